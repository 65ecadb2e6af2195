//! [`Microkernel::AttentionF32`](super::Microkernel::AttentionF32) for AVX2 + FMA,
//! [`Microkernel::AttentionF16Kv`](super::Microkernel::AttentionF16Kv) (f16 keys and values
//! widened with F16C as they are loaded) and
//! [`Microkernel::AttentionQ8Kv`](super::Microkernel::AttentionQ8Kv) (int8 codes widened as
//! loaded, their row scales folded into each key's score and each value's weight): one
//! body, generic over the key/value element ([`KvElement`]) and always inlined into the
//! entry points, which enable their features ([`attention_entry!`], [`attention_q8kv`]). One pass over the keys in blocks of [`KEY_BLOCK`] (online
//! softmax). Per block: the scores, 8 keys at a time (8 dot products in 8 accumulators,
//! reduced together), the block's largest score, a rescale of the running sum and of `out`
//! when the maximum grew, the exponentials 8 lanes at a time, then `out += p_j * v_j` with
//! a chunk of `out` held in registers across the block's keys. A call's first query row
//! asks for the key rows [`PREFETCH_KEYS`] ahead and for the value rows it scores (a kv
//! head's rows are strided in the cache; the rows after it find them cached). `out`
//! itself is the accumulator between blocks, so any head dim works without a scratch
//! buffer. Widened
//! elements are the f32 values the f32 kernel would read, so over f16 keys and values the
//! kernel computes exactly what the f32 one computes on their widening.

use super::super::x86_gemm::prefetch_cached;
use super::super::{QueryRows, RowScales};
use half::f16;
use std::arch::x86_64::{
    __m256, _mm256_add_epi32, _mm256_add_ps, _mm256_castsi256_ps, _mm256_cvtepi32_ps,
    _mm256_cvtepi8_epi32, _mm256_cvtph_ps, _mm256_cvtps_epi32, _mm256_fmadd_ps, _mm256_fnmadd_ps,
    _mm256_hadd_ps, _mm256_loadu_ps, _mm256_max_ps, _mm256_min_ps, _mm256_mul_ps,
    _mm256_permute2f128_ps, _mm256_round_ps, _mm256_set1_epi32, _mm256_set1_ps, _mm256_setzero_ps,
    _mm256_slli_epi32, _mm256_storeu_ps, _mm256_sub_ps, _mm_loadl_epi64, _mm_loadu_si128,
    _MM_FROUND_NO_EXC, _MM_FROUND_TO_NEAREST_INT,
};

/// Keys scored before their exponentials are folded into `out`.
const KEY_BLOCK: usize = 32;

/// Lanes of a ymm register.
const LANES: usize = 8;

/// Registers of `out` kept live while a block's values are accumulated.
const OUT_REGS: usize = 8;

/// How many keys ahead a call's first query row asks for the key rows (the value rows
/// are asked for as their keys are scored): a decode step's single query row reads each
/// key row once, from memory, so asking ahead hides that latency.
const PREFETCH_KEYS: usize = 16;

/// A key or value element the kernel widens to f32 lanes as it loads it.
///
/// # Safety
/// Every method needs AVX (and F16C for f16), enabled in the function it is inlined into.
trait KvElement: Copy {
    /// The 8 elements at `p` as f32 lanes (8 readable elements).
    unsafe fn load8(p: *const Self) -> __m256;
    /// The element as f32.
    fn widen(self) -> f32;
}

impl KvElement for f32 {
    #[inline(always)]
    unsafe fn load8(p: *const f32) -> __m256 {
        // SAFETY: 8 readable floats (caller's contract).
        unsafe { _mm256_loadu_ps(p) }
    }

    #[inline(always)]
    fn widen(self) -> f32 {
        self
    }
}

impl KvElement for f16 {
    #[inline(always)]
    unsafe fn load8(p: *const f16) -> __m256 {
        // SAFETY: 16 readable bytes, F16C available (caller's contract).
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.cast())) }
    }

    #[inline(always)]
    fn widen(self) -> f32 {
        self.to_f32()
    }
}

impl KvElement for i8 {
    #[inline(always)]
    unsafe fn load8(p: *const i8) -> __m256 {
        // SAFETY: 8 readable bytes, AVX2 available (caller's contract).
        unsafe { _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(p.cast()))) }
    }

    #[inline(always)]
    fn widen(self) -> f32 {
        f32::from(self)
    }
}

/// Defines `extern "C"` entry point `$name`, an [`AttentionFn`](super::super::AttentionFn)
/// over keys and values of `$kv`: the always-inlined generic [`attention_row`] per query
/// row, compiled with `$features` enabled.
macro_rules! attention_entry {
    ($(#[$doc:meta])* $name:ident, $kv:ty, $features:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As [`super::super::AttentionFn`] over its key/value type, and the CPU has the
        /// enabled features.
        #[allow(clippy::too_many_arguments)]
        #[target_feature(enable = $features)]
        pub(in crate::microkernel) unsafe extern "C" fn $name(
            q: *const f32,
            k: *const $kv,
            v: *const $kv,
            out: *mut f32,
            rows: i64,
            keys: i64,
            kv_stride: i64,
            head_dim: i64,
            scale: f32,
        ) {
            let scalars = (keys, kv_stride, head_dim);
            for (row, (q, out)) in QueryRows::new(q, out, rows, head_dim).enumerate() {
                let first = row == 0;
                // SAFETY: `QueryRows` yields row `row`'s `head_dim` floats of `q` and `out`
                // from the caller's lent rows; k/v as lent; `$features` enabled here.
                unsafe { attention_row::<$kv>(q, (k, v), None, out, scalars, scale, first) }
            }
        }
    };
}

attention_entry!(
    /// [`Microkernel::AttentionF32`](super::Microkernel::AttentionF32) over f32 keys and
    /// values.
    attention_f32, f32, "avx2,fma"
);
attention_entry!(
    /// [`Microkernel::AttentionF16Kv`](super::Microkernel::AttentionF16Kv): f16 keys and
    /// values widened with F16C.
    attention_f16kv, f16, "avx2,fma,f16c"
);

/// [`Microkernel::AttentionQ8Kv`](super::Microkernel::AttentionQ8Kv): int8 keys and values
/// with one f32 scale per row.
///
/// # Safety
/// As [`super::super::AttentionQ8KvFn`], and the CPU has AVX2 and FMA.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma")]
pub(in crate::microkernel) unsafe extern "C" fn attention_q8kv(
    q: *const f32,
    k: *const i8,
    v: *const i8,
    k_scales: *const f32,
    v_scales: *const f32,
    out: *mut f32,
    rows: i64,
    keys: i64,
    kv_stride: i64,
    head_dim: i64,
    scale: f32,
    scale_stride: i64,
) {
    let scales = RowScales::new(k_scales, v_scales, scale_stride);
    let scalars = (keys, kv_stride, head_dim);
    for (row, (q, out)) in QueryRows::new(q, out, rows, head_dim).enumerate() {
        let first = row == 0;
        // SAFETY: `QueryRows` yields row `row`'s `head_dim` floats of `q` and `out`; k/v and
        // their scales as lent (`AttentionQ8KvFn`); AVX2 and FMA enabled here.
        unsafe { attention_row::<i8>(q, (k, v), Some(scales), out, scalars, scale, first) }
    }
}

/// The attention of one query row over keys and values of `KV` (see
/// [`super::super::AttentionFn`]), rows scaled by `scales` when given (see
/// [`super::super::AttentionQ8KvFn`]); `(keys, kv_stride, head_dim)` are its scalars.
/// With `prefetch` (a call's first row) it asks for the rows ahead of those it reads.
///
/// # Safety
/// As [`super::super::AttentionFn`] (and [`super::super::AttentionQ8KvFn`] with
/// `scales`); inlined into a function enabling AVX2 and FMA (and F16C for f16), which the
/// CPU has.
#[inline(always)]
unsafe fn attention_row<KV: KvElement>(
    q: *const f32,
    (k, v): (*const KV, *const KV),
    scales: Option<RowScales>,
    out: *mut f32,
    (keys, kv_stride, head_dim): (i64, i64, i64),
    scale: f32,
    prefetch: bool,
) {
    let (keys, stride, dim) = (
        keys.max(0) as usize,
        kv_stride as usize,
        head_dim.max(0) as usize,
    );
    // The caller lends `dim` floats at `q` and `out`, and key or value row `j < keys` at
    // `k + j * stride` / `v + j * stride`, `dim` elements each; with `scales`, row
    // `j < keys`'s scales; the features are enabled in the entry point this is inlined into.
    // SAFETY: `out` holds `dim` floats (caller's contract); AVX2/FMA enabled by the entry.
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
        let ahead = prefetch.then_some((v, keys));
        // SAFETY: the block's rows `start..start + scores.len()` are below `keys`, so lent;
        // `q` holds `dim` floats; features enabled by the entry point.
        unsafe { score_block(q, k, rows, scale, scores, ahead) };
        if let Some(scales) = scales {
            for (j, score) in scores.iter_mut().enumerate() {
                // SAFETY: `start + j < keys`, a row whose key scale is lent.
                *score *= unsafe { scales.key(start + j) };
            }
        }
        // SAFETY: AVX2 and FMA are enabled in the entry point this is inlined into.
        let block_max = unsafe { largest(scores) };
        if block_max > max {
            let correction = (max - block_max).exp();
            sum *= correction;
            // SAFETY: `out` holds `dim` floats; AVX2/FMA enabled by the entry point.
            unsafe { scale_row(out, dim, correction) };
            max = block_max;
        }
        // SAFETY: AVX2 and FMA are enabled in the entry point this is inlined into.
        sum += unsafe { exp_shifted(scores, max) };
        // The sum is taken: each weight becomes its value row's weight times its scale.
        if let Some(scales) = scales {
            for (j, p) in scores.iter_mut().enumerate() {
                // SAFETY: `start + j < keys`, a row whose value scale is lent.
                *p *= unsafe { scales.value(start + j) };
            }
        }
        // SAFETY: the block's value rows are below `keys`, so lent; `out` holds `dim` floats
        // and does not overlap them (caller's contract); features enabled by the entry.
        unsafe { accumulate_values(out, v, rows, scores) };
        start += scores.len();
    }
    if keys > 0 {
        // SAFETY: `out` holds `dim` floats; AVX2/FMA enabled by the entry point.
        unsafe { scale_row(out, dim, 1.0 / sum) };
    }
}

/// Where a block's key or value rows are: row `first + j` at `base + (first + j) * stride`,
/// `dim` elements each.
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
    unsafe fn row<KV>(self, base: *const KV, j: usize) -> *const KV {
        // SAFETY: as the function's contract.
        unsafe { base.add((self.first + j) * self.stride) }
    }
}

/// Asks for value rows `first..first + 8` and the key rows [`PREFETCH_KEYS`] after them
/// (those below `keys`), each `dim` elements from row `j` at `base + j * stride`.
#[inline(always)]
fn prefetch_rows<KV>((k, v): (*const KV, *const KV), rows: Rows, first: usize, keys: usize) {
    let bytes = rows.dim * std::mem::size_of::<KV>();
    let row = |base: *const KV, j: usize| base.wrapping_add(j * rows.stride);
    for j in first..first + LANES {
        prefetch_cached(&[row(v, j)], bytes);
        if j + PREFETCH_KEYS < keys {
            prefetch_cached(&[row(k, j + PREFETCH_KEYS)], bytes);
        }
    }
}

/// `scores[j] = scale * q . k_j` for the block's rows, 8 keys at a time; with `ahead`
/// (the values and the call's key count), each 8 keys' value rows and the key rows
/// [`PREFETCH_KEYS`] after them are asked for first.
///
/// # Safety
/// `q` holds `rows.dim` floats and the block's `scores.len()` rows of `k` are lent;
/// inlined into a function enabling AVX2 and FMA (and F16C for f16), which the CPU has.
#[inline(always)]
unsafe fn score_block<KV: KvElement>(
    q: *const f32,
    k: *const KV,
    rows: Rows,
    scale: f32,
    scores: &mut [f32],
    ahead: Option<(*const KV, usize)>,
) {
    let mut j = 0;
    while j + LANES <= scores.len() {
        if let Some((v, keys)) = ahead {
            prefetch_rows((k, v), rows, rows.first + j, keys);
        }
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

/// The 8 dot products `q . row_r` over `n` elements, as one vector (lane `r`).
///
/// # Safety
/// `q` readable for `n` floats and every row for `n` elements; inlined into a function
/// enabling AVX2 and FMA (and F16C for f16), which the CPU has.
#[inline(always)]
unsafe fn dot8<KV: KvElement>(q: *const f32, rows: [*const KV; LANES], n: usize) -> __m256 {
    // SAFETY: the features (caller's contract); every load reads `[i, i +
    // LANES)` with `i + LANES <= n`, and the tails `i..n`, inside `q` and both rows.
    unsafe {
        let mut acc = [_mm256_setzero_ps(); LANES];
        let mut i = 0;
        while i + LANES <= n {
            let qv = _mm256_loadu_ps(q.add(i));
            for (acc_r, row) in acc.iter_mut().zip(&rows) {
                *acc_r = _mm256_fmadd_ps(qv, KV::load8(row.add(i)), *acc_r);
            }
            i += LANES;
        }
        let mut sums = reduce8(acc);
        if i < n {
            let tails: [f32; LANES] = std::array::from_fn(|r| {
                (i..n).map(|d| *q.add(d) * (*rows[r].add(d)).widen()).sum()
            });
            sums = _mm256_add_ps(sums, _mm256_loadu_ps(tails.as_ptr()));
        }
        sums
    }
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

/// The largest of `scores`, 8 lanes at a time: NaNs are skipped, as [`f32::max`] does
/// (`vmaxps` returns its second operand, the running maximum, when the first is NaN).
#[target_feature(enable = "avx2,fma")]
fn largest(scores: &[f32]) -> f32 {
    let mut max = _mm256_set1_ps(f32::NEG_INFINITY);
    let mut chunks = scores.chunks_exact(LANES);
    for chunk in &mut chunks {
        // SAFETY: `chunk` holds 8 floats.
        max = _mm256_max_ps(unsafe { _mm256_loadu_ps(chunk.as_ptr()) }, max);
    }
    let mut lanes = [0.0f32; LANES];
    // SAFETY: `lanes` holds 8 floats.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), max) };
    let rest = chunks.remainder().iter();
    lanes
        .iter()
        .chain(rest)
        .copied()
        .fold(f32::NEG_INFINITY, f32::max)
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
/// 2 ulp of `expf` for `x` in `[-87, 88]`; clamped outside; the AVX-512 attention's
/// exponentials too).
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(in crate::microkernel) fn exp8(x: __m256) -> __m256 {
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
/// `v` lent, not overlapping `out`; inlined into a function enabling AVX2 and FMA (and
/// F16C for f16), which the CPU has.
#[inline(always)]
unsafe fn accumulate_values<KV: KvElement>(
    out: *mut f32,
    v: *const KV,
    rows: Rows,
    weights: &[f32],
) {
    let dim = rows.dim;
    let mut d = 0;
    // SAFETY: every chunk lies inside `out[..dim]` and the lent value rows.
    unsafe {
        while d + OUT_REGS * LANES <= dim {
            accumulate_chunk::<KV, OUT_REGS>(out.add(d), v, rows, d, weights);
            d += OUT_REGS * LANES;
        }
        while d + LANES <= dim {
            accumulate_chunk::<KV, 1>(out.add(d), v, rows, d, weights);
            d += LANES;
        }
        for d in d..dim {
            let sum: f32 = weights
                .iter()
                .enumerate()
                .map(|(j, &p)| p * (*rows.row(v, j).add(d)).widen())
                .sum();
            *out.add(d) += sum;
        }
    }
}

/// `out[..R * 8] += sum_j p[j] * v_j[offset..offset + R * 8]` in `R` registers.
///
/// # Safety
/// `out` holds `R * 8` floats; the block's value rows hold `offset + R * 8` elements each;
/// inlined into a function enabling AVX2 and FMA (and F16C for f16), which the CPU has.
#[inline(always)]
unsafe fn accumulate_chunk<KV: KvElement, const R: usize>(
    out: *mut f32,
    v: *const KV,
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
                *acc_r = _mm256_fmadd_ps(pv, KV::load8(row.add(r * LANES)), *acc_r);
            }
        }
        for (r, acc_r) in acc.iter().enumerate() {
            _mm256_storeu_ps(out.add(r * LANES), *acc_r);
        }
    }
}

/// `sum_i a[i] * b[i]` over `n` elements, two 8-lane accumulators.
///
/// # Safety
/// `a` readable for `n` floats and `b` for `n` elements; inlined into a function enabling
/// AVX2 and FMA (and F16C for f16), which the CPU has.
#[inline(always)]
unsafe fn dot<KV: KvElement>(a: *const f32, b: *const KV, n: usize) -> f32 {
    // SAFETY: the features (caller's contract); every load reads
    // `a[i..i + LANES]` / `b[i..i + LANES]` with `i + LANES <= n`, the tail `i < n`.
    unsafe {
        let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let mut i = 0;
        while i + 2 * LANES <= n {
            acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a.add(i)), KV::load8(b.add(i)), acc0);
            let (a1, b1) = (a.add(i + LANES), b.add(i + LANES));
            acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a1), KV::load8(b1), acc1);
            i += 2 * LANES;
        }
        if i + LANES <= n {
            acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a.add(i)), KV::load8(b.add(i)), acc0);
            i += LANES;
        }
        let mut total = horizontal_sum(_mm256_add_ps(acc0, acc1));
        for i in i..n {
            total += *a.add(i) * (*b.add(i)).widen();
        }
        total
    }
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

    /// `largest` is the scalar fold with `f32::max` (NaNs skipped) for every length a
    /// block has, NaNs and infinities anywhere.
    #[test]
    fn largest_is_the_scalar_maximum() {
        if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
            return;
        }
        for len in 0..=KEY_BLOCK {
            for special in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
                for at in 0..len {
                    let mut scores: Vec<f32> =
                        (0..len).map(|i| (i * 37 % 11) as f32 - 5.0).collect();
                    scores[at] = special;
                    let want = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                    // SAFETY: AVX2 and FMA were detected.
                    let got = unsafe { largest(&scores) };
                    assert_eq!(got.to_bits(), want.to_bits(), "{scores:?}");
                }
            }
            let nans = vec![f32::NAN; len];
            // SAFETY: AVX2 and FMA were detected.
            assert_eq!(unsafe { largest(&nans) }, f32::NEG_INFINITY);
        }
    }

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
