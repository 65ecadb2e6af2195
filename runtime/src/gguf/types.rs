//! The ggml tensor types as data: one table of ids, names and block layouts, with the
//! dequantizer of each type this reader supports.

use super::dequant::{self, BlockFn};

/// A ggml tensor element type: its id in `enum ggml_type`, its name, and its block layout
/// (`block_elems` values stored in `block_bytes` bytes).
#[derive(Clone, Copy, Debug)]
pub struct GgmlType {
    /// The id stored in GGUF tensor infos.
    pub id: u32,
    /// ggml's name for it (`Q4_K`, `F16`, ...).
    pub name: &'static str,
    /// Values per block.
    pub block_elems: u64,
    /// Bytes per block.
    pub block_bytes: u64,
    /// Dequantizes one block into `block_elems` values, for the supported types.
    dequant: Option<BlockFn>,
}

impl PartialEq for GgmlType {
    fn eq(&self, other: &GgmlType) -> bool {
        self.id == other.id
    }
}

impl Eq for GgmlType {}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name, self.id)
    }
}

const fn ty(
    id: u32,
    name: &'static str,
    block_elems: u64,
    block_bytes: u64,
    dequant: Option<BlockFn>,
) -> GgmlType {
    GgmlType {
        id,
        name,
        block_elems,
        block_bytes,
        dequant,
    }
}

/// Every type id ggml currently defines for GGUF files (ids 4, 5, 31-33 and 36-38 were
/// removed from ggml and are unknown here). Layouts as in ggml's `type_traits`.
const TYPES: &[GgmlType] = &[
    ty(0, "F32", 1, 4, Some(dequant::f32)),
    ty(1, "F16", 1, 2, Some(dequant::f16)),
    ty(2, "Q4_0", 32, 18, Some(dequant::q4_0)),
    ty(3, "Q4_1", 32, 20, Some(dequant::q4_1)),
    ty(6, "Q5_0", 32, 22, Some(dequant::q5_0)),
    ty(7, "Q5_1", 32, 24, Some(dequant::q5_1)),
    ty(8, "Q8_0", 32, 34, Some(dequant::q8_0)),
    // Two f16 (scale, scaled sum) and 32 i8: 36 bytes, as ggml-common.h asserts (the gguf
    // Python package still lists 40, the size of an older layout with f32 fields).
    ty(9, "Q8_1", 32, 36, None),
    ty(10, "Q2_K", 256, 84, None),
    ty(11, "Q3_K", 256, 110, None),
    ty(12, "Q4_K", 256, 144, Some(dequant::q4_k)),
    ty(13, "Q5_K", 256, 176, Some(dequant::q5_k)),
    ty(14, "Q6_K", 256, 210, Some(dequant::q6_k)),
    ty(15, "Q8_K", 256, 292, None),
    ty(16, "IQ2_XXS", 256, 66, None),
    ty(17, "IQ2_XS", 256, 74, None),
    ty(18, "IQ3_XXS", 256, 98, None),
    ty(19, "IQ1_S", 256, 50, None),
    ty(20, "IQ4_NL", 32, 18, None),
    ty(21, "IQ3_S", 256, 110, None),
    ty(22, "IQ2_S", 256, 82, None),
    ty(23, "IQ4_XS", 256, 136, None),
    ty(24, "I8", 1, 1, None),
    ty(25, "I16", 1, 2, None),
    ty(26, "I32", 1, 4, None),
    ty(27, "I64", 1, 8, None),
    ty(28, "F64", 1, 8, None),
    ty(29, "IQ1_M", 256, 56, None),
    ty(30, "BF16", 1, 2, Some(dequant::bf16)),
    ty(34, "TQ1_0", 256, 54, None),
    ty(35, "TQ2_0", 256, 66, None),
    ty(39, "MXFP4", 32, 17, None),
    ty(40, "NVFP4", 64, 36, None),
    ty(41, "Q1_0", 128, 18, None),
];

impl GgmlType {
    /// The type of id `id`, if ggml defines one.
    pub fn from_id(id: u32) -> Option<GgmlType> {
        TYPES.iter().find(|t| t.id == id).copied()
    }

    /// The type named `name` (ggml's spelling, `Q4_K`), if ggml defines one.
    pub fn from_name(name: &str) -> Option<GgmlType> {
        TYPES.iter().find(|t| t.name == name).copied()
    }

    /// Whether [`GgufFile::dequantize`](super::GgufFile::dequantize) reads this type.
    pub fn is_supported(&self) -> bool {
        self.dequant.is_some()
    }

    /// The block dequantizer, for the supported types.
    pub(super) fn block_fn(&self) -> Option<BlockFn> {
        self.dequant
    }
}
