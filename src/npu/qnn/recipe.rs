//! The W4A16 recipe (mllm's QNN AOT path; [`RECIPES`] also has W8A16): LPBQ int4 weights for every projection, uint16
//! per-tensor asymmetric activations from calibrated ranges, uint16 for the other static
//! tensors (norm weights, biases added element-wise). Observer constraints as in mllm:
//! every range includes zero and is at least [`MIN_RANGE`] wide, widened by
//! [`RANGE_HEADROOM`]; a sigmoid's output has the fixed encoding of [0, 1]. (No op emitted yet concatenates, so no encodings are
//! shared across a concat.)

use super::error::QnnError;
use super::lower::FloatNet;
use super::variants::encoded_like;
use oxrelax_runtime::qnn::codes::{tensor_type, QnnDataType};
use oxrelax_runtime::qnn::net::{
    htp_computes_blocks, quantize_real, BlockwiseExpansion, NetGraph, QuantParams, ScaleOffset,
};
use std::collections::BTreeMap;

/// The narrowest calibrated range an activation encoding takes.
pub const MIN_RANGE: f32 = 1e-4;
/// How much wider than the calibrated range an activation encoding is: uint16 has bits to
/// spare (2x costs one of 16), and a prompt unlike the calibration text must not saturate.
pub const RANGE_HEADROOM: f32 = 2.0;
/// Block sizes of LPBQ weights along the input channels, preferred first; a row length
/// none of them divides into a layout HTP computes
/// ([`oxrelax_runtime::qnn::net::htp_computes_blocks`]) gets one block per channel.
pub const LPBQ_BLOCKS: &[u32] = &[16, 32];
/// The bits of an LPBQ block scale.
pub const BLOCK_SCALE_BITS: u32 = 4;

/// A quantization recipe of the NPU graphs: LPBQ weights of `weight_bits` (4: mllm's
/// W4A16; 8: W8A16, for models too small to take int4 weights without changing their
/// greedy output), uint16 activations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recipe {
    /// Its name (`w4a16`).
    pub name: &'static str,
    /// Bits of a weight code.
    pub weight_bits: u32,
}

/// The recipes, the default first.
pub const RECIPES: &[Recipe] = &[
    Recipe {
        name: "w4a16",
        weight_bits: 4,
    },
    Recipe {
        name: "w8a16",
        weight_bits: 8,
    },
];

/// Which recipe `compile --npu` applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecipeChoice {
    /// The first of [`RECIPES`] (fewest weight bits first) whose graphs, run with QNN's
    /// quantized semantics, predict the same next token as the float graphs at
    /// [`AUTO_MIN_AGREEMENT`] of the calibration text's positions; the last one if none
    /// does.
    Auto,
    /// This recipe.
    Named(Recipe),
}

/// The share of positions where a recipe's graphs must predict the float graphs' next
/// token for [`RecipeChoice::Auto`] to take it. Greedy generation drifts from the first
/// token that differs, so keeping most of a continuation of n tokens needs a
/// per-position agreement near the n-th root of that share (0.9 over 16 tokens: 0.993);
/// 0.98 keeps about three quarters of such continuations intact.
pub const AUTO_MIN_AGREEMENT: f64 = 0.98;

impl RecipeChoice {
    /// `auto`, or the recipe named `name`; the error lists the known names.
    pub fn named(name: &str) -> Result<RecipeChoice, String> {
        if name.eq_ignore_ascii_case("auto") {
            return Ok(RecipeChoice::Auto);
        }
        Recipe::named(name).map(RecipeChoice::Named)
    }

    /// The recipes to try, in order.
    pub fn candidates(self) -> Vec<Recipe> {
        match self {
            RecipeChoice::Auto => RECIPES.to_vec(),
            RecipeChoice::Named(recipe) => vec![recipe],
        }
    }

    /// `auto` or the recipe's name.
    pub fn name(self) -> &'static str {
        match self {
            RecipeChoice::Auto => "auto",
            RecipeChoice::Named(recipe) => recipe.name,
        }
    }
}

impl Recipe {
    /// The recipe named `name`; the error lists the known ones.
    pub fn named(name: &str) -> Result<Recipe, String> {
        RECIPES
            .iter()
            .find(|r| r.name.eq_ignore_ascii_case(name))
            .copied()
            .ok_or_else(|| {
                let known: Vec<&str> = RECIPES.iter().map(|r| r.name).collect();
                format!(
                    "unknown NPU recipe `{name}` (known: auto, {})",
                    known.join(", ")
                )
            })
    }
}

/// Observed `(min, max)` of tensors, by name (what calibration gives a recipe).
pub type Ranges = BTreeMap<String, (f32, f32)>;

/// The quantized net: its graph with types and encodings, and each static tensor's bytes.
#[derive(Debug, Clone)]
pub struct QuantizedNet {
    /// The recipe applied.
    pub recipe: Recipe,
    /// The tensors (typed and encoded) and nodes.
    pub graph: NetGraph,
    /// Each static tensor's stored bytes.
    pub statics: BTreeMap<String, Vec<u8>>,
}

/// Applies `recipe` to `net` with calibrated `ranges`.
pub fn quantize(net: &FloatNet, ranges: &Ranges, recipe: Recipe) -> Result<QuantizedNet, QnnError> {
    let filters = conv_filters(&net.graph);
    let sigmoid_outputs: Vec<&String> = net
        .graph
        .nodes
        .values()
        .filter(|node| node.op_type == "Sigmoid")
        .flat_map(|node| &node.output_names)
        .collect();
    let mut graph = net.graph.clone();
    let mut statics = BTreeMap::new();
    for (name, tensor) in graph.tensors.iter_mut() {
        if tensor.kind == tensor_type::STATIC {
            let values = &net.statics[name];
            let (dtype, params, bytes) = if filters.contains(&name.as_str()) {
                filter_codes(values, &tensor.dims, recipe.weight_bits)
            } else {
                let encoding = uint16_encoding(range_of(values));
                (
                    QnnDataType::UFixed16,
                    QuantParams::scale_offset(encoding.scale, encoding.offset),
                    encode_u16(values, encoding),
                )
            };
            tensor.data_type = dtype.code();
            tensor.quant_params = params;
            statics.insert(name.clone(), bytes);
            continue;
        }
        let encoding = if sigmoid_outputs.contains(&name) {
            uint16_encoding((0.0, 1.0))
        } else {
            let calibrated = encoded_like(&net.graphs, name);
            let range = ranges
                .get(&calibrated)
                .ok_or_else(|| QnnError::Uncalibrated {
                    tensor: calibrated.clone(),
                })?;
            uint16_encoding((range.0 * RANGE_HEADROOM, range.1 * RANGE_HEADROOM))
        };
        tensor.data_type = QnnDataType::UFixed16.code();
        tensor.quant_params = QuantParams::scale_offset(encoding.scale, encoding.offset);
    }
    Ok(QuantizedNet {
        recipe,
        graph,
        statics,
    })
}

/// The static tensors read as a `Conv2d`'s filter.
fn conv_filters(graph: &NetGraph) -> Vec<&str> {
    graph
        .nodes
        .values()
        .filter(|node| node.op_type == "Conv2d")
        .filter_map(|node| node.input_names.get(1).map(String::as_str))
        .collect()
}

fn range_of(values: &[f32]) -> (f32, f32) {
    values
        .iter()
        .fold((0.0f32, 0.0f32), |(lo, hi), &v| (lo.min(v), hi.max(v)))
}

/// The uint16 encoding of `range`: widened to include zero and [`MIN_RANGE`], with an
/// integer zero point (QNN's offset is minus the zero point).
pub fn uint16_encoding((lo, hi): (f32, f32)) -> ScaleOffset {
    let (lo, hi) = (lo.min(0.0), hi.max(0.0));
    let steps = 65535.0f32;
    let scale = (hi - lo).max(MIN_RANGE) / steps;
    let offset = (lo / scale).round().clamp(-steps, 0.0);
    ScaleOffset {
        scale,
        offset: offset as i32,
    }
}

/// `values` as little-endian uint16 codes of `encoding`.
fn encode_u16(values: &[f32], encoding: ScaleOffset) -> Vec<u8> {
    values
        .iter()
        .flat_map(|&x| (encoding.quantize(x, (0, 65535)) as u16).to_le_bytes())
        .collect()
}

/// An HWIO filter (`[1, 1, in, out]`) as `bits`-bit codes: 8-bit per output channel
/// ([`per_channel`]), 4-bit as LPBQ ([`lpbq`]).
fn filter_codes(values: &[f32], dims: &[u32], bits: u32) -> (QnnDataType, QuantParams, Vec<u8>) {
    match bits {
        4 => lpbq(values, dims, bits, lpbq_block(dims[2] as usize)),
        _ => per_channel(values, dims, bits),
    }
}

/// Symmetric codes of `bits` bits with one scale per output channel (`axis` 3, offset
/// 0), the widest value of each channel on the largest code: QNN's
/// `AXIS_SCALE_OFFSET` in `SFIXED_POINT_8`, which HTP takes for 8-bit weights.
pub(crate) fn per_channel(
    values: &[f32],
    dims: &[u32],
    bits: u32,
) -> (QnnDataType, QuantParams, Vec<u8>) {
    let codes_max = ((1i32 << (bits - 1)) - 1) as f32;
    let cout = dims[3] as usize;
    let mut widest = vec![0.0f32; cout];
    for (i, &v) in values.iter().enumerate() {
        let c = i % cout;
        widest[c] = widest[c].max(v.abs());
    }
    let scale_offsets: Vec<ScaleOffset> = widest
        .iter()
        .map(|&w| ScaleOffset {
            scale: if w > 0.0 { w / codes_max } else { 1.0 },
            offset: 0,
        })
        .collect();
    let codes = values
        .iter()
        .enumerate()
        .map(|(i, &v)| code(v, scale_offsets[i % cout].scale as f64, codes_max) as u8)
        .collect();
    let params = QuantParams::axis_scale_offset(3, scale_offsets);
    (QnnDataType::SFixed8, params, codes)
}

/// An HWIO filter (`[1, 1, in, out]`) as LPBQ codes of `bits` bits: per output channel
/// `c` a float scale `s_c`, per block `b` of the input channels an integer scale `k_cb`
/// in `[1, 16]`, so that the block's step is `s_c * k_cb`. `s_c` is searched among
/// [`CHANNEL_SCALES`] fractions of the widest block's step over 16, and each `k_cb` among
/// the two around the block's own step, for the least squared error. The codes are
/// declared `SFIXED_POINT_8` (one per byte, within the 4-bit range), as Qualcomm's own
/// converters declare LPBQ weights; `SFIXED_POINT_4` would mean two per byte.
pub(crate) fn lpbq(
    values: &[f32],
    dims: &[u32],
    bits: u32,
    block: usize,
) -> (QnnDataType, QuantParams, Vec<u8>) {
    let codes_max = ((1i32 << (bits - 1)) - 1) as f32;
    let (cin, cout) = (dims[2] as usize, dims[3] as usize);
    let blocks = cin / block;
    let mut codes = vec![0u8; values.len()];
    let mut scale_offsets = Vec::with_capacity(cout);
    let mut block_scales = Vec::with_capacity(cout * blocks);
    let mut column = vec![0.0f32; cin];
    for c in 0..cout {
        for (k, v) in column.iter_mut().enumerate() {
            *v = values[k * cout + c];
        }
        let channel = ChannelLpbq::best(&column, block, codes_max);
        scale_offsets.push(ScaleOffset {
            scale: channel.scale,
            offset: 0,
        });
        for (b, &k) in channel.block_scales.iter().enumerate() {
            block_scales.push(k);
            let step = block_step(channel.scale, k as f32);
            for i in b * block..(b + 1) * block {
                codes[i * cout + c] = code(column[i], step, codes_max) as u8;
            }
        }
    }
    let params = QuantParams::blockwise_expansion(BlockwiseExpansion {
        axis: 3,
        block_axis: 2,
        block_size: block as u32,
        num_blocks_per_axis: blocks as u32,
        block_scale_bitwidth: BLOCK_SCALE_BITS,
        scale_offsets,
        block_scales,
    });
    (QnnDataType::SFixed8, params, codes)
}

/// The LPBQ block size for `cin` input channels: the first of [`LPBQ_BLOCKS`] dividing
/// it into a layout HTP computes, else the whole row.
fn lpbq_block(cin: usize) -> usize {
    let fits =
        |b: &usize| cin.is_multiple_of(*b) && htp_computes_blocks(*b as u32, (cin / *b) as u32);
    LPBQ_BLOCKS
        .iter()
        .map(|&b| b as usize)
        .find(fits)
        .unwrap_or(cin)
}

/// Fractions of the widest block's step over 16 tried as a channel's scale.
pub const CHANNEL_SCALES: &[f32] = &[1.0, 0.9, 0.8, 0.7, 0.6];

/// A block's step: its channel's scale times its integer scale, as QNN expands it (f64).
fn block_step(scale: f32, k: f32) -> f64 {
    scale as f64 * k as f64
}

/// `x`'s code in steps of `step`, within `[-max - 1, max]`.
fn code(x: f32, step: f64, max: f32) -> i8 {
    let max = max as i64;
    quantize_real(x, step, 0, (-max - 1, max)) as i8
}

/// The squared error of `values` coded in steps of `step`.
fn coding_error(values: &[f32], step: f64, max: f32) -> f32 {
    values
        .iter()
        .map(|&x| (x as f64 - code(x, step, max) as f64 * step).powi(2) as f32)
        .sum()
}

/// One channel's LPBQ scales.
struct ChannelLpbq {
    scale: f32,
    block_scales: Vec<u16>,
    error: f32,
}

impl ChannelLpbq {
    /// The channel scale of [`CHANNEL_SCALES`] (and block scales) with the least error.
    fn best(column: &[f32], block: usize, max: f32) -> ChannelLpbq {
        let widest = column.iter().fold(0.0f32, |m, &v| m.max(v.abs()));
        let levels = (1u32 << BLOCK_SCALE_BITS) as f32;
        if widest == 0.0 {
            let block_scales = vec![1; column.len() / block];
            return ChannelLpbq {
                scale: 1.0,
                block_scales,
                error: 0.0,
            };
        }
        CHANNEL_SCALES
            .iter()
            .map(|f| ChannelLpbq::with_scale(column, block, widest / max / levels * f, max))
            .min_by(|a, b| a.error.total_cmp(&b.error))
            .unwrap_or_else(|| ChannelLpbq::with_scale(column, block, widest / max / levels, max))
    }

    /// Block scales for channel scale `scale`: per block the better of the two integers
    /// around its ideal step, within `[1, 16]`.
    fn with_scale(column: &[f32], block: usize, scale: f32, max_code: f32) -> ChannelLpbq {
        let levels = (1u32 << BLOCK_SCALE_BITS) as f32;
        let mut block_scales = Vec::with_capacity(column.len() / block);
        let mut error = 0.0;
        for values in column.chunks(block) {
            let max = values.iter().fold(0.0f32, |m, &v| m.max(v.abs()));
            let ideal = max / max_code / scale;
            let (k, e) = [ideal.floor(), ideal.ceil()]
                .map(|k| k.clamp(1.0, levels))
                .into_iter()
                .map(|k| (k, coding_error(values, block_step(scale, k), max_code)))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .unwrap_or((levels, 0.0));
            block_scales.push(k as u16);
            error += e;
        }
        ChannelLpbq {
            scale,
            block_scales,
            error,
        }
    }
}
