//! Matmul against a weight packed into column panels, the layout the matmul microkernels
//! read (MNN's `(H/HP, L, HP)` with LP = 1 for f32):
//!
//! - `pack_weight(weight [H, L], block = HP) -> [ceil(H / HP), L, HP]`, zero padded:
//!   `out[p, l, j] = weight[p*HP + j, l]` where `p*HP + j < H`, else 0. It depends on the
//!   weight only, so it runs once at compile time (`LiftTransformParams`).
//! - `packed_matmul(x [..., L], packed [P, L, HP], out_features = H) -> [..., H]`:
//!   `x @ weight^T` read from the panels; f16 panels with f32 `x` are widened as read.
//!
//! Quantized panels and their matmul are in [`quantize`](super::quantize).

use super::ctx::{InferCtx, Tensor};
use super::{attr, call, InferError, OpDef};
use super::{AttrDefault, AttrKind, AttrSpec};
use crate::{AttrValue, Attrs, Expr, StructInfo, SymExpr};

/// The packed-weight ops.
pub(super) const OPS: &[OpDef] = &[
    OpDef {
        name: "pack_weight",
        args: &["weight"],
        attrs: &[AttrSpec::new("block", AttrKind::Int, AttrDefault::Required)],
        infer: infer_pack_weight,
    },
    OpDef {
        name: "packed_matmul",
        args: &["x", "packed"],
        attrs: &[AttrSpec::new(
            "out_features",
            AttrKind::Int,
            AttrDefault::Required,
        )],
        infer: infer_packed_matmul,
    },
];

/// The number of `block`-wide panels covering `features` columns.
pub fn panel_count(features: i64, block: i64) -> i64 {
    (features + block - 1) / block
}

/// The value of integer attribute `name`, which must be positive.
pub(super) fn positive_attr(ctx: &InferCtx<'_>, name: &'static str) -> Result<i64, InferError> {
    let value = ctx.require(name, attr::int)?;
    if value <= 0 {
        return Err(ctx.invalid_attr(name, format!("must be positive, got {value}")));
    }
    Ok(value)
}

fn infer_pack_weight(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let weight = ctx.tensor(0)?;
    let block = positive_attr(ctx, "block")?;
    let [rows, cols] = weight.dims else {
        return Err(ctx.invalid_arg(0, format!("must be [H, L], got {}", weight.shape())));
    };
    let rows = rows
        .as_const()
        .ok_or_else(|| ctx.invalid_arg(0, format!("H must be static, got {rows}")))?;
    let panels = SymExpr::int(panel_count(rows, block));
    let shape = vec![panels, cols.clone(), SymExpr::int(block)];
    Ok(StructInfo::tensor(shape, weight.dtype))
}

fn infer_packed_matmul(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let (x, packed) = (ctx.tensor(0)?, ctx.tensor(1)?);
    let dtype = ctx.weighted_dtype(&x, &packed)?;
    let [panels, depth, block] = packed.dims else {
        return Err(ctx.invalid_arg(1, format!("must be [P, L, HP], got {}", packed.shape())));
    };
    let reduce = x.dims.last();
    if !reduce.is_some_and(|l| l.prove_equal(depth)) {
        let reason = format!(
            "reduction dims differ: {} and {}",
            x.shape(),
            packed.shape()
        );
        return Err(ctx.invalid_arg(1, reason));
    }
    Ok(StructInfo::tensor(
        product_shape(ctx, &x, (panels, block))?,
        dtype,
    ))
}

/// The shape of `x` times a weight packed in `panels` panels of width `block`: `x`'s
/// batch dims and the `out_features` attribute, after checking the panels cover them.
pub(super) fn product_shape(
    ctx: &InferCtx<'_>,
    x: &Tensor,
    (panels, block): (&SymExpr, &SymExpr),
) -> Result<Vec<SymExpr>, InferError> {
    let out_features = positive_attr(ctx, "out_features")?;
    let Some((_, batch)) = x.dims.split_last() else {
        return Err(ctx.invalid_arg(0, "must have at least one dim".to_string()));
    };
    let expected = block.as_const().map(|b| panel_count(out_features, b));
    if expected.is_none() || panels.as_const() != expected {
        let reason = format!(
            "{} panels of width {block} do not cover {out_features} features",
            panels
        );
        return Err(ctx.invalid_arg(1, reason));
    }
    let mut shape = batch.to_vec();
    shape.push(SymExpr::int(out_features));
    Ok(shape)
}

/// `weight` (`[H, L]`) packed into `block`-wide column panels `[ceil(H/block), L, block]`.
pub fn pack_weight(weight: &Expr, block: i64) -> Result<Expr, InferError> {
    let attrs = Attrs::from([("block".to_string(), AttrValue::Int(block))]);
    call("pack_weight", vec![weight.clone()], attrs)
}

/// `x @ weight^T` (`[..., out_features]`) with the weight given packed by [`pack_weight`].
pub fn packed_matmul(x: &Expr, packed: &Expr, out_features: i64) -> Result<Expr, InferError> {
    let attrs = Attrs::from([("out_features".to_string(), AttrValue::Int(out_features))]);
    call("packed_matmul", vec![x.clone(), packed.clone()], attrs)
}
