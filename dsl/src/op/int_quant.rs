//! Dynamic int8 activations (MNN's w8a8 / w4a8, with llama.cpp's q8_0 activation
//! blocks): each activation row is quantized to int8 at run time with one scale per group
//! of [`QUANT_GROUP`] values along the reduction (the weights' groups: an outlier channel
//! coarsens only its own group), and multiplies weights quantized at compile time (int8 or
//! int4 panels of the `quads` layout, see [`quantize`](super::quantize), with f16 group
//! scales: per weight the bytes of llama.cpp's q8_0 / q4_0) in integer dot products summed
//! exactly per group; each group's sum is scaled by its two scales after.
//!
//! - `activation_group_scales(x [..., L] f32) -> [..., G]` f32 with `G = ceil(L/32)`:
//!   each group's `max |x| / 127` (a tail group has fewer values).
//! - `quantize_activations(x [..., L] f32, scales [..., G]) -> [..., Lp]` u8 with
//!   `Lp = G*32`: `clamp(floor(x / scale + 0.5), -127, 127) + 128` with the scale of the
//!   value's group (0 for a zero scale), and 128 (zero) past `L`: the unsigned operand of
//!   `vpdpbusd`.
//! - `packed_matmul_int(xq [..., Lp] u8, x_scales [..., G] f32, packed, scales,
//!   out_features = H) -> [..., H]` f32:
//!   `out[..., h] = sum_g x_scales[..., g] * scale(h, g) * sum_{l in g} (xq[..., l] - 128) * w(h, l)`:
//!   the product of the dequantized activations and weights.
//!
//! The symmetric quantization of whole rows stores an int8 KV cache: per position and kv
//! head,
//! - `activation_scales(x [..., L] f32) -> [...]` f32: each row's `max |x| / 127`;
//! - `quantize_kv(x [..., L] f32, scales [...]) -> [..., L]` i8:
//!   `clamp(floor(x / scale + 0.5), -127, 127)` (0 for a zero scale), read back as
//!   `code * scale` (see [`attention_q8kv`](super::attention_q8kv)).

use super::ctx::{InferCtx, Tensor};
use super::packed::product_shape;
use super::quantize::{check_depth, quant_panels, QuantLayout, QuantPanels};
use super::{call, InferError, OpDef};
use super::{AttrDefault, AttrKind, AttrSpec};
use crate::tir::QUANT_GROUP;
use crate::{AttrValue, Attrs, DType, Expr, StructInfo, SymExpr};

/// The dynamic int8 activation ops.
pub(super) const OPS: &[OpDef] = &[
    OpDef {
        name: "activation_scales",
        args: &["x"],
        attrs: &[],
        infer: infer_scales,
    },
    OpDef {
        name: "activation_group_scales",
        args: &["x"],
        attrs: &[],
        infer: infer_group_scales,
    },
    OpDef {
        name: "quantize_activations",
        args: &["x", "scales"],
        attrs: &[],
        infer: infer_quantize,
    },
    OpDef {
        name: "quantize_kv",
        args: &["x", "scales"],
        attrs: &[],
        infer: infer_quantize_kv,
    },
    OpDef {
        name: "packed_matmul_int",
        args: &["xq", "x_scales", "packed", "scales"],
        attrs: &[AttrSpec::new(
            "out_features",
            AttrKind::Int,
            AttrDefault::Required,
        )],
        infer: infer_matmul,
    },
];

/// The activation row length after padding `depth` to whole groups (`Lp`).
pub fn padded_depth(depth: i64) -> i64 {
    (depth + QUANT_GROUP - 1) / QUANT_GROUP * QUANT_GROUP
}

/// Argument `index`: an f32 tensor of at least one dim.
fn activations<'a>(ctx: &InferCtx<'a>, index: usize) -> Result<Tensor<'a>, InferError> {
    let x = ctx.tensor(index)?;
    if x.dtype != DType::F32 || x.dims.is_empty() {
        let reason = format!("must be f32 [..., L], got {} {}", x.dtype, x.shape());
        return Err(ctx.invalid_arg(index, reason));
    }
    Ok(x)
}

fn infer_scales(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let x = activations(ctx, 0)?;
    let (_, rows) = x.dims.split_last().expect("checked non-empty");
    Ok(StructInfo::tensor(rows.to_vec(), DType::F32))
}

fn infer_group_scales(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let x = activations(ctx, 0)?;
    let (depth, rows) = x.dims.split_last().expect("checked non-empty");
    let Some(depth) = depth.as_const() else {
        return Err(ctx.invalid_arg(0, format!("L must be static, got {depth}")));
    };
    let mut shape = rows.to_vec();
    shape.push(SymExpr::int(padded_depth(depth) / QUANT_GROUP));
    Ok(StructInfo::tensor(shape, DType::F32))
}

/// Checks that argument `index` holds one f32 scale per row of `rows` (and, with
/// `groups`, per group of each row: `[rows..., groups]`).
fn check_scales_of(
    ctx: &InferCtx<'_>,
    index: usize,
    rows: &[SymExpr],
    groups: Option<i64>,
) -> Result<(), InferError> {
    let mut rows = rows.to_vec();
    rows.extend(groups.map(SymExpr::int));
    check_row_scales(ctx, index, &rows)
}

/// Checks that argument `index` holds one f32 scale per row of `rows`.
fn check_row_scales(ctx: &InferCtx<'_>, index: usize, rows: &[SymExpr]) -> Result<(), InferError> {
    let scales = ctx.tensor(index)?;
    let same = scales.dims.len() == rows.len()
        && scales.dims.iter().zip(rows).all(|(a, b)| a.prove_equal(b));
    if scales.dtype == DType::F32 && same {
        return Ok(());
    }
    let reason = format!(
        "must be one f32 scale per row [{}], got {} {}",
        rows.iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        scales.dtype,
        scales.shape()
    );
    Err(ctx.invalid_arg(index, reason))
}

fn infer_quantize(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let x = activations(ctx, 0)?;
    let (depth, rows) = x.dims.split_last().expect("checked non-empty");
    let Some(depth) = depth.as_const() else {
        return Err(ctx.invalid_arg(0, format!("L must be static, got {depth}")));
    };
    check_scales_of(ctx, 1, rows, Some(padded_depth(depth) / QUANT_GROUP))?;
    let mut shape = rows.to_vec();
    shape.push(SymExpr::int(padded_depth(depth)));
    Ok(StructInfo::tensor(shape, DType::U8))
}

fn infer_quantize_kv(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let x = activations(ctx, 0)?;
    let (_, rows) = x.dims.split_last().expect("checked non-empty");
    check_row_scales(ctx, 1, rows)?;
    Ok(StructInfo::tensor(x.dims.to_vec(), DType::I8))
}

/// Argument `index`: quantized panels of the quads layout.
fn quad_panels<'a>(
    ctx: &InferCtx<'_>,
    index: usize,
    packed: &Tensor<'a>,
) -> Result<QuantPanels<'a>, InferError> {
    let panels = quant_panels(ctx, index, packed)?;
    if panels.layout != QuantLayout::Quads {
        let reason = "must be panels of the quads layout".to_string();
        return Err(ctx.invalid_arg(index, reason));
    }
    Ok(panels)
}

/// Checks that argument `index` holds the f16 group scales of `panels` (`[P, Lp/32, HP]`).
fn check_group_scales(
    ctx: &InferCtx<'_>,
    index: usize,
    panels: &QuantPanels,
) -> Result<i64, InferError> {
    let scales = ctx.tensor(index)?;
    if let (DType::F16, [p, g, b]) = (scales.dtype, scales.dims) {
        let depth = g.as_const().map(|g| g * QUANT_GROUP);
        if p == panels.panels && b == panels.block {
            if let Some(depth) = depth.filter(|&l| panels.holds_depth(l)) {
                return Ok(depth);
            }
        }
    }
    let reason = format!(
        "must be the f16 group scales [{}, G, {}] of the panels, got {} {}",
        panels.panels,
        panels.block,
        scales.dtype,
        scales.shape()
    );
    Err(ctx.invalid_arg(index, reason))
}

fn infer_matmul(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let xq = ctx.tensor(0)?;
    let Some((depth, rows)) = xq.dims.split_last().filter(|_| xq.dtype == DType::U8) else {
        let reason = format!("must be u8 [..., Lp], got {} {}", xq.dtype, xq.shape());
        return Err(ctx.invalid_arg(0, reason));
    };
    let packed = ctx.tensor(2)?;
    let panels = quad_panels(ctx, 2, &packed)?;
    let depth = check_depth(ctx, 2, &panels, depth)?;
    if depth % QUANT_GROUP != 0 {
        let reason = format!("must be padded to whole groups of {QUANT_GROUP}, got {depth}");
        return Err(ctx.invalid_arg(0, reason));
    }
    check_scales_of(ctx, 1, rows, Some(depth / QUANT_GROUP))?;
    check_group_scales(ctx, 3, &panels)?;
    let shape = product_shape(ctx, &xq, (panels.panels, panels.block))?;
    Ok(StructInfo::tensor(shape, DType::F32))
}

/// The int8 scale of each group of [`QUANT_GROUP`] values of each row of `x` (`[..., L]`
/// f32): the scales of [`quantize_activations`].
pub fn activation_group_scales(x: &Expr) -> Result<Expr, InferError> {
    call("activation_group_scales", vec![x.clone()], Attrs::new())
}

/// Each row's int8 scale of `x` (`[..., L]` f32): the scales of [`quantize_kv`].
pub fn activation_scales(x: &Expr) -> Result<Expr, InferError> {
    call("activation_scales", vec![x.clone()], Attrs::new())
}

/// `x` quantized per group with `scales` ([`activation_group_scales`]) to u8 codes, rows
/// padded to whole groups.
pub fn quantize_activations(x: &Expr, scales: &Expr) -> Result<Expr, InferError> {
    call(
        "quantize_activations",
        vec![x.clone(), scales.clone()],
        Attrs::new(),
    )
}

/// `x` quantized per row with `scales` ([`activation_scales`]) to i8 codes of the same
/// shape: the rows of an int8 KV cache.
pub fn quantize_kv(x: &Expr, scales: &Expr) -> Result<Expr, InferError> {
    call("quantize_kv", vec![x.clone(), scales.clone()], Attrs::new())
}

/// `x @ weight^T` (`[..., out_features]`) from `x`'s int8 codes `xq` and group scales
/// and the weight's quads-layout panels and group scales.
pub fn packed_matmul_int(
    (xq, x_scales): (&Expr, &Expr),
    (packed, scales): (&Expr, &Expr),
    out_features: i64,
) -> Result<Expr, InferError> {
    let attrs = Attrs::from([("out_features".to_string(), AttrValue::Int(out_features))]);
    let args = vec![xq.clone(), x_scales.clone(), packed.clone(), scales.clone()];
    call("packed_matmul_int", args, attrs)
}
