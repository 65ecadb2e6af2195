//! [`Microkernel::AttentionF32`](super::Microkernel::AttentionF32),
//! [`Microkernel::AttentionF16Kv`](super::Microkernel::AttentionF16Kv) (f16 keys and values
//! widened by `fcvtl` as they are loaded, ARMv8.0) and
//! [`Microkernel::AttentionQ8Kv`](super::Microkernel::AttentionQ8Kv) (int8 codes widened as
//! loaded, each key's scale folded into its score and each value's into its weight) for
//! NEON: one body generic over the key/value element ([`NeonKv`]). One pass over the keys
//! in blocks of [`KEY_BLOCK`] (online softmax): the block's scores with 4-lane dot
//! products, a rescale of the running sum and of `out` when the block's largest score
//! grew, then `out += p_j * v_j`. `out` is the accumulator between blocks, so any head dim
//! works without a scratch buffer. Widened elements are the f32 values the f32 kernel
//! reads, so over f16 keys and values the kernel computes exactly what the f32 one
//! computes on their widening.

use super::super::{QueryRows, RowScales};
use super::widen_f16x4;
use half::f16;
use std::arch::aarch64::{
    float32x4_t, vaddq_f32, vaddvq_f32, vcvtq_f32_s32, vdivq_f32, vdup_n_u32, vdupq_n_f32,
    vfmaq_f32, vget_low_s16, vld1_u16, vld1q_f32, vmovl_s16, vmovl_s8, vmulq_f32,
    vreinterpret_s8_u32, vst1q_f32,
};

/// Keys scored before their exponentials are folded into `out`.
const KEY_BLOCK: usize = 32;

/// Lanes of a q register.
const LANES: usize = 4;

/// A key or value element the kernel widens to f32 lanes as it loads it.
pub(super) trait NeonKv: Copy {
    /// The 4 elements at `p` as f32 lanes.
    ///
    /// # Safety
    /// 4 elements are readable at `p`.
    unsafe fn load4(p: *const Self) -> float32x4_t;
    /// The element as f32.
    fn widen(self) -> f32;
}

impl NeonKv for f32 {
    #[inline(always)]
    unsafe fn load4(p: *const f32) -> float32x4_t {
        // SAFETY: 4 readable floats (caller's contract); NEON is baseline on aarch64.
        unsafe { vld1q_f32(p) }
    }

    #[inline(always)]
    fn widen(self) -> f32 {
        self
    }
}

impl NeonKv for f16 {
    #[inline(always)]
    unsafe fn load4(p: *const f16) -> float32x4_t {
        // SAFETY: 8 readable bytes (caller's contract).
        widen_f16x4(unsafe { vld1_u16(p.cast()) })
    }

    #[inline(always)]
    fn widen(self) -> f32 {
        self.to_f32()
    }
}

impl NeonKv for i8 {
    #[inline(always)]
    unsafe fn load4(p: *const i8) -> float32x4_t {
        // SAFETY: 4 readable bytes (caller's contract); NEON.
        unsafe {
            let bytes = vreinterpret_s8_u32(vdup_n_u32(p.cast::<u32>().read_unaligned()));
            vcvtq_f32_s32(vmovl_s16(vget_low_s16(vmovl_s8(bytes))))
        }
    }

    #[inline(always)]
    fn widen(self) -> f32 {
        f32::from(self)
    }
}

/// [`Microkernel::AttentionF32`](super::Microkernel::AttentionF32) over f32 keys and values
/// and [`Microkernel::AttentionF16Kv`](super::Microkernel::AttentionF16Kv) over f16 ones.
///
/// # Safety
/// As [`super::super::AttentionFn`] over `KV`.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe extern "C" fn attention<KV: NeonKv>(
    q: *const f32,
    k: *const KV,
    v: *const KV,
    out: *mut f32,
    rows: i64,
    keys: i64,
    kv_stride: i64,
    head_dim: i64,
    scale: f32,
) {
    let scalars = (keys, kv_stride, head_dim);
    for (q, out) in QueryRows::new(q, out, rows, head_dim) {
        // SAFETY: forwarded contract for each row.
        unsafe { attention_row(q, (k, v), None, out, scalars, scale) }
    }
}

/// [`Microkernel::AttentionQ8Kv`](super::Microkernel::AttentionQ8Kv): int8 keys and values
/// with one f32 scale per row.
///
/// # Safety
/// As [`super::super::AttentionQ8KvFn`].
#[allow(clippy::too_many_arguments)]
pub(super) unsafe extern "C" fn attention_q8kv(
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
    for (q, out) in QueryRows::new(q, out, rows, head_dim) {
        // SAFETY: forwarded contract for each row.
        unsafe { attention_row(q, (k, v), Some(scales), out, scalars, scale) }
    }
}

/// The attention of one query row over keys and values of `KV` (see
/// [`super::super::AttentionFn`]), rows scaled by `scales` when given (see
/// [`super::super::AttentionQ8KvFn`]); `(keys, kv_stride, head_dim)` are its scalars.
///
/// # Safety
/// As [`super::super::AttentionFn`] (and [`super::super::AttentionQ8KvFn`] with `scales`).
#[inline(always)]
unsafe fn attention_row<KV: NeonKv>(
    q: *const f32,
    (k, v): (*const KV, *const KV),
    scales: Option<RowScales>,
    out: *mut f32,
    (keys, kv_stride, head_dim): (i64, i64, i64),
    scale: f32,
) {
    let (keys, stride, dim) = (
        keys.max(0) as usize,
        kv_stride as usize,
        head_dim.max(0) as usize,
    );
    // The caller lends `dim` floats at `q` and `out` (not overlapping the inputs), and row
    // `j < keys` of `k` and `v` (`dim` elements from `j * stride`), with its scales when
    // `scales` are given.
    // SAFETY: `out` holds `dim` floats (the caller's contract).
    unsafe { scale_row(out, 0.0, dim) };
    let (mut max, mut sum) = (f32::NEG_INFINITY, 0.0f32);
    let mut block = [0.0f32; KEY_BLOCK];
    let mut start = 0;
    while start < keys {
        let scores = &mut block[..KEY_BLOCK.min(keys - start)];
        for (j, score) in scores.iter_mut().enumerate() {
            let row = start + j;
            // SAFETY: `row < keys`, whose key scale is lent with `scales`.
            let key_scale = scales.map_or(1.0, |s| unsafe { s.key(row) });
            // SAFETY: `row < keys`: `dim` elements of key `row` and `dim` floats at `q` lent.
            *score = scale * unsafe { dot(q, k.add(row * stride), dim) } * key_scale;
        }
        let block_max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        if block_max > max {
            let correction = (max - block_max).exp();
            sum *= correction;
            // SAFETY: `out` holds `dim` floats (the caller's contract).
            unsafe { scale_row(out, correction, dim) };
            max = block_max;
        }
        for (j, &score) in scores.iter().enumerate() {
            let row = start + j;
            let p = (score - max).exp();
            sum += p;
            // SAFETY: `row < keys`, whose value scale is lent with `scales`.
            let weight = p * scales.map_or(1.0, |s| unsafe { s.value(row) });
            // SAFETY: `row < keys`: value `row`'s `dim` elements lent; `out` holds `dim`
            // floats and does not overlap it.
            unsafe { add_scaled(out, v.add(row * stride), weight, dim) };
        }
        start += scores.len();
    }
    if keys > 0 {
        // SAFETY: `out` holds `dim` floats (the caller's contract).
        unsafe { divide(out, sum, dim) };
    }
}

/// `sum_d a[d] * b[d]` over `dim` elements, two 4-lane accumulators.
///
/// # Safety
/// `dim` readable floats at `a` and elements at `b`.
#[inline(always)]
unsafe fn dot<KV: NeonKv>(a: *const f32, b: *const KV, dim: usize) -> f32 {
    // SAFETY: every load reads `[d, d + LANES)` with `d + LANES <= dim`, the
    // tail `d < dim`; NEON.
    unsafe {
        let (mut acc0, mut acc1) = (vdupq_n_f32(0.0), vdupq_n_f32(0.0));
        let mut d = 0;
        while d + 2 * LANES <= dim {
            acc0 = vfmaq_f32(acc0, vld1q_f32(a.add(d)), KV::load4(b.add(d)));
            let (a1, b1) = (a.add(d + LANES), b.add(d + LANES));
            acc1 = vfmaq_f32(acc1, vld1q_f32(a1), KV::load4(b1));
            d += 2 * LANES;
        }
        if d + LANES <= dim {
            acc0 = vfmaq_f32(acc0, vld1q_f32(a.add(d)), KV::load4(b.add(d)));
            d += LANES;
        }
        let tail: f32 = (d..dim).map(|d| *a.add(d) * (*b.add(d)).widen()).sum();
        vaddvq_f32(vaddq_f32(acc0, acc1)) + tail
    }
}

/// `out[d] += p * x[d]` for `d < dim`.
///
/// # Safety
/// `dim` floats writable at `out` and elements readable at `x`, not overlapping.
#[inline(always)]
unsafe fn add_scaled<KV: NeonKv>(out: *mut f32, x: *const KV, p: f32, dim: usize) {
    // SAFETY: indices below `dim` (the caller's contract); NEON.
    unsafe {
        let weight = vdupq_n_f32(p);
        let mut d = 0;
        while d + LANES <= dim {
            let at = out.add(d);
            vst1q_f32(at, vfmaq_f32(vld1q_f32(at), weight, KV::load4(x.add(d))));
            d += LANES;
        }
        for d in d..dim {
            *out.add(d) += p * (*x.add(d)).widen();
        }
    }
}

/// `row[d] *= factor` for `d < dim` (`factor == 0` stores zeros, whatever `row` held).
///
/// # Safety
/// `dim` floats readable and writable at `row`.
#[inline(always)]
unsafe fn scale_row(row: *mut f32, factor: f32, dim: usize) {
    if factor == 0.0 {
        // SAFETY: as the function's contract.
        unsafe { std::ptr::write_bytes(row, 0, dim) };
        return;
    }
    // SAFETY: indices below `dim` (the caller's contract); NEON.
    unsafe {
        let f = vdupq_n_f32(factor);
        let mut d = 0;
        while d + LANES <= dim {
            vst1q_f32(row.add(d), vmulq_f32(vld1q_f32(row.add(d)), f));
            d += LANES;
        }
        for d in d..dim {
            *row.add(d) *= factor;
        }
    }
}

/// `out[d] /= sum` for `d < dim`.
///
/// # Safety
/// `dim` writable floats at `out`.
#[inline(always)]
unsafe fn divide(out: *mut f32, sum: f32, dim: usize) {
    // SAFETY: indices below `dim` (the caller's contract); NEON.
    unsafe {
        let divisor = vdupq_n_f32(sum);
        let mut d = 0;
        while d + LANES <= dim {
            vst1q_f32(out.add(d), vdivq_f32(vld1q_f32(out.add(d)), divisor));
            d += LANES;
        }
        for d in d..dim {
            *out.add(d) /= sum;
        }
    }
}
