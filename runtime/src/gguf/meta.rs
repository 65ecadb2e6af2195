//! Metadata values, owned: scalars, strings and (possibly nested) arrays, each array
//! stored as a vector of its element type.

use std::fmt;

/// A GGUF metadata value type, with its id in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetaType {
    /// 0: u8.
    U8,
    /// 1: i8.
    I8,
    /// 2: u16.
    U16,
    /// 3: i16.
    I16,
    /// 4: u32.
    U32,
    /// 5: i32.
    I32,
    /// 6: f32.
    F32,
    /// 7: bool (one byte, 0 or 1).
    Bool,
    /// 8: string (u64 length, UTF-8 bytes).
    String,
    /// 9: array (element type, u64 count, elements).
    Array,
    /// 10: u64.
    U64,
    /// 11: i64.
    I64,
    /// 12: f64.
    F64,
}

/// The value types in id order.
const META_TYPES: [MetaType; 13] = [
    MetaType::U8,
    MetaType::I8,
    MetaType::U16,
    MetaType::I16,
    MetaType::U32,
    MetaType::I32,
    MetaType::F32,
    MetaType::Bool,
    MetaType::String,
    MetaType::Array,
    MetaType::U64,
    MetaType::I64,
    MetaType::F64,
];

impl MetaType {
    /// The type of id `id`, if GGUF defines one.
    pub fn from_id(id: u32) -> Option<MetaType> {
        META_TYPES.get(usize::try_from(id).ok()?).copied()
    }

    /// The fewest bytes a value of this type takes in a file (a string's length, an
    /// array's element type and count).
    pub fn min_size(self) -> u64 {
        match self {
            MetaType::U8 | MetaType::I8 | MetaType::Bool => 1,
            MetaType::U16 | MetaType::I16 => 2,
            MetaType::U32 | MetaType::I32 | MetaType::F32 => 4,
            MetaType::U64 | MetaType::I64 | MetaType::F64 | MetaType::String => 8,
            MetaType::Array => 12,
        }
    }

    /// Its lower-case name (`u32`, `string`, ...).
    pub fn name(self) -> &'static str {
        match self {
            MetaType::U8 => "u8",
            MetaType::I8 => "i8",
            MetaType::U16 => "u16",
            MetaType::I16 => "i16",
            MetaType::U32 => "u32",
            MetaType::I32 => "i32",
            MetaType::F32 => "f32",
            MetaType::Bool => "bool",
            MetaType::String => "string",
            MetaType::Array => "array",
            MetaType::U64 => "u64",
            MetaType::I64 => "i64",
            MetaType::F64 => "f64",
        }
    }
}

/// One metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum MetaValue {
    /// A u8.
    U8(u8),
    /// An i8.
    I8(i8),
    /// A u16.
    U16(u16),
    /// An i16.
    I16(i16),
    /// A u32.
    U32(u32),
    /// An i32.
    I32(i32),
    /// An f32.
    F32(f32),
    /// A bool.
    Bool(bool),
    /// A UTF-8 string.
    String(String),
    /// An array.
    Array(MetaArray),
    /// A u64.
    U64(u64),
    /// An i64.
    I64(i64),
    /// An f64.
    F64(f64),
}

/// An array value: its elements, in a vector of their type.
#[derive(Clone, Debug, PartialEq)]
pub enum MetaArray {
    /// u8 elements.
    U8(Vec<u8>),
    /// i8 elements.
    I8(Vec<i8>),
    /// u16 elements.
    U16(Vec<u16>),
    /// i16 elements.
    I16(Vec<i16>),
    /// u32 elements.
    U32(Vec<u32>),
    /// i32 elements.
    I32(Vec<i32>),
    /// f32 elements.
    F32(Vec<f32>),
    /// bool elements.
    Bool(Vec<bool>),
    /// String elements.
    String(Vec<String>),
    /// Array elements (nested arrays).
    Array(Vec<MetaArray>),
    /// u64 elements.
    U64(Vec<u64>),
    /// i64 elements.
    I64(Vec<i64>),
    /// f64 elements.
    F64(Vec<f64>),
}

impl MetaValue {
    /// Its type.
    pub fn meta_type(&self) -> MetaType {
        match self {
            MetaValue::U8(_) => MetaType::U8,
            MetaValue::I8(_) => MetaType::I8,
            MetaValue::U16(_) => MetaType::U16,
            MetaValue::I16(_) => MetaType::I16,
            MetaValue::U32(_) => MetaType::U32,
            MetaValue::I32(_) => MetaType::I32,
            MetaValue::F32(_) => MetaType::F32,
            MetaValue::Bool(_) => MetaType::Bool,
            MetaValue::String(_) => MetaType::String,
            MetaValue::Array(_) => MetaType::Array,
            MetaValue::U64(_) => MetaType::U64,
            MetaValue::I64(_) => MetaType::I64,
            MetaValue::F64(_) => MetaType::F64,
        }
    }

    /// Its value as an i128 when it is an integer of any type.
    pub fn as_integer(&self) -> Option<i128> {
        Some(match *self {
            MetaValue::U8(v) => v.into(),
            MetaValue::I8(v) => v.into(),
            MetaValue::U16(v) => v.into(),
            MetaValue::I16(v) => v.into(),
            MetaValue::U32(v) => v.into(),
            MetaValue::I32(v) => v.into(),
            MetaValue::U64(v) => v.into(),
            MetaValue::I64(v) => v.into(),
            _ => return None,
        })
    }
}

/// The type and, for scalars, the value (`u64 7`, `string "llama"`, `array of 3 u32`),
/// as type errors show it.
impl fmt::Display for MetaValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.meta_type().name();
        match self {
            MetaValue::F32(v) => write!(f, "{name} {v}"),
            MetaValue::F64(v) => write!(f, "{name} {v}"),
            MetaValue::Bool(v) => write!(f, "{name} {v}"),
            MetaValue::String(v) if v.len() <= 64 => write!(f, "{name} {v:?}"),
            MetaValue::String(v) => write!(f, "{name} of {} bytes", v.len()),
            MetaValue::Array(a) => write!(f, "array of {} {}", a.len(), a.elem_type().name()),
            other => match other.as_integer() {
                Some(v) => write!(f, "{name} {v}"),
                None => write!(f, "{name}"),
            },
        }
    }
}

impl MetaArray {
    /// The element type.
    pub fn elem_type(&self) -> MetaType {
        match self {
            MetaArray::U8(_) => MetaType::U8,
            MetaArray::I8(_) => MetaType::I8,
            MetaArray::U16(_) => MetaType::U16,
            MetaArray::I16(_) => MetaType::I16,
            MetaArray::U32(_) => MetaType::U32,
            MetaArray::I32(_) => MetaType::I32,
            MetaArray::F32(_) => MetaType::F32,
            MetaArray::Bool(_) => MetaType::Bool,
            MetaArray::String(_) => MetaType::String,
            MetaArray::Array(_) => MetaType::Array,
            MetaArray::U64(_) => MetaType::U64,
            MetaArray::I64(_) => MetaType::I64,
            MetaArray::F64(_) => MetaType::F64,
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        match self {
            MetaArray::U8(v) => v.len(),
            MetaArray::I8(v) => v.len(),
            MetaArray::U16(v) => v.len(),
            MetaArray::I16(v) => v.len(),
            MetaArray::U32(v) => v.len(),
            MetaArray::I32(v) => v.len(),
            MetaArray::F32(v) => v.len(),
            MetaArray::Bool(v) => v.len(),
            MetaArray::String(v) => v.len(),
            MetaArray::Array(v) => v.len(),
            MetaArray::U64(v) => v.len(),
            MetaArray::I64(v) => v.len(),
            MetaArray::F64(v) => v.len(),
        }
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
