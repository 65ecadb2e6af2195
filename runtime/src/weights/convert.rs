//! Element conversions applied while loading weights: f16 and bf16 widened to f32 (plain
//! conversion at load time), and byte copies for everything stored as it is wanted.

use crate::dtype::DType;
use half::{bf16, f16};

/// `bytes` (little-endian elements of `from`) as elements of `to`, or `None` if that
/// conversion is not supported. Reads element by element, so `bytes` needs no alignment.
pub(crate) fn convert_bytes(bytes: &[u8], from: DType, to: DType) -> Option<Vec<u8>> {
    if from == to {
        return Some(bytes.to_vec());
    }
    let widen: fn([u8; 2]) -> f32 = match (from, to) {
        (DType::F16, DType::F32) => |b| f16::from_le_bytes(b).to_f32(),
        (DType::BF16, DType::F32) => |b| bf16::from_le_bytes(b).to_f32(),
        _ => return None,
    };
    Some(
        bytes
            .chunks_exact(2)
            .flat_map(|pair| widen([pair[0], pair[1]]).to_le_bytes())
            .collect(),
    )
}
