//! x86-64 AVX-512 VNNI side of the 4-bit decode GEMVs over activations rounded to 16 bits
//! ([`super::super::x86_gemv_a16`]): a panel's 16 columns in one zmm register, a
//! [`super::super::U4Pair`]
//! byte widened to a dword lane becomes its int16 pair with one shift and one
//! `vpternlogd`, and one `vpdpwssd` multiplies it by the broadcast pair of codes and adds
//! to the lane: two shuffle-unit instructions per 32 weights, where the f32 GEMV spends
//! four (widen, shift, two table lookups).

use super::super::x86_gemv_a16::{gemv_a16_entry, A16Isa, CODE_MAX};
use super::super::QUANT_GROUP;
use super::lane_mask;
use half::f16;
use std::arch::x86_64::{
    __m512, __m512i, _mm256_storeu_si256, _mm512_abs_ps, _mm512_add_epi32, _mm512_cmp_ps_mask,
    _mm512_cvtepi32_epi16, _mm512_cvtepi32_ps, _mm512_cvtepu8_epi32, _mm512_cvtps_epi32,
    _mm512_dpwssd_epi32, _mm512_maskz_loadu_ps, _mm512_max_ps, _mm512_mul_ps,
    _mm512_reduce_add_epi32, _mm512_reduce_max_ps, _mm512_set1_epi32, _mm512_set1_ps,
    _mm512_setzero_si512, _mm512_slli_epi32, _mm512_sub_epi32, _mm512_ternarylogic_epi32,
    _mm_loadu_si128, _CMP_UNORD_Q,
};

gemv_a16_entry!(
    /// [`Microkernel::Sgemv1x64Q4`](super::super::Microkernel::Sgemv1x64Q4): 4-bit
    /// weights, f32 scales.
    sgemv_1x64_q4, Vnni, f32, "avx512f,avx512bw,avx512vnni"
);
gemv_a16_entry!(
    /// [`Microkernel::Sgemv1x64Q4F16`](super::super::Microkernel::Sgemv1x64Q4F16): 4-bit
    /// weights, f16 scales.
    sgemv_1x64_q4f16, Vnni, f16, "avx512f,avx512bw,avx512vnni"
);

/// The AVX-512 VNNI side of the GEMV.
struct Vnni;

impl A16Isa for Vnni {
    type Row = __m512;
    type Sums = __m512i;

    #[inline(always)]
    unsafe fn round_group(a: *const f32, n: usize, codes: &mut [i16; QUANT_GROUP]) -> (f32, i32) {
        let (m0, m1) = (lane_mask(n), lane_mask(n.saturating_sub(16)));
        // SAFETY (all): the features; the masks read only the `n` lent floats, and the
        // stores write the 32 codes.
        unsafe {
            let x0 = _mm512_maskz_loadu_ps(m0, a);
            let x1 = _mm512_maskz_loadu_ps(m1, a.add(16));
            let max = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
            let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x0, x1) != 0;
            let inverse = if max > 0.0 { CODE_MAX / max } else { 0.0 };
            let to_codes = _mm512_set1_ps(inverse);
            let q0 = _mm512_cvtps_epi32(_mm512_mul_ps(x0, to_codes));
            let q1 = _mm512_cvtps_epi32(_mm512_mul_ps(x1, to_codes));
            _mm256_storeu_si256(codes.as_mut_ptr().cast(), _mm512_cvtepi32_epi16(q0));
            _mm256_storeu_si256(codes[16..].as_mut_ptr().cast(), _mm512_cvtepi32_epi16(q1));
            let scale = if nan { f32::NAN } else { max / CODE_MAX };
            (scale, _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1)))
        }
    }

    #[inline(always)]
    unsafe fn zero_sums() -> __m512i {
        // SAFETY: the features.
        unsafe { _mm512_setzero_si512() }
    }

    #[inline(always)]
    unsafe fn add_pair(sums: __m512i, pair: *const u8, codes: i32) -> __m512i {
        // SAFETY: the pair's 16 bytes are readable; the features.
        unsafe {
            let bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(pair.cast()));
            // 0xA8: (a | b) & c, the low nibble in the low word, the high in the high.
            let shifted = _mm512_slli_epi32::<12>(bytes);
            let nibbles = _mm512_set1_epi32(0x000F_000F);
            let w = _mm512_ternarylogic_epi32::<0xA8>(bytes, shifted, nibbles);
            _mm512_dpwssd_epi32(sums, w, _mm512_set1_epi32(codes))
        }
    }

    #[inline(always)]
    unsafe fn products(sums: __m512i, bias: i32) -> __m512 {
        // SAFETY: the features.
        unsafe { _mm512_cvtepi32_ps(_mm512_sub_epi32(sums, _mm512_set1_epi32(bias))) }
    }
}
