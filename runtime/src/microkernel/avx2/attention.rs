//! [`Microkernel::AttentionF32`](super::Microkernel::AttentionF32) for AVX2 + FMA: one
//! pass over the keys in blocks of [`KEY_BLOCK`] (online softmax). Per block: the scores
//! (8-lane dot products), the block's largest score, a rescale of the running sum and of
//! `out` when the maximum grew, then `out += p_j * v_j` for each key. `out` itself is the
//! accumulator, so any head dim works without a scratch buffer.

use std::arch::x86_64::{
    __m256, _mm256_add_ps, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_mul_ps, _mm256_set1_ps,
    _mm256_setzero_ps, _mm256_storeu_ps,
};

/// Keys scored before their exponentials are folded into `out`.
const KEY_BLOCK: usize = 32;

/// Lanes of a ymm register.
const LANES: usize = 8;

/// See [`super::super::AttentionFn`].
///
/// # Safety
/// As [`super::super::AttentionFn`], and the CPU has AVX2 and FMA.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe extern "C" fn attention_f32(
    q: *const f32,
    k: *const f32,
    v: *const f32,
    out: *mut f32,
    keys: i64,
    kv_stride: i64,
    head_dim: i64,
    scale: f32,
) {
    let (keys, stride, dim) = (
        keys.max(0) as usize,
        kv_stride as usize,
        head_dim.max(0) as usize,
    );
    // SAFETY (every block below): the caller lends `dim` floats at `q` and `out`, and key or
    // value row `j < keys` at `k + j * stride` / `v + j * stride`, `dim` floats each.
    unsafe { scale_row(out, dim, 0.0) };
    let (mut max, mut sum) = (f32::NEG_INFINITY, 0.0f32);
    let mut scores = [0.0f32; KEY_BLOCK];
    let mut start = 0;
    while start < keys {
        let count = KEY_BLOCK.min(keys - start);
        let mut block_max = f32::NEG_INFINITY;
        for (j, score) in scores.iter_mut().enumerate().take(count) {
            *score = scale * unsafe { dot(q, k.add((start + j) * stride), dim) };
            block_max = block_max.max(*score);
        }
        if block_max > max {
            let correction = (max - block_max).exp();
            sum *= correction;
            unsafe { scale_row(out, dim, correction) };
            max = block_max;
        }
        for (j, &score) in scores.iter().enumerate().take(count) {
            let p = (score - max).exp();
            sum += p;
            unsafe { add_scaled(out, v.add((start + j) * stride), dim, p) };
        }
        start += count;
    }
    if keys > 0 {
        unsafe { scale_row(out, dim, 1.0 / sum) };
    }
}

/// `sum_i a[i] * b[i]` over `n` floats, two 8-lane accumulators.
///
/// # Safety
/// `a` and `b` readable for `n` floats; the CPU has AVX2 and FMA.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot(a: *const f32, b: *const f32, n: usize) -> f32 {
    let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let mut i = 0;
    // SAFETY: every load reads `a[i..i + LANES]` / `b[i..i + LANES]` with `i + LANES <= n`.
    unsafe {
        while i + 2 * LANES <= n {
            acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a.add(i)), _mm256_loadu_ps(b.add(i)), acc0);
            let (a1, b1) = (a.add(i + LANES), b.add(i + LANES));
            acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a1), _mm256_loadu_ps(b1), acc1);
            i += 2 * LANES;
        }
        if i + LANES <= n {
            acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a.add(i)), _mm256_loadu_ps(b.add(i)), acc0);
            i += LANES;
        }
    }
    let mut total = horizontal_sum(_mm256_add_ps(acc0, acc1));
    for i in i..n {
        // SAFETY: `i < n`.
        total += unsafe { *a.add(i) * *b.add(i) };
    }
    total
}

/// The sum of the 8 lanes of `x`.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn horizontal_sum(x: __m256) -> f32 {
    let mut lanes = [0.0f32; LANES];
    // SAFETY: `lanes` holds 8 floats.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), x) };
    lanes.iter().sum()
}

/// `row[i] *= factor` for `i < n` (`factor == 0` stores zeros, whatever `row` held).
///
/// # Safety
/// `row` readable and writable for `n` floats; the CPU has AVX2 and FMA.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn scale_row(row: *mut f32, n: usize, factor: f32) {
    if factor == 0.0 {
        // SAFETY: as the function's contract.
        unsafe { std::ptr::write_bytes(row, 0, n) };
        return;
    }
    let f = _mm256_set1_ps(factor);
    let mut i = 0;
    // SAFETY: every access is inside `row[..n]`.
    unsafe {
        while i + LANES <= n {
            let at = row.add(i);
            _mm256_storeu_ps(at, _mm256_mul_ps(_mm256_loadu_ps(at), f));
            i += LANES;
        }
        for i in i..n {
            *row.add(i) *= factor;
        }
    }
}

/// `row[i] += p * x[i]` for `i < n`.
///
/// # Safety
/// `row` readable and writable and `x` readable for `n` floats, not overlapping; the CPU
/// has AVX2 and FMA.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn add_scaled(row: *mut f32, x: *const f32, n: usize, p: f32) {
    let pv = _mm256_set1_ps(p);
    let mut i = 0;
    // SAFETY: every access is inside `row[..n]` and `x[..n]`.
    unsafe {
        while i + LANES <= n {
            let at = row.add(i);
            let sum = _mm256_fmadd_ps(pv, _mm256_loadu_ps(x.add(i)), _mm256_loadu_ps(at));
            _mm256_storeu_ps(at, sum);
            i += LANES;
        }
        for i in i..n {
            *row.add(i) += p * *x.add(i);
        }
    }
}
