//! The numeric codes QNN gives its enums, as `model_net.json` and the generated C++ spell
//! them. Source: the `Qnn_DataType_t`, `Qnn_TensorType_t`, `Qnn_Definition_t` and
//! `Qnn_QuantizationEncoding_t` enums of `QnnTypes.h` in Qualcomm's QNN SDK (the public
//! API reference, docs.qualcomm.com "QNN API": Data Types), which the SDK's converters
//! write into `model_net.json`. Only the values the emitter, the validator and the host
//! reference backend use are here; the headers themselves are never copied.

/// An element type of a QNN tensor, with its `Qnn_DataType_t` code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QnnDataType {
    /// `QNN_DATATYPE_INT_32` (0x0032).
    Int32,
    /// `QNN_DATATYPE_UINT_32` (0x0132): parameters such as axes, strides, permutations.
    Uint32,
    /// `QNN_DATATYPE_FLOAT_16` (0x0216).
    Float16,
    /// `QNN_DATATYPE_FLOAT_32` (0x0232).
    Float32,
    /// `QNN_DATATYPE_SFIXED_POINT_4` (0x0304): two 4-bit codes per byte. Never emitted: the
    /// validator refuses it (HTP rejects it for weights; LPBQ codes are declared
    /// [`QnnDataType::SFixed8`] within [-8, 7]).
    SFixed4,
    /// `QNN_DATATYPE_SFIXED_POINT_8` (0x0308).
    SFixed8,
    /// `QNN_DATATYPE_SFIXED_POINT_32` (0x0332): quantized biases.
    SFixed32,
    /// `QNN_DATATYPE_UFIXED_POINT_8` (0x0408).
    UFixed8,
    /// `QNN_DATATYPE_UFIXED_POINT_16` (0x0416): A16 activations.
    UFixed16,
    /// `QNN_DATATYPE_BOOL_8` (0x0508).
    Bool8,
}

/// Every data type with its code.
const DATA_TYPES: &[(QnnDataType, u32)] = &[
    (QnnDataType::Int32, 0x0032),
    (QnnDataType::Uint32, 0x0132),
    (QnnDataType::Float16, 0x0216),
    (QnnDataType::Float32, 0x0232),
    (QnnDataType::SFixed4, 0x0304),
    (QnnDataType::SFixed8, 0x0308),
    (QnnDataType::SFixed32, 0x0332),
    (QnnDataType::UFixed8, 0x0408),
    (QnnDataType::UFixed16, 0x0416),
    (QnnDataType::Bool8, 0x0508),
];

impl QnnDataType {
    /// The `Qnn_DataType_t` code.
    pub fn code(self) -> u32 {
        DATA_TYPES
            .iter()
            .find(|(t, _)| *t == self)
            .map_or(0, |&(_, c)| c)
    }

    /// The data type of `code`, if it is one of ours.
    pub fn from_code(code: u32) -> Option<QnnDataType> {
        DATA_TYPES
            .iter()
            .find(|&&(_, c)| c == code)
            .map(|&(t, _)| t)
    }

    /// The C enumerator's name (what the generated `model.cpp` writes).
    pub fn c_name(self) -> &'static str {
        match self {
            QnnDataType::Int32 => "QNN_DATATYPE_INT_32",
            QnnDataType::Uint32 => "QNN_DATATYPE_UINT_32",
            QnnDataType::Float16 => "QNN_DATATYPE_FLOAT_16",
            QnnDataType::Float32 => "QNN_DATATYPE_FLOAT_32",
            QnnDataType::SFixed4 => "QNN_DATATYPE_SFIXED_POINT_4",
            QnnDataType::SFixed8 => "QNN_DATATYPE_SFIXED_POINT_8",
            QnnDataType::SFixed32 => "QNN_DATATYPE_SFIXED_POINT_32",
            QnnDataType::UFixed8 => "QNN_DATATYPE_UFIXED_POINT_8",
            QnnDataType::UFixed16 => "QNN_DATATYPE_UFIXED_POINT_16",
            QnnDataType::Bool8 => "QNN_DATATYPE_BOOL_8",
        }
    }

    /// Bytes per stored element (a 4-bit weight takes a byte here: the converter's
    /// default, unpacked storage).
    pub fn stored_bytes(self) -> usize {
        match self {
            QnnDataType::SFixed4
            | QnnDataType::SFixed8
            | QnnDataType::UFixed8
            | QnnDataType::Bool8 => 1,
            QnnDataType::Float16 | QnnDataType::UFixed16 => 2,
            QnnDataType::Int32
            | QnnDataType::Uint32
            | QnnDataType::Float32
            | QnnDataType::SFixed32 => 4,
        }
    }

    /// Whether values are quantized integers with an encoding (`*_FIXED_POINT_*`).
    pub fn is_fixed_point(self) -> bool {
        self.fixed_range().is_some()
    }

    /// The integer range of a fixed-point type.
    pub fn fixed_range(self) -> Option<(i64, i64)> {
        match self {
            QnnDataType::SFixed4 => Some((-8, 7)),
            QnnDataType::SFixed8 => Some((-128, 127)),
            QnnDataType::SFixed32 => Some((i32::MIN as i64, i32::MAX as i64)),
            QnnDataType::UFixed8 => Some((0, 255)),
            QnnDataType::UFixed16 => Some((0, 65535)),
            _ => None,
        }
    }

    /// `value` stored as one element of this type, little-endian (integers truncated
    /// toward zero; the caller keeps them in range).
    pub fn encode(self, value: f64) -> Vec<u8> {
        match self {
            QnnDataType::Float32 => (value as f32).to_le_bytes().to_vec(),
            QnnDataType::Float16 => half::f16::from_f64(value).to_le_bytes().to_vec(),
            QnnDataType::Int32 | QnnDataType::SFixed32 => (value as i32).to_le_bytes().to_vec(),
            QnnDataType::Uint32 => (value as u32).to_le_bytes().to_vec(),
            QnnDataType::UFixed16 => (value as u16).to_le_bytes().to_vec(),
            QnnDataType::SFixed4 | QnnDataType::SFixed8 => vec![value as i8 as u8],
            QnnDataType::UFixed8 | QnnDataType::Bool8 => vec![value as u8],
        }
    }

    /// The element stored little-endian in `w` (at least [`QnnDataType::stored_bytes`]
    /// long): the inverse of [`QnnDataType::encode`], exact for every type.
    pub fn decode(self, w: &[u8]) -> f64 {
        match self {
            QnnDataType::Float32 => f32::from_le_bytes([w[0], w[1], w[2], w[3]]) as f64,
            QnnDataType::Float16 => half::f16::from_le_bytes([w[0], w[1]]).to_f64(),
            QnnDataType::UFixed16 => u16::from_le_bytes([w[0], w[1]]) as f64,
            QnnDataType::Int32 | QnnDataType::SFixed32 => {
                i32::from_le_bytes([w[0], w[1], w[2], w[3]]) as f64
            }
            QnnDataType::Uint32 => u32::from_le_bytes([w[0], w[1], w[2], w[3]]) as f64,
            QnnDataType::SFixed4 | QnnDataType::SFixed8 => w[0] as i8 as f64,
            QnnDataType::UFixed8 | QnnDataType::Bool8 => w[0] as f64,
        }
    }

    /// Whether this is a float type.
    pub fn is_float(self) -> bool {
        matches!(self, QnnDataType::Float16 | QnnDataType::Float32)
    }
}

/// `Qnn_TensorType_t` codes.
pub mod tensor_type {
    /// `QNN_TENSOR_TYPE_APP_WRITE`: a graph input the app writes.
    pub const APP_WRITE: u32 = 0;
    /// `QNN_TENSOR_TYPE_APP_READ`: a graph output the app reads.
    pub const APP_READ: u32 = 1;
    /// `QNN_TENSOR_TYPE_NATIVE`: an intermediate the backend owns.
    pub const NATIVE: u32 = 3;
    /// `QNN_TENSOR_TYPE_STATIC`: constant data (weights, parameters).
    pub const STATIC: u32 = 4;

    /// The C enumerator's name of `code`.
    pub fn c_name(code: u32) -> &'static str {
        match code {
            APP_WRITE => "QNN_TENSOR_TYPE_APP_WRITE",
            APP_READ => "QNN_TENSOR_TYPE_APP_READ",
            NATIVE => "QNN_TENSOR_TYPE_NATIVE",
            STATIC => "QNN_TENSOR_TYPE_STATIC",
            _ => "QNN_TENSOR_TYPE_UNDEFINED",
        }
    }
}

/// `Qnn_Definition_t` codes.
pub mod definition {
    /// `QNN_DEFINITION_DEFINED`: the encoding given is used.
    pub const DEFINED: u32 = 1;
    /// `QNN_DEFINITION_UNDEFINED`: no encoding (float tensors).
    pub const UNDEFINED: u32 = 0x7FFF_FFFF;
}

/// `Qnn_QuantizationEncoding_t` codes.
pub mod encoding {
    /// `QNN_QUANTIZATION_ENCODING_SCALE_OFFSET`: one scale and offset per tensor.
    pub const SCALE_OFFSET: u32 = 0;
    /// `QNN_QUANTIZATION_ENCODING_AXIS_SCALE_OFFSET`: one per slice along an axis.
    pub const AXIS_SCALE_OFFSET: u32 = 1;
    /// `QNN_QUANTIZATION_ENCODING_BLOCKWISE_EXPANSION`: LPBQ, a float scale per channel
    /// expanded by a small integer scale per block of the reduction axis.
    pub const BLOCKWISE_EXPANSION: u32 = 5;
    /// `QNN_QUANTIZATION_ENCODING_UNDEFINED`.
    pub const UNDEFINED: u32 = 0x7FFF_FFFF;
}

/// `QNN_TENSOR_DATA_FORMAT_FLAT_BUFFER`, the only data format used.
pub const DATA_FORMAT_FLAT_BUFFER: u32 = 0;

/// The op package of QNN's built-in ops (`QNN_OP_PACKAGE_NAME_QTI_AISW`).
pub const PACKAGE_QTI_AISW: &str = "qti.aisw";
