//! The int8-activation GEMMs ([`super::QGemmFn`]) on aarch64 with `sdot` (the `dotprod`
//! feature): `sdot vd.4s, vn.16b, vm.4b[l]` adds to each of 4 int32 lanes the dot product
//! of 4 signed bytes of `vn` with quad `l` of `vm`. A panel's 16-byte vector is 4 columns
//! by 4 consecutive k, exactly one `sdot` operand, and 16 activation codes are 4 quads,
//! so one load of a row feeds four `sdot`s by lane.
//!
//! The sums are of the codes (the activation bytes `code + 128` with the sign bit
//! flipped), so no correction is needed; 4-bit weights are unpacked to
//! signed bytes first (nibble minus 8). Per group of 32 k the int32 sums are converted
//! to f32 and multiplied into the results by the group's scales (widened from f16 with
//! `fcvtl`), as the AVX2 kernels do, so both compute the same values. A pass covers
//! `EP` rows by `NV` vectors of one panel (4 x 8 columns for the prefill block, 1 x 16 for
//! the decode GEMV), which keeps the sums, results and operands in the 32 q registers.
//! The `dotprod` intrinsics are unstable in Rust, so `sdot` and `fcvtl` are inline
//! assembly. Tested against the scalar twins under `qemu-aarch64`.

use super::qgemm::{qgemm_entry, QCall, QPanel};
use super::{Implementation, Microkernel, MicrokernelFn, PANEL, QUANT_GROUP};
use half::f16;
use std::arch::aarch64::{
    float32x4_t, int32x4_t, int8x16_t, vandq_u8, vcvtq_f32_s32, vdupq_n_f32, vdupq_n_s32,
    vdupq_n_s8, vdupq_n_u8, veorq_u8, vfmaq_f32, vgetq_lane_f32, vld1_u16, vld1q_u8, vmulq_n_f32,
    vreinterpretq_s8_u8, vshrq_n_u8, vst1q_f32, vsubq_s8,
};
use std::arch::asm;

/// The features every kernel here needs.
const FEATURES: &[&str] = &["neon", "dotprod"];

/// One implementation row of this ISA.
const fn row(kernel: Microkernel, func: MicrokernelFn) -> Implementation {
    Implementation {
        kernel,
        isa: "neon+dotprod",
        features: FEATURES,
        func,
    }
}

/// The NEON `sdot` implementations.
pub(super) const IMPLEMENTATIONS: &[Implementation] = &[
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
];

/// Columns per q register (int32 sums or f32 results).
pub(super) const LANES: usize = 4;
/// q registers of columns per panel.
pub(super) const PANEL_VECTORS: usize = PANEL / LANES;

/// A panel element's weights as signed bytes (`sdot` operands; `smmla` ones after a zip).
pub(super) trait DotPanel: QPanel {
    /// The signed weights of the quad of depths `k..k + 4` (`k` a multiple of 4) of the 4
    /// columns of vector `v` of `panel`: 4 bytes per column.
    ///
    /// # Safety
    /// Those bytes of `panel` are readable.
    unsafe fn quad(panel: *const Self, k: usize, v: usize) -> int8x16_t;
}

impl DotPanel for i8 {
    #[inline(always)]
    unsafe fn quad(panel: *const i8, k: usize, v: usize) -> int8x16_t {
        // SAFETY: the 16 bytes of quad `k / 4`, vector `v` (the caller's contract).
        unsafe { vreinterpretq_s8_u8(vld1q_u8(panel.add(k / 4 * 64 + v * 16).cast())) }
    }
}

impl DotPanel for u8 {
    /// The low nibbles hold the first quad of each 8 k, the high nibbles the second.
    #[inline(always)]
    unsafe fn quad(panel: *const u8, k: usize, v: usize) -> int8x16_t {
        // SAFETY: the 16 bytes of step `k / 8`, vector `v` (the caller's contract).
        unsafe {
            let bytes = vld1q_u8(panel.add(k / 8 * 64 + v * 16));
            let nibbles = match k % 8 {
                0 => vandq_u8(bytes, vdupq_n_u8(0x0F)),
                _ => vshrq_n_u8::<4>(bytes),
            };
            vsubq_s8(vreinterpretq_s8_u8(nibbles), vdupq_n_s8(8))
        }
    }
}

qgemm_entry!(
    /// [`Microkernel::Qgemm4x16W8`] with NEON `sdot`.
    qgemm_4x16_w8, i8, 4 x 1, panels, "neon,dotprod"
);
qgemm_entry!(
    /// [`Microkernel::Qgemm4x16W4`] with NEON `sdot` (nibbles unpacked to bytes).
    qgemm_4x16_w4, u8, 4 x 1, panels, "neon,dotprod"
);
qgemm_entry!(
    /// [`Microkernel::Qgemv1x64W8`] with NEON `sdot`.
    qgemv_1x64_w8, i8, 1 x 4, panels, "neon,dotprod"
);
qgemm_entry!(
    /// [`Microkernel::Qgemv1x64W4`] with NEON `sdot` (nibbles unpacked to bytes).
    qgemv_1x64_w4, u8, 1 x 4, panels, "neon,dotprod"
);

/// `EP` rows by the first `NQ` panels, in passes of [`pass`]: 2 vectors (8 columns) at a
/// time for a block of rows, a whole panel for one row.
///
/// # Safety
/// As [`super::QGemmFn`] for `call`'s operands, with at least one of the `cols` columns
/// in panel `NQ - 1`; inlined into a function enabling `dotprod`, which the CPU has.
#[inline(always)]
unsafe fn panels<W: DotPanel, const EP: usize, const NQ: usize>(call: &QCall<W>) {
    for q in 0..NQ {
        for v0 in (0..PANEL_VECTORS).step_by(if EP == 1 { 4 } else { 2 }) {
            if q * PANEL + v0 * LANES >= call.cols {
                return;
            }
            // SAFETY: forwarded; panel `q` holds one of the `cols` columns.
            unsafe {
                match EP {
                    1 => pass::<W, EP, 4>(call, q, v0),
                    _ => pass::<W, EP, 2>(call, q, v0),
                }
            }
        }
    }
}

/// Rows `0..EP` by vectors `v0..v0 + NV` of panel `q`: per group, the int32 sums of the
/// codes, then the f32 results times the group's weight scales and the row's scale of the
/// group; finally the store of the `rows x cols` part.
///
/// # Safety
/// As [`panels`], with panel `q` lent.
#[inline(always)]
unsafe fn pass<W: DotPanel, const EP: usize, const NV: usize>(
    call: &QCall<W>,
    q: usize,
    v0: usize,
) {
    let panel = call.panel(q);
    let rows: [*const u8; EP] = std::array::from_fn(|i| call.a_row(i));
    // Every depth read is below the call's whole groups, in rows and panels lent.
    // SAFETY: NEON is baseline on aarch64.
    let mut acc = [[unsafe { vdupq_n_f32(0.0) }; NV]; EP];
    for g in 0..call.groups {
        // SAFETY: NEON is baseline on aarch64.
        let mut sums = [[unsafe { vdupq_n_s32(0) }; NV]; EP];
        for k16 in (g * QUANT_GROUP..(g + 1) * QUANT_GROUP).step_by(16) {
            // SAFETY: bytes `k16..k16 + 16` of lent row `min(i, rows - 1)` lie in group
            // `g < groups`, readable (the contract).
            let codes: [int8x16_t; EP] = std::array::from_fn(|i| unsafe { codes(rows[i], k16) });
            for v in 0..NV {
                // SAFETY: the quads of depths `k16..k16 + 16` (group `g < groups`) of vector
                // `v0 + v < 4` of lent panel `q`; `dotprod` enabled by the entry point.
                unsafe {
                    let w = [0, 4, 8, 12].map(|t| W::quad(panel, k16 + t, v0 + v));
                    for (sums_i, &codes_i) in sums.iter_mut().zip(&codes) {
                        let sum = sdot::<0>(sums_i[v], w[0], codes_i);
                        let sum = sdot::<1>(sum, w[1], codes_i);
                        let sum = sdot::<2>(sum, w[2], codes_i);
                        sums_i[v] = sdot::<3>(sum, w[3], codes_i);
                    }
                }
            }
        }
        let scales = call.group_scales(q, g);
        // SAFETY: `g < groups`; `a_scale` clamps `i` to the lent rows.
        let a_scales: [f32; EP] = std::array::from_fn(|i| unsafe { call.a_scale(i, g) });
        for v in 0..NV {
            // SAFETY: scales `4 (v0 + v)..+4` of the 16 of group `g` of lent panel `q`.
            let scale = unsafe { widen(scales.add((v0 + v) * LANES)) };
            for ((acc_i, sums_i), &a_scale) in acc.iter_mut().zip(&sums).zip(&a_scales) {
                // SAFETY: NEON is baseline on aarch64.
                acc_i[v] = unsafe {
                    let group = vmulq_n_f32(vcvtq_f32_s32(sums_i[v]), a_scale);
                    vfmaq_f32(acc_i[v], group, scale)
                };
            }
        }
    }
    for (i, acc_i) in acc.iter().enumerate().take(call.rows) {
        for (v, &sum) in acc_i.iter().enumerate() {
            let j = q * PANEL + (v0 + v) * LANES;
            // SAFETY: row `i < rows`, columns below `cols` only.
            unsafe { store(call, i, j, sum) };
        }
    }
}

/// Writes the 4 columns from `j` of row `i` that are below `cols`.
///
/// # Safety
/// `i < rows` of `call`, whose C is lent.
#[inline(always)]
pub(super) unsafe fn store<W: QPanel>(call: &QCall<W>, i: usize, j: usize, values: float32x4_t) {
    if j + LANES <= call.cols {
        // SAFETY: 4 columns below `cols` of row `i`.
        unsafe { vst1q_f32(call.out(i, j), values) };
        return;
    }
    // SAFETY: NEON is baseline on aarch64; the lane indices are constants below 4.
    let lanes: [f32; LANES] = unsafe {
        [
            vgetq_lane_f32::<0>(values),
            vgetq_lane_f32::<1>(values),
            vgetq_lane_f32::<2>(values),
            vgetq_lane_f32::<3>(values),
        ]
    };
    for (t, &value) in lanes.iter().enumerate().take(call.cols.saturating_sub(j)) {
        // SAFETY: column `j + t < cols` of row `i`.
        unsafe { *call.out(i, j + t) = value };
    }
}

/// The 16 activation codes of depths `k..k + 16` of `row` (bytes `code + 128`, the sign
/// bit flipped).
///
/// # Safety
/// Those 16 bytes are readable.
#[inline(always)]
pub(super) unsafe fn codes(row: *const u8, k: usize) -> int8x16_t {
    // SAFETY: 16 bytes readable (the caller's contract).
    unsafe { vreinterpretq_s8_u8(veorq_u8(vld1q_u8(row.add(k)), vdupq_n_u8(0x80))) }
}

/// `acc + dot(w, quad LANE of codes)` per int32 lane: `sdot` by element.
///
/// # Safety
/// Inlined into a function enabling `dotprod`, which the CPU has.
#[inline(always)]
unsafe fn sdot<const LANE: i32>(mut acc: int32x4_t, w: int8x16_t, codes: int8x16_t) -> int32x4_t {
    // SAFETY: `sdot` reads and writes registers only (the `dotprod` feature: the caller's
    // contract).
    unsafe {
        asm!(
            "sdot {acc:v}.4s, {w:v}.16b, {codes:v}.4b[{lane}]",
            acc = inout(vreg) acc,
            w = in(vreg) w,
            codes = in(vreg) codes,
            lane = const LANE,
            options(pure, nomem, nostack),
        );
    }
    acc
}

/// The 4 halves at `halves`, widened to f32 (`fcvtl`, base AdvSIMD).
///
/// # Safety
/// 8 bytes at `halves` are readable.
#[inline(always)]
pub(super) unsafe fn widen(halves: *const f16) -> float32x4_t {
    let wide: float32x4_t;
    // SAFETY: 4 halves readable (the caller's contract); `fcvtl` touches registers only.
    unsafe {
        let bits = vld1_u16(halves.cast());
        asm!(
            "fcvtl {wide:v}.4s, {bits:v}.4h",
            wide = out(vreg) wide,
            bits = in(vreg) bits,
            options(pure, nomem, nostack),
        );
    }
    wide
}
