//! x86-64 AVX2 + FMA microkernels (256-bit ymm registers, 8 f32 lanes).
//!
//! Each kernel keeps its whole block of C in ymm accumulators, starting from zero; at the
//! end it adds C (if accumulating) and stores. Full blocks store straight to C; edge blocks
//! (fewer rows or columns) spill the registers to a stack tile and copy the valid part, so
//! nothing outside `rows x cols` of C is read or written.

mod attention;

use super::{Implementation, Microkernel, MicrokernelFn};
use std::arch::x86_64::{
    __m256, _mm256_add_ps, _mm256_broadcast_ss, _mm256_fmadd_ps, _mm256_loadu_ps,
    _mm256_setzero_ps, _mm256_storeu_ps,
};

/// The features every kernel here needs.
const FEATURES: &[&str] = &["avx2", "fma"];

/// The AVX2 + FMA implementations.
pub(super) const IMPLEMENTATIONS: &[Implementation] = &[
    Implementation {
        kernel: Microkernel::Sgemm6x16,
        isa: "avx2+fma",
        features: FEATURES,
        func: MicrokernelFn::Gemm(sgemm_6x16),
    },
    Implementation {
        kernel: Microkernel::Sgemm1x16,
        isa: "avx2+fma",
        features: FEATURES,
        func: MicrokernelFn::Gemm(sgemm_1x16),
    },
    Implementation {
        kernel: Microkernel::AttentionF32,
        isa: "avx2+fma",
        features: FEATURES,
        func: MicrokernelFn::Attention(attention::attention_f32),
    },
];

/// Columns of every block here: two ymm registers.
const HP: usize = 16;

/// [`Microkernel::Sgemm6x16`]: 6 x 16 of C in 12 ymm accumulators; per k, one broadcast
/// from each of the 6 rows of `a` (read in place at stride `lda`) and 2 loads of `b` feed
/// 12 FMAs. Rows past `rows` re-read the last valid row (never stored).
///
/// # Safety
/// As [`super::GemmFn`], and the CPU has AVX2 and FMA.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma")]
unsafe extern "C" fn sgemm_6x16(
    a: *const f32,
    b: *const f32,
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
    let mut acc = [[_mm256_setzero_ps(); 2]; EP];
    for k in 0..kc.max(0) as usize {
        // SAFETY: `k < kc`: the caller lends `kc * HP` floats at `b`.
        let (b0, b1) = unsafe {
            let b_k = b.add(k * HP);
            (_mm256_loadu_ps(b_k), _mm256_loadu_ps(b_k.add(8)))
        };
        for (acc_i, &a_i) in acc.iter_mut().zip(&a_rows) {
            // SAFETY: `k < kc`: element k of a lent row.
            let a_ki = unsafe { _mm256_broadcast_ss(&*a_i.add(k)) };
            acc_i[0] = _mm256_fmadd_ps(a_ki, b0, acc_i[0]);
            acc_i[1] = _mm256_fmadd_ps(a_ki, b1, acc_i[1]);
        }
    }
    // SAFETY: forwarded contract for `c`.
    unsafe { store_block(&acc, c, ldc, rows, cols, accumulate) }
}

/// [`Microkernel::Sgemm1x16`], the decode GEMV block: streams `b` once; k is unrolled by 4
/// into 4 independent pairs of accumulators (8 FMA chains in flight), summed at the end.
/// `a` is one row (`lda` is not read).
///
/// # Safety
/// As [`super::GemmFn`], and the CPU has AVX2 and FMA.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma")]
unsafe extern "C" fn sgemm_1x16(
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    kc: i64,
    _lda: i64,
    ldc: i64,
    rows: i64,
    cols: i64,
    accumulate: i64,
) {
    const UNROLL: usize = 4;
    let kc = kc.max(0) as usize;
    let mut acc = [[_mm256_setzero_ps(); 2]; UNROLL];
    let mut k = 0;
    while k + UNROLL <= kc {
        for (u, acc_u) in acc.iter_mut().enumerate() {
            // SAFETY: `k + u < kc`: `a` holds `kc` floats and `b` `kc * HP`.
            let (a_k, b0, b1) = unsafe {
                let b_k = b.add((k + u) * HP);
                (
                    _mm256_broadcast_ss(&*a.add(k + u)),
                    _mm256_loadu_ps(b_k),
                    _mm256_loadu_ps(b_k.add(8)),
                )
            };
            acc_u[0] = _mm256_fmadd_ps(a_k, b0, acc_u[0]);
            acc_u[1] = _mm256_fmadd_ps(a_k, b1, acc_u[1]);
        }
        k += UNROLL;
    }
    for k in k..kc {
        // SAFETY: `k < kc`, as above.
        let (a_k, b0, b1) = unsafe {
            let b_k = b.add(k * HP);
            (
                _mm256_broadcast_ss(&*a.add(k)),
                _mm256_loadu_ps(b_k),
                _mm256_loadu_ps(b_k.add(8)),
            )
        };
        acc[0][0] = _mm256_fmadd_ps(a_k, b0, acc[0][0]);
        acc[0][1] = _mm256_fmadd_ps(a_k, b1, acc[0][1]);
    }
    let sum = |h: usize| {
        _mm256_add_ps(
            _mm256_add_ps(acc[0][h], acc[1][h]),
            _mm256_add_ps(acc[2][h], acc[3][h]),
        )
    };
    // SAFETY: forwarded contract for `c`.
    unsafe { store_block(&[[sum(0), sum(1)]], c, ldc, rows, cols, accumulate) }
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
