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
//!   `n - 8`); scale chosen per group by a search: with `m` the group's value of largest
//!   magnitude, each of 8 candidate divisors `n` (8 among them, llama.cpp's q4_0 choice
//!   `-m / 8`) gives codes `clamp(round(-w * n / m), -8, 7)`, and the candidate whose
//!   least-squares scale for its codes leaves the least error wins (the legalization's
//!   `Q4_DIVISORS` and `least_squares_scales`).
//!
//! With `layout = "quads"` (the dynamic-int8 schemes' panels, [`int_quant`](super::int_quant)),
//! the reduction is zero-padded to whole groups (`Lp = ceil(L/32)*32`) and each column
//! keeps 4 consecutive values of `l` together, the operand layout of 4-way int8 dot
//! products (`vpdpbusd`, `sdot`):
//! - 8: `[P, Lp/4, HP, 4]` i8 (`packed[p, l/4, j, l%4]`);
//! - 4: `[P, Lp/8, HP, 4, 2]` u4 (`packed[p, l/8, j, l%4, (l/4)%2]`, plus 8): one byte
//!   per column and `l%4` whose low nibble is a value of the first 4 of 8 consecutive `l`
//!   and whose high nibble is the matching value of the last 4.
//!
//! The ops:
//! - `quantize_scales(weight [H, L] f32, block = HP, bits, dtype, asymmetric) ->
//!   [ceil(H/HP), ceil(L/32), HP]` of `dtype` (f32 or f16): each group's scale (a tail
//!   group has fewer values); 0 for padding rows and all-zero groups. With `asymmetric`
//!   (4 bits, `L` a multiple of 32): `(max w - min w) / 15`, the step of 16 codes
//!   spanning the group from its least value to its greatest (llama.cpp's Q4_1 step).
//! - `quantize_offsets(weight [H, L] f32, scales, dtype) -> [H, L/32]` of `dtype`: the
//!   offset of each group of asymmetric scales, `min w + 8 * scale`, so that `weight -
//!   offset` lies on the symmetric 4-bit grid `-8..=7` of `scale`. A weight so quantized
//!   is `code * scale + offset`: a linear layer adds `sum_g offset[h, g] * sum_{l in g}
//!   x[l]`, a product of the activations' group sums with the offsets.
//! - `pack_weight_quant(weight [H, L] f32, scales, bits, layout = "rows" | "quads") ->
//!   panels`: `weight / scale` rounded half up (`floor(x + 0.5)`), clamped to the
//!   format's range; 0 where the scale is 0, the row is padding or `l >= L`.
//! - `packed_matmul_quant(x [..., L] f32, packed, scales, out_features = H) -> [..., H]`
//!   f32: `x @ weight^T` with weight `(h, l)` dequantized from the panels as read.
//! - `take_quant(packed, scales, ids [...], rows = V, width = L) -> [..., L]` f32 (panels of
//!   either layout): rows `ids`
//!   (clamped into `0..V`) of a `[V, L]` table quantized like a linear weight (row `v`
//!   is output column `v` of the panels), dequantized as they are gathered. A tied
//!   embedding shares one quantized copy between the lookup and the output head.
//! - `dequantize_weight(packed, scales, rows = H, width = L, transpose) -> [H, L]` f32
//!   (`[L, H]` with `transpose`, the transpose written directly): the whole weight,
//!   dequantized. `QuantizeWeights` writes a quantized weight this way; the rewrite
//!   phases fuse a transpose of it into it, then it into the ops that read it
//!   (`packed_matmul_quant`, `packed_matmul_int`, `take_quant`); one left over is
//!   computed like any op.

use super::ctx::{InferCtx, Tensor};
use super::packed::{panel_count, positive_attr, product_shape};
use super::{attr, call, InferError, OpDef};
use super::{AttrDefault, AttrKind, AttrSpec};
use crate::tir::QUANT_GROUP;
use crate::{AttrValue, Attrs, DType, Expr, StructInfo, SymExpr};
pub use oxrelax_abi::QuantLayout;

/// The quantization ops.
pub(super) const OPS: &[OpDef] = &[
    OpDef {
        name: "quantize_scales",
        args: &["weight"],
        attrs: &[
            AttrSpec::new("block", AttrKind::Int, AttrDefault::Required),
            AttrSpec::new("bits", AttrKind::Int, AttrDefault::Required),
            AttrSpec::new("dtype", AttrKind::DType, AttrDefault::Required),
            AttrSpec::new("asymmetric", AttrKind::Bool, AttrDefault::Optional),
        ],
        infer: infer_scales,
    },
    OpDef {
        name: "quantize_offsets",
        args: &["weight", "scales"],
        attrs: &[AttrSpec::new(
            "dtype",
            AttrKind::DType,
            AttrDefault::Required,
        )],
        infer: infer_offsets,
    },
    OpDef {
        name: "pack_weight_quant",
        args: &["weight", "scales"],
        attrs: &[
            AttrSpec::new("bits", AttrKind::Int, AttrDefault::Required),
            AttrSpec::new("layout", AttrKind::Str(LAYOUTS), AttrDefault::Optional),
        ],
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
    OpDef {
        name: "dequantize_weight",
        args: &["packed", "scales"],
        attrs: &[
            AttrSpec::new("rows", AttrKind::Int, AttrDefault::Required),
            AttrSpec::new("width", AttrKind::Int, AttrDefault::Required),
            AttrSpec::new("transpose", AttrKind::Bool, AttrDefault::Optional),
        ],
        infer: infer_dequantize,
    },
];

/// The bit widths a weight can be quantized to.
pub const QUANT_BITS: [i64; 2] = [4, 8];

/// The dtypes group scales can be stored in.
const SCALE_DTYPES: [DType; 2] = [DType::F32, DType::F16];

/// The values of `pack_weight_quant`'s `layout` attribute.
const LAYOUTS: &[&str] = &["rows", "quads"];

/// The number of scale groups along a reduction of `depth` values.
pub fn quant_groups(depth: i64) -> i64 {
    (depth + QUANT_GROUP - 1) / QUANT_GROUP
}

/// The panels' second dim for a reduction of `depth` values of `bits` bits in `layout`.
fn stored_depth(layout: QuantLayout, depth: i64, bits: i64) -> i64 {
    let padded = layout.padded_depth(depth as usize) as i64;
    match (layout, bits) {
        (QuantLayout::Rows, 4) => (padded + 1) / 2,
        (QuantLayout::Rows, _) => padded,
        (QuantLayout::Quads, 4) => padded / 8,
        (QuantLayout::Quads, _) => padded / 4,
    }
}

/// The shape and dtype of the `bits`-bit panels of an `[H, L]` weight in `block`-wide
/// panels of `layout` (see the module docs).
pub fn packed_quant_layout(
    features: i64,
    depth: i64,
    block: i64,
    (bits, layout): (i64, QuantLayout),
) -> (Vec<i64>, DType) {
    let panels = panel_count(features, block);
    let stored = stored_depth(layout, depth, bits);
    match (layout, bits) {
        (QuantLayout::Rows, 4) => (vec![panels, stored, block, 2], DType::U4),
        (QuantLayout::Rows, _) => (vec![panels, stored, block], DType::I8),
        (QuantLayout::Quads, 4) => (vec![panels, stored, block, 4, 2], DType::U4),
        (QuantLayout::Quads, _) => (vec![panels, stored, block, 4], DType::I8),
    }
}

/// Quantized panels as their struct info describes them.
#[derive(Clone, Copy, Debug)]
pub struct QuantPanels<'a> {
    /// Bits per weight (8 or 4).
    pub bits: i64,
    /// How the reduction is ordered.
    pub layout: QuantLayout,
    /// The number of panels.
    pub panels: &'a SymExpr,
    /// The second dim: the reduction as stored.
    pub stored: &'a SymExpr,
    /// The panel width.
    pub block: &'a SymExpr,
}

impl<'a> QuantPanels<'a> {
    /// The panels of shape `dims` and `dtype`, if they are quantized panels.
    pub fn of(dtype: DType, dims: &'a [SymExpr]) -> Option<QuantPanels<'a>> {
        let is = |d: &SymExpr, n: i64| d.as_const() == Some(n);
        let (bits, layout, p, l, b) = match (dtype, dims) {
            (DType::I8, [p, l, b]) => (8, QuantLayout::Rows, p, l, b),
            (DType::U4, [p, l, b, two]) if is(two, 2) => (4, QuantLayout::Rows, p, l, b),
            (DType::I8, [p, l, b, four]) if is(four, 4) => (8, QuantLayout::Quads, p, l, b),
            (DType::U4, [p, l, b, four, two]) if is(four, 4) && is(two, 2) => {
                (4, QuantLayout::Quads, p, l, b)
            }
            _ => return None,
        };
        Some(QuantPanels {
            bits,
            layout,
            panels: p,
            stored: l,
            block: b,
        })
    }

    /// Whether they store a reduction of `depth` values.
    pub fn holds_depth(&self, depth: i64) -> bool {
        self.stored.as_const() == Some(stored_depth(self.layout, depth, self.bits))
    }
}

/// The static `[H, L]` of an f32 weight argument.
fn weight_dims(ctx: &InferCtx<'_>) -> Result<(i64, i64), InferError> {
    let weight = ctx.tensor(0)?;
    let dims: Option<Vec<i64>> = weight.dims.iter().map(SymExpr::as_const).collect();
    match (weight.dtype, dims.as_deref()) {
        (DType::F32, Some(&[h, l])) => Ok((h, l)),
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

/// The `dtype` attribute, one of [`SCALE_DTYPES`].
fn scale_dtype_attr(ctx: &InferCtx<'_>) -> Result<DType, InferError> {
    let dtype = ctx.require("dtype", attr::dtype)?;
    if !SCALE_DTYPES.contains(&dtype) {
        return Err(ctx.invalid_attr("dtype", format!("must be f32 or f16, got {dtype}")));
    }
    Ok(dtype)
}

/// Checks that a weight of depth `l` splits into whole groups (asymmetric groups).
fn check_whole_groups(ctx: &InferCtx<'_>, l: i64) -> Result<(), InferError> {
    if l % QUANT_GROUP == 0 {
        return Ok(());
    }
    let reason =
        format!("asymmetric groups need a depth that is a multiple of {QUANT_GROUP}, got {l}");
    Err(ctx.invalid_arg(0, reason))
}

fn infer_scales(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let (h, l) = weight_dims(ctx)?;
    let block = positive_attr(ctx, "block")?;
    let bits = bits_attr(ctx)?;
    let dtype = scale_dtype_attr(ctx)?;
    if ctx.attr("asymmetric", attr::boolean).unwrap_or(false) {
        if bits != 4 {
            let reason = format!("asymmetric groups are 4-bit, got {bits} bits");
            return Err(ctx.invalid_attr("asymmetric", reason));
        }
        check_whole_groups(ctx, l)?;
    }
    let shape = [panel_count(h, block), quant_groups(l), block];
    Ok(StructInfo::tensor(shape.map(SymExpr::int).to_vec(), dtype))
}

fn infer_offsets(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let (h, l) = weight_dims(ctx)?;
    check_whole_groups(ctx, l)?;
    weight_scales_block(ctx, (h, l))?;
    let dtype = scale_dtype_attr(ctx)?;
    let shape = [h, quant_groups(l)];
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
    let block = weight_scales_block(ctx, (h, l))?;
    let layout = QuantLayout::from_attr(ctx.attr("layout", attr::string))
        .ok_or_else(|| ctx.invalid_attr("layout", "must be rows or quads".to_string()))?;
    let (shape, dtype) = packed_quant_layout(h, l, block, (bits, layout));
    Ok(StructInfo::tensor(
        shape.into_iter().map(SymExpr::int).collect(),
        dtype,
    ))
}

/// The panel width of argument 1, the group scales of the `[h, l]` weight argument 0.
fn weight_scales_block(ctx: &InferCtx<'_>, (h, l): (i64, i64)) -> Result<i64, InferError> {
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
    Ok(block)
}

/// The quantized panels argument `index`, of either layout.
pub(super) fn quant_panels<'a>(
    ctx: &InferCtx<'_>,
    index: usize,
    packed: &Tensor<'a>,
) -> Result<QuantPanels<'a>, InferError> {
    QuantPanels::of(packed.dtype, packed.dims).ok_or_else(|| {
        let reason = format!(
            "must be i8 [P, L, HP] or u4 [P, ceil(L/2), HP, 2] panels, or their quads \
             (i8 [P, Lp/4, HP, 4], u4 [P, Lp/8, HP, 4, 2]), got {} {}",
            packed.dtype,
            packed.shape()
        );
        ctx.invalid_arg(index, reason)
    })
}

/// Checks that quantized panels store a reduction of `depth` (static).
pub(super) fn check_depth(
    ctx: &InferCtx<'_>,
    index: usize,
    panels: &QuantPanels,
    depth: &SymExpr,
) -> Result<i64, InferError> {
    match depth.as_const() {
        Some(l) if panels.holds_depth(l) => Ok(l),
        _ => Err(ctx.invalid_arg(
            index,
            format!(
                "panels of depth {} do not hold a reduction of {depth} (static)",
                panels.stored
            ),
        )),
    }
}

fn infer_matmul(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let (x, packed, scales) = (ctx.tensor(0)?, ctx.tensor(1)?, ctx.tensor(2)?);
    if x.dtype != DType::F32 {
        return Err(ctx.invalid_arg(0, format!("must be f32, got {}", x.dtype)));
    }
    let panels = quant_panels(ctx, 1, &packed)?;
    if panels.layout != QuantLayout::Rows {
        let reason = "must be panels of the rows layout (quads are packed_matmul_int's)";
        return Err(ctx.invalid_arg(1, reason.to_string()));
    }
    let Some(depth) = x.dims.last() else {
        return Err(ctx.invalid_arg(0, "must have at least one dim".to_string()));
    };
    let depth = check_depth(ctx, 1, &panels, depth)?;
    check_scales(ctx, 2, &scales, (panels.panels, depth, panels.block))?;
    let shape = product_shape(ctx, &x, (panels.panels, panels.block))?;
    Ok(StructInfo::tensor(shape, DType::F32))
}

fn infer_take(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let (_, width) = quantized_table(ctx)?;
    let ids = ctx.tensor(2)?;
    if !matches!(ids.dtype, DType::I32 | DType::I64) {
        return Err(ctx.invalid_arg(2, format!("must be i32 or i64, got {}", ids.dtype)));
    }
    let mut shape = ids.dims.to_vec();
    shape.push(SymExpr::int(width));
    Ok(StructInfo::tensor(shape, DType::F32))
}

fn infer_dequantize(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let (rows, width) = quantized_table(ctx)?;
    let mut shape = vec![SymExpr::int(rows), SymExpr::int(width)];
    if ctx.attr("transpose", attr::boolean).unwrap_or(false) {
        shape.reverse();
    }
    Ok(StructInfo::tensor(shape, DType::F32))
}

/// The `(rows, width)` attributes of a `[rows, width]` table given quantized (arguments 0
/// and 1: panels and scales), checked against them.
fn quantized_table(ctx: &InferCtx<'_>) -> Result<(i64, i64), InferError> {
    let (packed, scales) = (ctx.tensor(0)?, ctx.tensor(1)?);
    let quant = quant_panels(ctx, 0, &packed)?;
    let (panels, block) = (quant.panels, quant.block);
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
    check_depth(ctx, 0, &quant, &SymExpr::int(width))?;
    check_scales(ctx, 1, &scales, (panels, width, block))?;
    Ok((rows, width))
}

/// The `bits`-bit group scales of `weight` (`[H, L]` f32) for `block`-wide panels,
/// stored as `dtype`; with `asymmetric`, the steps of groups spanning their values
/// (whose offsets [`quantize_offsets`] gives).
pub fn quantize_scales(
    weight: &Expr,
    block: i64,
    (bits, dtype): (i64, DType),
    asymmetric: bool,
) -> Result<Expr, InferError> {
    let mut attrs = Attrs::from([
        ("block".to_string(), AttrValue::Int(block)),
        ("bits".to_string(), AttrValue::Int(bits)),
        ("dtype".to_string(), AttrValue::DType(dtype)),
    ]);
    if asymmetric {
        attrs.insert("asymmetric".to_string(), AttrValue::Bool(true));
    }
    call("quantize_scales", vec![weight.clone()], attrs)
}

/// The offsets (`[H, L/32]` of `dtype`) of `weight`'s groups under its asymmetric
/// `scales`.
pub fn quantize_offsets(weight: &Expr, scales: &Expr, dtype: DType) -> Result<Expr, InferError> {
    let attrs = Attrs::from([("dtype".to_string(), AttrValue::DType(dtype))]);
    call(
        "quantize_offsets",
        vec![weight.clone(), scales.clone()],
        attrs,
    )
}

/// `weight` quantized with `scales` into `bits`-bit panels of `layout`.
pub fn pack_weight_quant(
    weight: &Expr,
    scales: &Expr,
    (bits, layout): (i64, QuantLayout),
) -> Result<Expr, InferError> {
    let mut attrs = Attrs::from([("bits".to_string(), AttrValue::Int(bits))]);
    if layout != QuantLayout::Rows {
        attrs.insert(
            "layout".to_string(),
            AttrValue::Str(layout.name().to_string()),
        );
    }
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

/// The whole `[rows, width]` weight given quantized, as f32; `[width, rows]` (its
/// transpose, written directly) when `transpose`.
pub fn dequantize_weight(
    packed: &Expr,
    scales: &Expr,
    (rows, width): (i64, i64),
    transpose: bool,
) -> Result<Expr, InferError> {
    let mut attrs = Attrs::from([
        ("rows".to_string(), AttrValue::Int(rows)),
        ("width".to_string(), AttrValue::Int(width)),
    ]);
    if transpose {
        attrs.insert("transpose".to_string(), AttrValue::Bool(true));
    }
    call(
        "dequantize_weight",
        vec![packed.clone(), scales.clone()],
        attrs,
    )
}
