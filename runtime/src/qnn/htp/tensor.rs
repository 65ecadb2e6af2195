//! A net's tensors declared to QNN: [`Declared`] holds a [`Tensor`] struct with the memory
//! its pointers point into (name, dimensions, encodings, data), and the conversions of an
//! app tensor's values to and from the bytes the graph reads and writes.

use super::api::{
    AxisScaleOffset, BlockwiseExpansion, ClientBuffer, Encoding, QuantizeParams, ScaleOffset,
    Tensor, TensorV1, BLOCK_SCALE_STORAGE_16, BLOCK_SCALE_STORAGE_8, TENSOR_MEM_RAW,
    TENSOR_VERSION_1,
};
use super::error::HtpError;
use crate::qnn::codes::{encoding, QnnDataType};
use crate::qnn::net::{quantize_real, NetTensor, QuantParams, TensorParam};
use std::ffi::CString;

/// A tensor declaration and the memory it points into. The pointers point into heap
/// buffers owned here, so moving a `Declared` keeps them valid.
pub(super) struct Declared {
    _name: CString,
    dims: Vec<u32>,
    _scale_offsets: Vec<ScaleOffset>,
    _blockwise: Option<Box<BlockwiseExpansion>>,
    _block_scales: BlockScales,
    data: Vec<u8>,
    /// The struct QNN reads.
    pub raw: Tensor,
}

/// The block scales QNN's LPBQ encoding points into (kept, never read here).
#[expect(dead_code, reason = "holds the memory the declaration points into")]
enum BlockScales {
    None,
    Narrow(Vec<u8>),
    Wide(Vec<u16>),
}

impl Declared {
    /// `tensor` as QNN declares it, named `name`, holding `data` (a static tensor's
    /// bytes, or an app tensor's buffer; empty for the others).
    pub fn new(name: &str, tensor: &NetTensor, data: Vec<u8>) -> Result<Declared, HtpError> {
        let invalid = |reason: String| HtpError::Tensor {
            tensor: name.to_string(),
            reason,
        };
        let c_name = CString::new(name).map_err(|_| invalid("a NUL in its name".into()))?;
        let dtype = tensor
            .dtype()
            .ok_or_else(|| invalid(format!("data type code {}", tensor.data_type)))?;
        if !data.is_empty() {
            let expected = stored_len(tensor, dtype).ok_or_else(|| invalid("too large".into()))?;
            if data.len() != expected {
                return Err(invalid(format!(
                    "{} bytes of data; dims {:?} of {} take {expected}",
                    data.len(),
                    tensor.dims,
                    dtype.c_name()
                )));
            }
        }
        let mut this = Declared {
            _name: c_name,
            dims: tensor.dims.clone(),
            _scale_offsets: Vec::new(),
            _blockwise: None,
            _block_scales: BlockScales::None,
            data,
            raw: blank_tensor(),
        };
        let quantize = this
            .quantize_params(&tensor.quant_params)
            .map_err(invalid)?;
        this.raw = Tensor {
            version: TENSOR_VERSION_1,
            v1: TensorV1 {
                id: 0,
                name: this._name.as_ptr(),
                kind: tensor.kind,
                data_format: tensor.data_format,
                data_type: tensor.data_type,
                quantize,
                rank: this.dims.len() as u32,
                dimensions: this.dims.as_mut_ptr(),
                mem_type: TENSOR_MEM_RAW,
                client_buf: ClientBuffer {
                    data: match this.data.is_empty() {
                        true => std::ptr::null_mut(),
                        false => this.data.as_mut_ptr().cast(),
                    },
                    size: this.data.len() as u32,
                },
            },
            v2_tail: [0; 3],
        };
        Ok(this)
    }

    /// A node's tensor parameter as a static tensor named `name`.
    pub fn param(name: &str, param: &TensorParam) -> Result<Declared, HtpError> {
        let dtype = QnnDataType::from_code(param.data_type).ok_or_else(|| HtpError::Tensor {
            tensor: name.to_string(),
            reason: format!("data type code {}", param.data_type),
        })?;
        let data = param.data.iter().flat_map(|&v| dtype.encode(v)).collect();
        let tensor = NetTensor {
            id: 0,
            kind: crate::qnn::codes::tensor_type::STATIC,
            data_format: 0,
            data_type: param.data_type,
            quant_params: QuantParams::none(),
            dims: param.dims.clone(),
        };
        Declared::new(name, &tensor, data)
    }

    /// The buffer the tensor points at.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    fn quantize_params(&mut self, params: &QuantParams) -> Result<QuantizeParams, String> {
        let mut raw = QuantizeParams {
            definition: params.definition,
            encoding_kind: params.encoding,
            encoding: Encoding { extent: [0; 4] },
        };
        match params.encoding {
            encoding::SCALE_OFFSET => {
                let so = params.scale_offset.ok_or("no scale_offset")?;
                raw.encoding.scale_offset = ScaleOffset {
                    scale: so.scale,
                    offset: so.offset,
                };
            }
            encoding::AXIS_SCALE_OFFSET => {
                let axis = params
                    .axis_scale_offset
                    .as_ref()
                    .ok_or("no axis_scale_offset")?;
                self._scale_offsets = convert(&axis.scale_offsets);
                raw.encoding.axis_scale_offset = AxisScaleOffset {
                    axis: axis.axis,
                    num_scale_offsets: self._scale_offsets.len() as u32,
                    scale_offset: self._scale_offsets.as_ptr(),
                };
            }
            encoding::BLOCKWISE_EXPANSION => {
                let lpbq = params
                    .blockwise_expansion
                    .as_ref()
                    .ok_or("no blockwise_expansion")?;
                self._scale_offsets = convert(&lpbq.scale_offsets);
                let narrow = lpbq.block_scales.iter().all(|&k| k <= u8::MAX as u16);
                let (storage, pointer) = match narrow {
                    true => {
                        let bytes: Vec<u8> = lpbq.block_scales.iter().map(|&k| k as u8).collect();
                        let pointer = bytes.as_ptr().cast();
                        self._block_scales = BlockScales::Narrow(bytes);
                        (BLOCK_SCALE_STORAGE_8, pointer)
                    }
                    false => {
                        let words = lpbq.block_scales.clone();
                        let pointer = words.as_ptr().cast();
                        self._block_scales = BlockScales::Wide(words);
                        (BLOCK_SCALE_STORAGE_16, pointer)
                    }
                };
                let expansion = Box::new(BlockwiseExpansion {
                    axis: lpbq.axis,
                    scale_offsets: self._scale_offsets.as_ptr(),
                    num_blocks_per_axis: lpbq.num_blocks_per_axis,
                    block_scale_bitwidth: lpbq.block_scale_bitwidth,
                    block_scale_storage: storage,
                    block_scales: pointer,
                });
                raw.encoding.blockwise_expansion = &*expansion;
                self._blockwise = Some(expansion);
            }
            encoding::UNDEFINED => {}
            other => return Err(format!("quantization encoding {other}")),
        }
        Ok(raw)
    }
}

fn convert(scale_offsets: &[crate::qnn::net::ScaleOffset]) -> Vec<ScaleOffset> {
    scale_offsets
        .iter()
        .map(|so| ScaleOffset {
            scale: so.scale,
            offset: so.offset,
        })
        .collect()
}

fn blank_tensor() -> Tensor {
    Tensor {
        version: TENSOR_VERSION_1,
        v1: TensorV1 {
            id: 0,
            name: std::ptr::null(),
            kind: 0,
            data_format: 0,
            data_type: 0,
            quantize: QuantizeParams {
                definition: 0,
                encoding_kind: 0,
                encoding: Encoding { extent: [0; 4] },
            },
            rank: 0,
            dimensions: std::ptr::null_mut(),
            mem_type: TENSOR_MEM_RAW,
            client_buf: ClientBuffer {
                data: std::ptr::null_mut(),
                size: 0,
            },
        },
        v2_tail: [0; 3],
    }
}

/// Bytes of `tensor`'s data as stored (`None` past 4 GiB, which QNN's sizes cannot hold).
pub(super) fn stored_len(tensor: &NetTensor, dtype: QnnDataType) -> Option<usize> {
    let bytes = tensor.numel().checked_mul(dtype.stored_bytes() as u64)?;
    (bytes <= u32::MAX as u64).then_some(bytes as usize)
}

/// An app tensor's real values as the bytes `tensor` holds: quantized by its
/// per-tensor encoding (QNN's rounding, saturated) or stored as its float type.
pub(super) fn encode_values(
    name: &str,
    tensor: &NetTensor,
    values: &[f32],
) -> Result<Vec<u8>, HtpError> {
    let dtype = tensor.dtype().ok_or_else(|| unsupported(name, tensor))?;
    if dtype.is_float() {
        return Ok(values
            .iter()
            .flat_map(|&v| dtype.encode(v as f64))
            .collect());
    }
    let (range, so) = per_tensor(name, tensor, dtype)?;
    Ok(values
        .iter()
        .flat_map(|&v| {
            let q = quantize_real(v, so.scale as f64, so.offset as i64, range);
            dtype.encode(q as f64)
        })
        .collect())
}

/// The real values of the bytes `tensor` holds (the inverse of [`encode_values`]).
pub(super) fn decode_values(
    name: &str,
    tensor: &NetTensor,
    bytes: &[u8],
) -> Result<Vec<f32>, HtpError> {
    let dtype = tensor.dtype().ok_or_else(|| unsupported(name, tensor))?;
    let width = dtype.stored_bytes();
    let ints = bytes.chunks_exact(width).map(|w| dtype.decode(w));
    if dtype.is_float() {
        return Ok(ints.map(|v| v as f32).collect());
    }
    let (_, so) = per_tensor(name, tensor, dtype)?;
    Ok(ints
        .map(|q| (so.scale as f64 * (q + so.offset as f64)) as f32)
        .collect())
}

fn per_tensor(
    name: &str,
    tensor: &NetTensor,
    dtype: QnnDataType,
) -> Result<((i64, i64), crate::qnn::net::ScaleOffset), HtpError> {
    match (dtype.fixed_range(), tensor.quant_params.scale_offset) {
        (Some(range), Some(so)) if tensor.quant_params.encoding == encoding::SCALE_OFFSET => {
            Ok((range, so))
        }
        _ => Err(unsupported(name, tensor)),
    }
}

fn unsupported(name: &str, tensor: &NetTensor) -> HtpError {
    HtpError::Tensor {
        tensor: name.to_string(),
        reason: format!(
            "a graph input or output of data type {} with encoding {}: only float types and \
             per-tensor scale-offset fixed point are exchanged with the app",
            tensor.data_type, tensor.quant_params.encoding
        ),
    }
}
