//! The int8-activation GEMMs ([`crate::microkernel::QGemmFn`]) on AVX2: `vpmaddubsw`
//! multiplies unsigned by signed bytes and adds adjacent pairs into int16 lanes (saturating),
//! `vpmaddwd` by ones widens pairs of those into int32. A panel's 64-byte step (16 columns
//! x 4 k) is two ymm registers of 8 columns each.
//!
//! One body serves both block shapes (`4 x 16` prefill, `1 x 64` decode GEMV streaming 4
//! panels): per group of 32 k, int32 sums per row and 8 columns, converted to f32, scaled
//! by the group's weight scales (the f16 scales widened with F16C, one `vcvtph2ps` per 8
//! columns) and multiplied into the results by the row's scale of the group (one FMA); at
//! the end, the results are stored (through a stack tile for partial blocks). How a
//! group's sums are formed depends on the weights ([`Avx2Panel`]):
//! - int8: the product of an activation byte (`code + 128`, up to 255) by a weight (up to
//!   127 in magnitude) overflows int16 in pairs, so the sums are of the codes, with
//!   llama.cpp's sign trick: `maddubs(abs(code), sign(w, code))` (each pair at most
//!   `2 * 128 * 127`), widened to int32 per quad; no correction is needed.
//! - 4-bit: the activation bytes themselves by `w` in `[-8, 7]` fit (a pair at most
//!   `2 * 255 * 8`), and so does a whole group per int16 lane (16 products, at most 32640),
//!   so the group accumulates in int16 and widens once; the group's correction removes
//!   the `128 * w` the bytes add, from the weights' sums per column (formed in bytes from
//!   the unpacked weights, shared by the block's rows).

use super::super::qgemm::{qgemm_entry, QCall, QPanel};
use super::super::x86_gemm::{prefetch_ahead, STREAM_PREFETCH_AHEAD};
use super::super::{PANEL, QUANT_GROUP};
use std::arch::x86_64::{
    __m256, __m256i, _mm256_abs_epi8, _mm256_add_epi16, _mm256_add_epi32, _mm256_add_epi8,
    _mm256_and_si256, _mm256_cvtepi32_ps, _mm256_cvtph_ps, _mm256_fmadd_ps, _mm256_fmsub_ps,
    _mm256_loadu_si256, _mm256_madd_epi16, _mm256_maddubs_epi16, _mm256_mul_ps, _mm256_set1_epi16,
    _mm256_set1_epi32, _mm256_set1_epi8, _mm256_set1_ps, _mm256_setzero_ps, _mm256_setzero_si256,
    _mm256_sign_epi8, _mm256_slli_epi32, _mm256_srli_epi16, _mm256_storeu_ps, _mm256_sub_epi8,
    _mm256_xor_si256, _mm_loadu_si128,
};

/// Columns per ymm register (int32 or f32 lanes).
const LANES: usize = 8;

/// A row's values over `NQ` panels: two registers of 8 columns per panel.
type Row<T, const NQ: usize> = [[T; 2]; NQ];

/// How the int32 sums of one group are formed from a panel element's weights.
pub(super) trait Avx2Panel: QPanel {
    /// Whether the sums are of the activation bytes (`code + 128`), so each group needs
    /// its correction (`128 *` the weights' sums); otherwise they are of the codes.
    const BYTE_SUMS: bool;

    /// The int32 sums of the group of depths `k0..k0 + 32`, per row of `a_rows` and per
    /// 8 columns of each panel of `panels`; with [`Avx2Panel::BYTE_SUMS`], also the sums of
    /// the group's weights per 8 columns of each panel (else zeros).
    ///
    /// # Safety
    /// Those depths of every row and panel are readable; inlined into a function enabling
    /// AVX2 and FMA, which the CPU has.
    unsafe fn group_sums<const EP: usize, const NQ: usize>(
        a_rows: &[*const u8; EP],
        panels: &[*const Self; NQ],
        k0: usize,
    ) -> ([Row<__m256i, NQ>; EP], Row<__m256i, NQ>);
}

impl Avx2Panel for i8 {
    const BYTE_SUMS: bool = false;

    /// Per quad and row: the 4 codes broadcast and their magnitudes; then per 8 columns of
    /// each panel, the weights (loaded again for each row: L1 hits, where holding every
    /// panel's would take the registers the sums need), `sign`, `maddubs`, `madd` by ones
    /// and an add.
    #[inline(always)]
    unsafe fn group_sums<const EP: usize, const NQ: usize>(
        a_rows: &[*const u8; EP],
        panels: &[*const i8; NQ],
        k0: usize,
    ) -> ([Row<__m256i, NQ>; EP], Row<__m256i, NQ>) {
        // SAFETY: AVX2 is enabled in the caller this is inlined into (its contract).
        let (ones, bias) = unsafe { (_mm256_set1_epi16(1), _mm256_set1_epi8(-128)) };
        // SAFETY: AVX2 (the caller's contract).
        let mut sums = [[[unsafe { _mm256_setzero_si256() }; 2]; NQ]; EP];
        for k in (k0..k0 + QUANT_GROUP).step_by(4) {
            for (sums_i, &a_i) in sums.iter_mut().zip(a_rows) {
                // SAFETY: bytes `k..k + 4` of the row, `k + 4 <= k0 + 32`: readable depths.
                let quad = unsafe { a_i.add(k).cast::<i32>().read_unaligned() };
                // SAFETY: AVX2 (the caller's contract).
                let code = unsafe { _mm256_xor_si256(_mm256_set1_epi32(quad), bias) };
                // SAFETY: AVX2 (the caller's contract).
                let magnitude = unsafe { _mm256_abs_epi8(code) };
                for (sum_q, &panel) in sums_i.iter_mut().zip(panels) {
                    for (h, sum) in sum_q.iter_mut().enumerate() {
                        // SAFETY: AVX2; the 32 bytes at `k * 16 + h * 32` lie in the panel's
                        // 64-byte step of depths `k..k + 4`, inside the readable group.
                        unsafe {
                            let w = _mm256_loadu_si256(panel.add(k * 16 + h * 32).cast());
                            let pairs = _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(w, code));
                            *sum = _mm256_add_epi32(*sum, _mm256_madd_epi16(pairs, ones));
                        }
                    }
                }
            }
        }
        // SAFETY: AVX2 (the caller's contract).
        (sums, [[unsafe { _mm256_setzero_si256() }; 2]; NQ])
    }
}

impl Avx2Panel for u8 {
    const BYTE_SUMS: bool = true;

    /// Per step of 8 k and 8 columns of each panel: the 32 bytes unpacked into their low
    /// and high nibbles minus 8; then per row, the two quads of activation bytes broadcast
    /// (loaded again for each panel: L1 hits, the registers go to the sums) and two
    /// `maddubs` added into int16 sums, widened at the end of the group. The weights'
    /// sums: per byte (a column and `k % 4`) the 8 weights of the group added in int8 (at
    /// most 64 in magnitude), widened to the columns' int32 sums at the end.
    #[inline(always)]
    unsafe fn group_sums<const EP: usize, const NQ: usize>(
        a_rows: &[*const u8; EP],
        panels: &[*const u8; NQ],
        k0: usize,
    ) -> ([Row<__m256i, NQ>; EP], Row<__m256i, NQ>) {
        // SAFETY: AVX2 is enabled in the caller this is inlined into (its contract).
        let (ones, ones8, nibble, eight) = unsafe {
            (
                _mm256_set1_epi16(1),
                _mm256_set1_epi8(1),
                _mm256_set1_epi8(0x0F),
                _mm256_set1_epi8(8),
            )
        };
        // SAFETY: AVX2 (the caller's contract).
        let mut sums16 = [[[unsafe { _mm256_setzero_si256() }; 2]; NQ]; EP];
        // SAFETY: AVX2 (the caller's contract).
        let mut weight_sums = [[unsafe { _mm256_setzero_si256() }; 2]; NQ];
        for k in (k0..k0 + QUANT_GROUP).step_by(8) {
            for (q, &panel) in panels.iter().enumerate() {
                for h in 0..2 {
                    // SAFETY: AVX2; the 32 bytes at `k * 8 + h * 32` lie in the panel's
                    // 64-byte step of depths `k..k + 8`, inside the readable group.
                    let (low, high) = unsafe {
                        let bytes = _mm256_loadu_si256(panel.add(k * 8 + h * 32).cast());
                        let low = _mm256_and_si256(bytes, nibble);
                        let high = _mm256_and_si256(_mm256_srli_epi16::<4>(bytes), nibble);
                        (_mm256_sub_epi8(low, eight), _mm256_sub_epi8(high, eight))
                    };
                    // SAFETY: AVX2 (the caller's contract).
                    weight_sums[q][h] =
                        unsafe { _mm256_add_epi8(weight_sums[q][h], _mm256_add_epi8(low, high)) };
                    for (sums_i, &a_i) in sums16.iter_mut().zip(a_rows) {
                        // SAFETY: AVX2; the row's bytes `k..k + 8`, `k + 8 <= k0 + 32`, are
                        // readable depths.
                        unsafe {
                            let quad = |at: usize| a_i.add(at).cast::<i32>().read_unaligned();
                            let both = _mm256_add_epi16(
                                _mm256_maddubs_epi16(_mm256_set1_epi32(quad(k)), low),
                                _mm256_maddubs_epi16(_mm256_set1_epi32(quad(k + 4)), high),
                            );
                            sums_i[q][h] = _mm256_add_epi16(sums_i[q][h], both);
                        }
                    }
                }
            }
        }
        for sums_i in sums16.iter_mut() {
            for sum_q in sums_i.iter_mut() {
                for sum in sum_q.iter_mut() {
                    // SAFETY: AVX2 (the caller's contract).
                    *sum = unsafe { _mm256_madd_epi16(*sum, ones) };
                }
            }
        }
        for sum_q in weight_sums.iter_mut() {
            for sum in sum_q.iter_mut() {
                // SAFETY: AVX2 (the caller's contract).
                *sum = unsafe { _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, *sum), ones) };
            }
        }
        (sums16, weight_sums)
    }
}

qgemm_entry!(
    /// [`crate::microkernel::Microkernel::Qgemm4x16W8`] on AVX2 (sums of the codes).
    qgemm_4x16_w8, i8, 4 x 1, panels, "avx2,fma,f16c"
);
qgemm_entry!(
    /// [`crate::microkernel::Microkernel::Qgemm4x16W4`] on AVX2 (int16 sums per group).
    qgemm_4x16_w4, u8, 4 x 1, panels, "avx2,fma,f16c"
);
qgemm_entry!(
    /// [`crate::microkernel::Microkernel::Qgemv1x64W8`] on AVX2 (sums of the codes).
    qgemv_1x64_w8, i8, 1 x 4, panels, "avx2,fma,f16c"
);
qgemm_entry!(
    /// [`crate::microkernel::Microkernel::Qgemv1x64W4`] on AVX2 (int16 sums per group).
    qgemv_1x64_w4, u8, 1 x 4, panels, "avx2,fma,f16c"
);

/// `EP` rows by the first `NQ` panels: the f32 results of every group (the group's sums
/// times its weight scales, less its correction, times the row's scale of the group),
/// then the stores ([`store_row`]).
///
/// # Safety
/// As [`super::super::QGemmFn`] for `call`'s operands, with at least one of the `cols`
/// columns in panel `NQ - 1`; inlined into a function enabling AVX2, FMA and F16C, which
/// the CPU has.
#[inline(always)]
unsafe fn panels<W: Avx2Panel, const EP: usize, const NQ: usize>(call: &QCall<W>) {
    let a_rows: [*const u8; EP] = std::array::from_fn(|i| call.a_row(i));
    let panels: [*const W; NQ] = std::array::from_fn(|q| call.panel(q));
    // SAFETY: AVX is enabled in the entry point this is inlined into (the contract).
    let mut acc = [[[unsafe { _mm256_setzero_ps() }; 2]; NQ]; EP];
    let group_bytes = W::panel_stride(QUANT_GROUP) * size_of::<W>();
    for g in 0..call.groups {
        if EP == 1 {
            prefetch_ahead(&panels, g * group_bytes, group_bytes, STREAM_PREFETCH_AHEAD);
        }
        // SAFETY: group `g < groups` of every lent row and panel.
        let (sums, weight_sums) = unsafe { W::group_sums(&a_rows, &panels, g * QUANT_GROUP) };
        for q in 0..NQ {
            // SAFETY: the 16 scales (32 bytes) of group `g` of lent panel `q`, widened; the
            // features.
            let (scale, corr) = unsafe {
                let at = call.group_scales(q, g);
                let scale = [
                    _mm256_cvtph_ps(_mm_loadu_si128(at.cast())),
                    _mm256_cvtph_ps(_mm_loadu_si128(at.add(LANES).cast())),
                ];
                let corr = |h: usize| {
                    let offset = _mm256_slli_epi32::<7>(weight_sums[q][h]);
                    _mm256_mul_ps(_mm256_cvtepi32_ps(offset), scale[h])
                };
                (scale, [corr(0), corr(1)])
            };
            for (i, (acc_i, sums_i)) in acc.iter_mut().zip(&sums).enumerate() {
                // SAFETY: the scale of group `g < groups` of row `i` (clamped to the lent
                // rows); the features.
                unsafe {
                    let a_scale = _mm256_set1_ps(call.a_scale(i, g));
                    for h in 0..2 {
                        let sum = _mm256_cvtepi32_ps(sums_i[q][h]);
                        let group = if W::BYTE_SUMS {
                            _mm256_fmsub_ps(sum, scale[h], corr[h])
                        } else {
                            _mm256_mul_ps(sum, scale[h])
                        };
                        acc_i[q][h] = _mm256_fmadd_ps(group, a_scale, acc_i[q][h]);
                    }
                }
            }
        }
    }
    for (i, acc_i) in acc.iter().enumerate().take(call.rows) {
        // SAFETY: row `i < rows`: forwarded contract.
        unsafe { store_row(call, i, acc_i) }
    }
}

/// Writes row `i` of the block to the call's `cols` columns: straight to C for a full
/// row, else through a stack tile.
///
/// # Safety
/// As [`panels`]; `i < rows`.
#[inline(always)]
unsafe fn store_row<W: Avx2Panel, const NQ: usize>(
    call: &QCall<W>,
    i: usize,
    acc_i: &Row<__m256, NQ>,
) {
    let mut tile = [0.0f32; 4 * PANEL];
    let full = call.cols == NQ * PANEL;
    // SAFETY: the features; `tile` holds every column of the block, and a full row of C
    // is lent.
    unsafe {
        for (q, acc_q) in acc_i.iter().enumerate() {
            for (h, &sum) in acc_q.iter().enumerate() {
                let j = q * PANEL + h * LANES;
                let out = if full {
                    call.out(i, j)
                } else {
                    tile[j..].as_mut_ptr()
                };
                _mm256_storeu_ps(out, sum);
            }
        }
    }
    if !full {
        for (j, &v) in tile.iter().enumerate().take(call.cols) {
            // SAFETY: `i < rows`, `j < cols`: inside the part of C lent.
            unsafe { *call.out(i, j) = v };
        }
    }
}
