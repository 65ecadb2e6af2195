//! x86-64 AVX-512F microkernels (512-bit zmm registers, 16 f32 lanes): the `12 x 32`
//! block GEMM over two f32, f16, int8 or 4-bit weight panels (24 zmm accumulators; per k two
//! panel loads and 12 broadcasts feed 24 FMAs, so the FMA units, not the loads, bound it),
//! the shared x86 body ([`super::x86_gemm`]) with a row of a block in one zmm register;
//! and the 4-bit decode GEMVs, whose nibble unpacking costs half the instructions of
//! AVX2's.
//!
//! Only [`Zmm`]'s `Row16`/`PanelElement` methods are specific to this file; the body is
//! the one the AVX2 kernels run, and its instances are tested on AVX2 CPUs through the
//! AVX2 implementations of the same kernels. These entry points themselves run (and are
//! tested) only on CPUs with AVX-512F.

mod attention;

use super::x86_gemm::{gemm_entry, PanelElement, Row16};
use super::{Implementation, Microkernel, MicrokernelFn, U4Pair};
use half::f16;
use std::arch::x86_64::{
    __m128i, __m512, _mm256_loadu_si256, _mm512_add_ps, _mm512_cvtepi32_ps, _mm512_cvtepi8_epi32,
    _mm512_cvtepu8_epi32, _mm512_cvtph_ps, _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_mul_ps,
    _mm512_permutexvar_ps, _mm512_set1_ps, _mm512_setr_ps, _mm512_setzero_ps, _mm512_srli_epi32,
    _mm512_storeu_ps,
};

/// The features every kernel here needs (f16 widening included: `vcvtph2ps` on zmm is
/// AVX-512F).
const FEATURES: &[&str] = &["avx512f"];

/// One implementation row of this ISA.
const fn row(kernel: Microkernel, func: MicrokernelFn) -> Implementation {
    Implementation {
        kernel,
        isa: "avx512f",
        features: FEATURES,
        func,
    }
}

/// The AVX-512F implementations.
pub(super) const IMPLEMENTATIONS: &[Implementation] = &[
    row(Microkernel::Sgemm12x32, MicrokernelFn::Gemm(sgemm_12x32)),
    row(
        Microkernel::Sgemm12x32Q8,
        MicrokernelFn::GemmQ8(sgemm_12x32_q8),
    ),
    row(
        Microkernel::Sgemm12x32F16,
        MicrokernelFn::GemmF16(sgemm_12x32_f16),
    ),
    row(
        Microkernel::Sgemm12x32Q4,
        MicrokernelFn::GemmQ4(sgemm_12x32_q4),
    ),
    row(
        Microkernel::Sgemm12x32Q4F16,
        MicrokernelFn::GemmQ4F16(sgemm_12x32_q4f16),
    ),
    row(
        Microkernel::Sgemv8x256Q4,
        MicrokernelFn::GemmQ4(sgemv_8x256_q4),
    ),
    row(
        Microkernel::Sgemv8x256Q4F16,
        MicrokernelFn::GemmQ4F16(sgemv_8x256_q4f16),
    ),
    row(
        Microkernel::AttentionF32,
        MicrokernelFn::Attention(attention::attention_f32),
    ),
    row(
        Microkernel::AttentionF16Kv,
        MicrokernelFn::AttentionF16Kv(attention::attention_f16kv),
    ),
    row(
        Microkernel::AttentionQ8Kv,
        MicrokernelFn::AttentionQ8Kv(attention::attention_q8kv),
    ),
];

/// One row of a block: 16 lanes in one zmm register.
type Zmm = __m512;

impl Row16 for Zmm {
    #[inline(always)]
    unsafe fn zero() -> Self {
        // SAFETY: AVX-512F (caller's contract).
        unsafe { _mm512_setzero_ps() }
    }

    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: 16 readable floats (caller's contract).
        unsafe { _mm512_loadu_ps(p) }
    }

    #[inline(always)]
    unsafe fn from_i8(bytes: __m128i) -> Self {
        // SAFETY: AVX-512F (caller's contract).
        unsafe { _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes)) }
    }

    /// Looks the nibbles up in a table of their values (`vpermps` reads the low 4 bits
    /// of each index): 4 instructions for 32 weights, where widening bytes takes 9.
    #[inline(always)]
    unsafe fn from_u4_pairs(bytes: __m128i) -> (Self, Self) {
        // SAFETY: AVX-512F (caller's contract).
        unsafe {
            let values = _mm512_setr_ps(
                -8.0, -7.0, -6.0, -5.0, -4.0, -3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0,
                7.0,
            );
            let wide = _mm512_cvtepu8_epi32(bytes);
            (
                _mm512_permutexvar_ps(wide, values),
                _mm512_permutexvar_ps(_mm512_srli_epi32::<4>(wide), values),
            )
        }
    }

    #[inline(always)]
    unsafe fn fma(self, a: f32, b: Self) -> Self {
        // SAFETY: AVX-512F (caller's contract).
        unsafe { _mm512_fmadd_ps(_mm512_set1_ps(a), b, self) }
    }

    #[inline(always)]
    unsafe fn fma_lanes(self, a: Self, b: Self) -> Self {
        // SAFETY: AVX-512F (caller's contract).
        unsafe { _mm512_fmadd_ps(a, b, self) }
    }

    #[inline(always)]
    unsafe fn add(self, other: Self) -> Self {
        // SAFETY: AVX-512F (caller's contract).
        unsafe { _mm512_add_ps(self, other) }
    }

    #[inline(always)]
    unsafe fn mul(self, other: Self) -> Self {
        // SAFETY: AVX-512F (caller's contract).
        unsafe { _mm512_mul_ps(self, other) }
    }

    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: 16 writable floats (caller's contract).
        unsafe { _mm512_storeu_ps(p, self) }
    }
}

impl PanelElement<Zmm> for f32 {
    #[inline(always)]
    unsafe fn load16(p: *const f32) -> Zmm {
        // SAFETY: forwarded contract.
        unsafe { _mm512_loadu_ps(p) }
    }
}

impl PanelElement<Zmm> for f16 {
    #[inline(always)]
    unsafe fn load16(p: *const f16) -> Zmm {
        // SAFETY: forwarded contract: 32 readable bytes, AVX-512F available.
        unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(p.cast())) }
    }
}

gemm_entry!(
    /// [`Microkernel::Sgemm12x32Q8`] over int8 weights (widened and scaled as loaded).
    sgemm_12x32_q8, Zmm, i8 scaled by f32, 12 x 2, "avx512f"
);
gemm_entry!(
    /// [`Microkernel::Sgemm12x32Q4`] over 4-bit weights (unpacked two k per load).
    sgemm_12x32_q4, Zmm, U4Pair scaled by f32, 12 x 2, "avx512f"
);
gemm_entry!(
    /// [`Microkernel::Sgemm12x32Q4F16`]: 4-bit weights, f16 scales.
    sgemm_12x32_q4f16, Zmm, U4Pair scaled by f16, 12 x 2, "avx512f"
);
gemm_entry!(
    /// [`Microkernel::Sgemv8x256Q4`] over 4-bit weights (partial sums scaled per group), one
    /// row and 64 columns at a time.
    sgemv_8x256_q4, Zmm, U4Pair scaled by f32, each 1 x 4 part, "avx512f"
);
gemm_entry!(
    /// [`Microkernel::Sgemv8x256Q4F16`]: 4-bit weights, f16 scales, one row and 64 columns
    /// at a time.
    sgemv_8x256_q4f16, Zmm, U4Pair scaled by f16, each 1 x 4 part, "avx512f"
);
gemm_entry!(
    /// [`Microkernel::Sgemm12x32`] over f32 weights (24 zmm accumulators).
    sgemm_12x32, Zmm, f32, 12 x 2, "avx512f"
);
gemm_entry!(
    /// [`Microkernel::Sgemm12x32F16`] over f16 weights.
    sgemm_12x32_f16, Zmm, f16, 12 x 2, "avx512f"
);
