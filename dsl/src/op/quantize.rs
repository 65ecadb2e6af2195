//! Weight quantization, run once at compile time (`LiftTransformParams`) like
//! [`pack_weight`](super::pack_weight), and the ops that read quantized weights.
//! Symmetric group quantization: one scale per [`QUANT_GROUP`] values of the reduction
//! axis `L` and output row, laid out as the quantized matmul microkernels read it.
//!
//! Two formats, by `bits`:
//! - 8: int8 panels `[P, L, HP]` i8 (`packed[p, l, j]` is weight `(p*HP + j, l)`);
//!   scale `max |w| / 127`.
//! - 4: int4 panels `[P, ceil(L/2), HP, 2]` u4, two values of `l` per byte
//!   (`packed[p, l/2, j, l%2]` is weight `(p*HP + j, l)` plus 8, so a nibble `n` means
//!   `n - 8`); scale `-m / 8` with `m` the group's value of largest magnitude (as
//!   llama.cpp's q4_0: `m` becomes exactly -8, the other values use all 16 levels).
//!
//! The ops:
//! - `quantize_scales(weight [H, L] f32, block = HP, bits, dtype) -> [ceil(H/HP),
//!   ceil(L/32), HP]` of `dtype` (f32 or f16): each group's scale (a tail group has
//!   fewer values); 0 for padding rows and all-zero groups.
//! - `pack_weight_quant(weight [H, L] f32, scales, bits) -> panels`: `weight / scale`
//!   rounded half up (`floor(x + 0.5)`), clamped to the format's range; 0 where the
//!   scale is 0 or the row is padding.
//! - `packed_matmul_quant(x [..., L] f32, packed, scales, out_features = H) -> [..., H]`
//!   f32: `x @ weight^T` with weight `(h, l)` dequantized from the panels as read.
//! - `take_quant(packed, scales, ids [...], rows = V, width = L) -> [..., L]` f32: rows `ids`
//!   (clamped into `0..V`) of a `[V, L]` table quantized like a linear weight (row `v`
//!   is output column `v` of the panels), dequantized as they are gathered. A tied
//!   embedding shares one quantized copy between the lookup and the output head.

use super::ctx::{InferCtx, Tensor};
use super::packed::{panel_count, positive_attr, product_shape};
use super::{attr, call, InferError, OpDef};
use super::{AttrDefault, AttrKind, AttrSpec};
use crate::tir::QUANT_GROUP;
use crate::{AttrValue, Attrs, DataType, Expr, StructInfo, SymExpr};

/// The quantization ops.
pub(super) const OPS: &[OpDef] = &[
    OpDef {
        name: "quantize_scales",
        args: &["weight"],
        attrs: &[
            AttrSpec::new("block", AttrKind::Int, AttrDefault::Required),
            AttrSpec::new("bits", AttrKind::Int, AttrDefault::Required),
            AttrSpec::new("dtype", AttrKind::DType, AttrDefault::Required),
        ],
        infer: infer_scales,
    },
    OpDef {
        name: "pack_weight_quant",
        args: &["weight", "scales"],
        attrs: &[AttrSpec::new("bits", AttrKind::Int, AttrDefault::Required)],
        infer: infer_pack,
    },
    OpDef {
        name: "packed_matmul_quant",
        args: &["x", "packed", "scales"],
        attrs: &[AttrSpec::new(
            "out_features",
            AttrKind::Int,
            AttrDefault::Required,
        )],
        infer: infer_matmul,
    },
    OpDef {
        name: "take_quant",
        args: &["packed", "scales", "ids"],
        attrs: &[
            AttrSpec::new("rows", AttrKind::Int, AttrDefault::Required),
            AttrSpec::new("width", AttrKind::Int, AttrDefault::Required),
        ],
        infer: infer_take,
    },
];

/// The bit widths a weight can be quantized to.
pub const QUANT_BITS: [i64; 2] = [4, 8];

/// The dtypes group scales can be stored in.
const SCALE_DTYPES: [DataType; 2] = [DataType::F32, DataType::F16];

/// The number of scale groups along a reduction of `depth` values.
pub fn quant_groups(depth: i64) -> i64 {
    (depth + QUANT_GROUP - 1) / QUANT_GROUP
}

/// The shape and dtype of the `bits`-bit panels of an `[H, L]` weight in `block`-wide
/// panels (see the module docs).
pub fn packed_quant_layout(
    features: i64,
    depth: i64,
    block: i64,
    bits: i64,
) -> (Vec<i64>, DataType) {
    let panels = panel_count(features, block);
    if bits == 4 {
        (vec![panels, (depth + 1) / 2, block, 2], DataType::U4)
    } else {
        (vec![panels, depth, block], DataType::I8)
    }
}

/// A quantized weight's panels, read from their struct info: `(bits, panels, the
/// reduction dim as stored, panel width)`.
pub(crate) fn packed_quant_dims<'a>(
    packed: &Tensor<'a>,
) -> Option<(i64, &'a SymExpr, &'a SymExpr, &'a SymExpr)> {
    match (packed.dtype, packed.dims) {
        (DataType::I8, [p, l, b]) => Some((8, p, l, b)),
        (DataType::U4, [p, l, b, two]) if two.as_const() == Some(2) => Some((4, p, l, b)),
        _ => None,
    }
}

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

/// The `bits` attribute, one of [`QUANT_BITS`].
fn bits_attr(ctx: &InferCtx<'_>) -> Result<i64, InferError> {
    let bits = ctx.require("bits", attr::int)?;
    if !QUANT_BITS.contains(&bits) {
        return Err(ctx.invalid_attr("bits", format!("must be 4 or 8, got {bits}")));
    }
    Ok(bits)
}

fn infer_scales(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let (h, l) = weight_dims(ctx)?;
    let block = positive_attr(ctx, "block")?;
    bits_attr(ctx)?;
    let dtype = ctx.require("dtype", attr::dtype)?;
    if !SCALE_DTYPES.contains(&dtype) {
        return Err(ctx.invalid_attr("dtype", format!("must be f32 or f16, got {dtype}")));
    }
    let shape = [panel_count(h, block), quant_groups(l), block];
    Ok(StructInfo::tensor(shape.map(SymExpr::int).to_vec(), dtype))
}

/// Checks that `scales` (argument `index`) are the group scales of panels `(panels,
/// depth, block)`.
fn check_scales(
    ctx: &InferCtx<'_>,
    index: usize,
    scales: &Tensor,
    (panels, depth, block): (&SymExpr, i64, &SymExpr),
) -> Result<(), InferError> {
    let groups = SymExpr::int(quant_groups(depth));
    let fits = SCALE_DTYPES.contains(&scales.dtype)
        && matches!(scales.dims, [p, g, b] if p == panels && *g == groups && b == block);
    if fits {
        return Ok(());
    }
    let reason = format!(
        "must be the f32 or f16 scales [{panels}, {groups}, {block}] of a reduction of {depth}, got {} {}",
        scales.dtype,
        scales.shape()
    );
    Err(ctx.invalid_arg(index, reason))
}

fn infer_pack(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let (h, l) = weight_dims(ctx)?;
    let bits = bits_attr(ctx)?;
    let scales = ctx.tensor(1)?;
    let block = match scales.dims {
        [_, _, b] => b.as_const().filter(|&b| b > 0),
        _ => None,
    };
    let Some(block) = block else {
        let reason = format!("must be [P, G, HP] scales, got {}", scales.shape());
        return Err(ctx.invalid_arg(1, reason));
    };
    let panels = SymExpr::int(panel_count(h, block));
    check_scales(ctx, 1, &scales, (&panels, l, &SymExpr::int(block)))?;
    let (shape, dtype) = packed_quant_layout(h, l, block, bits);
    Ok(StructInfo::tensor(
        shape.into_iter().map(SymExpr::int).collect(),
        dtype,
    ))
}

/// The quantized panels argument `index`: `(bits, panels, stored depth, block)`.
fn quant_panels<'a>(
    ctx: &InferCtx<'_>,
    index: usize,
    packed: &Tensor<'a>,
) -> Result<(i64, &'a SymExpr, &'a SymExpr, &'a SymExpr), InferError> {
    packed_quant_dims(packed).ok_or_else(|| {
        let reason = format!(
            "must be i8 [P, L, HP] or u4 [P, ceil(L/2), HP, 2] panels, got {} {}",
            packed.dtype,
            packed.shape()
        );
        ctx.invalid_arg(index, reason)
    })
}

/// Checks that quantized panels store a reduction of `depth` (static).
fn check_depth(
    ctx: &InferCtx<'_>,
    index: usize,
    (bits, stored): (i64, &SymExpr),
    depth: &SymExpr,
) -> Result<i64, InferError> {
    let units = |l: i64| if bits == 4 { (l + 1) / 2 } else { l };
    match depth.as_const() {
        Some(l) if stored.as_const() == Some(units(l)) => Ok(l),
        _ => Err(ctx.invalid_arg(
            index,
            format!("panels of depth {stored} do not hold a reduction of {depth} (static)"),
        )),
    }
}

fn infer_matmul(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let (x, packed, scales) = (ctx.tensor(0)?, ctx.tensor(1)?, ctx.tensor(2)?);
    if x.dtype != DataType::F32 {
        return Err(ctx.invalid_arg(0, format!("must be f32, got {}", x.dtype)));
    }
    let (bits, panels, stored, block) = quant_panels(ctx, 1, &packed)?;
    let Some(depth) = x.dims.last() else {
        return Err(ctx.invalid_arg(0, "must have at least one dim".to_string()));
    };
    let depth = check_depth(ctx, 1, (bits, stored), depth)?;
    check_scales(ctx, 2, &scales, (panels, depth, block))?;
    let shape = product_shape(ctx, &x, (panels, block))?;
    Ok(StructInfo::tensor(shape, DataType::F32))
}

fn infer_take(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let (packed, scales, ids) = (ctx.tensor(0)?, ctx.tensor(1)?, ctx.tensor(2)?);
    let (bits, panels, stored, block) = quant_panels(ctx, 0, &packed)?;
    let rows = positive_attr(ctx, "rows")?;
    let covered = match (panels.as_const(), block.as_const()) {
        (Some(p), Some(b)) => p == panel_count(rows, b),
        _ => false,
    };
    if !covered {
        let reason = format!("{panels} panels of width {block} do not hold {rows} rows");
        return Err(ctx.invalid_arg(0, reason));
    }
    let width = positive_attr(ctx, "width")?;
    check_depth(ctx, 0, (bits, stored), &SymExpr::int(width))?;
    check_scales(ctx, 1, &scales, (panels, width, block))?;
    if !matches!(ids.dtype, DataType::I32 | DataType::I64) {
        return Err(ctx.invalid_arg(2, format!("must be i32 or i64, got {}", ids.dtype)));
    }
    let mut shape = ids.dims.to_vec();
    shape.push(SymExpr::int(width));
    Ok(StructInfo::tensor(shape, DataType::F32))
}

/// The `bits`-bit group scales of `weight` (`[H, L]` f32) for `block`-wide panels,
/// stored as `dtype`.
pub fn quantize_scales(
    weight: &Expr,
    block: i64,
    bits: i64,
    dtype: DataType,
) -> Result<Expr, InferError> {
    let attrs = Attrs::from([
        ("block".to_string(), AttrValue::Int(block)),
        ("bits".to_string(), AttrValue::Int(bits)),
        ("dtype".to_string(), AttrValue::DType(dtype)),
    ]);
    call("quantize_scales", vec![weight.clone()], attrs)
}

/// `weight` quantized with `scales` into `bits`-bit panels.
pub fn pack_weight_quant(weight: &Expr, scales: &Expr, bits: i64) -> Result<Expr, InferError> {
    let attrs = Attrs::from([("bits".to_string(), AttrValue::Int(bits))]);
    call(
        "pack_weight_quant",
        vec![weight.clone(), scales.clone()],
        attrs,
    )
}

/// `x @ weight^T` (`[..., out_features]`) with the weight given quantized
/// ([`pack_weight_quant`] panels and their [`quantize_scales`]).
pub fn packed_matmul_quant(
    x: &Expr,
    packed: &Expr,
    scales: &Expr,
    out_features: i64,
) -> Result<Expr, InferError> {
    let attrs = Attrs::from([("out_features".to_string(), AttrValue::Int(out_features))]);
    let args = vec![x.clone(), packed.clone(), scales.clone()];
    call("packed_matmul_quant", args, attrs)
}

/// The rows `ids` of a `[rows, width]` table given quantized like a linear weight, as
/// f32.
pub fn take_quant(
    packed: &Expr,
    scales: &Expr,
    ids: &Expr,
    (rows, width): (i64, i64),
) -> Result<Expr, InferError> {
    let attrs = Attrs::from([
        ("rows".to_string(), AttrValue::Int(rows)),
        ("width".to_string(), AttrValue::Int(width)),
    ]);
    let args = vec![packed.clone(), scales.clone(), ids.clone()];
    call("take_quant", args, attrs)
}
