//! Element conversions applied while loading weights: between f32, f16 and bf16 (widened
//! exactly, or rounded to the nearest, ties to even), and byte copies for everything
//! stored as it is wanted.

use crate::dtype::DType;
use half::{bf16, f16};

/// Why bytes could not be converted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Unconvertible {
    /// The conversion is not supported (only floats convert to floats).
    Dtypes,
    /// Finite element `index` (of value `value`) overflows the narrower type.
    OutOfRange {
        /// The element's flat index.
        index: usize,
        /// Its value.
        value: f32,
    },
}

/// The error of loading tensor `name` of `file`, stored as `stored`, as `wanted` when
/// its conversion failed with `error`.
pub(crate) fn load_error(
    error: Unconvertible,
    name: &str,
    file: &std::path::Path,
    stored: DType,
    wanted: DType,
) -> super::WeightError {
    let (tensor, file) = (name.to_string(), file.to_path_buf());
    match error {
        Unconvertible::Dtypes => super::WeightError::Conversion {
            tensor,
            file,
            stored,
            wanted,
        },
        Unconvertible::OutOfRange { index, value } => super::WeightError::OutOfRange {
            tensor,
            file,
            index,
            value,
            wanted,
        },
    }
}

/// Reads one little-endian element as f32.
type ReadFloat = fn(&[u8]) -> f32;

/// Appends a value as one little-endian element; returns the value stored (rounded).
type WriteFloat = fn(f32, &mut Vec<u8>) -> f32;

/// `bytes` (little-endian elements of `from`) as elements of `to`. Reads element by
/// element, so `bytes` needs no alignment. A finite value the narrower type cannot hold
/// is an error rather than an infinity.
pub(crate) fn convert_bytes(
    bytes: &[u8],
    from: DType,
    to: DType,
) -> Result<Vec<u8>, Unconvertible> {
    if from == to {
        return Ok(bytes.to_vec());
    }
    let (width, read): (usize, ReadFloat) = match from {
        DType::F32 => (4, |b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        DType::F16 => (2, |b| f16::from_le_bytes([b[0], b[1]]).to_f32()),
        DType::BF16 => (2, |b| bf16::from_le_bytes([b[0], b[1]]).to_f32()),
        _ => return Err(Unconvertible::Dtypes),
    };
    let (out_width, write): (usize, WriteFloat) = match to {
        DType::F32 => (4, |v, out| {
            out.extend_from_slice(&v.to_le_bytes());
            v
        }),
        DType::F16 => (2, |v, out| {
            let h = f16::from_f32(v);
            out.extend_from_slice(&h.to_le_bytes());
            h.to_f32()
        }),
        DType::BF16 => (2, |v, out| {
            let h = bf16::from_f32(v);
            out.extend_from_slice(&h.to_le_bytes());
            h.to_f32()
        }),
        _ => return Err(Unconvertible::Dtypes),
    };
    let mut out = Vec::with_capacity(bytes.len() / width * out_width);
    for (index, element) in bytes.chunks_exact(width).enumerate() {
        let value = read(element);
        if write(value, &mut out).is_infinite() && value.is_finite() {
            return Err(Unconvertible::OutOfRange { index, value });
        }
    }
    Ok(out)
}
