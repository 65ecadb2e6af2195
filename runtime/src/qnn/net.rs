//! `model_net.json`: the QNN graphs of an artifact's `npu/` folder in the QNN converter's
//! JSON form (`graph.tensors` and `graph.nodes` keyed by name, numeric enum codes,
//! `quant_params` with `scale_offset` / `axis_scale_offset`, parameters split into
//! `tensor_params` and `scalar_params`), plus `graphs`, our list of the context's graphs
//! (the converter's file holds one): each with its ordered inputs, outputs and nodes.
//! Static tensors are shared by name between graphs (a prefill and a decode graph read
//! the same weights); every other name is unique in the file. The static data lives in
//! `model.bin` ([`super::bin`]).

use super::codes::{definition, encoding, QnnDataType};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The file name inside `npu/`.
pub const NET_FILE: &str = "model_net.json";

/// A whole `model_net.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetFile {
    /// The generated C++ source (`model.cpp`).
    #[serde(rename = "model.cpp")]
    pub model_cpp: String,
    /// The static data archive (`model.bin`).
    #[serde(rename = "model.bin")]
    pub model_bin: String,
    /// The command that produced the file.
    pub converter_command: String,
    /// A copyright line for the generated sources (empty).
    pub copyright_str: String,
    /// The op types the graphs use, sorted.
    pub op_types: Vec<String>,
    /// The graphs of the context, in the order they are composed.
    pub graphs: Vec<GraphSpec>,
    /// For each graph input or output that holds one row per token, the axis of the
    /// tokens (a call with fewer tokens than the graph's is padded along it).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub token_axes: BTreeMap<String, u32>,
    /// Every tensor and node of every graph.
    pub graph: NetGraph,
}

/// One graph of the context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GraphSpec {
    /// The graph's name (the outlined function's: `prefill_npu0`).
    pub name: String,
    /// Tokens per call (the chunk, or 1 for decode).
    pub tokens: u32,
    /// Its app-written inputs, in call order.
    pub inputs: Vec<String>,
    /// Its app-read outputs, in result order.
    pub outputs: Vec<String>,
    /// Its nodes, in execution order.
    pub nodes: Vec<String>,
    /// When this graph is the same computation as another over fewer tokens per call
    /// (chosen for calls it holds with less padding): that graph's name, which the CPU
    /// part calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant_of: Option<String>,
}

impl GraphSpec {
    /// The name of the `npu.<name>` function that runs this graph.
    pub fn call_name(&self) -> &str {
        self.variant_of.as_deref().unwrap_or(&self.name)
    }
}

/// The tensors and nodes of all graphs.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NetGraph {
    /// Tensors by name.
    pub tensors: BTreeMap<String, NetTensor>,
    /// Nodes by name.
    pub nodes: BTreeMap<String, NetNode>,
}

/// A tensor, as the converter writes one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetTensor {
    /// Left to the backend (0).
    pub id: u32,
    /// A `Qnn_TensorType_t` code ([`super::codes::tensor_type`]).
    #[serde(rename = "type")]
    pub kind: u32,
    /// `QNN_TENSOR_DATA_FORMAT_FLAT_BUFFER` (0).
    #[serde(rename = "dataFormat")]
    pub data_format: u32,
    /// A `Qnn_DataType_t` code ([`QnnDataType::code`]).
    pub data_type: u32,
    /// The quantization encoding.
    pub quant_params: QuantParams,
    /// The shape.
    pub dims: Vec<u32>,
}

impl NetTensor {
    /// The element type, if its code is one of ours.
    pub fn dtype(&self) -> Option<QnnDataType> {
        QnnDataType::from_code(self.data_type)
    }

    /// Number of elements.
    pub fn numel(&self) -> u64 {
        self.dims.iter().map(|&d| d as u64).product()
    }
}

/// `Qnn_QuantizeParams_t`: which encoding, and its values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuantParams {
    /// A `Qnn_Definition_t` code.
    pub definition: u32,
    /// A `Qnn_QuantizationEncoding_t` code.
    pub encoding: u32,
    /// For [`encoding::SCALE_OFFSET`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_offset: Option<ScaleOffset>,
    /// For [`encoding::AXIS_SCALE_OFFSET`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub axis_scale_offset: Option<AxisScaleOffset>,
    /// For [`encoding::BLOCKWISE_EXPANSION`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blockwise_expansion: Option<BlockwiseExpansion>,
}

impl QuantParams {
    /// No encoding (a float tensor).
    pub fn none() -> QuantParams {
        QuantParams {
            definition: definition::UNDEFINED,
            encoding: encoding::UNDEFINED,
            scale_offset: None,
            axis_scale_offset: None,
            blockwise_expansion: None,
        }
    }

    /// One scale and offset for the whole tensor.
    pub fn scale_offset(scale: f32, offset: i32) -> QuantParams {
        QuantParams {
            definition: definition::DEFINED,
            encoding: encoding::SCALE_OFFSET,
            scale_offset: Some(ScaleOffset { scale, offset }),
            ..QuantParams::none()
        }
    }

    /// One scale and offset per slice along `axis`.
    pub fn axis_scale_offset(axis: i32, scale_offsets: Vec<ScaleOffset>) -> QuantParams {
        QuantParams {
            definition: definition::DEFINED,
            encoding: encoding::AXIS_SCALE_OFFSET,
            axis_scale_offset: Some(AxisScaleOffset {
                axis,
                num_scale_offsets: scale_offsets.len() as u32,
                scale_offsets,
            }),
            ..QuantParams::none()
        }
    }

    /// LPBQ ([`BlockwiseExpansion`]).
    pub fn blockwise_expansion(lpbq: BlockwiseExpansion) -> QuantParams {
        QuantParams {
            definition: definition::DEFINED,
            encoding: encoding::BLOCKWISE_EXPANSION,
            blockwise_expansion: Some(lpbq),
            ..QuantParams::none()
        }
    }
}

/// `Qnn_ScaleOffset_t`: `real = scale * (q + offset)` (QNN's sign convention: the offset
/// is minus the zero point).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ScaleOffset {
    /// The step.
    pub scale: f32,
    /// Added to the integer before scaling.
    pub offset: i32,
}

impl ScaleOffset {
    /// The integer of real `x` under this encoding, saturated to `range`
    /// ([`quantize_real`]).
    pub fn quantize(self, x: f32, range: (i64, i64)) -> i64 {
        quantize_real(x, self.scale as f64, self.offset as i64, range)
    }
}

/// QNN's integer for a real `x` with step `scale` and `offset`: `round(x / scale) -
/// offset` (computed in f64, ties away from zero), saturated to `range`. The one
/// definition the recipe's encoder and the host reference backend both use.
pub fn quantize_real(x: f32, scale: f64, offset: i64, range: (i64, i64)) -> i64 {
    let q = (x as f64 / scale).round() as i64 - offset;
    q.clamp(range.0, range.1)
}

/// `Qnn_AxisScaleOffset_t`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AxisScaleOffset {
    /// The axis the encodings run along.
    pub axis: i32,
    /// `scale_offsets.len()`.
    pub num_scale_offsets: u32,
    /// One per index of `axis`.
    pub scale_offsets: Vec<ScaleOffset>,
}

/// LPBQ (low-power blockwise quantization, `Qnn_BlockwiseExpansion_t`): a weight of output
/// channel `c` (index along `axis`) in block `b` of the reduction axis (`block_axis`, in
/// blocks of `block_size`) is `q * scale_offsets[c].scale * block_scales[c * num_blocks +
/// b]`, the block scales small unsigned integers of `block_scale_bitwidth` bits (1..=16
/// for 4 bits), the offsets 0 (symmetric).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockwiseExpansion {
    /// The output-channel axis.
    pub axis: i32,
    /// The reduction axis the blocks run along.
    pub block_axis: i32,
    /// Elements per block of `block_axis`.
    pub block_size: u32,
    /// Blocks per channel.
    pub num_blocks_per_axis: u32,
    /// Bits of a block scale (4).
    pub block_scale_bitwidth: u32,
    /// The per-channel float scale (offset 0).
    pub scale_offsets: Vec<ScaleOffset>,
    /// The integer block scales, channel-major.
    pub block_scales: Vec<u16>,
}

impl BlockwiseExpansion {
    /// Whether Qualcomm's HTP backend computes this block layout correctly: one block per
    /// channel, blocks of a multiple of 32 elements, or an even number of blocks of 16.
    /// (libQnnHtp.so accepts blocks of 8 or 48, and odd counts of blocks of 16, but
    /// computes garbage with them.)
    pub fn htp_computes(&self) -> bool {
        htp_computes_blocks(self.block_size, self.num_blocks_per_axis)
    }
}

/// [`BlockwiseExpansion::htp_computes`] for `blocks` blocks of `block_size` elements.
pub fn htp_computes_blocks(block_size: u32, blocks: u32) -> bool {
    blocks == 1 || block_size.is_multiple_of(32) || (block_size == 16 && blocks.is_multiple_of(2))
}

/// A node, as the converter writes one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetNode {
    /// The op package (`qti.aisw`).
    pub package: String,
    /// The op type (`Conv2d`, `RmsNorm`, ...).
    #[serde(rename = "type")]
    pub op_type: String,
    /// Tensor-valued parameters by name.
    #[serde(default)]
    pub tensor_params: BTreeMap<String, TensorParam>,
    /// Scalar parameters by name: `{"<data type code>": value}`, one entry.
    #[serde(default)]
    pub scalar_params: BTreeMap<String, BTreeMap<String, f64>>,
    /// Input tensor names, in the op's order.
    pub input_names: Vec<String>,
    /// Output tensor names.
    pub output_names: Vec<String>,
}

/// A tensor-valued node parameter (axes, strides, a permutation), its data inline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TensorParam {
    /// A `Qnn_DataType_t` code.
    pub data_type: u32,
    /// The shape.
    pub dims: Vec<u32>,
    /// The values, row-major.
    pub data: Vec<f64>,
}

/// A scalar parameter in the converter's spelling: `{"<code>": value}`.
pub fn scalar_param(dtype: QnnDataType, value: f64) -> BTreeMap<String, f64> {
    BTreeMap::from([(dtype.code().to_string(), value)])
}

/// The data type and value of a scalar parameter, when it has exactly one entry with a
/// known code.
pub fn scalar_value(param: &BTreeMap<String, f64>) -> Option<(QnnDataType, f64)> {
    let mut entries = param.iter();
    let (code, &value) = entries.next()?;
    if entries.next().is_some() {
        return None;
    }
    Some((QnnDataType::from_code(code.parse().ok()?)?, value))
}
