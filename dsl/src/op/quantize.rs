//! Weight quantization, run once at compile time (`LiftTransformParams`) like
//! [`pack_weight`](super::pack_weight): symmetric int8 in groups of [`Q8_GROUP`] values of
//! the reduction axis, per output column, laid out as the `_q8` microkernels read it.
//!
//! - `quantize_scales_q8(weight [H, L] f32, block = HP) -> [ceil(H/HP), ceil(L/32), HP]`
//!   f32: `max |weight[row, l]| / 127` over the group's `l` (a tail group has fewer),
//!   `row = p*HP + j`; 0 for padding rows and all-zero groups.
//! - `pack_weight_q8(weight [H, L] f32, scales) -> [ceil(H/HP), L, HP]` i8:
//!   `weight[row, l] / scale` rounded half up (`floor(x + 0.5)`), 0 where the scale is 0
//!   or the row is padding.
//! - `take_q8(packed [V, H, 1] i8, scales [V, ceil(H/32), 1] f32, ids [...]) -> [..., H]`
//!   f32: rows of a table quantized with `block = 1` (one row per panel), dequantized as
//!   they are gathered (an int8 embedding table).

use super::ctx::InferCtx;
use super::packed::panel_count;
use super::{attr, call, InferError, OpDef};
use super::{AttrDefault, AttrKind, AttrSpec};
use crate::tir::Q8_GROUP;
use crate::{AttrValue, Attrs, DataType, Expr, StructInfo, SymExpr};

/// The quantization ops.
pub(super) const OPS: &[OpDef] = &[
    OpDef {
        name: "quantize_scales_q8",
        args: &["weight"],
        attrs: &[AttrSpec::new("block", AttrKind::Int, AttrDefault::Required)],
        infer: infer_scales,
    },
    OpDef {
        name: "pack_weight_q8",
        args: &["weight", "scales"],
        attrs: &[],
        infer: infer_pack,
    },
    OpDef {
        name: "take_q8",
        args: &["packed", "scales", "ids"],
        attrs: &[],
        infer: infer_take,
    },
];

/// The static `[H, L]` of an f32 weight argument.
fn weight_dims(ctx: &InferCtx<'_>) -> Result<(i64, i64), InferError> {
    let weight = ctx.tensor(0)?;
    let dims: Option<Vec<i64>> = weight.dims.iter().map(SymExpr::as_const).collect();
    match (weight.dtype, dims.as_deref()) {
        (DataType::F32, Some(&[h, l])) => Ok((h, l)),
        _ => Err(ctx.invalid_arg(
            0,
            format!(
                "must be a static [H, L] f32 weight, got {} {}",
                weight.dtype,
                weight.shape()
            ),
        )),
    }
}

fn infer_scales(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let (h, l) = weight_dims(ctx)?;
    let block = ctx.require("block", attr::int)?;
    if block <= 0 {
        return Err(ctx.invalid_attr("block", format!("must be positive, got {block}")));
    }
    let shape = [panel_count(h, block), (l + Q8_GROUP - 1) / Q8_GROUP, block];
    Ok(StructInfo::tensor(
        shape.map(SymExpr::int).to_vec(),
        DataType::F32,
    ))
}

fn infer_pack(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let (h, l) = weight_dims(ctx)?;
    let scales = ctx.tensor(1)?;
    let dims: Option<Vec<i64>> = scales.dims.iter().map(SymExpr::as_const).collect();
    let fits = match dims.as_deref() {
        Some(&[p, g, block]) => {
            scales.dtype == DataType::F32
                && block > 0
                && p == panel_count(h, block)
                && g == (l + Q8_GROUP - 1) / Q8_GROUP
        }
        _ => false,
    };
    let Some(&[panels, _, block]) = dims.as_deref().filter(|_| fits) else {
        let reason = format!(
            "must be the f32 scales of an [{h}, {l}] weight, got {} {}",
            scales.dtype,
            scales.shape()
        );
        return Err(ctx.invalid_arg(1, reason));
    };
    let shape = [panels, l, block].map(SymExpr::int).to_vec();
    Ok(StructInfo::tensor(shape, DataType::I8))
}

fn infer_take(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let (packed, scales, ids) = (ctx.tensor(0)?, ctx.tensor(1)?, ctx.tensor(2)?);
    let table: Option<Vec<i64>> = packed.dims.iter().map(SymExpr::as_const).collect();
    let Some(&[rows, width, 1]) = table.as_deref().filter(|_| packed.dtype == DataType::I8) else {
        let reason = format!(
            "must be an i8 [V, H, 1] table, got {} {}",
            packed.dtype,
            packed.shape()
        );
        return Err(ctx.invalid_arg(0, reason));
    };
    let groups = (width + Q8_GROUP - 1) / Q8_GROUP;
    let want = [rows, groups, 1].map(SymExpr::int);
    if scales.dtype != DataType::F32 || scales.dims != want {
        let reason = format!(
            "must be f32 [{rows}, {groups}, 1], got {} {}",
            scales.dtype,
            scales.shape()
        );
        return Err(ctx.invalid_arg(1, reason));
    }
    if !matches!(ids.dtype, DataType::I32 | DataType::I64) {
        return Err(ctx.invalid_arg(2, format!("must be i32 or i64, got {}", ids.dtype)));
    }
    let mut shape = ids.dims.to_vec();
    shape.push(SymExpr::int(width));
    Ok(StructInfo::tensor(shape, DataType::F32))
}

/// The group scales of `weight` (`[H, L]` f32) for `block`-wide panels.
pub fn quantize_scales_q8(weight: &Expr, block: i64) -> Result<Expr, InferError> {
    let attrs = Attrs::from([("block".to_string(), AttrValue::Int(block))]);
    call("quantize_scales_q8", vec![weight.clone()], attrs)
}

/// `weight` quantized with `scales` into int8 panels.
pub fn pack_weight_q8(weight: &Expr, scales: &Expr) -> Result<Expr, InferError> {
    call(
        "pack_weight_q8",
        vec![weight.clone(), scales.clone()],
        Attrs::new(),
    )
}

/// The rows `ids` of a table quantized row by row (`block = 1`), as f32.
pub fn take_q8(packed: &Expr, scales: &Expr, ids: &Expr) -> Result<Expr, InferError> {
    let args = vec![packed.clone(), scales.clone(), ids.clone()];
    call("take_q8", args, Attrs::new())
}
