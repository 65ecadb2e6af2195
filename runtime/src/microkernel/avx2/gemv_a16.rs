//! x86-64 AVX2 side of the 4-bit decode GEMVs over activations rounded to 16 bits
//! ([`super::super::x86_gemv_a16`]): a panel's 16 columns in two ymm registers. A pair
//! step's 16 bytes are widened to words, split into low and high nibbles and interleaved
//! into the int16 pairs of the columns' int32 lanes, and `vpmaddwd` multiplies them by the
//! broadcast pair of codes: nine instructions per 32 weights, where widening each weight
//! to f32 takes seventeen. The interleave leaves the lanes in the column order 0-3, 8-11
//! and 4-7, 12-15, put back once per group.

use super::super::x86_gemv_a16::{gemv_a16_entry, A16Isa, PairIsa, CODE_MAX};
use super::super::QUANT_GROUP;
use super::Ymm2;
use half::f16;
use std::arch::x86_64::{
    __m256, __m256i, _mm256_add_epi32, _mm256_and_ps, _mm256_and_si256, _mm256_castsi256_ps,
    _mm256_cmp_ps, _mm256_cmpgt_epi32, _mm256_cvtepi32_ps, _mm256_cvtepu8_epi16,
    _mm256_cvtps_epi32, _mm256_extractf128_ps, _mm256_extracti128_si256, _mm256_madd_epi16,
    _mm256_maskload_ps, _mm256_max_ps, _mm256_movemask_ps, _mm256_mul_ps, _mm256_or_ps,
    _mm256_packs_epi32, _mm256_permute2x128_si256, _mm256_permute4x64_epi64, _mm256_set1_epi16,
    _mm256_set1_epi32, _mm256_set1_ps, _mm256_setr_epi32, _mm256_setzero_si256, _mm256_srli_epi16,
    _mm256_storeu_si256, _mm256_sub_epi32, _mm256_unpackhi_epi16, _mm256_unpacklo_epi16,
    _mm_add_epi32, _mm_cvtsi128_si32, _mm_cvtss_f32, _mm_loadu_si128, _mm_max_ps, _mm_movehl_ps,
    _mm_shuffle_epi32, _mm_shuffle_ps, _CMP_UNORD_Q,
};

gemv_a16_entry!(
    /// [`Microkernel::Sgemv8x256Q4`](super::super::Microkernel::Sgemv8x256Q4): 4-bit
    /// weights, f32 scales.
    sgemv_8x256_q4, Avx2, f32, "avx2,fma"
);
gemv_a16_entry!(
    /// [`Microkernel::Sgemv8x256Q4F16`](super::super::Microkernel::Sgemv8x256Q4F16): 4-bit
    /// weights, f16 scales.
    sgemv_8x256_q4f16, Avx2, f16, "avx2,fma,f16c"
);

/// The AVX2 side of the GEMV.
pub(super) struct Avx2;

impl A16Isa for Avx2 {
    type Row = Ymm2;
    /// Columns 0-3 and 8-11, then 4-7 and 12-15.
    type Sums = [__m256i; 2];
    type Codes = [i16; QUANT_GROUP];

    #[inline(always)]
    unsafe fn round_group(a: *const f32, n: usize, codes: &mut [i16; QUANT_GROUP]) -> (f32, i32) {
        // SAFETY: the features; the masked loads read only the `n` lent floats, and
        // the stores write the 32 codes.
        unsafe {
            let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
            let x: [__m256; 4] = std::array::from_fn(|i| {
                let left = _mm256_set1_epi32(n.saturating_sub(8 * i) as i32);
                _mm256_maskload_ps(a.add(8 * i), _mm256_cmpgt_epi32(left, lanes))
            });
            let magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFF_FFFF));
            let abs = x.map(|v| _mm256_and_ps(v, magnitude));
            let max = max_lane(_mm256_max_ps(
                _mm256_max_ps(abs[0], abs[1]),
                _mm256_max_ps(abs[2], abs[3]),
            ));
            let unordered = x.map(|v| _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
            let any = _mm256_or_ps(
                _mm256_or_ps(unordered[0], unordered[1]),
                _mm256_or_ps(unordered[2], unordered[3]),
            );
            let nan = _mm256_movemask_ps(any) != 0;
            let inverse = if max > 0.0 { CODE_MAX / max } else { 0.0 };
            let to_codes = _mm256_set1_ps(inverse);
            let q = x.map(|v| _mm256_cvtps_epi32(_mm256_mul_ps(v, to_codes)));
            // `packs` interleaves 128-bit halves; the permute puts the codes back in order.
            for (half, pair) in q.chunks(2).enumerate() {
                let packed = _mm256_permute4x64_epi64::<0xD8>(_mm256_packs_epi32(pair[0], pair[1]));
                _mm256_storeu_si256(codes[16 * half..].as_mut_ptr().cast(), packed);
            }
            let total =
                _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
            let scale = if nan { f32::NAN } else { max / CODE_MAX };
            (scale, sum_lanes(total))
        }
    }

    #[inline(always)]
    unsafe fn products(sums: [__m256i; 2], bias: i32) -> Ymm2 {
        // SAFETY: the features.
        unsafe {
            let bias = _mm256_set1_epi32(bias);
            let first = _mm256_permute2x128_si256::<0x20>(sums[0], sums[1]);
            let second = _mm256_permute2x128_si256::<0x31>(sums[0], sums[1]);
            [
                _mm256_cvtepi32_ps(_mm256_sub_epi32(first, bias)),
                _mm256_cvtepi32_ps(_mm256_sub_epi32(second, bias)),
            ]
        }
    }
}

impl PairIsa for Avx2 {
    /// The columns' int16 pairs: columns 0-3 and 8-11, then 4-7 and 12-15.
    type Pair = [__m256i; 2];

    #[inline(always)]
    unsafe fn zero_sums() -> [__m256i; 2] {
        // SAFETY: the features.
        unsafe { [_mm256_setzero_si256(); 2] }
    }

    #[inline(always)]
    unsafe fn widen_pair(pair: *const u8) -> [__m256i; 2] {
        // SAFETY: the pair's 16 bytes are readable; the features.
        unsafe {
            let words = _mm256_cvtepu8_epi16(_mm_loadu_si128(pair.cast()));
            let lo = _mm256_and_si256(words, _mm256_set1_epi16(0x000F));
            let hi = _mm256_srli_epi16::<4>(words);
            [_mm256_unpacklo_epi16(lo, hi), _mm256_unpackhi_epi16(lo, hi)]
        }
    }

    #[inline(always)]
    unsafe fn add_pair(sums: [__m256i; 2], pair: [__m256i; 2], codes: i32) -> [__m256i; 2] {
        // SAFETY: the features.
        unsafe {
            let x = _mm256_set1_epi32(codes);
            [
                _mm256_add_epi32(sums[0], _mm256_madd_epi16(pair[0], x)),
                _mm256_add_epi32(sums[1], _mm256_madd_epi16(pair[1], x)),
            ]
        }
    }
}

/// The largest of `v`'s 8 lanes.
///
/// # Safety
/// AVX, enabled in the function this is inlined into.
#[inline(always)]
unsafe fn max_lane(v: __m256) -> f32 {
    // SAFETY: the features.
    unsafe {
        let m = _mm_max_ps(_mm256_extractf128_ps::<0>(v), _mm256_extractf128_ps::<1>(v));
        let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        _mm_cvtss_f32(_mm_max_ps(m, _mm_shuffle_ps::<1>(m, m)))
    }
}

/// The sum of `v`'s 8 int32 lanes.
///
/// # Safety
/// AVX2, enabled in the function this is inlined into.
#[inline(always)]
unsafe fn sum_lanes(v: __m256i) -> i32 {
    // SAFETY: the features.
    unsafe {
        let s = _mm_add_epi32(
            _mm256_extracti128_si256::<0>(v),
            _mm256_extracti128_si256::<1>(v),
        );
        let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0x4E>(s));
        _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32::<0xB1>(s)))
    }
}
