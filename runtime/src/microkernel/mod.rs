//! Hand-written microkernels that compiled kernels reach through
//! [`RtEnv::microkernels`](crate::abi::RtEnv::microkernels): f32 block GEMMs and the
//! attention of the query rows sharing a kv head. The GEMMs come with f32 and f16 weight
//! panels (f16 widened as loaded: F16C on x86-64) and with int8 and 4-bit panels scaled
//! per group of k; the dynamic-int8-activation GEMMs ([`QGemmFn`]) multiply int8
//! activation rows by int8 or 4-bit panels in integers, group by group, and scale into
//! f32 at the end of each group; the attention with f32 and f16 keys and values (an f16 KV cache, widened as loaded)
//! and with int8 ones scaled per row (an int8 KV cache, dequantized as loaded).
//!
//! A schedule tensorizes the inner block of a loop nest onto one of these; Cranelift
//! generates the loops around it (packing, tiling, epilogues). Every kernel has a scalar
//! twin (plain Rust, always available) and one implementation per CPU feature set it is
//! written for. [`MicrokernelSet`] picks one implementation per kernel from one table
//! (rows: kernel, ISA name, required features, function pointer), best first.
//!
//! Adding a kernel: its row in the ABI's table ([`Microkernel`], in `oxrelax-abi`) and
//! one implementation row per ISA (at least the scalar one). Adding an ISA: a file with
//! its `IMPLEMENTATIONS` and a line in `IMPLEMENTATIONS` below.

mod attention;
#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(target_arch = "x86_64")]
mod avx512_vnni;
#[cfg(target_arch = "aarch64")]
mod neon;
#[cfg(target_arch = "aarch64")]
mod neon_dot;
#[cfg(target_arch = "aarch64")]
mod neon_mmla;
mod qgemm;
mod scalar;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_attention;
#[cfg(test)]
mod tests_qgemm;
#[cfg(target_arch = "x86_64")]
mod x86_gemm;
#[cfg(target_arch = "x86_64")]
mod x86_gemv_a16;
#[cfg(target_arch = "x86_64")]
mod x86_stream_prefetch;

use attention::QueryRows;
pub use attention::{AttentionF16KvFn, AttentionFn, AttentionQ8KvFn, RowScales};
pub use oxrelax_abi::microkernel::{
    GemmBlock, Microkernel, PANEL, QUANT_GROUP, U4_GEMV_COLS, U4_GEMV_ROWS,
};
use std::sync::OnceLock;

/// A block-GEMM microkernel of block shape EP x HP (EP rows, HP columns) over packed
/// weight panels PANEL wide (see [`Microkernel::gemm_block`]).
///
/// For every `i < rows` and `j < cols`:
/// `c[i*ldc + j] = (accumulate != 0 ? c[i*ldc + j] : 0) + sum_{k < kc} a[i*lda + k] * b(k, j)`
/// with `b(k, j) = b[(j / PANEL)*lda*PANEL + k*PANEL + j % PANEL]`: `b` is HP / PANEL
/// packed panels `lda * PANEL` elements apart (a panel holds the whole reduction, whose
/// depth is the activation row stride `lda`), of which a call reads groups `0..kc`.
/// `kc <= 0` sums nothing (so `c` becomes 0 unless `accumulate`). The activation rows are
/// read in place (row `i` at `a + i*lda`). The weights are of `W` (f32, or f16 widened to
/// f32 as they are loaded: [`GemmF16Fn`]).
///
/// # Safety
/// `a` must be readable for `kc` floats from `a + i*lda` for every `i < rows` (rows past
/// `rows` are never read), `b` for `kc * PANEL` elements from `b + q*lda*PANEL` for every
/// panel `q` holding one of the first `cols` columns (panels past them are never read),
/// `c` readable and writable at `c[i*ldc + j]` for `i < rows, j < cols`, which is the only
/// part of `c` a kernel touches. `1 <= rows <= EP` and `1 <= cols <= HP` (values outside
/// are clamped: nothing is done for `rows <= 0` or `cols <= 0`); `lda >= kc` when the
/// block spans several panels. Pointers need only the alignment of `f32`.
pub type GemmFn<W = f32> = unsafe extern "C" fn(
    a: *const f32,
    b: *const W,
    c: *mut f32,
    kc: i64,
    lda: i64,
    ldc: i64,
    rows: i64,
    cols: i64,
    accumulate: i64,
);

/// A block GEMM whose packed weights are f16 ([`GemmFn`] with `b` holding f16 values, each
/// widened to f32 as it is loaded; `a` and `c` stay f32), so f16 weights stream at half
/// the bytes of f32 ones.
pub type GemmF16Fn = GemmFn<half::f16>;

/// A block GEMM over quantized weight panels `W` with group scales `S`: [`GemmFn`] with
/// `b(k, j) = w(k, j) * f32(s(k, j))`, where the weight `w(k, j)` is read from `b` as `W`
/// lays it out ([`GemmQ8Fn`]) and
/// `s(k, j) = scales[(j / PANEL)*ceil(lda / QUANT_GROUP)*PANEL + (k / QUANT_GROUP)*PANEL + j % PANEL]`:
/// each panel's scales are `[group][PANEL]`, one per [`QUANT_GROUP`] values of k and column
/// (f32, or f16 widened to f32 as loaded). A call starts at a group boundary (the caller
/// offsets `b` and `scales` to the call's first group).
///
/// # Safety
/// As [`GemmFn`], with `b` lent as the weight layout says; `scales` readable for the
/// groups `0..ceil(kc / QUANT_GROUP)` of every panel `b` lends (no more).
pub type GemmQuantFn<W, S> = unsafe extern "C" fn(
    a: *const f32,
    b: *const W,
    scales: *const S,
    c: *mut f32,
    kc: i64,
    lda: i64,
    ldc: i64,
    rows: i64,
    cols: i64,
    accumulate: i64,
);

/// A block GEMM over int8 weight panels with f32 scales ([`GemmQuantFn`]): one byte per
/// weight, `w(k, j) = f32(b[(j / PANEL)*lda*PANEL + k*PANEL + j % PANEL])`, panels
/// `lda * PANEL` bytes apart as [`GemmFn`]'s.
///
/// # Safety
/// As [`GemmQuantFn`]: `b` readable for `kc * PANEL` bytes from the start of every panel
/// it lends.
pub type GemmQ8Fn = GemmQuantFn<i8, f32>;

/// Two 4-bit weights of consecutive k (`k` even, `k + 1`) in one byte: the low nibble
/// holds `w(k) + 8`, the high nibble `w(k + 1) + 8` (so `w` is in `[-8, 7]`).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct U4Pair(pub u8);

impl U4Pair {
    /// The weight of depth `k` this pair holds (`k % 2` picks the nibble).
    pub fn weight(self, k: usize) -> i8 {
        let nibble = if k.is_multiple_of(2) {
            self.0 & 0x0F
        } else {
            self.0 >> 4
        };
        nibble as i8 - 8
    }
}

/// A block GEMM over 4-bit weight panels with f32 scales ([`GemmQuantFn`]): a panel holds
/// `ceil(lda / 2)` rows of 16 [`U4Pair`]s (one byte per column and pair of k), so
/// `w(k, j)` is nibble `k % 2` of byte `(j / PANEL)*ceil(lda / 2)*PANEL + (k / 2)*PANEL
/// + j % PANEL`, minus 8.
///
/// # Safety
/// As [`GemmQuantFn`]: `b` readable for `ceil(kc / 2) * PANEL` bytes from the start of
/// every panel it lends (the high nibble of the last byte is never used when `kc` is odd).
pub type GemmQ4Fn = GemmQuantFn<U4Pair, f32>;

/// [`GemmQ4Fn`] with f16 scales (widened to f32 as loaded).
pub type GemmQ4F16Fn = GemmQuantFn<U4Pair, half::f16>;

/// Columns of one part of a 4-bit GEMV call, for implementations with a 1 x 64 body.
const U4_GEMV_PART_COLS: usize = 64;

/// One part of a 4-bit GEMV call ([`u4_gemv_parts`]): one row and up to 64 columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct U4GemvPart {
    /// Floats from the call's `a` to the part's row.
    a: usize,
    /// Pairs from the call's `b` to the part's first panel.
    b: usize,
    /// Scales from the call's `scales` to the part's first panel's.
    scales: usize,
    /// Floats from the call's `c` to the part's first output.
    c: usize,
    /// The part's columns (1 to 64).
    cols: i64,
}

/// The parts, one row and 64 columns each, of a 4-bit GEMV call over a reduction `lda`
/// deep (also the activations' row stride) with `rows` rows (clamped to the call's
/// [`U4_GEMV_ROWS`]) and `cols` columns (clamped to its [`U4_GEMV_COLS`]), for
/// implementations that run a 1 x 64 body on each.
fn u4_gemv_parts(lda: i64, ldc: i64, rows: i64, cols: i64) -> impl Iterator<Item = U4GemvPart> {
    let lda = lda.max(0) as usize;
    let ldc = ldc.max(0) as usize;
    let panel_pairs = lda.div_ceil(2) * PANEL;
    let panel_scales = lda.div_ceil(QUANT_GROUP) * PANEL;
    let rows = rows.clamp(0, U4_GEMV_ROWS as i64) as usize;
    let cols = cols.clamp(0, U4_GEMV_COLS as i64) as usize;
    (0..rows).flat_map(move |row| {
        (0..cols)
            .step_by(U4_GEMV_PART_COLS)
            .map(move |col| U4GemvPart {
                a: row * lda,
                b: col / PANEL * panel_pairs,
                scales: col / PANEL * panel_scales,
                c: row * ldc + col,
                cols: (cols - col).min(U4_GEMV_PART_COLS) as i64,
            })
    })
}

/// A block GEMM of dynamically quantized int8 activations by int8 or 4-bit weight panels
/// (w8a8 / w4a8): integer products summed exactly per [`QUANT_GROUP`] of k, each group's
/// sum scaled into f32 by the group's activation and weight scales. The block is EP x HP
/// over panels of [`PANEL`] columns.
///
/// For every `i < rows` and `j < cols`:
/// `c[i*ldc + j] = sum_{k < kc} a_scales[i*(kc/32) + k/32] * s(k, j) * (a[i*lda + k] - 128) * w(k, j)`
/// where
/// - `a[i*lda + k]` is the activation byte, `code + 128` with the int8 code in
///   `[-127, 127]`, and `a_scales[i*(kc/32) + g]` the scale of group `g` of row `i`
///   (llama.cpp's q8_0 activation blocks: an outlier coarsens its own group only);
/// - `s(k, j) = scales[(j / 16)*(kc / 32)*16 + (k / 32)*16 + j % 16]`, an f16 widened to
///   f32 as loaded (a 4-bit GEMV streams 18 bytes per 32 weights of a column, as q4_0);
///   each panel's group scales are `[group][16]`;
/// - `w(k, j)` the weight of depth `k` and column `j` as `W` lays it out ([`QGemmW8Fn`],
///   [`QGemmW4Fn`]), panel `j / 16` holding the whole reduction of its 16 columns.
///
/// Each group's integer sum `sum_{k in g} (a - 128) * w` is exact (implementations sum
/// the codes, or the bytes and subtract `128 * sum_{k in g} w`, both in int32); results
/// agree up to f32 rounding of the scaling.
///
/// `c` is overwritten (never accumulated into). `kc` is the whole reduction and must be a
/// positive multiple of [`QUANT_GROUP`] (otherwise the result is unspecified: kernels sum
/// its whole groups only, and touch nothing outside what a call lends); `lda >= kc`.
///
/// # Safety
/// `a` readable for `kc` bytes from `a + i*lda` for every `i < rows` (rows past `rows` are
/// never read), `a_scales` for `rows * (kc / 32)` floats; for every panel `q` holding one
/// of the first `cols` columns (panels past them are never read), `b` readable for the
/// panel's bytes from the start of panel `q` and `scales` for its `kc / 32` groups of 16
/// halves; `c` writable at `c[i*ldc + j]` for `i < rows, j < cols`, which is the only part
/// of `c` a kernel touches. `1 <= rows <= EP` and `1 <= cols <= HP` (values outside are
/// clamped: nothing is done for `rows <= 0` or `cols <= 0`). Pointers need only the
/// alignment of their element type.
pub type QGemmFn<W> = unsafe extern "C" fn(
    a: *const u8,
    a_scales: *const f32,
    b: *const W,
    scales: *const half::f16,
    c: *mut f32,
    kc: i64,
    lda: i64,
    ldc: i64,
    rows: i64,
    cols: i64,
);

/// An int8-activation GEMM over int8 weight panels ([`QGemmFn`]): a panel is `kc * 16`
/// bytes, per quad of k (`k / 4`) 64 bytes holding its 16 columns' 4 consecutive weights,
/// `w(k, j) = b[(j / 16)*kc*16 + (k / 4)*64 + (j % 16)*4 + k % 4]` in `[-127, 127]` (one
/// zmm of `vpdpbusd` operands per quad).
///
/// # Safety
/// As [`QGemmFn`]: `b` readable for `kc * 16` bytes from the start of every panel it lends.
pub type QGemmW8Fn = QGemmFn<i8>;

/// An int8-activation GEMM over 4-bit weight panels ([`QGemmFn`]): a panel is `kc * 8`
/// bytes, per 8 k (`k / 8`) 64 bytes whose low nibbles are the first quad's int8 layout
/// ([`QGemmW8Fn`]) and high nibbles the second's: with
/// `byte = b[(j / 16)*kc*8 + (k / 8)*64 + (j % 16)*4 + k % 4]`, `w(k, j)` is its low nibble
/// if `k % 8 < 4`, else its high nibble, minus 8 (so in `[-8, 7]`).
///
/// # Safety
/// As [`QGemmFn`]: `b` readable for `kc * 8` bytes from the start of every panel it lends.
pub type QGemmW4Fn = QGemmFn<u8>;

/// One microkernel implementation, typed by the kernel's signature.
#[derive(Clone, Copy, Debug)]
pub enum MicrokernelFn {
    /// A block GEMM.
    Gemm(GemmFn),
    /// A block GEMM over f16 weights.
    GemmF16(GemmF16Fn),
    /// A block GEMM over int8 weights with group scales.
    GemmQ8(GemmQ8Fn),
    /// A block GEMM over 4-bit weights with f32 group scales.
    GemmQ4(GemmQ4Fn),
    /// A block GEMM over 4-bit weights with f16 group scales.
    GemmQ4F16(GemmQ4F16Fn),
    /// The attention of a group of query rows.
    Attention(AttentionFn),
    /// An int8-activation GEMM over int8 weights.
    QGemmW8(QGemmW8Fn),
    /// An int8-activation GEMM over 4-bit weights.
    QGemmW4(QGemmW4Fn),
    /// The attention of a group of query rows over f16 keys and values.
    AttentionF16Kv(AttentionF16KvFn),
    /// The attention of a group of query rows over int8 keys and values with row scales.
    AttentionQ8Kv(AttentionQ8KvFn),
}

impl MicrokernelFn {
    /// The entry point (what [`RtEnv::microkernels`](crate::abi::RtEnv::microkernels) holds;
    /// compiled code calls it with the kernel's signature).
    pub fn address(self) -> *const () {
        match self {
            MicrokernelFn::Gemm(f) => f as *const (),
            MicrokernelFn::GemmF16(f) => f as *const (),
            MicrokernelFn::GemmQ8(f) => f as *const (),
            MicrokernelFn::GemmQ4(f) => f as *const (),
            MicrokernelFn::GemmQ4F16(f) => f as *const (),
            MicrokernelFn::Attention(f) => f as *const (),
            MicrokernelFn::QGemmW8(f) => f as *const (),
            MicrokernelFn::QGemmW4(f) => f as *const (),
            MicrokernelFn::AttentionF16Kv(f) => f as *const (),
            MicrokernelFn::AttentionQ8Kv(f) => f as *const (),
        }
    }

    /// The block GEMM, if this is one.
    pub fn gemm(self) -> Option<GemmFn> {
        match self {
            MicrokernelFn::Gemm(f) => Some(f),
            _ => None,
        }
    }

    /// The block GEMM over f16 weights, if this is one.
    pub fn gemm_f16(self) -> Option<GemmF16Fn> {
        match self {
            MicrokernelFn::GemmF16(f) => Some(f),
            _ => None,
        }
    }

    /// The block GEMM over int8 weights, if this is one.
    pub fn gemm_q8(self) -> Option<GemmQ8Fn> {
        match self {
            MicrokernelFn::GemmQ8(f) => Some(f),
            _ => None,
        }
    }

    /// The attention kernel, if this is one.
    pub fn attention(self) -> Option<AttentionFn> {
        match self {
            MicrokernelFn::Attention(f) => Some(f),
            _ => None,
        }
    }

    /// The attention kernel over f16 keys and values, if this is one.
    pub fn attention_f16kv(self) -> Option<AttentionF16KvFn> {
        match self {
            MicrokernelFn::AttentionF16Kv(f) => Some(f),
            _ => None,
        }
    }

    /// The attention kernel over int8 keys and values with row scales, if this is one.
    pub fn attention_q8kv(self) -> Option<AttentionQ8KvFn> {
        match self {
            MicrokernelFn::AttentionQ8Kv(f) => Some(f),
            _ => None,
        }
    }
}

/// One implementation of a kernel: which ISA it is written for, the CPU features it
/// needs (names as in `is_x86_feature_detected!`), and the function.
struct Implementation {
    kernel: Microkernel,
    isa: &'static str,
    features: &'static [&'static str],
    func: MicrokernelFn,
}

/// Every implementation, per ISA, best ISA first; the scalar twins come last and need
/// nothing, so every kernel always has one.
const IMPLEMENTATIONS: &[&[Implementation]] = &[
    #[cfg(target_arch = "x86_64")]
    avx512_vnni::IMPLEMENTATIONS,
    #[cfg(target_arch = "x86_64")]
    avx512::IMPLEMENTATIONS,
    #[cfg(target_arch = "x86_64")]
    avx2::IMPLEMENTATIONS,
    #[cfg(target_arch = "aarch64")]
    neon_mmla::IMPLEMENTATIONS,
    #[cfg(target_arch = "aarch64")]
    neon_dot::IMPLEMENTATIONS,
    #[cfg(target_arch = "aarch64")]
    neon::IMPLEMENTATIONS,
    scalar::IMPLEMENTATIONS,
];

fn implementations() -> impl Iterator<Item = &'static Implementation> {
    IMPLEMENTATIONS.iter().flat_map(|isa| isa.iter())
}

/// One implementation (function pointer) of every [`Microkernel`], and the ISA each came
/// from.
#[derive(Clone, Copy, Debug)]
pub struct MicrokernelSet {
    funcs: [MicrokernelFn; Microkernel::COUNT],
    isas: [&'static str; Microkernel::COUNT],
}

impl MicrokernelSet {
    /// The scalar twins (run on any CPU).
    pub fn scalar() -> MicrokernelSet {
        MicrokernelSet::for_features(&[])
    }

    /// The best implementations for this CPU (features detected once per process).
    pub fn detect() -> MicrokernelSet {
        static DETECTED: OnceLock<MicrokernelSet> = OnceLock::new();
        *DETECTED.get_or_init(|| MicrokernelSet::pick(|_| true))
    }

    /// The best implementations whose required features are all in `allowed` and
    /// detected on this host (e.g. `&["avx2", "fma"]`; `&[]` gives the scalar twins).
    pub fn for_features(allowed: &[&str]) -> MicrokernelSet {
        MicrokernelSet::pick(|feature| allowed.contains(&feature))
    }

    /// Per kernel, the first implementation (best first) whose features are all detected
    /// and `allowed`.
    fn pick(allowed: impl Fn(&str) -> bool) -> MicrokernelSet {
        let usable = |imp: &Implementation| {
            imp.features
                .iter()
                .all(|&f| crate::host::has_feature(f) && allowed(f))
        };
        let best = |kernel: Microkernel| {
            implementations()
                .find(|imp| imp.kernel == kernel && usable(imp))
                .unwrap_or_else(|| unreachable!("{} has no scalar twin", kernel.name()))
        };
        let chosen = Microkernel::ALL.map(best);
        MicrokernelSet {
            funcs: chosen.map(|imp| imp.func),
            isas: chosen.map(|imp| imp.isa),
        }
    }

    /// The function chosen for `kernel`.
    pub fn get(&self, kernel: Microkernel) -> MicrokernelFn {
        self.funcs[kernel as usize]
    }

    /// The ISA the function for `kernel` was written for: `"avx512vbmi"`, `"avx512vnni"`,
    /// `"avx512f"`,
    /// `"avx2+fma"`, `"avx2+fma+f16c"`, `"neon"` or `"scalar"`.
    pub fn isa(&self, kernel: Microkernel) -> &'static str {
        self.isas[kernel as usize]
    }

    /// Every chosen entry point, indexed by `Microkernel as usize` (the layout of
    /// [`RtEnv::microkernels`](crate::abi::RtEnv::microkernels)).
    pub fn table(&self) -> [*const (); Microkernel::COUNT] {
        self.funcs.map(MicrokernelFn::address)
    }
}
