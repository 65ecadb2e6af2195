//! Tensor values and their encodings: every value the simulator holds is an f32 array
//! of real (dequantized) values; a fixed-point tensor's values lie on its encoding's grid,
//! so its integers are recovered exactly by [`Encoding::quantize`] (for |q + offset| below
//! 2^24, which covers every activation type). Rounding is to nearest, ties away from zero,
//! then saturation to the type's range.

use super::error::SimError;
use crate::qnn::codes::{encoding, QnnDataType};
use crate::qnn::net::{quantize_real, NetTensor, ScaleOffset};
use half::f16;

/// A tensor's dims and values (row-major).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Array {
    /// The shape.
    pub dims: Vec<usize>,
    /// The values.
    pub data: Vec<f32>,
}

/// How a tensor's values are represented.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Encoding {
    /// Plain f32.
    F32,
    /// f16: values round through half precision.
    F16,
    /// Integers of `range` with per-element scales and offsets.
    Fixed {
        /// The type's integer range.
        range: (i64, i64),
        /// Where each element's scale and offset come from.
        scales: Scales,
    },
}

/// The scales and offsets of a fixed-point tensor.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Scales {
    /// One for the whole tensor.
    Tensor(ScaleOffset),
    /// One per index of an axis (`stride` elements apart).
    Axis(AxisIndex, Vec<ScaleOffset>),
    /// LPBQ: a float scale per channel times an integer scale per block.
    Block(Blockwise),
}

/// Which index of one axis a flat element index has.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct AxisIndex {
    /// Elements between consecutive indices of the axis.
    pub stride: usize,
    /// The axis's length.
    pub len: usize,
}

impl AxisIndex {
    fn new(dims: &[usize], axis: i32) -> Option<AxisIndex> {
        let axis = usize::try_from(axis).ok().filter(|&a| a < dims.len())?;
        let stride = dims[axis + 1..].iter().product();
        Some(AxisIndex {
            stride,
            len: dims[axis],
        })
    }

    /// The axis index of flat element `i`.
    pub fn of(self, i: usize) -> usize {
        (i / self.stride.max(1)) % self.len.max(1)
    }
}

/// An LPBQ encoding resolved against its tensor's dims.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Blockwise {
    /// The output-channel axis.
    pub channel: AxisIndex,
    /// The reduction axis.
    pub reduce: AxisIndex,
    /// Elements per block of the reduction axis.
    pub block_size: usize,
    /// Blocks per channel.
    pub blocks: usize,
    /// The float scale of each channel.
    pub channel_scales: Vec<f32>,
    /// The integer scale of each block, channel-major.
    pub block_scales: Vec<u16>,
}

impl Encoding {
    /// The encoding of `tensor` (whose dims are `dims`), checked against them.
    pub fn of(name: &str, tensor: &NetTensor, dims: &[usize]) -> Result<Encoding, SimError> {
        let dtype = tensor
            .dtype()
            .ok_or_else(|| data_type_error(name, tensor))?;
        match dtype {
            QnnDataType::Float32 => return Ok(Encoding::F32),
            QnnDataType::Float16 => return Ok(Encoding::F16),
            _ => {}
        }
        let range = dtype
            .fixed_range()
            .ok_or_else(|| data_type_error(name, tensor))?;
        let bad = |reason: &str| SimError::Encoding {
            tensor: name.to_string(),
            reason: reason.to_string(),
        };
        let params = &tensor.quant_params;
        let scales = match params.encoding {
            encoding::SCALE_OFFSET => {
                Scales::Tensor(params.scale_offset.ok_or_else(|| bad("no scale_offset"))?)
            }
            encoding::AXIS_SCALE_OFFSET => {
                let axis = params.axis_scale_offset.as_ref();
                let axis = axis.ok_or_else(|| bad("no axis_scale_offset"))?;
                let index =
                    AxisIndex::new(dims, axis.axis).ok_or_else(|| bad("axis out of range"))?;
                if axis.scale_offsets.len() != index.len {
                    return Err(bad("one scale_offset per index of the axis is needed"));
                }
                Scales::Axis(index, axis.scale_offsets.clone())
            }
            encoding::BLOCKWISE_EXPANSION => {
                let lpbq = params.blockwise_expansion.as_ref();
                Scales::Block(
                    blockwise(dims, lpbq.ok_or_else(|| bad("no blockwise_expansion"))?)
                        .map_err(bad)?,
                )
            }
            _ => return Err(bad("a fixed-point tensor needs a supported encoding")),
        };
        let encoding = Encoding::Fixed { range, scales };
        encoding.check_scales().map_err(bad)?;
        Ok(encoding)
    }

    fn check_scales(&self) -> Result<(), &'static str> {
        let Encoding::Fixed { scales, .. } = self else {
            return Ok(());
        };
        let good = |s: f32| s.is_finite() && s > 0.0;
        let all_good = match scales {
            Scales::Tensor(so) => good(so.scale),
            Scales::Axis(_, list) => list.iter().all(|so| good(so.scale)),
            Scales::Block(b) => b.channel_scales.iter().all(|&s| good(s)),
        };
        if all_good {
            Ok(())
        } else {
            Err("scales must be finite and positive")
        }
    }

    /// The scale and offset of flat element `i`.
    fn param_at(scales: &Scales, i: usize) -> (f64, i64) {
        match scales {
            Scales::Tensor(so) => (so.scale as f64, so.offset as i64),
            Scales::Axis(index, list) => {
                let so = list[index.of(i)];
                (so.scale as f64, so.offset as i64)
            }
            Scales::Block(b) => {
                let c = b.channel.of(i);
                let block = b.reduce.of(i) / b.block_size;
                let scale =
                    b.channel_scales[c] as f64 * b.block_scales[c * b.blocks + block] as f64;
                (scale, 0)
            }
        }
    }

    /// The integers of `values` (fixed-point encodings only): `round(x / scale) - offset`,
    /// ties away from zero, saturated to the type's range.
    pub fn quantize(&self, values: &[f32]) -> Option<Vec<i64>> {
        let Encoding::Fixed { range, scales } = self else {
            return None;
        };
        let quantize_one = |(i, &x): (usize, &f32)| {
            let (scale, offset) = Encoding::param_at(scales, i);
            quantize_real(x, scale, offset, *range)
        };
        Some(values.iter().enumerate().map(quantize_one).collect())
    }

    /// The real values of fixed-point integers: `scale * (q + offset)` (f32 for others).
    pub fn dequantize(&self, ints: &[i64]) -> Vec<f32> {
        let Encoding::Fixed { scales, .. } = self else {
            return ints.iter().map(|&q| q as f32).collect();
        };
        let real = |(i, &q): (usize, &i64)| {
            let (scale, offset) = Encoding::param_at(scales, i);
            (scale * (q + offset) as f64) as f32
        };
        ints.iter().enumerate().map(real).collect()
    }

    /// Moves `values` onto this encoding's grid: f16 rounding, or quantize and dequantize.
    pub fn settle(&self, values: &mut [f32]) {
        match self {
            Encoding::F32 => {}
            Encoding::F16 => values
                .iter_mut()
                .for_each(|x| *x = f16::from_f32(*x).to_f32()),
            Encoding::Fixed { .. } => {
                if let Some(ints) = self.quantize(values) {
                    values.copy_from_slice(&self.dequantize(&ints));
                }
            }
        }
    }

    /// The single scale and offset of a per-tensor fixed-point encoding.
    pub fn per_tensor(&self) -> Option<ScaleOffset> {
        match self {
            Encoding::Fixed {
                scales: Scales::Tensor(so),
                ..
            } => Some(*so),
            _ => None,
        }
    }

    /// The integer range of a fixed-point encoding.
    pub fn range(&self) -> Option<(i64, i64)> {
        match self {
            Encoding::Fixed { range, .. } => Some(*range),
            _ => None,
        }
    }
}

fn blockwise(
    dims: &[usize],
    lpbq: &crate::qnn::net::BlockwiseExpansion,
) -> Result<Blockwise, &'static str> {
    let channel = AxisIndex::new(dims, lpbq.axis).ok_or("axis out of range")?;
    let reduce = AxisIndex::new(dims, lpbq.block_axis).ok_or("block_axis out of range")?;
    let block_size = lpbq.block_size as usize;
    let blocks = lpbq.num_blocks_per_axis as usize;
    if block_size == 0 || blocks != reduce.len.div_ceil(block_size) {
        return Err(
            "num_blocks_per_axis must be the block axis's length over block_size, rounded up",
        );
    }
    if lpbq.scale_offsets.len() != channel.len || lpbq.block_scales.len() != channel.len * blocks {
        return Err("one scale per channel and one block scale per channel and block are needed");
    }
    if lpbq.scale_offsets.iter().any(|so| so.offset != 0) {
        return Err("LPBQ offsets must be 0");
    }
    Ok(Blockwise {
        channel,
        reduce,
        block_size,
        blocks,
        channel_scales: lpbq.scale_offsets.iter().map(|so| so.scale).collect(),
        block_scales: lpbq.block_scales.clone(),
    })
}

fn data_type_error(name: &str, tensor: &NetTensor) -> SimError {
    SimError::DType {
        tensor: name.to_string(),
        code: tensor.data_type,
    }
}

/// A tensor's dims as `usize`, and its element count, if that fits.
pub(crate) fn dims_of(name: &str, tensor: &NetTensor) -> Result<(Vec<usize>, usize), SimError> {
    let dims: Vec<usize> = tensor.dims.iter().map(|&d| d as usize).collect();
    let numel = dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    let numel = numel.ok_or_else(|| SimError::Encoding {
        tensor: name.to_string(),
        reason: "its element count overflows".to_string(),
    })?;
    Ok((dims, numel))
}

/// The real values of a static tensor's little-endian bytes (already checked to be `numel
/// x stored bytes` long), dequantized through `encoding` if fixed-point.
pub(crate) fn decode_static(
    name: &str,
    dtype: QnnDataType,
    bytes: &[u8],
    encoding: &Encoding,
) -> Result<Vec<f32>, SimError> {
    let words = bytes.chunks_exact(dtype.stored_bytes());
    match dtype.is_float() {
        true => Ok(words.map(|w| dtype.decode(w) as f32).collect()),
        false => {
            let ints: Vec<i64> = words.map(|w| dtype.decode(w) as i64).collect();
            let range = encoding.range().unwrap_or((i64::MIN, i64::MAX));
            if let Some(index) = ints.iter().position(|q| !(range.0..=range.1).contains(q)) {
                return Err(SimError::StaticValue {
                    tensor: name.to_string(),
                    index,
                    value: ints[index],
                });
            }
            Ok(encoding.dequantize(&ints))
        }
    }
}
