//! Element data types of tensors, scalars and buffers.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The element type of a tensor or a TIR value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DataType {
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
    /// 4-bit unsigned integer, packed two per byte (quantized weights).
    U4,
    /// Boolean (masks, conditions).
    Bool,
}

impl DataType {
    /// All data types, in declaration order.
    pub const ALL: [DataType; 9] = [
        DataType::F32,
        DataType::F16,
        DataType::BF16,
        DataType::I64,
        DataType::I32,
        DataType::I8,
        DataType::U8,
        DataType::U4,
        DataType::Bool,
    ];

    /// Width of one element in bits.
    pub fn bits(self) -> u32 {
        match self {
            DataType::F32 | DataType::I32 => 32,
            DataType::F16 | DataType::BF16 => 16,
            DataType::I64 => 64,
            DataType::I8 | DataType::U8 | DataType::Bool => 8,
            DataType::U4 => 4,
        }
    }

    /// Whether this is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(self, DataType::F32 | DataType::F16 | DataType::BF16)
    }

    /// Whether this is an integer type (signed or not, bool excluded).
    pub fn is_int(self) -> bool {
        matches!(
            self,
            DataType::I64 | DataType::I32 | DataType::I8 | DataType::U8 | DataType::U4
        )
    }

    /// The short name used in the text form (`f32`, `bf16`, `i32`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DataType::F32 => "f32",
            DataType::F16 => "f16",
            DataType::BF16 => "bf16",
            DataType::I64 => "i64",
            DataType::I32 => "i32",
            DataType::I8 => "i8",
            DataType::U8 => "u8",
            DataType::U4 => "u4",
            DataType::Bool => "bool",
        }
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A data type name that is not one of [`DataType::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown data type `{0}` (expected one of f32, f16, bf16, i64, i32, i8, u8, u4, bool)")]
pub struct UnknownDataType(pub String);

impl FromStr for DataType {
    type Err = UnknownDataType;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DataType::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| UnknownDataType(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in DataType::ALL {
            assert_eq!(d.name().parse::<DataType>().unwrap(), d);
        }
        assert!("f8".parse::<DataType>().is_err());
    }
}
