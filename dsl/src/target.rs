//! [`Target`]: what the compiler generates code for — a triple, its CPU features, vector
//! widths and the tile table the schedule rules read. The host's features are detected
//! once; a target can also be named with explicit features (so tests can force AVX2 or
//! scalar code on any host).

use oxrelax_abi::host;
use std::collections::BTreeSet;
use std::sync::OnceLock;

/// Tile sizes of the f32 matmul rules on a target: the microkernels to tensorize onto and
/// the cache blocking around them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatmulTiles {
    /// The prefill microkernel (a block of `ep` rows by `hp` columns).
    pub gemm_kernel: &'static str,
    /// The decode (one row) microkernel, over whole panels of width `hp` (its block
    /// spans one or more of them).
    pub gemv_kernel: &'static str,
    /// Rows of the prefill register block (E).
    pub ep: i64,
    /// Panel width of packed weights (H).
    pub hp: i64,
    /// Reduction block (L) kept in L1/L2 per microkernel call.
    pub l_block: i64,
    /// Panels one prefill task computes (its packed-weight block stays in L2).
    pub panels_per_task: i64,
    /// Rows up to which a matmul (a batched decode step) runs on the decode kernel, in
    /// blocks of that kernel's rows, when it takes more than one (the 4-bit GEMVs): where
    /// those widen each weight once for all their rows (the x86 sides over 16-bit
    /// activations). 1 elsewhere: several rows take the prefill block.
    pub gemv_rows: i64,
}

/// One row of the tile table: the architecture, the CPU features it needs, its tiles.
#[derive(Clone, Copy, Debug)]
struct TileRow {
    arch: &'static str,
    features: &'static [&'static str],
    /// Widest f32 vector the microkernels use, in bits.
    vector_bits: u32,
    matmul: MatmulTiles,
}

/// f32 tiles shared by the rows below (the panel width is 16 on every target, so packed
/// weights are portable across them; the runtime picks each microkernel's implementation).
const F32_TILES: MatmulTiles = MatmulTiles {
    gemm_kernel: "sgemm_6x16",
    gemv_kernel: "sgemv_1x64",
    ep: 6,
    hp: 16,
    l_block: 256,
    panels_per_task: 4,
    gemv_rows: 1,
};

/// The 4-bit GEMVs of the x86 sides over 16-bit activations (`vpdpwssd`, `vpmaddwd`,
/// `vpdpbusd`) serve a batched decode step of up to 16 sequences.
const A16_GEMV_ROWS: i64 = 16;

/// f32 tiles of AVX-512 targets: the `12 x 32` block over two panels (24 zmm
/// accumulators; per k two panel loads and 12 broadcasts feed 24 FMAs, so the FMA units
/// bound it), with 2048-deep L blocks: a task's 4 panels of an L block (512 KiB) stay in
/// L2 and each call streams one block's two panels once per 12 rows. The GEMV is memory
/// bound: AVX2's is kept.
const AVX512_TILES: MatmulTiles = MatmulTiles {
    gemm_kernel: "sgemm_12x32",
    ep: 12,
    l_block: 2048,
    panels_per_task: 4,
    ..F32_TILES
};

/// The tile table, most specific rows first; the first row whose arch matches and whose
/// features the target has is used.
const TILE_TABLE: &[TileRow] = &[
    TileRow {
        arch: "x86_64",
        features: &["avx512f", "avx512bw", "avx512vnni"],
        vector_bits: 512,
        matmul: MatmulTiles {
            gemv_rows: A16_GEMV_ROWS,
            ..AVX512_TILES
        },
    },
    TileRow {
        arch: "x86_64",
        features: &["avx512f"],
        vector_bits: 512,
        matmul: AVX512_TILES,
    },
    TileRow {
        arch: "x86_64",
        features: &["avx2", "fma", "f16c"],
        vector_bits: 256,
        matmul: MatmulTiles {
            gemv_rows: A16_GEMV_ROWS,
            ..F32_TILES
        },
    },
    TileRow {
        arch: "x86_64",
        features: &["avx2", "fma"],
        vector_bits: 256,
        matmul: F32_TILES,
    },
    TileRow {
        arch: "*",
        features: &[],
        vector_bits: 128,
        matmul: F32_TILES,
    },
];

/// The int8 block GEMMs (dynamic int8 activations) of a target: the `(ep, hp)` blocks of
/// the prefill and decode microkernels (named per weight format in the microkernel
/// table, e.g. `qgemm_6x32_w8`). Their panels are the f32 tiles' `hp` wide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntMatmulTiles {
    /// The prefill block (rows, columns).
    pub gemm: (i64, i64),
    /// The decode block (one row, columns spanning whole panels).
    pub gemv: (i64, i64),
}

/// One row of the int8 tile table: the architecture, the features it needs, its tiles.
#[derive(Clone, Copy, Debug)]
struct IntTileRow {
    arch: &'static str,
    features: &'static [&'static str],
    tiles: IntMatmulTiles,
}

/// The int8 tile table, most specific rows first (as [`TILE_TABLE`]). With VNNI, the
/// `6 x 32` block: per group of 32 k, 12 int32 accumulators take 8 `vpdpbusd` each, then
/// are scaled into 12 f32 accumulators (about 29 zmm live). AVX2 (`pmaddubsw`, 16 ymm
/// registers) keeps `4 x 16`.
const INT_TILE_TABLE: &[IntTileRow] = &[
    IntTileRow {
        arch: "x86_64",
        features: &["avx512f", "avx512bw", "avx512vnni"],
        tiles: IntMatmulTiles {
            gemm: (6, 32),
            gemv: (1, 64),
        },
    },
    IntTileRow {
        arch: "*",
        features: &[],
        tiles: IntMatmulTiles {
            gemm: (4, 16),
            gemv: (1, 64),
        },
    },
];

pub use oxrelax_abi::host::KNOWN_FEATURES;

/// Restricts the host target to those of its detected features this lists
/// (comma-separated, e.g. `avx2,fma`), so one machine can compare the tile table's rows
/// (AVX2 tiles and microkernels against AVX-512 ones on an AVX-512 CPU). The runtime
/// still runs each chosen microkernel's best implementation for the CPU.
pub const TARGET_FEATURES_ENV: &str = "OXRELAX_TARGET_FEATURES";

/// The host's detected features, restricted by [`TARGET_FEATURES_ENV`] if it is set.
fn host_features() -> BTreeSet<String> {
    let allowed = std::env::var(TARGET_FEATURES_ENV).ok();
    let allowed: Option<BTreeSet<&str>> = allowed
        .as_deref()
        .map(|list| list.split(',').map(str::trim).collect());
    host::detected_features()
        .iter()
        .filter(|f| allowed.as_ref().is_none_or(|allowed| allowed.contains(*f)))
        .map(|f| f.to_string())
        .collect()
}

/// What code is generated for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The target triple (`x86_64-unknown-linux-gnu`).
    pub triple: String,
    /// The CPU features the generated code may use (`avx2`, `fma`, ...).
    pub features: BTreeSet<String>,
}

impl Target {
    /// The machine this process runs on, features detected once (and restricted by
    /// [`TARGET_FEATURES_ENV`]).
    pub fn host() -> Target {
        static HOST: OnceLock<Target> = OnceLock::new();
        HOST.get_or_init(|| Target {
            triple: host::host_triple(),
            features: host_features(),
        })
        .clone()
    }

    /// A named target: `triple` with exactly `features` (e.g. `["avx2", "fma"]`, or none
    /// for scalar microkernels).
    pub fn new(triple: &str, features: &[&str]) -> Target {
        Target {
            triple: triple.to_string(),
            features: features.iter().map(|f| f.to_string()).collect(),
        }
    }

    /// A named target whose features (`+` prefixes allowed) are checked against
    /// [`KNOWN_FEATURES`] for its architecture; the error names the unknown one.
    pub fn named(triple: &str, features: &[&str]) -> Result<Target, String> {
        let arch = triple.split('-').next().unwrap_or("");
        let known = KNOWN_FEATURES
            .iter()
            .find(|(a, _)| *a == arch)
            .map_or(&[][..], |(_, f)| *f);
        let names: Vec<&str> = features.iter().map(|f| f.trim_start_matches('+')).collect();
        if let Some(unknown) = names.iter().find(|f| !known.contains(f)) {
            return Err(format!(
                "unknown CPU feature `{unknown}` for {triple} (known: {})",
                known.join(", ")
            ));
        }
        Ok(Target::new(triple, &names))
    }

    /// The architecture (the triple's first component).
    pub fn arch(&self) -> &str {
        self.triple.split('-').next().unwrap_or("")
    }

    /// Whether the target has CPU feature `name`.
    pub fn has(&self, name: &str) -> bool {
        self.features.contains(name)
    }

    fn tile_row(&self) -> &'static TileRow {
        TILE_TABLE
            .iter()
            .find(|row| {
                (row.arch == "*" || row.arch == self.arch())
                    && row.features.iter().all(|f| self.has(f))
            })
            .expect("the tile table ends with a row for every target")
    }

    /// The f32 matmul tiles for this target.
    pub fn matmul_tiles(&self) -> MatmulTiles {
        self.tile_row().matmul
    }

    /// The int8 matmul tiles for this target.
    pub fn int_matmul_tiles(&self) -> IntMatmulTiles {
        let matches = |row: &&IntTileRow| {
            (row.arch == "*" || row.arch == self.arch()) && row.features.iter().all(|f| self.has(f))
        };
        INT_TILE_TABLE
            .iter()
            .find(matches)
            .expect("the int8 tile table ends with a row for every target")
            .tiles
    }

    /// The widest f32 vector the target's microkernels use, in bits.
    pub fn vector_bits(&self) -> u32 {
        self.tile_row().vector_bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_is_probed_for_known_features_only() {
        let host = Target::host();
        let names: Vec<&str> = host.features.iter().map(String::as_str).collect();
        assert!(Target::named(&host.triple, &names).is_ok(), "{names:?}");
        assert!(Target::named(&host.triple, &["+nosuch"]).is_err());
    }

    #[test]
    fn the_tile_table_picks_the_row_of_the_named_features() {
        let x86 = "x86_64-unknown-linux-gnu";
        let avx512 = Target::new(x86, &["avx512f", "avx2", "fma"]);
        assert_eq!(avx512.matmul_tiles().gemm_kernel, "sgemm_12x32");
        assert_eq!((avx512.matmul_tiles().ep, avx512.vector_bits()), (12, 512));
        let avx2 = Target::new(x86, &["avx2", "fma"]);
        assert_eq!(avx2.matmul_tiles().gemm_kernel, "sgemm_6x16");
        assert_eq!(avx2.vector_bits(), 256);
        let generic = Target::new("aarch64-unknown-linux-gnu", &["avx512f"]);
        assert_eq!(generic.matmul_tiles().gemm_kernel, "sgemm_6x16");
        let vnni = Target::new(x86, &["avx512f", "avx512bw", "avx512vnni"]);
        assert_eq!(vnni.int_matmul_tiles().gemm, (6, 32));
        // Batched decode steps run the 4-bit GEMVs where they widen weights once per call.
        let a16 = Target::new(x86, &["avx2", "fma", "f16c"]);
        let gemv_rows = [&vnni, &a16, &avx512, &avx2, &generic].map(|t| t.matmul_tiles().gemv_rows);
        assert_eq!(gemv_rows, [16, 16, 1, 1, 1]);
        assert_eq!(avx512.int_matmul_tiles().gemm, (4, 16));
        assert_eq!(generic.int_matmul_tiles().gemv, (1, 64));
        // Every target packs weights the same way.
        for target in [&avx512, &avx2, &generic] {
            assert_eq!(target.matmul_tiles().hp, 16);
        }
    }
}
