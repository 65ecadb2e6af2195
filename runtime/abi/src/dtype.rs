//! Element types of tensors, TIR values and buffers, and their byte sizes: one type for
//! the compiler and the runtime.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The element type of a tensor, a TIR value or a runtime buffer.
///
/// Serialized (e.g. in `vm.json`) by its short name: `"f32"`, `"bf16"`, `"u4"`, ...
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// IEEE binary32.
    F32,
    /// IEEE binary16 (storage; computed as f32).
    F16,
    /// bfloat16 (storage; computed as f32).
    BF16,
    /// 64-bit signed integer (indices, shape values).
    I64,
    /// 32-bit signed integer (token ids).
    I32,
    /// 8-bit signed integer.
    I8,
    /// 8-bit unsigned integer.
    U8,
    /// 4-bit unsigned integer, two per byte (element `2i` in the low nibble of byte `i`).
    U4,
    /// Boolean (masks, conditions), stored as one byte (0 or 1).
    Bool,
}

impl DType {
    /// All data types, in declaration order.
    pub const ALL: [DType; 9] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I64,
        DType::I32,
        DType::I8,
        DType::U8,
        DType::U4,
        DType::Bool,
    ];

    /// Width of one element in bits.
    pub fn bits(self) -> u32 {
        match self {
            DType::F32 | DType::I32 => 32,
            DType::F16 | DType::BF16 => 16,
            DType::I64 => 64,
            DType::I8 | DType::U8 | DType::Bool => 8,
            DType::U4 => 4,
        }
    }

    /// Whether this is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16)
    }

    /// Whether this is an integer type (signed or not, bool excluded).
    pub fn is_int(self) -> bool {
        matches!(
            self,
            DType::I64 | DType::I32 | DType::I8 | DType::U8 | DType::U4
        )
    }

    /// Bytes taken by `numel` elements; sub-byte types round up to a whole byte per tensor.
    pub fn storage_bytes(self, numel: usize) -> Option<usize> {
        let bits = numel.checked_mul(self.bits() as usize)?;
        Some(bits.div_ceil(8))
    }

    /// Whether elements are smaller than a byte (so an element offset may not be a byte offset).
    pub fn is_sub_byte(self) -> bool {
        self.bits() < 8
    }

    /// The short name (`f32`, `bf16`, `u4`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I64 => "i64",
            DType::I32 => "i32",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::U4 => "u4",
            DType::Bool => "bool",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A data type name that is not one of [`DType::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown dtype `{0}` (expected one of f32, f16, bf16, i64, i32, i8, u8, u4, bool)")]
pub struct UnknownDType(pub String);

impl FromStr for DType {
    type Err = UnknownDType;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DType::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| UnknownDType(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_serialize_short() {
        for d in DType::ALL {
            assert_eq!(d.name().parse::<DType>().unwrap(), d);
            assert_eq!(
                serde_json::to_string(&d).unwrap(),
                format!("\"{}\"", d.name())
            );
        }
        let err = "f8".parse::<DType>().unwrap_err();
        assert!(err.to_string().contains("`f8`"));
    }

    #[test]
    fn storage_bytes_round_sub_byte_types_up() {
        assert_eq!(DType::F32.storage_bytes(3), Some(12));
        assert_eq!(DType::BF16.storage_bytes(3), Some(6));
        assert_eq!(DType::I64.storage_bytes(2), Some(16));
        assert_eq!(DType::Bool.storage_bytes(5), Some(5));
        assert_eq!(DType::U4.storage_bytes(4), Some(2));
        assert_eq!(DType::U4.storage_bytes(5), Some(3));
        assert_eq!(DType::U4.storage_bytes(0), Some(0));
        assert_eq!(DType::F32.storage_bytes(usize::MAX), None);
        assert!(DType::U4.is_sub_byte() && !DType::U8.is_sub_byte());
    }
}
