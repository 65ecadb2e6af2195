//! How a KV cache stores a position: the tensors (streams) appended and viewed together,
//! as data ([`KvFormat::streams`]).

use crate::dtype::{DType, UnknownDType};
use std::fmt;
use std::str::FromStr;

/// How a KV cache stores K and V.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvFormat {
    /// K and V as elements of one dtype (`f32`, `f16`, ...).
    Plain(DType),
    /// K and V as int8 codes with one f32 scale per position and KV head (`q8`): what
    /// `quantize_kv` produces and `attention_q8kv` reads.
    Q8,
}

/// One tensor a cache stores per position: `[kv_heads, head_dim]` (or `[kv_heads]` for
/// scales) elements of `dtype`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stream {
    /// Its name in errors (`k`, `v`, `k_scales`, `v_scales`).
    pub name: &'static str,
    /// Whether a position holds `head_dim` elements per KV head (K or V), or one (a scale).
    pub per_element: bool,
    /// The element type.
    pub dtype: DType,
}

/// K and V of `dtype`.
const fn plain(dtype: DType) -> [Stream; 2] {
    [
        Stream {
            name: "k",
            per_element: true,
            dtype,
        },
        Stream {
            name: "v",
            per_element: true,
            dtype,
        },
    ]
}

/// The f32 scales `name` (one per KV head).
const fn scales(name: &'static str) -> Stream {
    Stream {
        name,
        per_element: false,
        dtype: DType::F32,
    }
}

impl KvFormat {
    /// The tensors a position holds, in the order `append` takes and `view` returns them.
    pub fn streams(self) -> Vec<Stream> {
        match self {
            KvFormat::Plain(dtype) => plain(dtype).to_vec(),
            KvFormat::Q8 => {
                let [k, v] = plain(DType::I8);
                vec![k, v, scales("k_scales"), scales("v_scales")]
            }
        }
    }
}

impl From<DType> for KvFormat {
    fn from(dtype: DType) -> Self {
        KvFormat::Plain(dtype)
    }
}

impl fmt::Display for KvFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KvFormat::Plain(dtype) => write!(f, "{dtype}"),
            KvFormat::Q8 => f.write_str("q8"),
        }
    }
}

impl FromStr for KvFormat {
    type Err = UnknownDType;

    /// `q8`, or a dtype name.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "q8" => Ok(KvFormat::Q8),
            _ => s.parse().map(KvFormat::Plain),
        }
    }
}
