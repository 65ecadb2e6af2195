//! Matmul against a weight packed into column panels, the layout the matmul microkernels
//! read (MNN's `(H/HP, L, HP)` with LP = 1 for f32):
//!
//! - `pack_weight(weight [H, L], block = HP) -> [ceil(H / HP), L, HP]`, zero padded:
//!   `out[p, l, j] = weight[p*HP + j, l]` where `p*HP + j < H`, else 0. It depends on the
//!   weight only, so it runs once at compile time (`LiftTransformParams`).
//! - `packed_matmul(x [..., L], packed [P, L, HP], out_features = H) -> [..., H]`:
//!   `x @ weight^T` read from the panels; f16 panels with f32 `x` are widened as read.
//! - `packed_matmul_q8(x [..., L] f32, packed [P, L, HP] i8, scales [P, ceil(L / 32), HP]
//!   f32, out_features = H) -> [..., H] f32`: the same over int8 panels, weight `(l, h)`
//!   being `packed[h / HP, l, h % HP] * scales[h / HP, l / 32, h % HP]` (symmetric
//!   quantization in groups of [`Q8_GROUP`] along the reduction).

use super::ctx::InferCtx;
use super::{attr, call, InferError, OpDef};
use super::{AttrDefault, AttrKind, AttrSpec};
use crate::tir::Q8_GROUP;
use crate::{AttrValue, Attrs, DataType, Expr, StructInfo, SymExpr};

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
    OpDef {
        name: "packed_matmul_q8",
        args: &["x", "packed", "scales"],
        attrs: &[AttrSpec::new(
            "out_features",
            AttrKind::Int,
            AttrDefault::Required,
        )],
        infer: infer_packed_matmul_q8,
    },
];

/// The number of `block`-wide panels covering `features` columns.
pub fn panel_count(features: i64, block: i64) -> i64 {
    (features + block - 1) / block
}

fn positive_attr(ctx: &InferCtx<'_>, name: &'static str) -> Result<i64, InferError> {
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
    Ok(StructInfo::tensor(product_shape(ctx, &x, &packed)?, dtype))
}

/// The shape of `x` times the weight packed in `packed`: `x`'s batch dims and the
/// `out_features` attribute, after checking the panels cover them and the reduction dims
/// agree.
fn product_shape(
    ctx: &InferCtx<'_>,
    x: &super::ctx::Tensor,
    packed: &super::ctx::Tensor,
) -> Result<Vec<SymExpr>, InferError> {
    let out_features = positive_attr(ctx, "out_features")?;
    let [panels, depth, block] = packed.dims else {
        return Err(ctx.invalid_arg(1, format!("must be [P, L, HP], got {}", packed.shape())));
    };
    let Some((reduce, batch)) = x.dims.split_last() else {
        return Err(ctx.invalid_arg(0, "must have at least one dim".to_string()));
    };
    if !reduce.prove_equal(depth) {
        let reason = format!(
            "reduction dims differ: {} and {}",
            x.shape(),
            packed.shape()
        );
        return Err(ctx.invalid_arg(1, reason));
    }
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

fn infer_packed_matmul_q8(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let (x, packed, scales) = (ctx.tensor(0)?, ctx.tensor(1)?, ctx.tensor(2)?);
    let dtypes = [
        (0, &x, DataType::F32),
        (1, &packed, DataType::I8),
        (2, &scales, DataType::F32),
    ];
    if let Some((index, t, want)) = dtypes.iter().find(|(_, t, want)| t.dtype != *want) {
        return Err(ctx.invalid_arg(*index, format!("must be {want}, got {}", t.dtype)));
    }
    let shape = product_shape(ctx, &x, &packed)?;
    let [panels, depth, block] = packed.dims else {
        unreachable!("product_shape checked the rank");
    };
    let groups = depth
        .as_const()
        .map(|l| SymExpr::int((l + Q8_GROUP - 1) / Q8_GROUP));
    let fits =
        matches!(scales.dims, [p, g, b] if p == panels && Some(g) == groups.as_ref() && b == block);
    if !fits {
        let reason = format!(
            "must be [{panels}, ceil({depth} / {Q8_GROUP}), {block}] (static L), got {}",
            scales.shape()
        );
        return Err(ctx.invalid_arg(2, reason));
    }
    Ok(StructInfo::tensor(shape, DataType::F32))
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

/// [`packed_matmul`] over int8 panels `packed` with their group `scales`.
pub fn packed_matmul_q8(
    x: &Expr,
    packed: &Expr,
    scales: &Expr,
    out_features: i64,
) -> Result<Expr, InferError> {
    let attrs = Attrs::from([("out_features".to_string(), AttrValue::Int(out_features))]);
    let args = vec![x.clone(), packed.clone(), scales.clone()];
    call("packed_matmul_q8", args, attrs)
}
