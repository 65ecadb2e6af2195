//! [`Microkernel::AttentionF32`](super::Microkernel::AttentionF32) for AVX2 + FMA: one
//! pass over the keys in blocks of [`KEY_BLOCK`] (online softmax). Per block: the scores,
//! 8 keys at a time (8 dot products in 8 accumulators, reduced together), the block's
//! largest score, a rescale of the running sum and of `out` when the maximum grew, the
//! exponentials 8 lanes at a time, then `out += p_j * v_j` with a chunk of `out` held in
//! registers across the block's keys. `out` itself is the accumulator between blocks, so
//! any head dim works without a scratch buffer.

use std::arch::x86_64::{
    __m256, _mm256_add_epi32, _mm256_add_ps, _mm256_castsi256_ps, _mm256_cvtps_epi32,
    _mm256_fmadd_ps, _mm256_fnmadd_ps, _mm256_hadd_ps, _mm256_loadu_ps, _mm256_max_ps,
    _mm256_min_ps, _mm256_mul_ps, _mm256_permute2f128_ps, _mm256_round_ps, _mm256_set1_epi32,
    _mm256_set1_ps, _mm256_setzero_ps, _mm256_slli_epi32, _mm256_storeu_ps, _mm256_sub_ps,
    _MM_FROUND_NO_EXC, _MM_FROUND_TO_NEAREST_INT,
};

/// Keys scored before their exponentials are folded into `out`.
const KEY_BLOCK: usize = 32;

/// Lanes of a ymm register.
const LANES: usize = 8;

/// Registers of `out` kept live while a block's values are accumulated.
const OUT_REGS: usize = 8;

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
    let mut block = [0.0f32; KEY_BLOCK];
    let mut start = 0;
    while start < keys {
        let scores = &mut block[..KEY_BLOCK.min(keys - start)];
        let rows = Rows {
            first: start,
            stride,
            dim,
        };
        unsafe { score_block(q, k, rows, scale, scores) };
        let block_max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        if block_max > max {
            let correction = (max - block_max).exp();
            sum *= correction;
            unsafe { scale_row(out, dim, correction) };
            max = block_max;
        }
        sum += exp_shifted(scores, max);
        unsafe { accumulate_values(out, v, rows, scores) };
        start += scores.len();
    }
    if keys > 0 {
        unsafe { scale_row(out, dim, 1.0 / sum) };
    }
}

/// Where a block's key or value rows are: row `first + j` at `base + (first + j) * stride`,
/// `dim` floats each.
#[derive(Clone, Copy)]
struct Rows {
    first: usize,
    stride: usize,
    dim: usize,
}

impl Rows {
    /// Row `j` of the block in `base`.
    ///
    /// # Safety
    /// Row `first + j` of `base` is lent.
    unsafe fn row(self, base: *const f32, j: usize) -> *const f32 {
        // SAFETY: as the function's contract.
        unsafe { base.add((self.first + j) * self.stride) }
    }
}

/// `scores[j] = scale * q . k_j` for the block's rows, 8 keys at a time.
///
/// # Safety
/// `q` holds `rows.dim` floats and the block's `scores.len()` rows of `k` are lent; the
/// CPU has AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
unsafe fn score_block(q: *const f32, k: *const f32, rows: Rows, scale: f32, scores: &mut [f32]) {
    let mut j = 0;
    while j + LANES <= scores.len() {
        // SAFETY: rows `j..j + 8` of the block are lent; `scores[j..j + 8]` exists.
        unsafe {
            let dots = dot8(q, std::array::from_fn(|r| rows.row(k, j + r)), rows.dim);
            _mm256_storeu_ps(
                scores.as_mut_ptr().add(j),
                _mm256_mul_ps(dots, _mm256_set1_ps(scale)),
            );
        }
        j += LANES;
    }
    for (r, score) in scores.iter_mut().enumerate().skip(j) {
        // SAFETY: row `r` of the block is lent.
        *score = scale * unsafe { dot(q, rows.row(k, r), rows.dim) };
    }
}

/// The 8 dot products `q . row_r` over `n` floats, as one vector (lane `r`).
///
/// # Safety
/// `q` and every row readable for `n` floats; the CPU has AVX2 and FMA.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot8(q: *const f32, rows: [*const f32; LANES], n: usize) -> __m256 {
    let mut acc = [_mm256_setzero_ps(); LANES];
    let mut i = 0;
    // SAFETY: every load reads `[i, i + LANES)` with `i + LANES <= n`.
    unsafe {
        while i + LANES <= n {
            let qv = _mm256_loadu_ps(q.add(i));
            for (acc_r, row) in acc.iter_mut().zip(&rows) {
                *acc_r = _mm256_fmadd_ps(qv, _mm256_loadu_ps(row.add(i)), *acc_r);
            }
            i += LANES;
        }
    }
    let mut sums = reduce8(acc);
    if i < n {
        let tails: [f32; LANES] = std::array::from_fn(|r| {
            // SAFETY: `i..n` is inside both rows.
            (i..n).map(|d| unsafe { *q.add(d) * *rows[r].add(d) }).sum()
        });
        // SAFETY: `tails` holds 8 floats.
        sums = _mm256_add_ps(sums, unsafe { _mm256_loadu_ps(tails.as_ptr()) });
    }
    sums
}

/// Lane `r` of the result is the sum of the 8 lanes of `acc[r]`.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn reduce8(acc: [__m256; LANES]) -> __m256 {
    let pairs = [
        _mm256_hadd_ps(acc[0], acc[1]),
        _mm256_hadd_ps(acc[2], acc[3]),
        _mm256_hadd_ps(acc[4], acc[5]),
        _mm256_hadd_ps(acc[6], acc[7]),
    ];
    // Per 128-bit half: the partial sums of rows 0-3 (`low`) and 4-7 (`high`).
    let low = _mm256_hadd_ps(pairs[0], pairs[1]);
    let high = _mm256_hadd_ps(pairs[2], pairs[3]);
    _mm256_add_ps(
        _mm256_permute2f128_ps::<0x20>(low, high),
        _mm256_permute2f128_ps::<0x31>(low, high),
    )
}

/// `scores[j] = exp(scores[j] - max)`; returns their sum.
#[target_feature(enable = "avx2,fma")]
fn exp_shifted(scores: &mut [f32], max: f32) -> f32 {
    let shift = _mm256_set1_ps(max);
    let mut total = _mm256_setzero_ps();
    let mut chunks = scores.chunks_exact_mut(LANES);
    for chunk in &mut chunks {
        // SAFETY: `chunk` holds 8 floats.
        unsafe {
            let p = exp8(_mm256_sub_ps(_mm256_loadu_ps(chunk.as_ptr()), shift));
            _mm256_storeu_ps(chunk.as_mut_ptr(), p);
            total = _mm256_add_ps(total, p);
        }
    }
    let mut sum = horizontal_sum(total);
    for score in chunks.into_remainder() {
        *score = (*score - max).exp();
        sum += *score;
    }
    sum
}

/// `e^x` per lane (Cephes' single-precision polynomial after reducing by `ln 2`; within
/// 2 ulp of `expf` for `x` in `[-87, 88]`; clamped outside).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn exp8(x: __m256) -> __m256 {
    let x = _mm256_min_ps(
        _mm256_max_ps(x, _mm256_set1_ps(-87.0)),
        _mm256_set1_ps(88.0),
    );
    let n = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm256_mul_ps(
        x,
        _mm256_set1_ps(std::f32::consts::LOG2_E),
    ));
    // r = x - n ln 2, with ln 2 split so n * LN2_HI is exact.
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693_359_4), x);
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.121_944_4e-4), r);
    let mut p = _mm256_set1_ps(1.987_569_1e-4);
    for c in [
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        1.666_666_5e-1,
        0.5,
    ] {
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
    }
    let r2 = _mm256_mul_ps(r, r);
    let e_r = _mm256_add_ps(_mm256_fmadd_ps(p, r2, r), _mm256_set1_ps(1.0));
    let bias = _mm256_set1_epi32(127);
    let two_n = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(
        _mm256_cvtps_epi32(n),
        bias,
    )));
    _mm256_mul_ps(e_r, two_n)
}

/// `out += sum_j p[j] * v_j` over the block's value rows (`p` = `weights`), a chunk of
/// `out` at a time held in registers across all the keys.
///
/// # Safety
/// `out` readable and writable for `rows.dim` floats, the block's `weights.len()` rows of
/// `v` lent, not overlapping `out`; the CPU has AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
unsafe fn accumulate_values(out: *mut f32, v: *const f32, rows: Rows, weights: &[f32]) {
    let dim = rows.dim;
    let mut d = 0;
    // SAFETY: every chunk lies inside `out[..dim]` and the lent value rows.
    unsafe {
        while d + OUT_REGS * LANES <= dim {
            accumulate_chunk::<OUT_REGS>(out.add(d), v, rows, d, weights);
            d += OUT_REGS * LANES;
        }
        while d + LANES <= dim {
            accumulate_chunk::<1>(out.add(d), v, rows, d, weights);
            d += LANES;
        }
        for d in d..dim {
            let sum: f32 = weights
                .iter()
                .enumerate()
                .map(|(j, &p)| p * *rows.row(v, j).add(d))
                .sum();
            *out.add(d) += sum;
        }
    }
}

/// `out[..R * 8] += sum_j p[j] * v_j[offset..offset + R * 8]` in `R` registers.
///
/// # Safety
/// `out` holds `R * 8` floats; the block's value rows hold `offset + R * 8` floats each;
/// the CPU has AVX2 and FMA.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn accumulate_chunk<const R: usize>(
    out: *mut f32,
    v: *const f32,
    rows: Rows,
    offset: usize,
    weights: &[f32],
) {
    // SAFETY: as the function's contract.
    unsafe {
        let mut acc: [__m256; R] = std::array::from_fn(|r| _mm256_loadu_ps(out.add(r * LANES)));
        for (j, &p) in weights.iter().enumerate() {
            let (pv, row) = (_mm256_set1_ps(p), rows.row(v, j).add(offset));
            for (r, acc_r) in acc.iter_mut().enumerate() {
                *acc_r = _mm256_fmadd_ps(pv, _mm256_loadu_ps(row.add(r * LANES)), *acc_r);
            }
        }
        for (r, acc_r) in acc.iter().enumerate() {
            _mm256_storeu_ps(out.add(r * LANES), *acc_r);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `exp8` within 2e-7 (relative) of `e^x` in f64 over the range softmax uses.
    #[test]
    fn exp8_matches_exp() {
        if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
            return;
        }
        let xs: Vec<f32> = (0..=80_000).map(|i| -80.0 + i as f32 * 1e-3).collect();
        for chunk in xs.chunks_exact(LANES) {
            let mut got = [0.0f32; LANES];
            // SAFETY: AVX2 and FMA were detected; both arrays hold 8 floats.
            unsafe { _mm256_storeu_ps(got.as_mut_ptr(), exp8(_mm256_loadu_ps(chunk.as_ptr()))) };
            for (&x, &e) in chunk.iter().zip(&got) {
                let want = f64::from(x).exp();
                let err = (f64::from(e) - want).abs() / want;
                assert!(
                    err <= 2e-7,
                    "exp({x}) = {e}, want {want} (relative error {err})"
                );
            }
        }
    }
}
