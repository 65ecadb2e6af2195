//! x86-64 AVX2 + FMA microkernels (256-bit ymm registers, 8 f32 lanes); the GEMMs also
//! over f16 weight panels, widened as loaded with F16C, and over int8 and 4-bit panels
//! with f32 or (F16C) f16 group scales; the int8-activation GEMMs ([`qgemm`], f16 group
//! scales) need F16C too.
//!
//! The GEMMs are the shared x86 bodies ([`super::x86_gemm`]) with a row of a block held in
//! two ymm registers. Besides the target's `6 x 16` block, the `12 x 32` block of the
//! AVX-512 targets has an AVX2 version too (48 accumulators do not fit in 16 ymm
//! registers, so it spills; it serves code compiled for AVX-512 on an AVX2 CPU, and tests
//! the two-panel body on CPUs without AVX-512). The int8-activation GEMMs are in [`qgemm`];
//! the 4-bit decode GEMVs, over activations rounded to 16 bits, in [`gemv_a16`].

pub(super) mod attention;
mod gemv_a16;
mod qgemm;

use super::x86_gemm::{gemm_entry, PanelElement, Row16};
use super::{Implementation, Microkernel, MicrokernelFn, U4Pair};
use half::f16;
use std::arch::x86_64::{
    __m128i, __m256, _mm256_add_ps, _mm256_cvtepi32_ps, _mm256_cvtepi8_epi32, _mm256_cvtph_ps,
    _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_mul_ps, _mm256_set1_ps, _mm256_setzero_ps,
    _mm256_storeu_ps, _mm_loadu_si128, _mm_srli_si128,
};

/// The features every kernel here needs.
const FEATURES: &[&str] = &["avx2", "fma"];

/// The features of the kernels widening f16 (weights, scales, or keys and values), which
/// include every int8-activation GEMM.
const F16_FEATURES: &[&str] = &["avx2", "fma", "f16c"];

/// One implementation row of this ISA (`f16`: it widens f16 elements).
const fn row(kernel: Microkernel, f16: bool, func: MicrokernelFn) -> Implementation {
    let (isa, features) = if f16 {
        ("avx2+fma+f16c", F16_FEATURES)
    } else {
        ("avx2+fma", FEATURES)
    };
    Implementation {
        kernel,
        isa,
        features,
        func,
    }
}

/// The AVX2 + FMA implementations.
pub(super) const IMPLEMENTATIONS: &[Implementation] = &[
    row(
        Microkernel::Sgemm6x16,
        false,
        MicrokernelFn::Gemm(sgemm_6x16),
    ),
    row(
        Microkernel::Sgemv1x64,
        false,
        MicrokernelFn::Gemm(sgemv_1x64),
    ),
    row(
        Microkernel::Sgemm6x16F16,
        true,
        MicrokernelFn::GemmF16(sgemm_6x16_f16),
    ),
    row(
        Microkernel::Sgemv1x64F16,
        true,
        MicrokernelFn::GemmF16(sgemv_1x64_f16),
    ),
    row(
        Microkernel::Sgemm12x32,
        false,
        MicrokernelFn::Gemm(sgemm_12x32),
    ),
    row(
        Microkernel::Sgemm12x32F16,
        true,
        MicrokernelFn::GemmF16(sgemm_12x32_f16),
    ),
    row(
        Microkernel::Sgemm6x16Q8,
        false,
        MicrokernelFn::GemmQ8(sgemm_6x16_q8),
    ),
    row(
        Microkernel::Sgemv1x64Q8,
        false,
        MicrokernelFn::GemmQ8(sgemv_1x64_q8),
    ),
    row(
        Microkernel::Sgemm12x32Q8,
        false,
        MicrokernelFn::GemmQ8(sgemm_12x32_q8),
    ),
    row(
        Microkernel::Sgemm6x16Q4,
        false,
        MicrokernelFn::GemmQ4(sgemm_6x16_q4),
    ),
    row(
        Microkernel::Sgemv8x256Q4,
        false,
        MicrokernelFn::GemmQ4(gemv_a16::sgemv_8x256_q4),
    ),
    row(
        Microkernel::Sgemm12x32Q4,
        false,
        MicrokernelFn::GemmQ4(sgemm_12x32_q4),
    ),
    row(
        Microkernel::Sgemm6x16Q4F16,
        true,
        MicrokernelFn::GemmQ4F16(sgemm_6x16_q4f16),
    ),
    row(
        Microkernel::Sgemv8x256Q4F16,
        true,
        MicrokernelFn::GemmQ4F16(gemv_a16::sgemv_8x256_q4f16),
    ),
    row(
        Microkernel::Sgemm12x32Q4F16,
        true,
        MicrokernelFn::GemmQ4F16(sgemm_12x32_q4f16),
    ),
    row(
        Microkernel::AttentionF32,
        false,
        MicrokernelFn::Attention(attention::attention_f32),
    ),
    row(
        Microkernel::Qgemm4x16W8,
        true,
        MicrokernelFn::QGemmW8(qgemm::qgemm_4x16_w8),
    ),
    row(
        Microkernel::Qgemm4x16W4,
        true,
        MicrokernelFn::QGemmW4(qgemm::qgemm_4x16_w4),
    ),
    row(
        Microkernel::Qgemv1x64W8,
        true,
        MicrokernelFn::QGemmW8(qgemm::qgemv_1x64_w8),
    ),
    row(
        Microkernel::Qgemv1x64W4,
        true,
        MicrokernelFn::QGemmW4(qgemm::qgemv_1x64_w4),
    ),
    row(
        Microkernel::AttentionF16Kv,
        true,
        MicrokernelFn::AttentionF16Kv(attention::attention_f16kv),
    ),
    row(
        Microkernel::AttentionQ8Kv,
        false,
        MicrokernelFn::AttentionQ8Kv(attention::attention_q8kv),
    ),
];

/// One row of a block: 16 lanes in two ymm registers.
type Ymm2 = [__m256; 2];

impl Row16 for Ymm2 {
    #[inline(always)]
    unsafe fn zero() -> Self {
        // SAFETY: AVX (caller's contract).
        unsafe { [_mm256_setzero_ps(); 2] }
    }

    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: 16 readable floats (caller's contract).
        unsafe { [_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8))] }
    }

    #[inline(always)]
    unsafe fn from_i8(bytes: __m128i) -> Self {
        // SAFETY: AVX2 (caller's contract).
        unsafe {
            [
                _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes)),
                _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128::<8>(bytes))),
            ]
        }
    }

    #[inline(always)]
    unsafe fn fma(self, a: f32, b: Self) -> Self {
        // SAFETY: FMA (caller's contract).
        unsafe {
            let a = _mm256_set1_ps(a);
            [
                _mm256_fmadd_ps(a, b[0], self[0]),
                _mm256_fmadd_ps(a, b[1], self[1]),
            ]
        }
    }

    #[inline(always)]
    unsafe fn fma_lanes(self, a: Self, b: Self) -> Self {
        // SAFETY: FMA (caller's contract).
        unsafe {
            [
                _mm256_fmadd_ps(a[0], b[0], self[0]),
                _mm256_fmadd_ps(a[1], b[1], self[1]),
            ]
        }
    }

    #[inline(always)]
    unsafe fn add(self, other: Self) -> Self {
        // SAFETY: AVX (caller's contract).
        unsafe {
            [
                _mm256_add_ps(self[0], other[0]),
                _mm256_add_ps(self[1], other[1]),
            ]
        }
    }

    #[inline(always)]
    unsafe fn mul(self, other: Self) -> Self {
        // SAFETY: AVX (caller's contract).
        unsafe {
            [
                _mm256_mul_ps(self[0], other[0]),
                _mm256_mul_ps(self[1], other[1]),
            ]
        }
    }

    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: 16 writable floats (caller's contract).
        unsafe {
            _mm256_storeu_ps(p, self[0]);
            _mm256_storeu_ps(p.add(8), self[1]);
        }
    }
}

impl PanelElement<Ymm2> for f32 {
    #[inline(always)]
    unsafe fn load16(p: *const f32) -> Ymm2 {
        // SAFETY: forwarded contract.
        unsafe { Ymm2::load(p) }
    }
}

impl PanelElement<Ymm2> for f16 {
    #[inline(always)]
    unsafe fn load16(p: *const f16) -> Ymm2 {
        // SAFETY: forwarded contract: 32 readable bytes, F16C available.
        unsafe {
            [
                _mm256_cvtph_ps(_mm_loadu_si128(p.cast())),
                _mm256_cvtph_ps(_mm_loadu_si128(p.add(8).cast())),
            ]
        }
    }
}

gemm_entry!(
    /// [`Microkernel::Sgemm6x16Q8`] over int8 weights (widened and scaled as loaded).
    sgemm_6x16_q8, Ymm2, i8 scaled by f32, 6 x 1, "avx2,fma"
);
gemm_entry!(
    /// [`Microkernel::Sgemv1x64Q8`] over int8 weights (partial sums scaled per group).
    sgemv_1x64_q8, Ymm2, i8 scaled by f32, 1 x 4, "avx2,fma"
);
gemm_entry!(
    /// [`Microkernel::Sgemm12x32Q8`] over int8 weights, on AVX2 (spills).
    sgemm_12x32_q8, Ymm2, i8 scaled by f32, 12 x 2, "avx2,fma"
);
gemm_entry!(
    /// [`Microkernel::Sgemm6x16Q4`] over 4-bit weights (unpacked two k per load).
    sgemm_6x16_q4, Ymm2, U4Pair scaled by f32, 6 x 1, "avx2,fma"
);
gemm_entry!(
    /// [`Microkernel::Sgemm12x32Q4`] over 4-bit weights, on AVX2 (spills).
    sgemm_12x32_q4, Ymm2, U4Pair scaled by f32, 12 x 2, "avx2,fma"
);
gemm_entry!(
    /// [`Microkernel::Sgemm6x16Q4F16`]: 4-bit weights, f16 scales widened with F16C.
    sgemm_6x16_q4f16, Ymm2, U4Pair scaled by f16, 6 x 1, "avx2,fma,f16c"
);
gemm_entry!(
    /// [`Microkernel::Sgemm12x32Q4F16`]: 4-bit weights, f16 scales, on AVX2 (spills).
    sgemm_12x32_q4f16, Ymm2, U4Pair scaled by f16, 12 x 2, "avx2,fma,f16c"
);
gemm_entry!(
    /// [`Microkernel::Sgemm6x16`] over f32 weights (12 ymm accumulators).
    sgemm_6x16, Ymm2, f32, 6 x 1, "avx2,fma"
);
gemm_entry!(
    /// [`Microkernel::Sgemm6x16F16`] over f16 weights.
    sgemm_6x16_f16, Ymm2, f16, 6 x 1, "avx2,fma,f16c"
);
gemm_entry!(
    /// [`Microkernel::Sgemv1x64`] over f32 weights.
    sgemv_1x64, Ymm2, f32, 1 x 4, "avx2,fma"
);
gemm_entry!(
    /// [`Microkernel::Sgemv1x64F16`] over f16 weights.
    sgemv_1x64_f16, Ymm2, f16, 1 x 4, "avx2,fma,f16c"
);
gemm_entry!(
    /// [`Microkernel::Sgemm12x32`] over f32 weights, on AVX2 (spills; see the module docs).
    sgemm_12x32, Ymm2, f32, 12 x 2, "avx2,fma"
);
gemm_entry!(
    /// [`Microkernel::Sgemm12x32F16`] over f16 weights, on AVX2.
    sgemm_12x32_f16, Ymm2, f16, 12 x 2, "avx2,fma,f16c"
);
