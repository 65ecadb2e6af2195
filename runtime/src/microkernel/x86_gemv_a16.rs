//! The x86-64 4-bit decode GEMVs over f32 activations rounded to 16 bits
//! ([`Microkernel::Sgemv8x256Q4`](super::Microkernel::Sgemv8x256Q4) and its f16-scale twin,
//! which [`rounds_activations`](super::Microkernel::rounds_activations)), written once for
//! every ISA that multiplies the rounded activations in integers ([`A16Isa`]: int16 pairs
//! by `vpdpwssd` on AVX-512 VNNI and `vpmaddwd` on AVX2 ([`PairIsa`]), bytes by `vpdpbusd`
//! on AVX-512 VBMI; each sums a group as [`GroupSums`] says).
//!
//! The f32 GEMV ([`super::x86_gemm`]) widens every weight to f32 before its FMA, and those
//! shuffle-unit instructions, not memory, bound it. Here each group of 32 activations is
//! first rounded to 16-bit fixed point with its own scale (`code = round(a * CODE_MAX /
//! max|a|)`, an error of at most `max|a| / 65278` per value, finer than f16's for every
//! value within 32x of the largest). Then the nibbles of a [`U4Pair`] byte become the
//! int16 pair `(w(k) + 8, w(k + 1) + 8)` of one int32 lane, which one instruction
//! multiplies by the broadcast pair of codes and adds to the lane (or, on VBMI, the
//! nibbles of 4 pairs are one lane's unsigned bytes, multiplied by the codes' high and
//! low bytes). The nibbles are `w + 8`, so each group's int32 sums lose `8 * sum(codes)`
//! before they are converted and scaled (weight scale times the group's activation
//! scale) into f32 accumulators. The sides compute the same integers, so they agree bit
//! for bit.
//!
//! A call spans 256 columns ([`PANELS`] panels), so rounding the activations, about a
//! sixth of the work when a call spanned 4 panels, is done once for 16; and up to
//! [`U4_GEMV_ROWS`] rows (a batched decode step), in passes of 8, 4, 2 or 1 rows, each
//! weight widened once per pass for all its rows. A row's arithmetic is the same in every
//! pass, so it computes the same bits alone and among others. They are
//! rounded [`CHUNK_GROUPS`] groups at a time into a stack buffer, so any reduction depth
//! works; then each panel's run of the chunk is read in turn, one stream at a time (as
//! the int8-activation GEMVs read theirs), asking for the weights
//! [`STREAM_PREFETCH_AHEAD`] ahead. A tail group (and the odd depth of a pair) is padded
//! with zero codes, which makes the nibbles past `kc` irrelevant. A NaN activation makes its
//! group's scale NaN (and an infinite one its codes 0 and its scale infinite), so the
//! result is NaN where the f32 sum's would be NaN or infinite.

use super::x86_gemm::{
    prefetch_ahead, store_block, PanelElement, Row16, HP, STREAM_PREFETCH_AHEAD,
};
use super::{QUANT_GROUP, U4_GEMV_ROWS};
use std::mem::MaybeUninit;

/// The largest code of a rounded activation: `127 * 257`, so a code is `256 * hi + lo`
/// with both bytes signed (`hi = (code + 128) >> 8` and `lo` in `-127..=127`), which the
/// int8 dot products of [`super::avx512_vnni`]'s VBMI side multiply separately.
pub(super) const CODE_MAX: f32 = 32639.0;

/// Panels of a call (its 256 columns): the activations are rounded once for all of them.
const PANELS: usize = super::U4_GEMV_COLS / HP;

/// Groups of activations rounded at a time (the stack buffer's size, 16 KiB of codes): a
/// reduction up to 8192 deep is one chunk, so each panel is one run.
pub(super) const CHUNK_GROUPS: usize = 256;

/// One group of activations, rounded: its codes, scale and the sum of its codes.
#[derive(Clone, Copy)]
struct Rounded<C> {
    codes: C,
    scale: f32,
    sum: i32,
}

/// One ISA's side of the GEMV.
///
/// # Safety
/// Every method needs the ISA's features, enabled in the function it is inlined into.
pub(super) trait A16Isa {
    /// 16 f32 lanes (the accumulators of one panel).
    type Row: Row16;
    /// The int32 sums of one panel's 16 columns over a group.
    type Sums: Copy;
    /// One group's rounded activations, in the form [`GroupSums::group_sums`] reads.
    type Codes: Copy + Default;

    /// Rounds the `n` (1 to 32) activations at `a` to `codes` (zero-padded to 32):
    /// returns the group's scale (NaN if an activation is) and the sum of its codes.
    unsafe fn round_group(a: *const f32, n: usize, codes: &mut Self::Codes) -> (f32, i32);

    /// `sums - bias` per column, as f32 lanes in column order.
    unsafe fn products(sums: Self::Sums, bias: i32) -> Self::Row;
}

/// How an ISA sums a group for the rows of a pass ([`PairIsa`]s one pair at a time).
///
/// # Safety
/// As [`A16Isa`].
pub(super) trait GroupSums: A16Isa {
    /// For each of the `R` rows, `sum (w + 8) * code` over pairs `pair0..pair0 + pairs`
    /// (at most a group's 16; only those are read) of the panel at `panel` and the row's
    /// `codes` of the group: each weight is widened once for all the rows.
    unsafe fn group_sums<const R: usize>(
        panel: *const u8,
        pair0: usize,
        pairs: usize,
        codes: [&Self::Codes; R],
    ) -> [Self::Sums; R];
}

/// An ISA that widens one pair of a panel (its 16 bytes) at a time and multiplies it by
/// the broadcast pair of codes of each row.
///
/// # Safety
/// As [`A16Isa`].
pub(super) trait PairIsa: A16Isa<Codes = [i16; QUANT_GROUP]> {
    /// One pair of a panel's 16 columns, widened to int16 pairs.
    type Pair: Copy;

    /// No sums.
    unsafe fn zero_sums() -> Self::Sums;

    /// The 16 bytes of one pair of a panel at `pair`: per column, the int16 pair
    /// `(w(k) + 8, w(k + 1) + 8)`.
    unsafe fn widen_pair(pair: *const u8) -> Self::Pair;

    /// `sums` plus, per column, `(w(k) + 8) * codes.0 + (w(k + 1) + 8) * codes.1` for a
    /// widened pair and the two codes in the int16 halves of `codes`.
    unsafe fn add_pair(sums: Self::Sums, pair: Self::Pair, codes: i32) -> Self::Sums;
}

/// Defines `extern "C"` entry point `$name`, a [`super::GemmQuantFn`] over 4-bit weights
/// with `$s` scales for an 8 x 256 block, on `$isa`'s side of [`Gemv::run`], compiled with
/// `$features` enabled.
macro_rules! gemv_a16_entry {
    ($(#[$doc:meta])* $name:ident, $isa:ty, $s:ty, $features:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As [`crate::microkernel::GemmQuantFn`] over 4-bit weights, and the CPU has the
        /// enabled features.
        #[allow(clippy::too_many_arguments)]
        #[target_feature(enable = $features)]
        pub(in crate::microkernel) unsafe extern "C" fn $name(
            a: *const f32,
            b: *const $crate::microkernel::U4Pair,
            scales: *const $s,
            c: *mut f32,
            kc: i64,
            lda: i64,
            ldc: i64,
            rows: i64,
            cols: i64,
            accumulate: i64,
        ) {
            use $crate::microkernel::x86_gemv_a16::Gemv;
            let sizes = [kc, lda, ldc, rows, cols, accumulate];
            let Some(call) = Gemv::new(a, b.cast(), scales, c, sizes) else {
                return;
            };
            // SAFETY: forwarded contract; the features are enabled here.
            unsafe { call.run::<$isa>() }
        }
    };
}
pub(super) use gemv_a16_entry;

/// The operands of one GEMV call (`rows` clamped to [`U4_GEMV_ROWS`], `cols` to the
/// block's 256).
pub(super) struct Gemv<S> {
    a: *const f32,
    /// Panel 0's bytes ([`super::U4Pair`]s).
    b: *const u8,
    scales: *const S,
    c: *mut f32,
    kc: usize,
    /// The reduction's depth in the panels, and the activations' row stride.
    lda: usize,
    ldc: usize,
    rows: usize,
    cols: usize,
    accumulate: i64,
}

impl<S> Gemv<S> {
    /// The call with [`super::GemmQuantFn`]'s arguments (`kc, lda, ldc, rows, cols,
    /// accumulate` last), or `None` when it computes nothing.
    pub(super) fn new(
        a: *const f32,
        b: *const u8,
        scales: *const S,
        c: *mut f32,
        [kc, lda, ldc, rows, cols, accumulate]: [i64; 6],
    ) -> Option<Gemv<S>> {
        (rows > 0 && cols > 0).then(|| Gemv {
            a,
            b,
            scales,
            c,
            kc: kc.max(0) as usize,
            lda: lda.max(0) as usize,
            ldc: ldc.max(0) as usize,
            rows: (rows as usize).min(U4_GEMV_ROWS),
            cols: (cols as usize).min(PANELS * HP),
            accumulate,
        })
    }

    /// Panels holding one of the columns (the only ones read).
    fn panels(&self) -> usize {
        self.cols.div_ceil(HP)
    }

    /// The call's rows in passes of 8, 4, 2 or 1 ([`Gemv::pass`]).
    ///
    /// # Safety
    /// As [`super::GemmQuantFn`]; inlined into a function enabling `I`'s features, which
    /// the CPU has.
    #[inline(always)]
    pub(super) unsafe fn run<I: GroupSums>(&self)
    where
        S: PanelElement<I::Row>,
    {
        let mut row = 0;
        while row < self.rows {
            let left = self.rows - row;
            // SAFETY: forwarded contract; each pass's rows are below `rows`.
            row += unsafe {
                match left {
                    8.. => self.pass::<I, 8>(row),
                    4.. => self.pass::<I, 4>(row),
                    2.. => self.pass::<I, 2>(row),
                    _ => self.pass::<I, 1>(row),
                }
            };
        }
    }

    /// Rows `row0..row0 + R` over the panels holding the columns: per chunk of groups,
    /// each row's activations rounded, then each panel's groups of the chunk summed for
    /// every row and scaled into its accumulators; then C. Returns `R`.
    ///
    /// # Safety
    /// As [`Gemv::run`], with rows `row0..row0 + R` lent.
    #[inline(always)]
    unsafe fn pass<I: GroupSums, const R: usize>(&self, row0: usize) -> usize
    where
        S: PanelElement<I::Row>,
    {
        let panel_bytes = self.lda.div_ceil(2) * HP;
        let scale_stride = self.lda.div_ceil(QUANT_GROUP) * HP;
        let group_bytes = QUANT_GROUP / 2 * HP;
        // SAFETY: `I`'s features are enabled in the entry point this is inlined into.
        let mut acc = [[unsafe { I::Row::zero() }; R]; PANELS];
        let acc = &mut acc[..self.panels()];
        // Uninitialized: a call writes (and reads) only the groups it rounds, so it does
        // not pay for zeroing the whole buffer. Row `r`'s groups start at `r * chunk`.
        let mut rounded = [const { MaybeUninit::<Rounded<I::Codes>>::uninit() }; CHUNK_GROUPS];
        let chunk = CHUNK_GROUPS / R;
        let all_groups = self.kc.div_ceil(QUANT_GROUP);
        for g0 in (0..all_groups).step_by(chunk) {
            let groups = (all_groups - g0).min(chunk);
            for r in 0..R {
                // SAFETY: row `row0 + r` is lent: `kc` activations from `a + row * lda`.
                let a = unsafe { self.a.add((row0 + r) * self.lda) };
                for local in 0..groups {
                    let k0 = (g0 + local) * QUANT_GROUP;
                    let n = (self.kc - k0).min(QUANT_GROUP);
                    let mut codes = I::Codes::default();
                    // SAFETY: activations `k0..k0 + n <= kc` of the row are lent.
                    let (scale, sum) = unsafe { I::round_group(a.add(k0), n, &mut codes) };
                    rounded[r * chunk + local].write(Rounded { codes, scale, sum });
                }
            }
            // SAFETY: the loop above wrote slots `r * chunk..r * chunk + groups` of every
            // row `r < R`, the only ones read below.
            let group_of =
                |r: usize, local: usize| unsafe { rounded[r * chunk + local].assume_init_ref() };
            for (q, acc_q) in acc.iter_mut().enumerate() {
                let panel = self.b.wrapping_add(q * panel_bytes);
                for local in 0..groups {
                    let g = g0 + local;
                    let pair0 = g * QUANT_GROUP / 2;
                    let pairs = (self.kc - g * QUANT_GROUP).min(QUANT_GROUP).div_ceil(2);
                    prefetch_ahead(&[panel], pair0 * HP, group_bytes, STREAM_PREFETCH_AHEAD);
                    let rows: [&Rounded<I::Codes>; R] = std::array::from_fn(|r| group_of(r, local));
                    // SAFETY: pairs `pair0..pair0 + pairs` of lent panel `q` hold depths
                    // below `kc`; its group `g` has 16 scales.
                    unsafe {
                        let sums = I::group_sums::<R>(panel, pair0, pairs, rows.map(|r| &r.codes));
                        let w_scale = S::load16(self.scales.add(q * scale_stride + g * HP));
                        for ((acc_r, sums), group) in acc_q.iter_mut().zip(sums).zip(rows) {
                            let scale = I::Row::zero().fma(group.scale, w_scale);
                            let products = I::products(sums, 8 * group.sum);
                            *acc_r = acc_r.fma_lanes(products, scale);
                        }
                    }
                }
            }
        }
        for (q, acc_q) in acc.iter().enumerate() {
            let cols = (self.cols - q * HP) as i64;
            // SAFETY: columns `q * 16..cols` of rows `row0..row0 + R` of `c` are lent.
            unsafe {
                let c = self.c.add(row0 * self.ldc + q * HP);
                store_block::<I::Row, R>(acc_q, c, self.ldc as i64, R as i64, cols, self.accumulate)
            };
        }
        R
    }
}

impl<I: PairIsa> GroupSums for I {
    /// One pair at a time, widened once; each row's two codes broadcast.
    #[inline(always)]
    unsafe fn group_sums<const R: usize>(
        panel: *const u8,
        pair0: usize,
        pairs: usize,
        codes: [&[i16; QUANT_GROUP]; R],
    ) -> [I::Sums; R] {
        // SAFETY: `I`'s features are enabled in the entry point this is inlined into.
        let mut sums = [unsafe { I::zero_sums() }; R];
        // Pair `p`'s two codes are dword `p` of a row's codes (little-endian: k, then k + 1).
        let pair_codes = codes.map(|c| c.as_ptr().cast::<i32>());
        for p in 0..pairs.min(QUANT_GROUP / 2) {
            // SAFETY: `p < pairs`, so pair `pair0 + p` (16 bytes) of the panel is lent; the
            // features are enabled by the entry point.
            let pair = unsafe { I::widen_pair(panel.add((pair0 + p) * HP)) };
            for (sums, codes) in sums.iter_mut().zip(pair_codes) {
                // SAFETY: dword `p < 16` of the row's 32 codes; the features.
                unsafe { *sums = I::add_pair(*sums, pair, codes.add(p).read_unaligned()) };
            }
        }
        sums
    }
}
