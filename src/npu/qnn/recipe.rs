//! The W4A16 recipe (mllm's QNN AOT path): LPBQ int4 weights for every projection, uint16
//! per-tensor asymmetric activations from calibrated ranges, uint16 for the other static
//! tensors (norm weights, biases added element-wise). Observer constraints as in mllm:
//! every range includes zero and is at least [`MIN_RANGE`] wide; a sigmoid's output has
//! the fixed encoding of [0, 1]. (No op emitted yet concatenates, so no encodings are
//! shared across a concat.)

use super::error::QnnError;
use super::lower::FloatNet;
use oxrelax_runtime::qnn::codes::{tensor_type, QnnDataType};
use oxrelax_runtime::qnn::net::{BlockwiseExpansion, NetGraph, QuantParams, ScaleOffset};
use std::collections::BTreeMap;

/// The narrowest calibrated range an activation encoding takes.
pub const MIN_RANGE: f32 = 1e-4;
/// Block sizes of LPBQ weights along the input channels, preferred first; a row length
/// neither divides gets one block per channel.
pub const LPBQ_BLOCKS: &[u32] = &[32, 16];
/// The bits of an LPBQ block scale.
pub const BLOCK_SCALE_BITS: u32 = 4;

/// Observed `(min, max)` of every non-static tensor, by name.
pub type Ranges = BTreeMap<String, (f32, f32)>;

/// The quantized net: its graph with types and encodings, and each static tensor's bytes.
#[derive(Debug, Clone)]
pub struct QuantizedNet {
    /// The tensors (typed and encoded) and nodes.
    pub graph: NetGraph,
    /// Each static tensor's stored bytes.
    pub statics: BTreeMap<String, Vec<u8>>,
}

/// Applies the recipe to `net` with calibrated `ranges`.
pub fn quantize(net: &FloatNet, ranges: &Ranges) -> Result<QuantizedNet, QnnError> {
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
                lpbq(values, &tensor.dims)
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
            let range = ranges.get(name).ok_or_else(|| QnnError::Uncalibrated {
                tensor: name.clone(),
            })?;
            uint16_encoding(*range)
        };
        tensor.data_type = QnnDataType::UFixed16.code();
        tensor.quant_params = QuantParams::scale_offset(encoding.scale, encoding.offset);
    }
    Ok(QuantizedNet { graph, statics })
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

/// `values` as little-endian uint16 codes of `encoding` (`q = round(x / scale) - offset`,
/// saturated).
fn encode_u16(values: &[f32], encoding: ScaleOffset) -> Vec<u8> {
    values
        .iter()
        .flat_map(|&x| {
            let q = ((x / encoding.scale).round() - encoding.offset as f32).clamp(0.0, 65535.0);
            (q as u16).to_le_bytes()
        })
        .collect()
}

/// An HWIO filter (`[1, 1, in, out]`) as LPBQ int4: per output channel `c` a float scale
/// `s_c`, per block `b` of the input channels an integer scale `k_cb` in `[1, 16]`, so
/// that the block's step is `s_c * k_cb`; `s_c` is chosen so the channel's widest block
/// uses `k = 16`. Codes are stored one signed byte each.
fn lpbq(values: &[f32], dims: &[u32]) -> (QnnDataType, QuantParams, Vec<u8>) {
    let (cin, cout) = (dims[2] as usize, dims[3] as usize);
    let block = LPBQ_BLOCKS
        .iter()
        .map(|&b| b as usize)
        .find(|b| cin.is_multiple_of(*b))
        .unwrap_or(cin);
    let blocks = cin / block;
    let levels = (1u32 << BLOCK_SCALE_BITS) as f32;
    let mut codes = vec![0u8; values.len()];
    let mut scale_offsets = Vec::with_capacity(cout);
    let mut block_scales = Vec::with_capacity(cout * blocks);
    for c in 0..cout {
        let at = |k: usize| values[k * cout + c];
        let block_max: Vec<f32> = (0..blocks)
            .map(|b| (b * block..(b + 1) * block).fold(0.0f32, |m, k| m.max(at(k).abs())))
            .collect();
        let widest = block_max.iter().fold(0.0f32, |m, &v| m.max(v));
        let scale = if widest > 0.0 {
            widest / 7.0 / levels
        } else {
            1.0
        };
        scale_offsets.push(ScaleOffset { scale, offset: 0 });
        for (b, &max) in block_max.iter().enumerate() {
            let k = (max / 7.0 / scale).ceil().clamp(1.0, levels);
            block_scales.push(k as u16);
            for i in b * block..(b + 1) * block {
                let q = (at(i) / (scale * k)).round().clamp(-8.0, 7.0) as i8;
                codes[i * cout + c] = q as u8;
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
    (QnnDataType::SFixed4, params, codes)
}
