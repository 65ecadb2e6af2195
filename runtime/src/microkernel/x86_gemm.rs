//! The x86-64 block GEMM, written once for every vector ISA and block shape: generic over
//! how one row of 16 floats of the block is held in registers ([`Row16`]: two ymm
//! registers on AVX2, one zmm on AVX-512F), over the packed weight element
//! ([`PanelElement`]: f32, f16 widened as loaded, or int8 or 4-bit quantized with f32 or
//! f16 group scales), and over the block's rows and panels (`6 x 1` panel for AVX2 prefill,
//! `1 x 4` for the decode GEMV, which streams 4 panels at once so more cache-line fills are
//! in flight). The body is always inlined into `extern "C"` entry points that enable their
//! ISA's features ([`gemm_entry!`]).
//!
//! Each kernel keeps its whole block of C in accumulators, starting from zero; at the end
//! it adds C (if accumulating) and stores. Full blocks store straight to C; edge blocks
//! (fewer rows or columns) spill the registers to a stack tile and copy the valid part, so
//! nothing outside `rows x cols` of C is read or written.
//!
//! Over weights that load in pairs of k (4-bit) the reduction runs two k at a time, then a
//! single-k tail; over the others, k by k. Quantized weights are scaled per group: the
//! GEMM blocks scale each loaded weight vector (their accumulators leave no register to
//! spare); the GEMV (one row) sums a group's products unscaled and scales the partial sums
//! once per group.

use super::x86_stream_prefetch::{stream_prefetch, StreamPrefetch};
use super::U4Pair;
use std::arch::x86_64::{
    __m128i, _mm_and_si128, _mm_loadu_si128, _mm_prefetch, _mm_set1_epi8, _mm_srli_epi16,
    _mm_sub_epi8, _MM_HINT_NTA, _MM_HINT_T0,
};

/// Width of a packed weight panel, and of one row of a GEMM block here.
pub(super) const HP: usize = 16;

/// 16 f32 lanes (one row of a block) in the registers of one ISA.
///
/// # Safety
/// Every method needs the ISA's features, enabled in the function it is inlined into.
pub(super) trait Row16: Copy {
    /// All lanes zero.
    unsafe fn zero() -> Self;
    /// The 16 floats at `p` (16 readable floats).
    unsafe fn load(p: *const f32) -> Self;
    /// The 16 signed bytes of `bytes` as f32 lanes.
    unsafe fn from_i8(bytes: __m128i) -> Self;
    /// The weights of 16 [`U4Pair`]s: the low nibbles' values, then the high ones' (each
    /// nibble minus 8). By default unpacked as bytes and widened ([`Row16::from_i8`]).
    #[inline(always)]
    unsafe fn from_u4_pairs(bytes: __m128i) -> (Self, Self) {
        // SAFETY: SSE2 is baseline; the caller's features for `from_i8`.
        unsafe {
            let (nibble, bias) = (_mm_set1_epi8(0x0F), _mm_set1_epi8(8));
            let low = _mm_sub_epi8(_mm_and_si128(bytes, nibble), bias);
            let high = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16::<4>(bytes), nibble), bias);
            (Self::from_i8(low), Self::from_i8(high))
        }
    }

    /// `self + a * b`, lane by lane (fused).
    unsafe fn fma(self, a: f32, b: Self) -> Self;
    /// `self + a * b` with `a` a row too, lane by lane (fused).
    unsafe fn fma_lanes(self, a: Self, b: Self) -> Self;
    /// `self + other`, lane by lane.
    unsafe fn add(self, other: Self) -> Self;
    /// `self * other`, lane by lane.
    unsafe fn mul(self, other: Self) -> Self;
    /// Stores the lanes to `p` (16 writable floats).
    unsafe fn store(self, p: *mut f32);
}

/// A packed weight (or scale) element the kernels widen to f32 lanes as they load it.
///
/// A panel holds the weights of 16 columns for every k; by default one element per weight,
/// 16 per k.
pub(super) trait PanelElement<R: Row16>: Copy {
    /// For a quantized element, the run of k that shares one scale per column
    /// ([`super::QUANT_GROUP`]); 0 for floats, which are not scaled.
    const GROUP: usize = 0;

    /// Elements from one panel to the next when the reduction is `lda` deep.
    #[inline(always)]
    fn panel_stride(lda: usize) -> usize {
        lda * HP
    }

    /// The element holding depth `k` (`k` even for pairs) from the start of a panel.
    #[inline(always)]
    fn depth_offset(k: usize) -> usize {
        k * HP
    }

    /// The 16 elements from `p` as f32 lanes.
    ///
    /// # Safety
    /// 16 elements are readable at `p`; the CPU has the ISA's and the element's features
    /// (F16C for f16 on AVX2), enabled in the function this is inlined into.
    unsafe fn load16(p: *const Self) -> R;

    /// The 16 weights of depth `k` of the panel at `panel`.
    ///
    /// # Safety
    /// As [`PanelElement::load16`], for the elements holding depth `k`.
    #[inline(always)]
    unsafe fn load_k(panel: *const Self, k: usize) -> R {
        // SAFETY: forwarded contract: one element per weight, 16 per k.
        unsafe { Self::load16(panel.add(<Self as PanelElement<R>>::depth_offset(k))) }
    }

    /// Whether one load feeds two k ([`PanelElement::load_pair`] costs about one
    /// [`PanelElement::load_k`]): the k loop then steps by pairs. Otherwise it steps k by
    /// k, as unrolling by two would only hold more weight rows in registers (the AVX2 6x16
    /// f16 block then spills an accumulator).
    const PAIR_LOADS: bool = false;

    /// The 16 weights of depths `k` and `k + 1` (`k` even) of the panel at `panel`.
    ///
    /// # Safety
    /// As [`PanelElement::load_k`] for both depths.
    #[inline(always)]
    unsafe fn load_pair(panel: *const Self, k: usize) -> (R, R) {
        // SAFETY: forwarded contract.
        unsafe { (Self::load_k(panel, k), Self::load_k(panel, k + 1)) }
    }
}

impl<R: Row16> PanelElement<R> for i8 {
    const GROUP: usize = super::QUANT_GROUP;

    #[inline(always)]
    unsafe fn load16(p: *const i8) -> R {
        // SAFETY: forwarded contract: 16 readable bytes.
        unsafe { R::from_i8(_mm_loadu_si128(p.cast())) }
    }
}

impl<R: Row16> PanelElement<R> for U4Pair {
    const GROUP: usize = super::QUANT_GROUP;
    const PAIR_LOADS: bool = true;

    #[inline(always)]
    fn panel_stride(lda: usize) -> usize {
        lda.div_ceil(2) * HP
    }

    #[inline(always)]
    fn depth_offset(k: usize) -> usize {
        k / 2 * HP
    }

    /// The 16 low nibbles at `p` (the weights of the even k), as f32 lanes.
    #[inline(always)]
    unsafe fn load16(p: *const U4Pair) -> R {
        // SAFETY: forwarded contract: 16 readable bytes.
        unsafe { Self::load_pair(p, 0).0 }
    }

    #[inline(always)]
    unsafe fn load_k(panel: *const U4Pair, k: usize) -> R {
        // SAFETY: forwarded contract: the 16 bytes holding depth `k` (and `k ^ 1`).
        let (even, odd) = unsafe { Self::load_pair(panel, k & !1) };
        if k.is_multiple_of(2) {
            even
        } else {
            odd
        }
    }

    #[inline(always)]
    unsafe fn load_pair(panel: *const U4Pair, k: usize) -> (R, R) {
        // SAFETY: forwarded contract: the 16 bytes of pair `k / 2`.
        unsafe {
            R::from_u4_pairs(_mm_loadu_si128(
                panel.add(<Self as PanelElement<R>>::depth_offset(k)).cast(),
            ))
        }
    }
}

/// Defines `extern "C"` entry point `$name`, a [`super::GemmFn`] over weights `$w` (or a
/// [`super::GemmQuantFn`] over weights `$w` scaled by `$s`): the always-inlined generic
/// [`gemm_block`] for `$ep` rows by `$np` panels of 16 columns, in rows of `$row`,
/// compiled with `$features` enabled.
macro_rules! gemm_entry {
    ($(#[$doc:meta])* $name:ident, $row:ty, U4Pair scaled by $s:ident, each 1 x 4 part, $features:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As [`super::GemmQuantFn`] over 4-bit weights and its scale type, and the CPU has
        /// the enabled features.
        #[allow(clippy::too_many_arguments)]
        #[target_feature(enable = $features)]
        pub(super) unsafe extern "C" fn $name(
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
            for part in $crate::microkernel::u4_gemv_parts(lda, ldc, rows, cols) {
                // SAFETY: the part's row, panels, scales and columns are the call's, lent
                // by the caller; the body's features are enabled here.
                unsafe {
                    let operands = (b.add(part.b), scales.add(part.scales));
                    $crate::microkernel::x86_gemm::gemm_block::<$row, $crate::microkernel::U4Pair, $s, 1, 4>(
                        a.add(part.a), operands, c.add(part.c), kc, lda, ldc, 1, part.cols, accumulate,
                    )
                }
            }
        }
    };
    ($(#[$doc:meta])* $name:ident, $row:ty, $w:ident scaled by $s:ident, $ep:literal x $np:literal, $features:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As [`super::GemmQuantFn`] over its weight and scale types, and the CPU has the
        /// enabled features.
        #[allow(clippy::too_many_arguments)]
        #[target_feature(enable = $features)]
        pub(super) unsafe extern "C" fn $name(
            a: *const f32,
            b: *const $w,
            scales: *const $s,
            c: *mut f32,
            kc: i64,
            lda: i64,
            ldc: i64,
            rows: i64,
            cols: i64,
            accumulate: i64,
        ) {
            // SAFETY: forwarded contract; the body's features are enabled here.
            unsafe {
                $crate::microkernel::x86_gemm::gemm_block::<$row, $w, $s, $ep, $np>(
                    a, (b, scales), c, kc, lda, ldc, rows, cols, accumulate,
                )
            }
        }
    };
    ($(#[$doc:meta])* $name:ident, $row:ty, $w:ty, $ep:literal x $np:literal, $features:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As [`super::GemmFn`] over its weight type, and the CPU has the enabled features.
        #[allow(clippy::too_many_arguments)]
        #[target_feature(enable = $features)]
        pub(super) unsafe extern "C" fn $name(
            a: *const f32,
            b: *const $w,
            c: *mut f32,
            kc: i64,
            lda: i64,
            ldc: i64,
            rows: i64,
            cols: i64,
            accumulate: i64,
        ) {
            // SAFETY: forwarded contract; the body's features are enabled here.
            unsafe {
                $crate::microkernel::x86_gemm::gemm_block::<$row, $w, f32, $ep, $np>(
                    a, (b, std::ptr::null()), c, kc, lda, ldc, rows, cols, accumulate,
                )
            }
        }
    };
}
pub(super) use gemm_entry;

/// `EP x (NP * 16)` of C: the block GEMM of [`super::GemmFn`] (or, for quantized weights,
/// [`super::GemmQuantFn`] with `scales` of `S`; null otherwise) over `NP` panels, reading
/// only the panels that hold one of the `cols` columns (an edge block at the right of the
/// weights has fewer).
///
/// # Safety
/// As [`super::GemmFn`] (or [`super::GemmQuantFn`]) with `b` of `W`; inlined into a
/// function enabling `R`'s, `W`'s and `S`'s features, which the CPU has.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn gemm_block<
    R: Row16,
    W: PanelElement<R>,
    S: PanelElement<R>,
    const EP: usize,
    const NP: usize,
>(
    a: *const f32,
    (b, scales): (*const W, *const S),
    c: *mut f32,
    kc: i64,
    lda: i64,
    ldc: i64,
    rows: i64,
    cols: i64,
    accumulate: i64,
) {
    if rows <= 0 || cols <= 0 {
        return;
    }
    let block = Block {
        a,
        b,
        scales,
        c,
        kc: kc.max(0) as usize,
        lda: lda as isize,
        ldc,
        rows,
        cols,
        accumulate,
    };
    let panels = (cols as usize).div_ceil(HP).min(NP);
    // SAFETY: forwarded contract; the count is the number of panels holding the columns.
    unsafe {
        // A block of fewer rows (a small decode batch) over whole panels computes 2, 4,
        // 6 or 8 rows, not `EP` (a row's sums do not depend on how many rows a block
        // computes, as long as it is more than one: one row sums a GEMV's way).
        if rows < EP as i64 && panels == NP && EP > 2 {
            match rows {
                1 | 2 => block.panels::<R, 2, NP>(),
                3 | 4 => block.panels::<R, 4, NP>(),
                5 | 6 => block.panels::<R, 6, NP>(),
                7 | 8 => block.panels::<R, 8, NP>(),
                _ => block.panels::<R, EP, NP>(),
            }
            return;
        }
        match panels {
            4 => block.panels::<R, EP, 4>(),
            3 => block.panels::<R, EP, 3>(),
            2 => block.panels::<R, EP, 2>(),
            _ => block.panels::<R, EP, 1>(),
        }
    }
}

/// The operands of one [`super::GemmFn`] call (`kc` clamped at 0).
struct Block<W, S> {
    a: *const f32,
    b: *const W,
    /// Quantized weights' scales (`[panel][group][16]`), null for floats.
    scales: *const S,
    c: *mut f32,
    kc: usize,
    lda: isize,
    ldc: i64,
    rows: i64,
    cols: i64,
    accumulate: i64,
}

impl<W, S> Block<W, S> {
    /// `EP` rows by the `NQ` panels from `b` (`W::panel_stride(lda)` elements apart), in
    /// `EP x NQ` accumulators; per k, one load per panel and, per row of `a` (read in
    /// place at stride `lda`), one broadcast feeding `NQ` FMAs. Rows past `rows` re-read
    /// the last valid row (never stored).
    ///
    /// # Safety
    /// As [`gemm_block`], with at least one of the `cols` columns in panel `NQ - 1`.
    #[inline(always)]
    unsafe fn panels<R: Row16, const EP: usize, const NQ: usize>(&self)
    where
        W: PanelElement<R>,
        S: PanelElement<R>,
    {
        let last = self.rows.min(EP as i64) as usize - 1;
        // SAFETY: row `min(i, last) < rows` of `a` is lent (`kc` floats from `a + row * lda`).
        let a_rows: [*const f32; EP] =
            std::array::from_fn(|i| unsafe { self.a.offset(i.min(last) as isize * self.lda) });
        // (Several panels need `lda >= kc >= 0`; a single one is at offset 0 whatever `lda`.)
        let lda = self.lda.max(0) as usize;
        // SAFETY: panel `q < NQ` holds one of the columns, so it is lent (the elements of its
        // first `kc` depths from `b + q * panel_stride`).
        let panels: [*const W; NQ] =
            std::array::from_fn(|q| unsafe { self.b.add(q * W::panel_stride(lda)) });
        // SAFETY: `R`'s features are enabled in the entry point this is inlined into.
        let mut acc = [[unsafe { R::zero() }; NQ]; EP];
        // Runs of k sharing a scale (the whole call for floats).
        let group = if W::GROUP == 0 {
            self.kc.max(1)
        } else {
            W::GROUP
        };
        let scale_stride = lda.div_ceil(group) * HP;
        let mut k0 = 0;
        while k0 < self.kc {
            let k1 = self.kc.min(k0 + group);
            let run = (&a_rows, &panels, k0..k1);
            if W::GROUP == 0 {
                // SAFETY: forwarded contract; `k1 <= kc`.
                unsafe { Self::add_products(&mut acc, run, None) };
            } else {
                // SAFETY: quantized weights come with the scales of every group read, panel
                // `q`'s `scale_stride` elements apart.
                let scale: [R; NQ] = std::array::from_fn(|q| unsafe {
                    S::load16(self.scales.add(q * scale_stride + k0 / group * HP))
                });
                if EP == 1 {
                    // The GEMV: the group's products unscaled, then scaled once; the
                    // weights [`PREFETCH_AHEAD`] ahead asked for.
                    let width = |k| W::depth_offset(k) * size_of::<W>();
                    prefetch_ahead(&panels, width(k0), width(group), PREFETCH_AHEAD);
                    // SAFETY: `R`'s features are enabled in the entry point (the contract).
                    let mut part = [[unsafe { R::zero() }; NQ]; EP];
                    // SAFETY: forwarded contract; `k1 <= kc`.
                    unsafe { Self::add_products(&mut part, run, None) };
                    for (acc_i, part_i) in acc.iter_mut().zip(&part) {
                        for ((acc_iq, &part_iq), &s_q) in acc_i.iter_mut().zip(part_i).zip(&scale) {
                            // SAFETY: the features (see above).
                            *acc_iq = unsafe { acc_iq.fma_lanes(part_iq, s_q) };
                        }
                    }
                } else {
                    // SAFETY: forwarded contract; `k1 <= kc`.
                    unsafe { Self::add_products(&mut acc, run, Some(&scale)) };
                }
            }
            k0 = k1;
        }
        let columns: [[R; EP]; NQ] = std::array::from_fn(|q| std::array::from_fn(|i| acc[i][q]));
        for (q, column) in columns.iter().enumerate() {
            let first = (q * HP) as i64;
            // SAFETY: columns `first..cols` (clamped to 16) of the lent rows of `c`.
            unsafe {
                store_block(
                    column,
                    self.c.add(q * HP),
                    self.ldc,
                    self.rows,
                    self.cols - first,
                    self.accumulate,
                )
            }
        }
    }

    /// `acc[i][q] += a_rows[i][k] * w_q(k)` for every `k` of `ks` (which starts even), with
    /// `w_q(k)` the weights of depth `k` of panel `q`, times `scale[q]` when given: two k
    /// per step (one [`PanelElement::load_pair`] per panel) when `W` loads pairs, then one
    /// k per step (the tail of an odd run, or every k).
    ///
    /// # Safety
    /// Every row of `a_rows` is readable for the `ks.end` floats and every panel for the
    /// elements of its first `ks.end` depths; the CPU has the features of `R` and `W`,
    /// enabled in the function this is inlined into.
    #[inline(always)]
    unsafe fn add_products<R: Row16, const EP: usize, const NQ: usize>(
        acc: &mut [[R; NQ]; EP],
        (a_rows, panels, ks): (&[*const f32; EP], &[*const W; NQ], std::ops::Range<usize>),
        scale: Option<&[R; NQ]>,
    ) where
        W: PanelElement<R>,
    {
        let mut k = ks.start;
        while W::PAIR_LOADS && k + 2 <= ks.end {
            // SAFETY: `k + 1 < ks.end`: depths `k` and `k + 1` of each lent panel.
            let pairs: [(R, R); NQ] =
                std::array::from_fn(|q| unsafe { W::load_pair(panels[q], k) });
            // SAFETY: forwarded contract; `k + 1 < ks.end`, so both depths are readable.
            unsafe {
                add_outer(acc, a_rows, k, scaled(pairs.map(|p| p.0), scale));
                add_outer(acc, a_rows, k + 1, scaled(pairs.map(|p| p.1), scale));
            }
            k += 2;
        }
        while k < ks.end {
            // SAFETY: `k < ks.end`: depth `k` of each lent panel.
            let b_k = std::array::from_fn(|q| unsafe { W::load_k(panels[q], k) });
            // SAFETY: forwarded contract.
            unsafe { add_outer(acc, a_rows, k, scaled(b_k, scale)) };
            k += 1;
        }
    }
}

/// `w[q] * scale[q]` when scaled, else `w`.
///
/// # Safety
/// Inlined into a function enabling `R`'s features, which the CPU has.
#[inline(always)]
unsafe fn scaled<R: Row16, const NQ: usize>(w: [R; NQ], scale: Option<&[R; NQ]>) -> [R; NQ] {
    match scale {
        // SAFETY: the features (caller's contract).
        Some(s) => std::array::from_fn(|q| unsafe { w[q].mul(s[q]) }),
        None => w,
    }
}

/// `acc[i][q] += a_rows[i][k] * b_k[q]`: per row, one broadcast feeding `NQ` FMAs.
///
/// # Safety
/// Element `k` of every row of `a_rows` is readable; inlined into a function enabling
/// `R`'s features, which the CPU has.
#[inline(always)]
unsafe fn add_outer<R: Row16, const EP: usize, const NQ: usize>(
    acc: &mut [[R; NQ]; EP],
    a_rows: &[*const f32; EP],
    k: usize,
    b_k: [R; NQ],
) {
    for (acc_i, &a_i) in acc.iter_mut().zip(a_rows) {
        // SAFETY: element `k` of a lent row.
        let a_ik = unsafe { *a_i.add(k) };
        for (acc_iq, &b_kq) in acc_i.iter_mut().zip(&b_k) {
            // SAFETY: the features (caller's contract).
            *acc_iq = unsafe { acc_iq.fma(a_ik, b_kq) };
        }
    }
}

/// Writes the `rows x cols` part of an `EP x 16` block held in registers to `c`:
/// `c = (accumulate ? c : 0) + block`. A full block goes straight to `c`; an edge block
/// through a stack tile, touching only its valid part of `c`.
///
/// # Safety
/// `c[i*ldc + j]` is readable and writable for `i < rows, j < cols` (clamped to the block);
/// inlined into a function enabling `R`'s features, which the CPU has.
#[inline(always)]
pub(super) unsafe fn store_block<R: Row16, const EP: usize>(
    block: &[R; EP],
    c: *mut f32,
    ldc: i64,
    rows: i64,
    cols: i64,
    accumulate: i64,
) {
    let ldc = ldc as isize;
    if rows == EP as i64 && cols == HP as i64 {
        for (i, &sum) in block.iter().enumerate() {
            // SAFETY: a full block: all 16 columns of rows `i < EP` are lent.
            unsafe {
                let out = c.offset(i as isize * ldc);
                let v = if accumulate != 0 {
                    R::load(out).add(sum)
                } else {
                    sum
                };
                v.store(out);
            }
        }
        return;
    }
    let rows = rows.clamp(0, EP as i64) as usize;
    let cols = cols.clamp(0, HP as i64) as usize;
    let mut tile = [[0.0f32; HP]; EP];
    for (row, sum) in tile.iter_mut().zip(block) {
        // SAFETY: each tile row holds 16 floats.
        unsafe { sum.store(row.as_mut_ptr()) }
    }
    for (i, row) in tile.iter().enumerate().take(rows) {
        for (j, &sum) in row.iter().enumerate().take(cols) {
            // SAFETY: `i < rows`, `j < cols`: inside the part of `c` the caller lends.
            unsafe {
                let out = c.offset(i as isize * ldc + j as isize);
                *out = if accumulate != 0 { *out + sum } else { sum };
            }
        }
    }
}

/// How far ahead of the group it reads a decode GEMV that reads 4 panels side by side
/// (this file's) asks for the next weights of each (software prefetch; the distance was
/// chosen by timing decode against no prefetch and against longer distances).
pub(super) const PREFETCH_AHEAD: usize = 1024;

/// How far ahead a decode GEMV that streams its panels one after the other (the
/// int8-activation GEMVs and [`super::x86_gemv_a16`]'s) asks for the next weights: past
/// the end of a panel this is the next one's start (the distance was chosen by timing
/// decode against [`PREFETCH_AHEAD`]'s).
pub(super) const STREAM_PREFETCH_AHEAD: usize = 8192;

/// Asks for the cache lines of bytes `at + ahead ..` (`bytes` of them) of every panel,
/// where the GEMV reads bytes `at ..` now (a hint: it never faults, so the lines may lie
/// past the end of a panel), with this CPU's [`stream_prefetch`] hint. A decode step reads
/// each weight once and streams hundreds of MB of them; where the hint is non-temporal it
/// keeps them from evicting what the next kernels reread (activations, norm weights, the
/// KV cache); which hint each CPU vendor gets is [`super::x86_stream_prefetch`]'s.
#[inline(always)]
pub(super) fn prefetch_ahead<W, const NQ: usize>(
    panels: &[*const W; NQ],
    at: usize,
    bytes: usize,
    ahead: usize,
) {
    let hint = stream_prefetch();
    for &panel in panels {
        let start = panel.cast::<u8>().wrapping_add(at + ahead);
        match hint {
            StreamPrefetch::NonTemporal => prefetch_lines::<_MM_HINT_NTA>(start, bytes),
            StreamPrefetch::AllLevels => prefetch_lines::<_MM_HINT_T0>(start, bytes),
        }
    }
}

/// Asks for the first `bytes` of every row into all cache levels (`T0`): rows the caller
/// reads soon and again (the attention's key and value rows, which the call's other query
/// rows and the next decode steps reread).
#[inline(always)]
pub(super) fn prefetch_cached<W, const N: usize>(rows: &[*const W; N], bytes: usize) {
    for &row in rows {
        prefetch_lines::<_MM_HINT_T0>(row.cast(), bytes);
    }
}

/// Prefetches the cache lines of `bytes` bytes from `start` with hint `HINT`.
#[inline(always)]
fn prefetch_lines<const HINT: i32>(start: *const u8, bytes: usize) {
    for line in (0..bytes).step_by(64) {
        // SAFETY: SSE (baseline on x86-64); a prefetch reads nothing architecturally.
        unsafe { _mm_prefetch::<HINT>(start.wrapping_add(line).cast()) }
    }
}
