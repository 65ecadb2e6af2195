//! x86-64 AVX-512 VNNI microkernels (and, in [`gemv_a16`], the 4-bit decode GEMVs over f32
//! activations rounded to 16 bits): the int8-activation GEMMs ([`super::QGemmFn`]) on
//! `vpdpbusd`, which adds to each int32 lane the 4 products of 4 unsigned activation bytes
//! by 4 signed weight bytes. A 64-byte step of a panel ([`super::QGemmW8Fn`]'s quad: 16
//! columns x 4 k) is one such operand, the row's 4 activation bytes broadcast to every lane
//! the other; so a zmm register sums 16 columns, exactly (no saturation), over a group.
//!
//! One body serves every block shape ([`panels`], entered through
//! [`super::qgemm::qgemm_entry`]): per group of 32 k, int32 sums of `EP` rows by `NQ`
//! panels (`6 x 2` for the prefill block: 12 zmm of sums and 12 of f32 results; `1 x 1`
//! for each of the decode GEMV's 4 panels in turn, each weight load folded into its
//! `vpdpbusd`), then each sum converted to f32, scaled by the group's weight scales less
//! the group's correction (one FMA; the 16 f16 scales of a panel's group widened by one
//! `vcvtph2ps`, AVX-512F) and multiplied into the result by the row's scale of the group
//! (one FMA). At the end the results are stored through a lane mask (partial blocks write
//! only their part of C).
//!
//! The activations stay bytes (`code + 128`, unsigned as `vpdpbusd` wants them); each
//! group's correction removes the `128 * w` they add: per panel (shared by the block's
//! rows) one more `vpdpbusd` per operand, of bytes 1, sums the group's weights of each
//! column, so `128 * sum w` times the scales is subtracted from the scaled sums (the
//! panels hold nothing more than the weights and their scales). A 4-bit step's operands are unpacked
//! as `16 * w`: `(nibble << 4) ^ 0x80` is `16 * (nibble - 8)` as a signed byte, one
//! `vpternlogd` per operand (plus a shift for the low nibbles), where `nibble - 8` takes
//! an `and` and a byte subtraction; the results are divided by 16 (exactly) at the end.

mod gemv_a16;

use super::qgemm::{qgemm_entry, QCall, QPanel};
use super::x86_gemm::{prefetch_ahead, STREAM_PREFETCH_AHEAD};
use super::{Implementation, Microkernel, MicrokernelFn, PANEL, QUANT_GROUP};
use std::arch::x86_64::{
    __m512, __m512i, __mmask16, _mm256_loadu_si256, _mm512_cvtepi32_ps, _mm512_cvtph_ps,
    _mm512_dpbusd_epi32, _mm512_fmadd_ps, _mm512_fmsub_ps, _mm512_loadu_si512,
    _mm512_mask_storeu_ps, _mm512_mul_ps, _mm512_set1_epi32, _mm512_set1_epi8, _mm512_set1_ps,
    _mm512_setzero_ps, _mm512_setzero_si512, _mm512_slli_epi16, _mm512_slli_epi32,
    _mm512_ternarylogic_epi32,
};

/// The features every kernel here needs.
const FEATURES: &[&str] = &["avx512f", "avx512bw", "avx512vnni"];

/// The features of the 4-bit decode GEMVs' VBMI side (ahead of the plain VNNI one).
const VBMI_FEATURES: &[&str] = &["avx512f", "avx512bw", "avx512vnni", "avx512vbmi"];

/// One implementation row of this ISA.
const fn row(kernel: Microkernel, func: MicrokernelFn) -> Implementation {
    Implementation {
        kernel,
        isa: "avx512vnni",
        features: FEATURES,
        func,
    }
}

/// The AVX-512 VNNI implementations.
pub(super) const IMPLEMENTATIONS: &[Implementation] = &[
    row(
        Microkernel::Qgemm6x32W8,
        MicrokernelFn::QGemmW8(qgemm_6x32_w8),
    ),
    row(
        Microkernel::Qgemm6x32W4,
        MicrokernelFn::QGemmW4(qgemm_6x32_w4),
    ),
    row(
        Microkernel::Qgemm4x16W8,
        MicrokernelFn::QGemmW8(qgemm_4x16_w8),
    ),
    row(
        Microkernel::Qgemm4x16W4,
        MicrokernelFn::QGemmW4(qgemm_4x16_w4),
    ),
    row(
        Microkernel::Qgemv1x64W8,
        MicrokernelFn::QGemmW8(qgemv_1x64_w8),
    ),
    row(
        Microkernel::Qgemv1x64W4,
        MicrokernelFn::QGemmW4(qgemv_1x64_w4),
    ),
    Implementation {
        kernel: Microkernel::Sgemv8x256Q4,
        isa: "avx512vbmi",
        features: VBMI_FEATURES,
        func: MicrokernelFn::GemmQ4(gemv_a16::sgemv_8x256_q4_vbmi),
    },
    Implementation {
        kernel: Microkernel::Sgemv8x256Q4F16,
        isa: "avx512vbmi",
        features: VBMI_FEATURES,
        func: MicrokernelFn::GemmQ4F16(gemv_a16::sgemv_8x256_q4f16_vbmi),
    },
    row(
        Microkernel::Sgemv8x256Q4,
        MicrokernelFn::GemmQ4(gemv_a16::sgemv_8x256_q4),
    ),
    row(
        Microkernel::Sgemv8x256Q4F16,
        MicrokernelFn::GemmQ4F16(gemv_a16::sgemv_8x256_q4f16),
    ),
];

/// Depths per step of the k loop: two `vpdpbusd` operands per panel (two int8 quads, or
/// the two nibbles of one 4-bit step).
const STEP: usize = 8;

/// A weight panel element as `vpdpbusd` operands.
trait VnniPanel: QPanel {
    /// The operands hold the weights times this (exact in f32; the sums are divided by it).
    const MAGNIFY: f32;

    /// The signed-byte operand of quad `half` (0: depths `k..k + 4`, 1: `k + 4..k + 8`) of
    /// the step of [`STEP`] depths from `k` at `step` (its first element).
    ///
    /// # Safety
    /// The step's elements are readable; inlined into a function enabling AVX-512F and
    /// AVX-512BW, which the CPU has.
    unsafe fn operand(step: *const Self, half: usize) -> __m512i;
}

impl VnniPanel for i8 {
    const MAGNIFY: f32 = 1.0;

    #[inline(always)]
    unsafe fn operand(step: *const i8, half: usize) -> __m512i {
        // SAFETY: the quad's 64 bytes are readable (the caller's contract).
        unsafe { _mm512_loadu_si512(step.add(half * 64).cast()) }
    }
}

impl VnniPanel for u8 {
    const MAGNIFY: f32 = 16.0;

    /// `(nibble << 4) ^ 0x80` per byte: `16 * (nibble - 8)` as a signed byte.
    #[inline(always)]
    unsafe fn operand(step: *const u8, half: usize) -> __m512i {
        // SAFETY: the step's 64 bytes are readable; AVX-512F/BW (the caller's contract).
        unsafe {
            let bytes = _mm512_loadu_si512(step.cast());
            // The low nibbles moved up (the high ones spill into the next byte's low nibble,
            // which the mask drops).
            let high = if half == 0 {
                _mm512_slli_epi16::<4>(bytes)
            } else {
                bytes
            };
            let (mask, bias) = (_mm512_set1_epi8(0xF0u8 as i8), _mm512_set1_epi8(-128));
            // 0x6A: (a & b) ^ c.
            _mm512_ternarylogic_epi32::<0x6A>(high, mask, bias)
        }
    }
}

qgemm_entry!(
    /// [`Microkernel::Qgemm6x32W8`]: 12 zmm of int32 sums, 12 of f32 results.
    qgemm_6x32_w8, i8, 6 x 2, panels, "avx512f,avx512bw,avx512vnni"
);
qgemm_entry!(
    /// [`Microkernel::Qgemm6x32W4`]: 4-bit steps unpacked once for the 6 rows.
    qgemm_6x32_w4, u8, 6 x 2, panels, "avx512f,avx512bw,avx512vnni"
);
qgemm_entry!(
    /// [`Microkernel::Qgemm4x16W8`] (the AVX2 block, here for VNNI CPUs).
    qgemm_4x16_w8, i8, 4 x 1, panels, "avx512f,avx512bw,avx512vnni"
);
qgemm_entry!(
    /// [`Microkernel::Qgemm4x16W4`] (the AVX2 block, here for VNNI CPUs).
    qgemm_4x16_w4, u8, 4 x 1, panels, "avx512f,avx512bw,avx512vnni"
);
qgemm_entry!(
    /// [`Microkernel::Qgemv1x64W8`]: per quad, one broadcast and 4 `vpdpbusd` reading the
    /// 4 panels' weights straight from memory.
    qgemv_1x64_w8, i8, 1 x 4, panels, "avx512f,avx512bw,avx512vnni"
);
qgemm_entry!(
    /// [`Microkernel::Qgemv1x64W4`]: per 8 k and panel, one load, a shift and two
    /// `vpternlogd` feed 2 `vpdpbusd`.
    qgemv_1x64_w4, u8, 1 x 4, panels, "avx512f,avx512bw,avx512vnni"
);

/// `EP` rows by the first `NQ` panels: the f32 results of every group ([`group_sums`] scaled
/// by the group's scales), then the epilogue ([`store_rows`]).
///
/// # Safety
/// As [`super::QGemmFn`] for `call`'s operands, with at least one of the `cols` columns
/// in panel `NQ - 1`; inlined into a function enabling this file's features, which the
/// CPU has.
#[inline(always)]
unsafe fn panels<W: VnniPanel, const EP: usize, const NQ: usize>(call: &QCall<W>) {
    let a_rows: [*const u8; EP] = std::array::from_fn(|i| call.a_row(i));
    let panels: [*const W; NQ] = std::array::from_fn(|q| call.panel(q));
    // SAFETY: AVX-512F is enabled in the entry point this is inlined into (the contract).
    let mut acc = [[unsafe { _mm512_setzero_ps() }; NQ]; EP];
    let group_bytes = W::panel_stride(QUANT_GROUP) * size_of::<W>();
    for g in 0..call.groups {
        if EP == 1 {
            prefetch_ahead(&panels, g * group_bytes, group_bytes, STREAM_PREFETCH_AHEAD);
        }
        // SAFETY: group `g < groups` of every lent row and panel.
        let (sums, weight_sums) =
            unsafe { group_sums::<W, EP, NQ>(&a_rows, &panels, g * QUANT_GROUP) };
        for q in 0..NQ {
            // SAFETY: the 16 scales (32 bytes) of group `g` of lent panel `q`; the features.
            let (scale, corr) = unsafe {
                let scale = _mm512_cvtph_ps(_mm256_loadu_si256(call.group_scales(q, g).cast()));
                let offset = _mm512_cvtepi32_ps(_mm512_slli_epi32::<7>(weight_sums[q]));
                (scale, _mm512_mul_ps(offset, scale))
            };
            for (i, (acc_i, sums_i)) in acc.iter_mut().zip(&sums).enumerate() {
                // SAFETY: the features; the scale of group `g < groups` of row `i` (clamped
                // to the lent rows), broadcast from memory.
                acc_i[q] = unsafe {
                    let group = _mm512_fmsub_ps(_mm512_cvtepi32_ps(sums_i[q]), scale, corr);
                    _mm512_fmadd_ps(group, _mm512_set1_ps(call.a_scale(i, g)), acc_i[q])
                };
            }
        }
    }
    // SAFETY: forwarded contract.
    unsafe { store_rows(call, &acc) }
}

/// The int32 sums `sum_{k0 <= k < k0 + 32} a_rows[i][k] * w_q(k)` per row `i` and panel
/// `q`, and the weight sums `sum_{k0 <= k < k0 + 32} w_q(k)` per panel `q` (all times
/// [`VnniPanel::MAGNIFY`]), 16 columns a register.
///
/// # Safety
/// Depths `k0..k0 + 32` of every row of `a_rows` and every panel are readable; inlined
/// into a function enabling this file's features, which the CPU has.
#[inline(always)]
unsafe fn group_sums<W: VnniPanel, const EP: usize, const NQ: usize>(
    a_rows: &[*const u8; EP],
    panels: &[*const W; NQ],
    k0: usize,
) -> ([[__m512i; NQ]; EP], [__m512i; NQ]) {
    // SAFETY: AVX-512F/BW are enabled in the entry point this is inlined into.
    let (zero, ones) = unsafe { (_mm512_setzero_si512(), _mm512_set1_epi8(1)) };
    let mut sums = [[zero; NQ]; EP];
    let mut weight_sums = [zero; NQ];
    for k in (k0..k0 + QUANT_GROUP).step_by(STEP) {
        let at = k / STEP * W::panel_stride(STEP);
        for half in 0..2 {
            let mut w = [zero; NQ];
            for ((w_q, &panel), weight_sum) in w.iter_mut().zip(panels).zip(&mut weight_sums) {
                // SAFETY: the step at depth `k`, `k + 8 <= k0 + 32`, lies in the readable
                // group of the panel; the features are enabled by the entry point.
                *w_q = unsafe { W::operand(panel.add(at), half) };
                // SAFETY: AVX-512 VNNI is enabled in the entry point (the contract).
                *weight_sum = unsafe { _mm512_dpbusd_epi32(*weight_sum, ones, *w_q) };
            }
            for (sums_i, &a_i) in sums.iter_mut().zip(a_rows) {
                // SAFETY: bytes `k + 4 * half..+4` of the row are below `k0 + 32`, readable.
                let quad = unsafe { a_i.add(k + 4 * half).cast::<i32>().read_unaligned() };
                // SAFETY: AVX-512F is enabled in the entry point (the contract).
                let a4 = unsafe { _mm512_set1_epi32(quad) };
                for (sum, &w_q) in sums_i.iter_mut().zip(&w) {
                    // SAFETY: AVX-512 VNNI is enabled in the entry point (the contract).
                    *sum = unsafe { _mm512_dpbusd_epi32(*sum, a4, w_q) };
                }
            }
        }
    }
    (sums, weight_sums)
}

/// Writes `c[i][j] = acc[i][j] / MAGNIFY` for the call's `rows x cols`, through lane
/// masks.
///
/// # Safety
/// As [`panels`]; `NQ` covers the call's columns.
#[inline(always)]
unsafe fn store_rows<W: VnniPanel, const EP: usize, const NQ: usize>(
    call: &QCall<W>,
    acc: &[[__m512; NQ]; EP],
) {
    let lanes: [__mmask16; NQ] = std::array::from_fn(|q| lane_mask(call.cols - q * PANEL));
    // SAFETY: AVX-512F is enabled in the entry point this is inlined into (the contract).
    let unmagnify = unsafe { _mm512_set1_ps(1.0 / W::MAGNIFY) };
    for (i, acc_i) in acc.iter().enumerate().take(call.rows) {
        for q in 0..NQ {
            // SAFETY: AVX-512F; the masked store touches only lanes `j < cols` of row
            // `i < rows` of `c`, which are lent.
            unsafe {
                let v = _mm512_mul_ps(acc_i[q], unmagnify);
                _mm512_mask_storeu_ps(call.out(i, q * PANEL), lanes[q], v);
            }
        }
    }
}

/// The mask of the first `min(n, 16)` lanes (none for `n == 0`).
#[inline(always)]
fn lane_mask(n: usize) -> __mmask16 {
    ((1u32 << n.min(PANEL)) - 1) as __mmask16
}
