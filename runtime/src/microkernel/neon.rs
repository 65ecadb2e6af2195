//! aarch64 NEON microkernels (128-bit q registers, 4 f32 lanes): the block GEMMs `6 x 16`
//! (prefill: 24 accumulators, one panel) and `1 x 64` (the decode GEMV: 16 accumulators
//! streaming 4 panels at once) over f32, f16, int8 and 4-bit weight panels (the
//! quantized ones times their group scales, f32 or f16), and the attention rows. Per k
//! of a GEMM, one 16-weight load per panel, widened to four f32 q registers ([`Panel`])
//! and for quantized weights multiplied by their group's scales (loaded once a group),
//! and one broadcast activation per row feed `vfmaq_f32`s; the block is then written
//! back through a staging row, so partial blocks touch only their `rows x cols`. The
//! attention row ([`attention`]) is one body over f32, f16 and int8 keys and values,
//! widened as they are loaded. Tested against the scalar twins under `qemu-aarch64` (the
//! runtime's aarch64 CI step).

mod attention;

use super::{
    u4_gemv_parts, Implementation, Microkernel, MicrokernelFn, U4Pair, PANEL, QUANT_GROUP,
};
use attention::{attention, attention_q8kv};
use half::f16;
use std::arch::aarch64::{
    float32x4_t, int8x16_t, uint16x4_t, vandq_u8, vcvtq_f32_s32, vdupq_n_f32, vdupq_n_s8,
    vdupq_n_u8, vfmaq_f32, vget_high_s16, vget_high_s8, vget_high_u16, vget_low_s16, vget_low_s8,
    vget_low_u16, vld1q_f32, vld1q_s8, vld1q_u16, vld1q_u8, vmovl_s16, vmovl_s8, vmulq_f32,
    vreinterpretq_s8_u8, vshrq_n_u8, vst1q_f32, vsubq_s8,
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
    row(
        Microkernel::Sgemm6x16,
        MicrokernelFn::Gemm(sgemm::<f32, 6, 1>),
    ),
    row(
        Microkernel::Sgemv1x64,
        MicrokernelFn::Gemm(sgemm::<f32, 1, 4>),
    ),
    row(
        Microkernel::Sgemm6x16F16,
        MicrokernelFn::GemmF16(sgemm::<f16, 6, 1>),
    ),
    row(
        Microkernel::Sgemv1x64F16,
        MicrokernelFn::GemmF16(sgemm::<f16, 1, 4>),
    ),
    row(
        Microkernel::Sgemm6x16Q8,
        MicrokernelFn::GemmQ8(sgemm_quant::<i8, f32, 6, 1>),
    ),
    row(
        Microkernel::Sgemv1x64Q8,
        MicrokernelFn::GemmQ8(sgemm_quant::<i8, f32, 1, 4>),
    ),
    row(
        Microkernel::Sgemm6x16Q4,
        MicrokernelFn::GemmQ4(sgemm_quant::<U4Pair, f32, 6, 1>),
    ),
    row(
        Microkernel::Sgemv8x256Q4,
        MicrokernelFn::GemmQ4(sgemv_q4::<f32>),
    ),
    row(
        Microkernel::Sgemm6x16Q4F16,
        MicrokernelFn::GemmQ4F16(sgemm_quant::<U4Pair, f16, 6, 1>),
    ),
    row(
        Microkernel::Sgemv8x256Q4F16,
        MicrokernelFn::GemmQ4F16(sgemv_q4::<f16>),
    ),
    row(
        Microkernel::AttentionF32,
        MicrokernelFn::Attention(attention::<f32>),
    ),
    row(
        Microkernel::AttentionF16Kv,
        MicrokernelFn::AttentionF16Kv(attention::<f16>),
    ),
    row(
        Microkernel::AttentionQ8Kv,
        MicrokernelFn::AttentionQ8Kv(attention_q8kv),
    ),
];

/// 16 weights (or scales) as f32, four lanes a register.
type Row16 = [float32x4_t; 4];

/// The 4 f16 values `bits` widened to f32 (`fcvtl`, exact; ARMv8.0 Advanced SIMD).
#[inline(always)]
fn widen_f16x4(bits: uint16x4_t) -> float32x4_t {
    let wide: float32x4_t;
    // SAFETY: `fcvtl` reads and writes registers only; NEON is baseline on aarch64.
    unsafe {
        std::arch::asm!(
            "fcvtl {wide:v}.4s, {bits:v}.4h",
            wide = out(vreg) wide,
            bits = in(vreg) bits,
            options(pure, nomem, nostack, preserves_flags),
        )
    };
    wide
}

/// The 16 f16 values at `p` widened to f32.
///
/// # Safety
/// 32 bytes are readable at `p`.
#[inline(always)]
unsafe fn load_f16x16(p: *const f16) -> Row16 {
    // SAFETY: 16 readable f16 (caller's contract); NEON.
    unsafe {
        let (lo, hi) = (vld1q_u16(p.cast()), vld1q_u16(p.cast::<u16>().add(8)));
        [
            vget_low_u16(lo),
            vget_high_u16(lo),
            vget_low_u16(hi),
            vget_high_u16(hi),
        ]
    }
    .map(widen_f16x4)
}

/// A weight element of a packed panel, widened to f32 as loaded.
trait Panel: Copy {
    /// Weights per element, of consecutive k (a panel holds `ceil(depth / PER_ELEMENT)`
    /// elements per column).
    const PER_ELEMENT: usize = 1;

    /// The 16 weights of depth `k` of the panel row at `p` (the elements holding `k`).
    ///
    /// # Safety
    /// 16 elements are readable at `p`.
    unsafe fn load_k(p: *const Self, k: usize) -> Row16;
}

impl Panel for f32 {
    #[inline(always)]
    unsafe fn load_k(p: *const f32, _k: usize) -> Row16 {
        // SAFETY: 16 readable floats (caller's contract).
        std::array::from_fn(|l| unsafe { vld1q_f32(p.add(4 * l)) })
    }
}

impl Panel for f16 {
    #[inline(always)]
    unsafe fn load_k(p: *const f16, _k: usize) -> Row16 {
        // SAFETY: forwarded contract.
        unsafe { load_f16x16(p) }
    }
}

impl Panel for i8 {
    #[inline(always)]
    unsafe fn load_k(p: *const i8, _k: usize) -> Row16 {
        // SAFETY: 16 readable bytes (caller's contract).
        unsafe { widen_i8x16(vld1q_s8(p)) }
    }
}

impl Panel for U4Pair {
    const PER_ELEMENT: usize = 2;

    #[inline(always)]
    unsafe fn load_k(p: *const U4Pair, k: usize) -> Row16 {
        // SAFETY: 16 readable pairs, one byte each (caller's contract); NEON.
        unsafe {
            let bytes = vld1q_u8(p.cast());
            let nibbles = if k.is_multiple_of(2) {
                vandq_u8(bytes, vdupq_n_u8(0x0F))
            } else {
                vshrq_n_u8::<4>(bytes)
            };
            widen_i8x16(vsubq_s8(vreinterpretq_s8_u8(nibbles), vdupq_n_s8(8)))
        }
    }
}

/// 16 signed bytes as f32.
#[inline(always)]
fn widen_i8x16(bytes: int8x16_t) -> Row16 {
    // SAFETY: NEON is baseline on aarch64; registers only.
    unsafe {
        let (lo, hi) = (vmovl_s8(vget_low_s8(bytes)), vmovl_s8(vget_high_s8(bytes)));
        [
            vget_low_s16(lo),
            vget_high_s16(lo),
            vget_low_s16(hi),
            vget_high_s16(hi),
        ]
        .map(|half| vcvtq_f32_s32(vmovl_s16(half)))
    }
}

/// A group scale element (f32, or f16 widened as loaded).
trait Scale: Copy {
    /// The 16 scales at `p`.
    ///
    /// # Safety
    /// 16 elements are readable at `p`.
    unsafe fn load16(p: *const Self) -> Row16;
}

impl Scale for f32 {
    #[inline(always)]
    unsafe fn load16(p: *const f32) -> Row16 {
        // SAFETY: forwarded contract.
        unsafe { <f32 as Panel>::load_k(p, 0) }
    }
}

impl Scale for f16 {
    #[inline(always)]
    unsafe fn load16(p: *const f16) -> Row16 {
        // SAFETY: forwarded contract.
        unsafe { load_f16x16(p) }
    }
}

/// The block GEMM of `EP` rows by `NQ` panels of float weights `W`
/// ([`Microkernel::Sgemm6x16`] is `sgemm::<f32, 6, 1>`, [`Microkernel::Sgemv1x64`]
/// `sgemm::<f32, 1, 4>`, their f16 versions `W = f16`).
///
/// # Safety
/// As [`super::GemmFn`] over `W`.
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn sgemm<W: Panel, const EP: usize, const NQ: usize>(
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
    let call = Call::<W, f32>::new(a, (b, None), c, (kc, lda, ldc), (rows, cols), accumulate);
    // SAFETY: forwarded contract.
    unsafe { call.block::<EP, NQ>() }
}

/// The block GEMM of `EP` rows by `NQ` panels of quantized weights `W` with group scales
/// `S` ([`super::GemmQuantFn`]).
///
/// # Safety
/// As [`super::GemmQuantFn`].
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn sgemm_quant<W: Panel, S: Scale, const EP: usize, const NQ: usize>(
    a: *const f32,
    b: *const W,
    scales: *const S,
    c: *mut f32,
    kc: i64,
    lda: i64,
    ldc: i64,
    rows: i64,
    cols: i64,
    accumulate: i64,
) {
    let operands = (b, Some(scales));
    let call = Call::new(a, operands, c, (kc, lda, ldc), (rows, cols), accumulate);
    // SAFETY: forwarded contract.
    unsafe { call.block::<EP, NQ>() }
}

/// The 4-bit decode GEMV ([`Microkernel::Sgemv8x256Q4`] with scales of `S`): the `1 x 64`
/// block on each 64-column part of each row of the call.
///
/// # Safety
/// As [`super::GemmQuantFn`] over 4-bit weights.
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn sgemv_q4<S: Scale>(
    a: *const f32,
    b: *const U4Pair,
    scales: *const S,
    c: *mut f32,
    kc: i64,
    lda: i64,
    ldc: i64,
    rows: i64,
    cols: i64,
    accumulate: i64,
) {
    for part in u4_gemv_parts(lda, ldc, rows, cols) {
        let operands = (
            b.wrapping_add(part.b),
            Some(scales.wrapping_add(part.scales)),
        );
        let (a, c) = (a.wrapping_add(part.a), c.wrapping_add(part.c));
        let call = Call::new(a, operands, c, (kc, lda, ldc), (1, part.cols), accumulate);
        // SAFETY: the part's panels, scales and columns are the call's, lent by the caller.
        unsafe { call.block::<1, 4>() }
    }
}

/// One call's operands, sizes clamped as [`super::GemmFn`] says.
struct Call<W, S> {
    a: *const f32,
    b: *const W,
    /// The group scales of quantized weights.
    scales: Option<*const S>,
    c: *mut f32,
    kc: usize,
    lda: isize,
    ldc: isize,
    rows: usize,
    cols: usize,
    accumulate: bool,
}

impl<W: Panel, S: Scale> Call<W, S> {
    fn new(
        a: *const f32,
        (b, scales): (*const W, Option<*const S>),
        c: *mut f32,
        (kc, lda, ldc): (i64, i64, i64),
        (rows, cols): (i64, i64),
        accumulate: i64,
    ) -> Self {
        Call {
            a,
            b,
            scales,
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
    /// As [`super::GemmFn`] (or [`super::GemmQuantFn`] with scales) for the call's
    /// operands.
    #[inline(always)]
    unsafe fn block<const EP: usize, const NQ: usize>(&self) {
        let (rows, cols) = (self.rows.min(EP), self.cols.min(NQ * PANEL));
        if rows == 0 || cols == 0 {
            return;
        }
        let panels = cols.div_ceil(PANEL);
        let depth = self.lda.max(0) as usize;
        let panel_stride = depth.div_ceil(W::PER_ELEMENT) * PANEL;
        let groups = depth.div_ceil(QUANT_GROUP);
        // Rows `< rows` of `a`, the `panels` lent panels and their scales are read for
        // depths `< kc` only (the caller's contract).
        // SAFETY: NEON is baseline on aarch64.
        let zero = unsafe { vdupq_n_f32(0.0) };
        let mut acc = [[[zero; 4]; NQ]; EP];
        // Quantized weights: the scales of `k`'s group, loaded at the group's first k.
        let mut group_scales = [[zero; 4]; NQ];
        for k in 0..self.kc {
            if let Some(scales) = self.scales.filter(|_| k % QUANT_GROUP == 0) {
                for (q, s_q) in group_scales.iter_mut().enumerate().take(panels) {
                    let at = (q * groups + k / QUANT_GROUP) * PANEL;
                    // SAFETY: group `k / 32` (`k < kc`) of panel `q < panels` holds one of
                    // the columns, so its 16 scales are lent.
                    *s_q = unsafe { S::load16(scales.add(at)) };
                }
            }
            let mut w = [[zero; 4]; NQ];
            for (q, w_q) in w.iter_mut().enumerate().take(panels) {
                let at = q * panel_stride + k / W::PER_ELEMENT * PANEL;
                // SAFETY: panel `q < panels` holds one of the columns, so its depth `k < kc`
                // is lent.
                *w_q = unsafe { W::load_k(self.b.add(at), k) };
                if self.scales.is_some() {
                    let s = group_scales[q];
                    // SAFETY: NEON is baseline on aarch64.
                    *w_q = std::array::from_fn(|l| unsafe { vmulq_f32(w_q[l], s[l]) });
                }
            }
            for (i, acc_i) in acc.iter_mut().enumerate() {
                let row = i.min(rows - 1) as isize;
                // SAFETY: row `min(i, rows - 1) < rows` of `a` is lent for `kc > k` floats.
                let x = unsafe { vdupq_n_f32(*self.a.offset(row * self.lda + k as isize)) };
                for (acc_iq, w_q) in acc_i.iter_mut().zip(&w).take(panels) {
                    for (acc_l, &w_l) in acc_iq.iter_mut().zip(w_q) {
                        // SAFETY: NEON is baseline on aarch64.
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
    /// Row `i < rows` of `c` is lent for the call's columns.
    #[inline(always)]
    unsafe fn store_row<const NQ: usize>(&self, i: usize, acc_i: &[Row16; NQ]) {
        let mut staged = [[0.0f32; PANEL]; NQ];
        for (stage, acc_iq) in staged.iter_mut().zip(acc_i) {
            for (l, &v) in acc_iq.iter().enumerate() {
                // SAFETY: 4 floats of the staging row.
                unsafe { vst1q_f32(stage.as_mut_ptr().add(4 * l), v) };
            }
        }
        // SAFETY: row `i < rows` of `c` is lent (the contract), so its start is in bounds.
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
