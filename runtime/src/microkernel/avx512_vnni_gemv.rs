//! x86-64 AVX-512 VNNI decode GEMVs over 4-bit weights and f32 activations
//! ([`Microkernel::Sgemv1x64Q4`], [`Microkernel::Sgemv1x64Q4F16`]) on `vpdpwssd`, which
//! adds to each int32 lane the two products of two int16 pairs.
//!
//! The f32 GEMV ([`super::x86_gemm`]) spends four shuffle-unit instructions on every 32
//! weights (widen, shift, two table lookups) and is bound by them, not by memory. Here each
//! group of 32 activations is first rounded to 16-bit fixed point with its own scale
//! (`code = round(a * 32767 / max|a|)`: an error of at most `max|a| / 65534` per value,
//! finer than f16's), which the kernels' contract allows for these two kernels
//! ([`Microkernel::rounds_activations`]). Then a [`U4Pair`] byte widened to a dword lane
//! becomes the int16 pair `(low nibble, high nibble)` with one shift and one `vpternlogd`,
//! and one `vpdpwssd` multiplies it by the broadcast pair of codes: two shuffle-unit
//! instructions per 32 weights. The nibbles are `w + 8`, so each group's int32 sums lose
//! `8 * sum(codes)` before they are converted and scaled (weight scale times the group's
//! activation scale) into the f32 accumulators.
//!
//! The activations are rounded [`CHUNK_GROUPS`] groups at a time into a stack buffer, so
//! any reduction depth works; a tail group (and the odd depth of a pair) is padded with
//! zero codes, which makes the nibbles past `kc` irrelevant.

use super::x86_gemm::{prefetch_ahead, PanelElement, HP};
use super::{Implementation, Microkernel, MicrokernelFn, U4Pair, QUANT_GROUP};
use half::f16;
use std::arch::x86_64::{
    __m512, __m512i, __mmask16, _mm256_storeu_si256, _mm512_abs_ps, _mm512_add_epi32,
    _mm512_add_ps, _mm512_cmp_ps_mask, _mm512_cvtepi32_epi16, _mm512_cvtepi32_ps,
    _mm512_cvtepu8_epi32, _mm512_cvtps_epi32, _mm512_dpwssd_epi32, _mm512_fmadd_ps,
    _mm512_mask_storeu_ps, _mm512_maskz_loadu_ps, _mm512_max_ps, _mm512_mul_ps,
    _mm512_reduce_add_epi32, _mm512_reduce_max_ps, _mm512_set1_epi32, _mm512_set1_ps,
    _mm512_setzero_ps, _mm512_setzero_si512, _mm512_slli_epi32, _mm512_sub_epi32,
    _mm512_ternarylogic_epi32, _mm_loadu_si128, _CMP_UNORD_Q,
};

/// The features every kernel here needs.
const FEATURES: &[&str] = &["avx512f", "avx512bw", "avx512vnni"];

/// One implementation row of this file.
const fn row(kernel: Microkernel, func: MicrokernelFn) -> Implementation {
    Implementation {
        kernel,
        isa: "avx512vnni",
        features: FEATURES,
        func,
    }
}

/// The AVX-512 VNNI GEMVs over f32 activations.
pub(super) const IMPLEMENTATIONS: &[Implementation] = &[
    row(
        Microkernel::Sgemv1x64Q4,
        MicrokernelFn::GemmQ4(sgemv_1x64_q4),
    ),
    row(
        Microkernel::Sgemv1x64Q4F16,
        MicrokernelFn::GemmQ4F16(sgemv_1x64_q4f16),
    ),
];

/// Groups of activations rounded at a time (the stack buffer's size).
const CHUNK_GROUPS: usize = 8;

/// The largest code of a rounded activation.
const CODE_MAX: f32 = 32767.0;

/// Panels of one call (the GEMV block is 1 x 64).
const NP: usize = 4;

/// Activations of up to [`CHUNK_GROUPS`] groups rounded to int16 codes.
struct Codes {
    /// The codes, in k order (a pair of k is one dword).
    codes: [i16; CHUNK_GROUPS * QUANT_GROUP],
    /// Per group, the scale that takes a code back to f32.
    scales: [f32; CHUNK_GROUPS],
    /// Per group, the sum of its codes.
    sums: [i32; CHUNK_GROUPS],
}

macro_rules! sgemv_entry {
    ($(#[$doc:meta])* $name:ident, $s:ty) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As [`super::GemmQuantFn`] over 4-bit weights, and the CPU has this file's
        /// features.
        #[allow(clippy::too_many_arguments)]
        #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
        unsafe extern "C" fn $name(
            a: *const f32,
            b: *const U4Pair,
            scales: *const $s,
            c: *mut f32,
            kc: i64,
            lda: i64,
            _ldc: i64,
            rows: i64,
            cols: i64,
            accumulate: i64,
        ) {
            if rows <= 0 || cols <= 0 {
                return;
            }
            let call = Gemv {
                a,
                b: b.cast(),
                scales,
                c,
                kc: kc.max(0) as usize,
                lda: lda.max(0) as usize,
                cols: (cols as usize).min(NP * HP),
                accumulate: accumulate != 0,
            };
            // SAFETY: forwarded contract; the features are enabled here.
            unsafe {
                match call.cols.div_ceil(HP) {
                    4 => call.run::<4>(),
                    3 => call.run::<3>(),
                    2 => call.run::<2>(),
                    _ => call.run::<1>(),
                }
            }
        }
    };
}

sgemv_entry!(
    /// [`Microkernel::Sgemv1x64Q4`]: 4-bit weights, f32 scales.
    sgemv_1x64_q4, f32
);
sgemv_entry!(
    /// [`Microkernel::Sgemv1x64Q4F16`]: 4-bit weights, f16 scales.
    sgemv_1x64_q4f16, f16
);

/// The operands of one GEMV call (row 0 only; `cols` clamped to the block).
struct Gemv<S> {
    a: *const f32,
    /// Panel 0's bytes ([`U4Pair`]s).
    b: *const u8,
    scales: *const S,
    c: *mut f32,
    kc: usize,
    lda: usize,
    cols: usize,
    accumulate: bool,
}

impl<S: PanelElement<__m512>> Gemv<S> {
    /// The first `NQ` panels (those holding the `cols` columns): per chunk of groups, the
    /// activations rounded, then each group's int32 sums scaled into the accumulators.
    ///
    /// # Safety
    /// As [`super::GemmQuantFn`], one row; at least one column in panel `NQ - 1`; inlined
    /// into a function enabling this file's features, which the CPU has.
    #[inline(always)]
    unsafe fn run<const NQ: usize>(&self) {
        let panel_bytes = self.lda.div_ceil(2) * HP;
        let scale_stride = self.lda.div_ceil(QUANT_GROUP) * HP;
        let panels: [*const u8; NQ] = std::array::from_fn(|q| self.b.wrapping_add(q * panel_bytes));
        // SAFETY (rest): the features (the caller's contract).
        let mut acc = [unsafe { _mm512_setzero_ps() }; NQ];
        let mut codes = Codes {
            codes: [0; CHUNK_GROUPS * QUANT_GROUP],
            scales: [0.0; CHUNK_GROUPS],
            sums: [0; CHUNK_GROUPS],
        };
        let chunk = CHUNK_GROUPS * QUANT_GROUP;
        for k0 in (0..self.kc).step_by(chunk) {
            let k1 = self.kc.min(k0 + chunk);
            // SAFETY: activations `k0..k1 <= kc` of row 0 are lent.
            let groups = unsafe { round_activations(self.a.add(k0), k1 - k0, &mut codes) };
            for local in 0..groups {
                let g = k0 / QUANT_GROUP + local;
                let pair0 = g * QUANT_GROUP / 2;
                let pairs = (self.kc - g * QUANT_GROUP).min(QUANT_GROUP).div_ceil(2);
                prefetch_ahead(&panels, pair0 * HP, QUANT_GROUP / 2 * HP);
                let pair_codes = codes.codes[local * QUANT_GROUP..].as_ptr().cast::<i32>();
                // SAFETY: pairs `pair0..pair0 + pairs` hold depths below `kc` (lent); the
                // group's codes are in the buffer.
                let sums = unsafe { group_sums(&panels, pair0, pairs, pair_codes) };
                let bias = unsafe { _mm512_set1_epi32(8 * codes.sums[local]) };
                let a_scale = unsafe { _mm512_set1_ps(codes.scales[local]) };
                for (q, (acc_q, &sum_q)) in acc.iter_mut().zip(&sums).enumerate() {
                    // SAFETY: group `g` of lent panel `q` has 16 scales.
                    unsafe {
                        let w_scale = S::load16(self.scales.add(q * scale_stride + g * HP));
                        let products = _mm512_cvtepi32_ps(_mm512_sub_epi32(sum_q, bias));
                        *acc_q = _mm512_fmadd_ps(products, _mm512_mul_ps(w_scale, a_scale), *acc_q);
                    }
                }
            }
        }
        for (q, &acc_q) in acc.iter().enumerate() {
            let lanes = lane_mask(self.cols - q * HP);
            // SAFETY: lanes `j < cols` of `c` are lent.
            unsafe {
                let out = self.c.add(q * HP);
                let v = if self.accumulate {
                    _mm512_add_ps(acc_q, _mm512_maskz_loadu_ps(lanes, out))
                } else {
                    acc_q
                };
                _mm512_mask_storeu_ps(out, lanes, v);
            }
        }
    }
}

/// Per panel, `sum (w + 8) * code` over pairs `pair0..pair0 + pairs` (at most a group's
/// 16), 16 columns a register; `pair_codes` points at the first pair's two codes.
///
/// # Safety
/// The pairs' 16 bytes of every panel are readable, and `pairs` dwords at `pair_codes`;
/// inlined into a function enabling this file's features, which the CPU has.
#[inline(always)]
unsafe fn group_sums<const NQ: usize>(
    panels: &[*const u8; NQ],
    pair0: usize,
    pairs: usize,
    pair_codes: *const i32,
) -> [__m512i; NQ] {
    // SAFETY (rest): the features; every pair read is one of the lent ones.
    let mut sums = [unsafe { _mm512_setzero_si512() }; NQ];
    let nibbles = unsafe { _mm512_set1_epi32(0x000F_000F) };
    for p in 0..pairs {
        let x = unsafe { _mm512_set1_epi32(pair_codes.add(p).read_unaligned()) };
        for (sum, &panel) in sums.iter_mut().zip(panels) {
            unsafe {
                let bytes =
                    _mm512_cvtepu8_epi32(_mm_loadu_si128(panel.add((pair0 + p) * HP).cast()));
                // 0xA8: (a | b) & c, the low nibble in the low word, the high in the high.
                let w = _mm512_ternarylogic_epi32::<0xA8>(
                    bytes,
                    _mm512_slli_epi32::<12>(bytes),
                    nibbles,
                );
                *sum = _mm512_dpwssd_epi32(*sum, w, x);
            }
        }
    }
    sums
}

/// Rounds the `n` (at most a chunk) activations at `a` to int16 codes, group by group,
/// zero-padding the last group; returns the number of groups.
///
/// # Safety
/// `n` floats are readable at `a`; inlined into a function enabling this file's features,
/// which the CPU has.
#[inline(always)]
unsafe fn round_activations(a: *const f32, n: usize, out: &mut Codes) -> usize {
    let groups = n.div_ceil(QUANT_GROUP);
    for g in 0..groups {
        let left = n - g * QUANT_GROUP;
        let (m0, m1) = (lane_mask(left), lane_mask(left.saturating_sub(HP)));
        // SAFETY (rest): the features; the masks read only the `n` lent floats.
        unsafe {
            let x0 = _mm512_maskz_loadu_ps(m0, a.add(g * QUANT_GROUP));
            let x1 = _mm512_maskz_loadu_ps(m1, a.add(g * QUANT_GROUP + HP));
            let max = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
            // A NaN makes the scale NaN, an infinity makes it infinite (its codes are 0):
            // either way the result is NaN, as the f32 sum's would be (or infinite).
            let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x0, x1) != 0;
            let inverse = if max > 0.0 { CODE_MAX / max } else { 0.0 };
            let to_codes = _mm512_set1_ps(inverse);
            let q0 = _mm512_cvtps_epi32(_mm512_mul_ps(x0, to_codes));
            let q1 = _mm512_cvtps_epi32(_mm512_mul_ps(x1, to_codes));
            let dst = out.codes.as_mut_ptr().add(g * QUANT_GROUP);
            _mm256_storeu_si256(dst.cast(), _mm512_cvtepi32_epi16(q0));
            _mm256_storeu_si256(dst.add(HP).cast(), _mm512_cvtepi32_epi16(q1));
            out.sums[g] = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
            out.scales[g] = if nan { f32::NAN } else { max / CODE_MAX };
        }
    }
    groups
}

/// The mask of the first `min(n, 16)` lanes (none for `n == 0`).
#[inline(always)]
fn lane_mask(n: usize) -> __mmask16 {
    ((1u32 << n.min(HP)) - 1) as __mmask16
}
