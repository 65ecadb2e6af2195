//! [`Microkernel::AttentionF32`](super::Microkernel::AttentionF32),
//! [`Microkernel::AttentionF16Kv`](super::Microkernel::AttentionF16Kv) and
//! [`Microkernel::AttentionQ8Kv`](super::Microkernel::AttentionQ8Kv) for AVX-512F: the
//! query rows of a call (the query heads sharing a kv head) attend together,
//! [`ROW_BATCH`] at a time, so each key and value row is loaded and widened once for all
//! of them, from registers; a call's last 1 to 7 rows go to the AVX2 kernel. One pass over the keys in blocks of [`KEY_BLOCK`] (online
//! softmax). Two keys at a time, each widened 16-lane chunk of their rows feeds an FMA
//! into every row's accumulator for that key; the 16 accumulators are reduced together
//! into one vector, lane `8i + r` the score of query row `r` for key `i`, so the block's
//! maxima, rescales and exponentials run for all rows at once. Then `out += p_j * v_j` two 16-lane chunks at a time for every row
//! (16 zmm accumulators), the rescale of `out` folded into loading it. The keys and values
//! [`PREFETCH_KEYS`] ahead are prefetched: a kv head's rows are strided in the cache.

use super::super::avx2::attention::{self as narrow, exp8};
use super::super::x86_gemm::prefetch_cached;
use super::super::RowScales;
use half::f16;
use std::arch::x86_64::{
    __m256, __m512, __mmask16, _mm256_add_ps, _mm256_blendv_ps, _mm256_cmp_ps, _mm256_loadu_ps,
    _mm256_loadu_si256, _mm256_max_ps, _mm256_mul_ps, _mm256_set1_ps, _mm256_setzero_ps,
    _mm256_storeu_ps, _mm256_sub_ps, _mm512_add_ps, _mm512_castpd_ps, _mm512_castps_pd,
    _mm512_cvtepi32_ps, _mm512_cvtepi8_epi32, _mm512_cvtph_ps, _mm512_fmadd_ps, _mm512_loadu_ps,
    _mm512_mask_blend_ps, _mm512_mask_storeu_ps, _mm512_maskz_loadu_ps, _mm512_mul_ps,
    _mm512_set1_ps, _mm512_setzero_ps, _mm512_shuffle_f32x4, _mm512_storeu_ps, _mm512_unpackhi_pd,
    _mm512_unpackhi_ps, _mm512_unpacklo_pd, _mm512_unpacklo_ps, _mm_loadu_si128, _CMP_GT_OQ,
};

/// Keys scored before their exponentials are folded into `out`.
const KEY_BLOCK: usize = 16;

/// Lanes of a zmm register.
const LANES: usize = 16;

/// Query rows attending together (a call's batch): one score lane each in a ymm register.
const ROW_BATCH: usize = 8;

/// How many keys ahead the key and value rows are prefetched (chosen by timing: fewer
/// hid too little of the memory latency, more, asked for into L2, were slower again).
const PREFETCH_KEYS: usize = 16;

/// A key or value element widened to 16 f32 lanes as it is loaded.
///
/// # Safety
/// Every method needs AVX-512F, enabled in the function it is inlined into.
trait Kv16: Copy + Default {
    /// The 16 elements at `p` as f32 lanes (16 readable elements).
    unsafe fn load16(p: *const Self) -> __m512;

    /// The `n < 16` elements at `p` as the first `n` lanes, the others zero (`n`
    /// readable elements).
    #[inline(always)]
    unsafe fn load_part(p: *const Self, n: usize) -> __m512 {
        let mut part = [Self::default(); LANES];
        // SAFETY: `n < 16` readable elements (caller's contract) into 16 of `part`.
        unsafe {
            std::ptr::copy_nonoverlapping(p, part.as_mut_ptr(), n);
            Self::load16(part.as_ptr())
        }
    }

    /// `n <= 16` elements at `p`, as [`Kv16::load16`] or [`Kv16::load_part`].
    #[inline(always)]
    unsafe fn load(p: *const Self, n: usize) -> __m512 {
        // SAFETY: `n` readable elements (caller's contract).
        unsafe {
            if n == LANES {
                Self::load16(p)
            } else {
                Self::load_part(p, n)
            }
        }
    }
}

impl Kv16 for f32 {
    #[inline(always)]
    unsafe fn load16(p: *const f32) -> __m512 {
        // SAFETY: 16 readable floats (caller's contract).
        unsafe { _mm512_loadu_ps(p) }
    }

    #[inline(always)]
    unsafe fn load_part(p: *const f32, n: usize) -> __m512 {
        // SAFETY: `n` readable floats (caller's contract); masked lanes are not read.
        unsafe { _mm512_maskz_loadu_ps(mask(n), p) }
    }
}

impl Kv16 for f16 {
    #[inline(always)]
    unsafe fn load16(p: *const f16) -> __m512 {
        // SAFETY: 32 readable bytes (caller's contract).
        unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(p.cast())) }
    }
}

impl Kv16 for i8 {
    #[inline(always)]
    unsafe fn load16(p: *const i8) -> __m512 {
        // SAFETY: 16 readable bytes (caller's contract).
        unsafe { _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p.cast()))) }
    }
}

/// The mask of the first `n <= 16` lanes.
#[inline(always)]
fn mask(n: usize) -> __mmask16 {
    (((1u32 << n) - 1) & 0xffff) as __mmask16
}

/// Defines `extern "C"` entry point `$name`, an [`AttentionFn`](super::super::AttentionFn)
/// over keys and values of `$kv`: [`attention_rows`], with AVX2 kernel `$narrow` for the
/// last rows.
macro_rules! attention_entry {
    ($(#[$doc:meta])* $name:ident, $kv:ty, $narrow:path) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As [`super::super::AttentionFn`] over its key/value type, and the CPU has
        /// AVX-512F.
        #[allow(clippy::too_many_arguments)]
        pub(in super::super) unsafe extern "C" fn $name(
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
            let call = Call::new((k, v), None, (keys, kv_stride, head_dim), scale);
            // SAFETY: `attention_rows` passes `rows` lent query rows of `q`/`out`; k/v as lent
            // here; AVX-512F CPUs have AVX2, FMA and F16C.
            let narrow = |q, out, rows| unsafe {
                $narrow(q, k, v, out, rows, keys, kv_stride, head_dim, scale)
            };
            // SAFETY: forwarded contract (`rows * head_dim` floats at `q`, `out`); AVX-512F.
            unsafe { attention_rows::<$kv>(q, out, rows, call, narrow) }
        }
    };
}

attention_entry!(
    /// [`Microkernel::AttentionF32`](super::super::Microkernel::AttentionF32) over f32 keys
    /// and values.
    attention_f32, f32, narrow::attention_f32
);
attention_entry!(
    /// [`Microkernel::AttentionF16Kv`](super::super::Microkernel::AttentionF16Kv): f16 keys
    /// and values widened as loaded.
    attention_f16kv, f16, narrow::attention_f16kv
);

/// [`Microkernel::AttentionQ8Kv`](super::super::Microkernel::AttentionQ8Kv): int8 keys
/// and values with one f32 scale per row.
///
/// # Safety
/// As [`super::super::AttentionQ8KvFn`], and the CPU has AVX-512F.
#[allow(clippy::too_many_arguments)]
pub(in super::super) unsafe extern "C" fn attention_q8kv(
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
    let call = Call::new((k, v), Some(scales), (keys, kv_stride, head_dim), scale);
    // SAFETY: `attention_rows` passes `rows` lent query rows of `q`/`out`; k/v and their
    // scales as lent here; AVX-512F CPUs have AVX2 and FMA.
    let narrow = |q, out, rows| unsafe {
        narrow::attention_q8kv(
            q,
            k,
            v,
            k_scales,
            v_scales,
            out,
            rows,
            keys,
            kv_stride,
            head_dim,
            scale,
            scale_stride,
        )
    };
    // SAFETY: forwarded contract (`rows * head_dim` floats at `q`, `out`); AVX-512F.
    unsafe { attention_rows::<i8>(q, out, rows, call, narrow) }
}

/// What every query row of a call shares: the keys and values (and their row scales), the
/// sizes and the score scale.
#[derive(Clone, Copy)]
struct Call<KV> {
    k: *const KV,
    v: *const KV,
    scales: Option<RowScales>,
    keys: usize,
    stride: usize,
    dim: usize,
    scale: f32,
}

impl<KV> Call<KV> {
    /// The call of an entry point's operands and scalars `(keys, kv_stride, head_dim)`.
    fn new(
        (k, v): (*const KV, *const KV),
        scales: Option<RowScales>,
        (keys, kv_stride, head_dim): (i64, i64, i64),
        scale: f32,
    ) -> Self {
        Call {
            k,
            v,
            scales,
            keys: keys.max(0) as usize,
            stride: kv_stride.max(0) as usize,
            dim: head_dim.max(0) as usize,
            scale,
        }
    }

    /// Key row `j`.
    ///
    /// # Safety
    /// `j < keys`.
    #[inline(always)]
    unsafe fn key(&self, j: usize) -> *const KV {
        // SAFETY: row `j < keys` is lent (the entry's contract).
        unsafe { self.k.add(j * self.stride) }
    }

    /// Value row `j`.
    ///
    /// # Safety
    /// `j < keys`.
    #[inline(always)]
    unsafe fn value(&self, j: usize) -> *const KV {
        // SAFETY: row `j < keys` is lent (the entry's contract).
        unsafe { self.v.add(j * self.stride) }
    }

    /// Prefetches key and value row `j` when it exists.
    #[inline(always)]
    fn prefetch(&self, j: usize) {
        if j >= self.keys {
            return;
        }
        let bytes = self.dim * std::mem::size_of::<KV>();
        // SAFETY: row `j < keys` is lent.
        let rows = unsafe { [self.key(j), self.value(j)] };
        prefetch_cached(&rows, bytes);
    }
}

/// The rows of a call, [`ROW_BATCH`] at a time, the last 1 to 7 by `narrow(q, out, rows)`
/// (the AVX2 kernel, one row at a time with its softmax over 8 keys at once: as fast for
/// 4 rows as this kernel and faster for fewer); zeros when there are no keys.
///
/// # Safety
/// As the entry points: `rows * dim` floats at `q` and `out`; `narrow` is the AVX2 kernel
/// over the same keys; the CPU has AVX-512F.
#[target_feature(enable = "avx512f")]
unsafe fn attention_rows<KV: Kv16>(
    q: *const f32,
    out: *mut f32,
    rows: i64,
    call: Call<KV>,
    narrow: impl Fn(*const f32, *mut f32, i64),
) {
    let (rows, dim) = (rows.max(0) as usize, call.dim);
    if call.keys == 0 {
        // SAFETY: `out` holds `rows * dim` floats (the caller's contract).
        unsafe { std::ptr::write_bytes(out, 0, rows * dim) };
        return;
    }
    let mut r = 0;
    while r < rows {
        // SAFETY: rows `r..r + n` (n <= rows - r) of `q` and `out` are lent.
        let (q, out) = unsafe { (q.add(r * dim), out.add(r * dim)) };
        if rows - r >= ROW_BATCH {
            // SAFETY: `rows - r >= 8`, so 8 lent rows at `q` and `out`; AVX-512F enabled here.
            unsafe { attend::<KV>(q, out, call) };
            r += ROW_BATCH;
        } else {
            narrow(q, out, (rows - r) as i64);
            r = rows;
        }
    }
}

/// The attention of [`ROW_BATCH`] query rows (`dim` floats apart) over the call's keys (at
/// least one).
///
/// # Safety
/// `8 * dim` floats at `q` and `out`; the call's rows lent; the CPU has AVX-512F.
#[target_feature(enable = "avx512f")]
unsafe fn attend<KV: Kv16>(q: *const f32, out: *mut f32, call: Call<KV>) {
    // SAFETY: `out` holds 8 rows; it accumulates from zero.
    unsafe { std::ptr::write_bytes(out, 0, ROW_BATCH * call.dim) };
    let mut max = _mm256_set1_ps(f32::NEG_INFINITY);
    let mut sum = _mm256_setzero_ps();
    let mut weights = [[0.0f32; ROW_BATCH]; KEY_BLOCK];
    let mut start = 0;
    while start < call.keys {
        let block = &mut weights[..KEY_BLOCK.min(call.keys - start)];
        // SAFETY: keys `start..start + block.len()` are below `keys`, so lent; `q` holds 8
        // rows; AVX-512F enabled here.
        unsafe { score_block(q, &call, start, block) };
        let mut block_max = _mm256_set1_ps(f32::NEG_INFINITY);
        for s in block.iter() {
            // SAFETY: each score row holds 8 floats.
            block_max = _mm256_max_ps(unsafe { _mm256_loadu_ps(s.as_ptr()) }, block_max);
        }
        // Where a row's maximum grew: its new maximum and the rescale of its sum and out.
        let grew = _mm256_cmp_ps::<_CMP_GT_OQ>(block_max, max);
        let new_max = _mm256_blendv_ps(max, block_max, grew);
        let rescale =
            _mm256_blendv_ps(_mm256_set1_ps(1.0), exp8(_mm256_sub_ps(max, new_max)), grew);
        max = new_max;
        sum = _mm256_mul_ps(sum, rescale);
        for (j, s) in block.iter_mut().enumerate() {
            // SAFETY: `s` holds 8 floats.
            let mut p = exp8(_mm256_sub_ps(unsafe { _mm256_loadu_ps(s.as_ptr()) }, max));
            sum = _mm256_add_ps(sum, p);
            // The sum is taken: each weight becomes its value row's weight times its scale.
            if let Some(scales) = call.scales {
                // SAFETY: `start + j < keys`, a row whose value scale is lent.
                p = _mm256_mul_ps(p, _mm256_set1_ps(unsafe { scales.value(start + j) }));
            }
            // SAFETY: `s` holds 8 floats.
            unsafe { _mm256_storeu_ps(s.as_mut_ptr(), p) };
        }
        // SAFETY: `out` holds 8 rows of `dim`; the block's value rows are below `keys`, so
        // lent; AVX-512F enabled here.
        unsafe { accumulate_values(out, &call, start, block, lanes(rescale)) };
        start += block.len();
    }
    let inverse = lanes(sum).map(|s| 1.0 / s);
    // SAFETY: `out` holds 8 rows; a rescale by `1 / sum` with nothing added.
    unsafe { accumulate_values(out, &call, start, &[], inverse) };
}

/// The 8 lanes of `x`.
#[inline(always)]
fn lanes(x: __m256) -> [f32; ROW_BATCH] {
    let mut lanes = [0.0f32; ROW_BATCH];
    // SAFETY: `lanes` holds 8 floats; AVX is implied by the callers' AVX-512F.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), x) };
    lanes
}

/// `scores[j][r] = scale * q_r . k_{start + j}` (times the key row's scale), two keys at a
/// time (each query chunk loaded once for both, and their 16 dot products reduced
/// together: [`reduce16`]), the last odd key alone; prefetches the rows [`PREFETCH_KEYS`]
/// ahead. Two keys at a time rather than one, so each query chunk is loaded once for
/// both.
///
/// # Safety
/// `8 * dim` floats at `q`; keys `start..start + scores.len()` lent; AVX-512F.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn score_block<KV: Kv16>(
    q: *const f32,
    call: &Call<KV>,
    start: usize,
    scores: &mut [[f32; ROW_BATCH]],
) {
    let mut pairs = scores.chunks_exact_mut(2);
    let mut j = start;
    for pair in &mut pairs {
        // SAFETY: keys `j` and `j + 1` are lent; `q` holds 8 rows; the pair's two rows of
        // 8 floats are contiguous.
        unsafe {
            let dots = scaled_scores::<KV, 2>(q, call, j);
            _mm512_storeu_ps(pair.as_mut_ptr().cast(), dots);
        }
        j += 2;
    }
    if let [score] = pairs.into_remainder() {
        // SAFETY: key `j` is lent; `q` holds 8 rows; `score` holds the 8 lanes stored.
        unsafe {
            let dots = scaled_scores::<KV, 1>(q, call, j);
            _mm512_mask_storeu_ps(score.as_mut_ptr(), 0x00FF, dots);
        }
    }
}

/// The scores of the `N <= 2` keys from `first` (lane `8i + r`: query row `r`, key
/// `first + i`; zero past the keys), times the call's scale and the keys' row scales;
/// prefetches the rows [`PREFETCH_KEYS`] ahead of them.
///
/// # Safety
/// `8 * dim` floats at `q`; keys `first..first + N` lent; AVX-512F.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn scaled_scores<KV: Kv16, const N: usize>(
    q: *const f32,
    call: &Call<KV>,
    first: usize,
) -> __m512 {
    let keys: [usize; N] = std::array::from_fn(|i| first + i);
    for j in keys {
        call.prefetch(j + PREFETCH_KEYS);
    }
    // SAFETY: the keys are lent; `q` holds 8 rows (the caller's contract).
    let acc = unsafe { dot_products(q, call, keys) };
    let none = [_mm512_setzero_ps(); ROW_BATCH];
    let sums = reduce16(acc[0], *acc.get(1).unwrap_or(&none));
    let mut dots = _mm512_mul_ps(sums, _mm512_set1_ps(call.scale));
    if let Some(scales) = call.scales {
        // SAFETY: the keys are lent, with their scales.
        let [a, b] = [0, 1].map(|i| keys.get(i).map_or(0.0, |&j| unsafe { scales.key(j) }));
        let both = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(a), _mm512_set1_ps(b));
        dots = _mm512_mul_ps(dots, both);
    }
    dots
}

/// Per key `keys[i]` and query row `r`: 16 lanes summing to `q_r . k` (unscaled), each
/// query chunk loaded once for all the keys.
///
/// # Safety
/// `8 * dim` floats at `q`; the keys are lent; AVX-512F.
#[inline(always)]
unsafe fn dot_products<KV: Kv16, const N: usize>(
    q: *const f32,
    call: &Call<KV>,
    keys: [usize; N],
) -> [[__m512; ROW_BATCH]; N] {
    let dim = call.dim;
    let full = dim / LANES * LANES;
    // SAFETY: AVX-512F is enabled in the caller this is inlined into (its contract).
    let mut acc = [[unsafe { _mm512_setzero_ps() }; ROW_BATCH]; N];
    // SAFETY: each key is lent for `dim` elements; every chunk `[d, d + 16)`
    // below `full`, and the tail `[full, dim)`, lies inside it and inside each query row.
    unsafe {
        let rows = keys.map(|j| call.key(j));
        for d in (0..full).step_by(LANES) {
            let k = rows.map(|row| KV::load16(row.add(d)));
            for r in 0..ROW_BATCH {
                let q_r = _mm512_loadu_ps(q.add(r * dim + d));
                for (acc_i, &k_i) in acc.iter_mut().zip(&k) {
                    acc_i[r] = _mm512_fmadd_ps(q_r, k_i, acc_i[r]);
                }
            }
        }
        if full < dim {
            let n = dim - full;
            let k = rows.map(|row| KV::load_part(row.add(full), n));
            for r in 0..ROW_BATCH {
                let q_r = _mm512_maskz_loadu_ps(mask(n), q.add(r * dim + full));
                for (acc_i, &k_i) in acc.iter_mut().zip(&k) {
                    acc_i[r] = _mm512_fmadd_ps(q_r, k_i, acc_i[r]);
                }
            }
        }
    }
    acc
}

/// Lane `8i + r` of the result is the sum of the 16 lanes of row `r` of key `i` (`first`
/// for `i = 0`, `second` for 1): a transposing reduction, four levels of two shuffles
/// and an add, each level halving the vectors.
#[inline]
#[target_feature(enable = "avx512f")]
fn reduce16(first: [__m512; ROW_BATCH], second: [__m512; ROW_BATCH]) -> __m512 {
    let v: [__m512; 2 * ROW_BATCH] = std::array::from_fn(|i| {
        if i < ROW_BATCH {
            first[i]
        } else {
            second[i - ROW_BATCH]
        }
    });
    // Per 128-bit block: `v[2i]`'s partial sums in lanes 0 and 2, `v[2i + 1]`'s in 1 and 3.
    let pairs: [__m512; 8] = std::array::from_fn(|i| {
        let (a, b) = (v[2 * i], v[2 * i + 1]);
        _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b))
    });
    // Per 128-bit block: lane m holds `v[4i + m]`'s sum over that block.
    let quads: [__m512; 4] = std::array::from_fn(|i| {
        let (a, b) = (
            _mm512_castps_pd(pairs[2 * i]),
            _mm512_castps_pd(pairs[2 * i + 1]),
        );
        _mm512_add_ps(
            _mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
            _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)),
        )
    });
    // Blocks: `v[8i..8i + 4]` over blocks 0-1, then over 2-3; `v[8i + 4..8i + 8]` alike.
    let halves: [__m512; 2] =
        std::array::from_fn(|i| add_block_pairs(quads[2 * i], quads[2 * i + 1]));
    add_block_pairs(halves[0], halves[1])
}

/// Blocks `[a0 + a1, a2 + a3, b0 + b1, b2 + b3]` of the 128-bit blocks `a0..a3` of `a`
/// and `b0..b3` of `b`.
#[inline]
#[target_feature(enable = "avx512f")]
fn add_block_pairs(a: __m512, b: __m512) -> __m512 {
    _mm512_add_ps(
        _mm512_shuffle_f32x4::<0b10_00_10_00>(a, b),
        _mm512_shuffle_f32x4::<0b11_01_11_01>(a, b),
    )
}

/// `out_r = out_r * rescale[r] + sum_j weights[j][r] * v_{start + j}` for the 8 rows:
/// two whole 16-lane chunks of every row at a time, then the rest of the row.
///
/// # Safety
/// `8 * dim` floats at `out`; values `start..start + weights.len()` lent; AVX-512F.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn accumulate_values<KV: Kv16>(
    out: *mut f32,
    call: &Call<KV>,
    start: usize,
    weights: &[[f32; ROW_BATCH]],
    rescale: [f32; ROW_BATCH],
) {
    let dim = call.dim;
    let pairs = dim / (2 * LANES) * (2 * LANES);
    let chunks = Chunks {
        call,
        start,
        weights,
        rescale,
    };
    // SAFETY: every chunk lies inside the rows (the caller's contract).
    unsafe {
        for d in (0..pairs).step_by(2 * LANES) {
            chunks.accumulate::<true>(out, d, [LANES, LANES]);
        }
        if pairs < dim {
            let n = dim - pairs;
            chunks.accumulate::<false>(out, pairs, [LANES.min(n), n.saturating_sub(LANES)]);
        }
    }
}

/// The value rows and weights [`accumulate_values`] folds into `out`, two chunks at a
/// time.
struct Chunks<'a, KV> {
    call: &'a Call<KV>,
    start: usize,
    weights: &'a [[f32; ROW_BATCH]],
    rescale: [f32; ROW_BATCH],
}

impl<KV: Kv16> Chunks<'_, KV> {
    /// Elements `[d + 16c, d + 16c + lens[c])` of every row, `c < 2` (`WHOLE`: both 16).
    ///
    /// # Safety
    /// Those elements lie inside the 8 rows of `out` (`dim` floats apart) and each value
    /// row; AVX-512F.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn accumulate<const WHOLE: bool>(&self, out: *mut f32, d: usize, lens: [usize; 2]) {
        let dim = self.call.dim;
        // SAFETY: as the function's contract; a chunk of length 0 is never
        // read (a masked load of no lanes, or zeros).
        unsafe {
            let at = |r: usize, c: usize| out.add(r * dim + d + c * LANES);
            let mut acc = [[_mm512_setzero_ps(); 2]; ROW_BATCH];
            for (r, acc_r) in acc.iter_mut().enumerate() {
                let f = _mm512_set1_ps(self.rescale[r]);
                for (c, acc_rc) in acc_r.iter_mut().enumerate() {
                    let row = if WHOLE {
                        _mm512_loadu_ps(at(r, c))
                    } else {
                        _mm512_maskz_loadu_ps(mask(lens[c]), at(r, c))
                    };
                    *acc_rc = _mm512_mul_ps(f, row);
                }
            }
            for (j, w) in self.weights.iter().enumerate() {
                let value = self.call.value(self.start + j).add(d);
                let v = if WHOLE {
                    [KV::load16(value), KV::load16(value.add(LANES))]
                } else {
                    [KV::load(value, lens[0]), load_second(value, lens[1])]
                };
                for (r, acc_r) in acc.iter_mut().enumerate() {
                    let p = _mm512_set1_ps(w[r]);
                    acc_r[0] = _mm512_fmadd_ps(p, v[0], acc_r[0]);
                    acc_r[1] = _mm512_fmadd_ps(p, v[1], acc_r[1]);
                }
            }
            for (r, acc_r) in acc.iter().enumerate() {
                for (c, &acc_rc) in acc_r.iter().enumerate() {
                    if WHOLE {
                        _mm512_storeu_ps(at(r, c), acc_rc);
                    } else {
                        _mm512_mask_storeu_ps(at(r, c), mask(lens[c]), acc_rc);
                    }
                }
            }
        }
    }
}

/// The second chunk of a value row at `value`: its `n <= 16` elements from lane 16 on
/// (zeros when `n` is 0).
///
/// # Safety
/// `16 + n` readable elements at `value`; AVX-512F.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn load_second<KV: Kv16>(value: *const KV, n: usize) -> __m512 {
    if n == 0 {
        return _mm512_setzero_ps();
    }
    // SAFETY: as the function's contract.
    unsafe { KV::load(value.add(LANES), n) }
}
