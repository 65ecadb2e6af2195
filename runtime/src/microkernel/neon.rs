//! aarch64 NEON microkernels (128-bit q registers, 4 f32 lanes): the f32 block GEMMs
//! `6 x 16` (prefill: 24 accumulators, one panel) and `1 x 64` (the decode GEMV: 16
//! accumulators streaming 4 panels at once), and the f32 attention row. Per k of a GEMM,
//! one 16-float load per panel (four `ld1`) and one broadcast activation per row feed
//! `vfmaq_f32`s; the block is then written back through a staging row, so partial blocks
//! touch only their `rows x cols`. The attention takes the scalar twin's two passes (the
//! largest score, then the exponentials and the weighted values) with vector dot
//! products and updates. Tested against the scalar twins under `qemu-aarch64` (the
//! runtime's aarch64 CI step).

use super::{Implementation, Microkernel, MicrokernelFn};
use std::arch::aarch64::{
    float32x4_t, vaddvq_f32, vdivq_f32, vdupq_n_f32, vfmaq_f32, vld1q_f32, vst1q_f32,
};

/// The features every kernel here needs.
const FEATURES: &[&str] = &["neon"];

/// One implementation row of this ISA.
const fn row(kernel: Microkernel, func: MicrokernelFn) -> Implementation {
    Implementation {
        kernel,
        isa: "neon",
        features: FEATURES,
        func,
    }
}

/// The NEON implementations.
pub(super) const IMPLEMENTATIONS: &[Implementation] = &[
    row(Microkernel::Sgemm6x16, MicrokernelFn::Gemm(sgemm::<6, 1>)),
    row(Microkernel::Sgemv1x64, MicrokernelFn::Gemm(sgemm::<1, 4>)),
    row(
        Microkernel::AttentionF32,
        MicrokernelFn::Attention(attention_f32),
    ),
];

/// Columns per packed weight panel (four q registers).
const PANEL: usize = 16;

/// The block GEMM of `EP` rows by `NQ` panels ([`Microkernel::Sgemm6x16`] is
/// `sgemm::<6, 1>`, [`Microkernel::Sgemv1x64`] `sgemm::<1, 4>`).
///
/// # Safety
/// As [`super::GemmFn`].
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn sgemm<const EP: usize, const NQ: usize>(
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
    let call = Call::new(a, b, c, (kc, lda, ldc), (rows, cols), accumulate);
    // SAFETY: forwarded contract; NEON is part of every aarch64 CPU Rust targets.
    unsafe { call.block::<EP, NQ>() }
}

/// One call's operands, sizes clamped as [`super::GemmFn`] says.
struct Call {
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    kc: usize,
    lda: isize,
    ldc: isize,
    rows: usize,
    cols: usize,
    accumulate: bool,
}

impl Call {
    fn new(
        a: *const f32,
        b: *const f32,
        c: *mut f32,
        (kc, lda, ldc): (i64, i64, i64),
        (rows, cols): (i64, i64),
        accumulate: i64,
    ) -> Call {
        Call {
            a,
            b,
            c,
            kc: kc.max(0) as usize,
            lda: lda as isize,
            ldc: ldc as isize,
            rows: rows.max(0) as usize,
            cols: cols.max(0) as usize,
            accumulate: accumulate != 0,
        }
    }

    /// `EP` rows by `NQ` panels: every k's products accumulated in registers, then the
    /// block written back.
    ///
    /// # Safety
    /// As [`super::GemmFn`] for the call's operands.
    #[inline(always)]
    unsafe fn block<const EP: usize, const NQ: usize>(&self) {
        let (rows, cols) = (self.rows.min(EP), self.cols.min(NQ * PANEL));
        if rows == 0 || cols == 0 {
            return;
        }
        let panels = cols.div_ceil(PANEL);
        let panel_stride = self.lda.max(0) as usize * PANEL;
        // SAFETY (rest): NEON; rows `< rows` of `a` and the `panels` lent panels are read
        // for depths `< kc` only (the caller's contract).
        let zero = unsafe { vdupq_n_f32(0.0) };
        let mut acc = [[[zero; 4]; NQ]; EP];
        for k in 0..self.kc {
            let mut w = [[zero; 4]; NQ];
            for (q, w_q) in w.iter_mut().enumerate().take(panels) {
                let p = unsafe { self.b.add(q * panel_stride + k * PANEL) };
                *w_q = std::array::from_fn(|l| unsafe { vld1q_f32(p.add(4 * l)) });
            }
            for (i, acc_i) in acc.iter_mut().enumerate() {
                let row = i.min(rows - 1) as isize;
                let x = unsafe { vdupq_n_f32(*self.a.offset(row * self.lda + k as isize)) };
                for (acc_iq, w_q) in acc_i.iter_mut().zip(&w).take(panels) {
                    for (acc_l, &w_l) in acc_iq.iter_mut().zip(w_q) {
                        *acc_l = unsafe { vfmaq_f32(*acc_l, x, w_l) };
                    }
                }
            }
        }
        for (i, acc_i) in acc.iter().enumerate().take(rows) {
            // SAFETY: row `i < rows` of `c`, columns `< cols` (the caller's contract).
            unsafe { self.store_row(i, acc_i) };
        }
    }

    /// Writes (or adds to) `c[i][j]` for `j < cols` from the row's accumulators.
    ///
    /// # Safety
    /// Row `i < rows` of `c` is lent for the call's columns; NEON.
    #[inline(always)]
    unsafe fn store_row<const NQ: usize>(&self, i: usize, acc_i: &[[float32x4_t; 4]; NQ]) {
        let mut staged = [[0.0f32; PANEL]; NQ];
        for (stage, acc_iq) in staged.iter_mut().zip(acc_i) {
            for (l, &v) in acc_iq.iter().enumerate() {
                // SAFETY: 4 floats of the staging row.
                unsafe { vst1q_f32(stage.as_mut_ptr().add(4 * l), v) };
            }
        }
        let out = unsafe { self.c.offset(i as isize * self.ldc) };
        for (j, &value) in staged
            .iter()
            .flatten()
            .enumerate()
            .take(self.cols.min(NQ * PANEL))
        {
            // SAFETY: column `j < cols` of the lent row.
            unsafe {
                let at = out.add(j);
                *at = if self.accumulate { *at + value } else { value };
            }
        }
    }
}

/// [`Microkernel::AttentionF32`]: the scalar twin's two passes over the keys, with
/// 4-lane dot products and value updates (a scalar tail for head dims not a multiple of 4).
///
/// # Safety
/// As [`super::AttentionFn`].
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn attention_f32(
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
    // SAFETY (rest): `head_dim` floats at `q` and `out`, and row `j < keys` of `k` and `v`
    // (`dim` floats from `j * stride`) are lent (the caller's contract); NEON.
    unsafe {
        std::slice::from_raw_parts_mut(out, dim).fill(0.0);
        let score = |j: usize| scale * dot(q, k.add(j * stride), dim);
        let max = (0..keys).map(score).fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0f32;
        for j in 0..keys {
            let p = (score(j) - max).exp();
            sum += p;
            add_scaled(out, v.add(j * stride), p, dim);
        }
        if keys > 0 {
            divide(out, sum, dim);
        }
    }
}

/// `sum_d a[d] * b[d]` over `dim` floats.
///
/// # Safety
/// `dim` readable floats at `a` and `b`; NEON.
#[inline(always)]
unsafe fn dot(a: *const f32, b: *const f32, dim: usize) -> f32 {
    let body = dim / 4 * 4;
    // SAFETY (rest): indices below `dim` (the caller's contract).
    let mut acc = unsafe { vdupq_n_f32(0.0) };
    for d in (0..body).step_by(4) {
        acc = unsafe { vfmaq_f32(acc, vld1q_f32(a.add(d)), vld1q_f32(b.add(d))) };
    }
    let tail: f32 = (body..dim).map(|d| unsafe { *a.add(d) * *b.add(d) }).sum();
    unsafe { vaddvq_f32(acc) + tail }
}

/// `out[d] += p * x[d]` for `d < dim`.
///
/// # Safety
/// `dim` floats writable at `out` and readable at `x`, not overlapping; NEON.
#[inline(always)]
unsafe fn add_scaled(out: *mut f32, x: *const f32, p: f32, dim: usize) {
    let body = dim / 4 * 4;
    // SAFETY (rest): indices below `dim` (the caller's contract).
    let weight = unsafe { vdupq_n_f32(p) };
    for d in (0..body).step_by(4) {
        unsafe {
            vst1q_f32(
                out.add(d),
                vfmaq_f32(vld1q_f32(out.add(d)), weight, vld1q_f32(x.add(d))),
            )
        };
    }
    for d in body..dim {
        unsafe { *out.add(d) += p * *x.add(d) };
    }
}

/// `out[d] /= sum` for `d < dim`.
///
/// # Safety
/// `dim` writable floats at `out`; NEON.
#[inline(always)]
unsafe fn divide(out: *mut f32, sum: f32, dim: usize) {
    let body = dim / 4 * 4;
    // SAFETY (rest): indices below `dim` (the caller's contract).
    let divisor = unsafe { vdupq_n_f32(sum) };
    for d in (0..body).step_by(4) {
        unsafe { vst1q_f32(out.add(d), vdivq_f32(vld1q_f32(out.add(d)), divisor)) };
    }
    for d in body..dim {
        unsafe { *out.add(d) /= sum };
    }
}
