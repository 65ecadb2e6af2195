//! x86-64 AVX-512 VNNI side of the 4-bit decode GEMVs over activations rounded to 16 bits
//! ([`super::super::x86_gemv_a16`]): a panel's 16 columns in one zmm register, a
//! [`super::super::U4Pair`]
//! byte widened to a dword lane becomes its int16 pair with one shift and one
//! `vpternlogd`, and one `vpdpwssd` multiplies it by the broadcast pair of codes and adds
//! to the lane: two shuffle-unit instructions per 32 weights, where the f32 GEMV spends
//! four (widen, shift, two table lookups).

use super::super::x86_gemm::HP;
use super::super::x86_gemv_a16::{gemv_a16_entry, A16Isa, GroupSums, PairIsa, CODE_MAX};
use super::super::QUANT_GROUP;
use super::lane_mask;
use half::f16;
use std::arch::x86_64::{
    __m512, __m512i, _mm256_storeu_si256, _mm512_abs_ps, _mm512_add_epi16, _mm512_add_epi32,
    _mm512_and_si512, _mm512_castsi256_si512, _mm512_cmp_ps_mask, _mm512_cvtepi16_epi8,
    _mm512_cvtepi32_epi16, _mm512_cvtepi32_ps, _mm512_cvtepu8_epi32, _mm512_cvtps_epi32,
    _mm512_dpbusd_epi32, _mm512_dpwssd_epi32, _mm512_inserti64x4, _mm512_loadu_si512,
    _mm512_maskz_loadu_epi8, _mm512_maskz_loadu_ps, _mm512_max_ps, _mm512_mul_ps,
    _mm512_permutexvar_epi8, _mm512_reduce_add_epi32, _mm512_reduce_max_ps, _mm512_set1_epi16,
    _mm512_set1_epi32, _mm512_set1_epi8, _mm512_set1_ps, _mm512_setzero_si512, _mm512_slli_epi16,
    _mm512_slli_epi32, _mm512_srai_epi16, _mm512_srli_epi16, _mm512_storeu_si512, _mm512_sub_epi16,
    _mm512_sub_epi32, _mm512_ternarylogic_epi32, _mm_loadu_si128, _CMP_UNORD_Q,
};

gemv_a16_entry!(
    /// [`Microkernel::Sgemv8x256Q4`](super::super::Microkernel::Sgemv8x256Q4): 4-bit
    /// weights, f32 scales.
    sgemv_8x256_q4, Vnni, f32, "avx512f,avx512bw,avx512vnni"
);
gemv_a16_entry!(
    /// [`Microkernel::Sgemv8x256Q4F16`](super::super::Microkernel::Sgemv8x256Q4F16): 4-bit
    /// weights, f16 scales.
    sgemv_8x256_q4f16, Vnni, f16, "avx512f,avx512bw,avx512vnni"
);

gemv_a16_entry!(
    /// [`Microkernel::Sgemv8x256Q4`](super::super::Microkernel::Sgemv8x256Q4) on VBMI: 4-bit
    /// weights, f32 scales.
    sgemv_8x256_q4_vbmi, Vbmi, f32, "avx512f,avx512bw,avx512vnni,avx512vbmi"
);
gemv_a16_entry!(
    /// [`Microkernel::Sgemv8x256Q4F16`](super::super::Microkernel::Sgemv8x256Q4F16) on VBMI:
    /// 4-bit weights, f16 scales.
    sgemv_8x256_q4f16_vbmi, Vbmi, f16, "avx512f,avx512bw,avx512vnni,avx512vbmi"
);

/// The AVX-512 VNNI side of the GEMV.
struct Vnni;

impl A16Isa for Vnni {
    type Row = __m512;
    type Sums = __m512i;
    type Codes = [i16; QUANT_GROUP];

    #[inline(always)]
    unsafe fn round_group(a: *const f32, n: usize, codes: &mut [i16; QUANT_GROUP]) -> (f32, i32) {
        let (m0, m1) = (lane_mask(n), lane_mask(n.saturating_sub(16)));
        // SAFETY: the features; the masks read only the `n` lent floats, and the
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
    unsafe fn products(sums: __m512i, bias: i32) -> __m512 {
        // SAFETY: the features.
        unsafe { _mm512_cvtepi32_ps(_mm512_sub_epi32(sums, _mm512_set1_epi32(bias))) }
    }
}

impl PairIsa for Vnni {
    /// A column's pair in each int32 lane: `w(k) + 8` in the low word, `w(k + 1) + 8` in
    /// the high.
    type Pair = __m512i;

    #[inline(always)]
    unsafe fn zero_sums() -> __m512i {
        // SAFETY: the features.
        unsafe { _mm512_setzero_si512() }
    }

    #[inline(always)]
    unsafe fn widen_pair(pair: *const u8) -> __m512i {
        // SAFETY: the pair's 16 bytes are readable; the features.
        unsafe {
            let bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(pair.cast()));
            // 0xA8: (a | b) & c, the low nibble in the low word, the high in the high.
            let shifted = _mm512_slli_epi32::<12>(bytes);
            let nibbles = _mm512_set1_epi32(0x000F_000F);
            _mm512_ternarylogic_epi32::<0xA8>(bytes, shifted, nibbles)
        }
    }

    #[inline(always)]
    unsafe fn add_pair(sums: __m512i, pair: __m512i, codes: i32) -> __m512i {
        // SAFETY: the features.
        unsafe { _mm512_dpwssd_epi32(sums, pair, _mm512_set1_epi32(codes)) }
    }
}

/// The AVX-512 VBMI side of the GEMV: a step of 4 pairs of a panel (64 bytes, depths
/// `8s..8s + 8` of 16 columns) at a time. One `vpermb` gathers each column's 4 bytes into
/// its dword lane; the low nibbles (even depths) and the high ones (odd depths) are the
/// unsigned operands of `vpdpbusd`, and each code is split into two signed bytes
/// (`code = 256 * hi + lo`, see [`CODE_MAX`]) that are multiplied separately: 4
/// `vpdpbusd` and 4 other instructions per 128 weights, where the pair-at-a-time sides
/// spend 16.
struct Vbmi;

/// Byte `4j + r` of a transposed step is byte `16r + j` of the panel's step: pair `r` of
/// column `j`, so a dword lane holds one column's 4 pairs.
const TRANSPOSE: [u8; 64] = {
    let mut index = [0u8; 64];
    let mut b = 0;
    while b < 64 {
        index[b] = (b % 4 * 16 + b / 4) as u8;
        b += 1;
    }
    index
};

/// Byte `16s + 4t + r` of a group's split codes, from the high bytes (0..32) and then the
/// low bytes (32..64) of its 32 codes: for step `s`, the code of depth `8s + 2r + t / 2`
/// (`t / 2`: the even or odd depths of the 4 pairs), its high byte for even `t`, its low
/// byte for odd `t`.
const SPLIT: [u8; 64] = {
    let mut index = [0u8; 64];
    let mut b = 0;
    while b < 64 {
        let (s, t, r) = (b / 16, b / 4 % 4, b % 4);
        index[b] = ((t % 2) * 32 + 8 * s + 2 * r + t / 2) as u8;
        b += 1;
    }
    index
};

impl A16Isa for Vbmi {
    type Row = __m512;
    /// The sums of the codes' high bytes, then of their low bytes.
    type Sums = [__m512i; 2];
    /// Per step `s`, dwords `4s..4s + 4` of [`SPLIT`]'s bytes.
    type Codes = [i32; QUANT_GROUP / 2];

    #[inline(always)]
    unsafe fn round_group(a: *const f32, n: usize, codes: &mut [i32; 16]) -> (f32, i32) {
        let mut words = [0i16; QUANT_GROUP];
        // SAFETY: the features (VNNI's among them); `Vnni::round_group` gets this contract
        // (`n` lent floats at `a`); the loads and stores touch the 32 words, 16 dwords.
        unsafe {
            let rounded = Vnni::round_group(a, n, &mut words);
            let c = _mm512_loadu_si512(words.as_ptr().cast());
            let hi = _mm512_srai_epi16::<8>(_mm512_add_epi16(c, _mm512_set1_epi16(128)));
            let lo = _mm512_sub_epi16(c, _mm512_slli_epi16::<8>(hi));
            let bytes = _mm512_inserti64x4::<1>(
                _mm512_castsi256_si512(_mm512_cvtepi16_epi8(hi)),
                _mm512_cvtepi16_epi8(lo),
            );
            let split = _mm512_loadu_si512(SPLIT.as_ptr().cast());
            let arranged = _mm512_permutexvar_epi8(split, bytes);
            _mm512_storeu_si512(codes.as_mut_ptr().cast(), arranged);
            rounded
        }
    }

    #[inline(always)]
    unsafe fn products(sums: [__m512i; 2], bias: i32) -> __m512 {
        // SAFETY: the features.
        unsafe {
            let total = _mm512_add_epi32(_mm512_slli_epi32::<8>(sums[0]), sums[1]);
            _mm512_cvtepi32_ps(_mm512_sub_epi32(total, _mm512_set1_epi32(bias)))
        }
    }
}

impl GroupSums for Vbmi {
    #[inline(always)]
    unsafe fn group_sums<const R: usize>(
        panel: *const u8,
        pair0: usize,
        pairs: usize,
        codes: [&[i32; 16]; R],
    ) -> [[__m512i; 2]; R] {
        // SAFETY: the features; every load reads only pairs below `pair0 + pairs`
        // of the panel (the last step through a byte mask), which are lent.
        unsafe {
            let mut sums = [[_mm512_setzero_si512(); 2]; R];
            let transpose = _mm512_loadu_si512(TRANSPOSE.as_ptr().cast());
            let nibble = _mm512_set1_epi8(0x0F);
            for step in 0..pairs.min(QUANT_GROUP / 2).div_ceil(4) {
                let rows = (pairs - 4 * step).min(4);
                let at = panel.add((pair0 + 4 * step) * HP);
                let bytes = if rows == 4 {
                    _mm512_loadu_si512(at.cast())
                } else {
                    _mm512_maskz_loadu_epi8(u64::MAX >> (64 - 16 * rows), at.cast())
                };
                let w = _mm512_permutexvar_epi8(transpose, bytes);
                let even = _mm512_and_si512(w, nibble);
                let odd = _mm512_and_si512(_mm512_srli_epi16::<4>(w), nibble);
                for (sum, codes) in sums.iter_mut().zip(codes) {
                    let [even_hi, even_lo, odd_hi, odd_lo] =
                        std::array::from_fn(|t| _mm512_set1_epi32(codes[4 * step + t]));
                    sum[0] = _mm512_dpbusd_epi32(sum[0], even, even_hi);
                    sum[1] = _mm512_dpbusd_epi32(sum[1], even, even_lo);
                    sum[0] = _mm512_dpbusd_epi32(sum[0], odd, odd_hi);
                    sum[1] = _mm512_dpbusd_epi32(sum[1], odd, odd_lo);
                }
            }
            sums
        }
    }
}
