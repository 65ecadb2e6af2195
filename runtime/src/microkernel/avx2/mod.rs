//! x86-64 AVX2 + FMA microkernels (256-bit ymm registers, 8 f32 lanes); the GEMMs also
//! over f16 weight panels, widened as loaded with F16C.
//!
//! The GEMM bodies are generic over the weight element ([`PanelElement`]) and always
//! inlined into entry points that enable the features their element needs.
//!
//! Each kernel keeps its whole block of C in ymm accumulators, starting from zero; at the
//! end it adds C (if accumulating) and stores. Full blocks store straight to C; edge blocks
//! (fewer rows or columns) spill the registers to a stack tile and copy the valid part, so
//! nothing outside `rows x cols` of C is read or written.

mod attention;

use super::{Implementation, Microkernel, MicrokernelFn};
use half::f16;
use std::arch::x86_64::{
    __m256, _mm256_add_ps, _mm256_broadcast_ss, _mm256_cvtph_ps, _mm256_fmadd_ps, _mm256_loadu_ps,
    _mm256_setzero_ps, _mm256_storeu_ps, _mm_loadu_si128,
};

/// The features every kernel here needs.
const FEATURES: &[&str] = &["avx2", "fma"];

/// The features of the kernels over f16 weights.
const F16_FEATURES: &[&str] = &["avx2", "fma", "f16c"];

/// The AVX2 + FMA implementations.
pub(super) const IMPLEMENTATIONS: &[Implementation] = &[
    Implementation {
        kernel: Microkernel::Sgemm6x16,
        isa: "avx2+fma",
        features: FEATURES,
        func: MicrokernelFn::Gemm(sgemm_6x16),
    },
    Implementation {
        kernel: Microkernel::Sgemv1x64,
        isa: "avx2+fma",
        features: FEATURES,
        func: MicrokernelFn::Gemm(sgemv_1x64),
    },
    Implementation {
        kernel: Microkernel::Sgemm6x16F16,
        isa: "avx2+fma+f16c",
        features: F16_FEATURES,
        func: MicrokernelFn::GemmF16(sgemm_6x16_f16),
    },
    Implementation {
        kernel: Microkernel::Sgemv1x64F16,
        isa: "avx2+fma+f16c",
        features: F16_FEATURES,
        func: MicrokernelFn::GemmF16(sgemv_1x64_f16),
    },
    Implementation {
        kernel: Microkernel::AttentionF32,
        isa: "avx2+fma",
        features: FEATURES,
        func: MicrokernelFn::Attention(attention::attention_f32),
    },
];

/// Width of a packed weight panel (and of a GEMM block here): two ymm registers.
const HP: usize = 16;

/// A weight element the kernels widen to f32 lanes as they load it.
trait PanelElement: Copy {
    /// The 8 elements from `p` as f32 lanes.
    ///
    /// # Safety
    /// 8 elements are readable at `p`; the CPU has the element's features (AVX for f32,
    /// F16C for f16), enabled in the function this is inlined into.
    unsafe fn load8(p: *const Self) -> __m256;
}

impl PanelElement for f32 {
    #[inline(always)]
    unsafe fn load8(p: *const f32) -> __m256 {
        // SAFETY: forwarded contract.
        unsafe { _mm256_loadu_ps(p) }
    }
}

impl PanelElement for f16 {
    #[inline(always)]
    unsafe fn load8(p: *const f16) -> __m256 {
        // SAFETY: forwarded contract: 16 readable bytes, F16C available.
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.cast())) }
    }
}

/// Defines `extern "C"` entry point `$name`, a [`super::GemmFn`] over weights `$w`: the
/// always-inlined generic body `$body::<$w>` compiled with `$features` enabled.
macro_rules! gemm_entry {
    ($(#[$doc:meta])* $name:ident, $w:ty, $features:literal, $body:ident) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As [`super::GemmFn`] over its weight type, and the CPU has the enabled features.
        #[allow(clippy::too_many_arguments)]
        #[target_feature(enable = $features)]
        unsafe extern "C" fn $name(
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
            unsafe { $body::<$w>(a, b, c, kc, lda, ldc, rows, cols, accumulate) }
        }
    };
}

gemm_entry!(
    /// [`Microkernel::Sgemm6x16`]: [`gemm_6x16`] over f32 weights.
    sgemm_6x16, f32, "avx2,fma", gemm_6x16
);
gemm_entry!(
    /// [`Microkernel::Sgemm6x16F16`]: [`gemm_6x16`] over f16 weights.
    sgemm_6x16_f16, f16, "avx2,fma,f16c", gemm_6x16
);
gemm_entry!(
    /// [`Microkernel::Sgemv1x64`]: [`gemv_1x64`] over f32 weights.
    sgemv_1x64, f32, "avx2,fma", gemv_1x64
);
gemm_entry!(
    /// [`Microkernel::Sgemv1x64F16`]: [`gemv_1x64`] over f16 weights.
    sgemv_1x64_f16, f16, "avx2,fma,f16c", gemv_1x64
);

/// 6 x 16 of C in 12 ymm accumulators; per k, one broadcast from each of the 6 rows of `a`
/// (read in place at stride `lda`) and 2 loads of `b` feed 12 FMAs. Rows past `rows`
/// re-read the last valid row (never stored).
///
/// # Safety
/// As [`super::GemmFn`] with `b` of `W`; inlined into a function enabling AVX2, FMA and
/// `W`'s features, which the CPU has.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn gemm_6x16<W: PanelElement>(
    a: *const f32,
    b: *const W,
    c: *mut f32,
    kc: i64,
    lda: i64,
    ldc: i64,
    rows: i64,
    cols: i64,
    accumulate: i64,
) {
    const EP: usize = 6;
    if rows <= 0 || cols <= 0 {
        return;
    }
    let last = rows.min(EP as i64) as usize - 1;
    // SAFETY: row `min(i, last) < rows` of `a` is lent (`kc` floats from `a + row * lda`).
    let a_rows: [*const f32; EP] =
        std::array::from_fn(|i| unsafe { a.offset(i.min(last) as isize * lda as isize) });
    // SAFETY (rest): the caller's CPU has the features (see above).
    let mut acc = [[unsafe { _mm256_setzero_ps() }; 2]; EP];
    for k in 0..kc.max(0) as usize {
        // SAFETY: `k < kc`: the caller lends `kc * HP` elements at `b`.
        let (b0, b1) = unsafe {
            let b_k = b.add(k * HP);
            (W::load8(b_k), W::load8(b_k.add(8)))
        };
        for (acc_i, &a_i) in acc.iter_mut().zip(&a_rows) {
            // SAFETY: `k < kc`: element k of a lent row.
            unsafe {
                let a_ki = _mm256_broadcast_ss(&*a_i.add(k));
                acc_i[0] = _mm256_fmadd_ps(a_ki, b0, acc_i[0]);
                acc_i[1] = _mm256_fmadd_ps(a_ki, b1, acc_i[1]);
            }
        }
    }
    // SAFETY: forwarded contract for `c`.
    unsafe { store_block(&acc, c, ldc, rows, cols, accumulate) }
}

/// Panels a [`Microkernel::Sgemv1x64`] call streams at once.
const GEMV_PANELS: usize = 4;

/// The decode GEMV block: one row times up to 4 consecutive panels, all streamed in the
/// same pass over `k` (4 concurrent memory streams and 8 independent FMA chains keep more
/// cache-line fills in flight than one panel at a time). An edge block (`cols < 64`)
/// reads only the panels holding its columns. `a` is one row (`lda` is not read).
///
/// # Safety
/// As [`super::GemmFn`] with `b` of `W`; inlined into a function enabling AVX2, FMA and
/// `W`'s features, which the CPU has.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn gemv_1x64<W: PanelElement>(
    a: *const f32,
    b: *const W,
    c: *mut f32,
    kc: i64,
    _lda: i64,
    ldc: i64,
    rows: i64,
    cols: i64,
    accumulate: i64,
) {
    if rows <= 0 || cols <= 0 {
        return;
    }
    let kc = kc.max(0) as usize;
    let out = (c, ldc, cols, accumulate);
    // SAFETY: forwarded contract; `panels` is the number of panels holding the columns.
    unsafe {
        match (cols as usize).div_ceil(HP).min(GEMV_PANELS) {
            4 => gemv_panels::<W, 4>(a, b, kc, out),
            3 => gemv_panels::<W, 3>(a, b, kc, out),
            2 => gemv_panels::<W, 2>(a, b, kc, out),
            _ => gemv_panels::<W, 1>(a, b, kc, out),
        }
    }
}

/// One row times `NP` consecutive panels (`b + q * kc * HP` for `q < NP`), written to
/// `out = (c, ldc, cols, accumulate)` as [`super::GemmFn`] does.
///
/// # Safety
/// `a` holds `kc` floats, `b` `NP * kc * HP` elements; `c` as in [`store_block`] for the
/// `cols` columns (at least one in panel `NP - 1`); inlined as [`gemv_1x64`].
#[inline(always)]
unsafe fn gemv_panels<W: PanelElement, const NP: usize>(
    a: *const f32,
    b: *const W,
    kc: usize,
    (c, ldc, cols, accumulate): (*mut f32, i64, i64, i64),
) {
    // SAFETY (whole body): `k < kc`: `a` holds `kc` floats, each panel `kc * HP`
    // elements; the CPU has the features.
    let mut acc = [[unsafe { _mm256_setzero_ps() }; 2]; NP];
    for k in 0..kc {
        unsafe {
            let a_k = _mm256_broadcast_ss(&*a.add(k));
            for (q, acc_q) in acc.iter_mut().enumerate() {
                let b_qk = b.add((q * kc + k) * HP);
                acc_q[0] = _mm256_fmadd_ps(a_k, W::load8(b_qk), acc_q[0]);
                acc_q[1] = _mm256_fmadd_ps(a_k, W::load8(b_qk.add(8)), acc_q[1]);
            }
        }
    }
    for (q, acc_q) in acc.iter().enumerate() {
        let first = (q * HP) as i64;
        // SAFETY: columns `first..cols` of row 0 (clamped to 16) are lent.
        unsafe { store_block(&[*acc_q], c.add(q * HP), ldc, 1, cols - first, accumulate) }
    }
}

/// Writes the `rows x cols` part of an `EP x 16` block held in registers to `c`:
/// `c = (accumulate ? c : 0) + block`. A full block goes straight to `c`; an edge block
/// through a stack tile, touching only its valid part of `c`.
///
/// # Safety
/// `c[i*ldc + j]` is readable and writable for `i < rows, j < cols` (clamped to the block);
/// the CPU has AVX2 and FMA.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn store_block<const EP: usize>(
    block: &[[__m256; 2]; EP],
    c: *mut f32,
    ldc: i64,
    rows: i64,
    cols: i64,
    accumulate: i64,
) {
    let ldc = ldc as isize;
    if rows == EP as i64 && cols == HP as i64 {
        for (i, block_i) in block.iter().enumerate() {
            for (h, &sum) in block_i.iter().enumerate() {
                // SAFETY: a full block: all 16 columns of rows `i < EP` are lent.
                unsafe {
                    let out = c.offset(i as isize * ldc).add(8 * h);
                    let v = if accumulate != 0 {
                        _mm256_add_ps(_mm256_loadu_ps(out), sum)
                    } else {
                        sum
                    };
                    _mm256_storeu_ps(out, v);
                }
            }
        }
        return;
    }
    let rows = rows.clamp(0, EP as i64) as usize;
    let cols = cols.clamp(0, HP as i64) as usize;
    let mut tile = [[0.0f32; HP]; EP];
    for (row, block_i) in tile.iter_mut().zip(block) {
        // SAFETY: each tile row holds 16 floats, two unaligned 8-lane stores.
        unsafe {
            _mm256_storeu_ps(row.as_mut_ptr(), block_i[0]);
            _mm256_storeu_ps(row.as_mut_ptr().add(8), block_i[1]);
        }
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
