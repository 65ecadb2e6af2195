//! The int8-activation prefill GEMMs ([`super::QGemmFn`], `4 x 16` blocks) on aarch64
//! with `smmla` (the `i8mm` feature): `smmla vd.4s, vn.16b, vm.16b` adds to the 2 x 2
//! int32 block `vd` the product of two rows of 8 signed bytes (`vn`: two activation rows'
//! codes over 8 k) by two columns of 8 (`vm`: two weight columns over the same k), twice
//! the multiply-adds of an `sdot`.
//!
//! The panels keep the layout the `sdot` kernels read (4 k per column per 16-byte
//! vector): the quads of depths `k` and `k + 4` of 4 columns are zipped by 32-bit lanes
//! into the two column pairs' 8-k operands, and two rows' 16 codes by 64-bit lanes into
//! the row pair's. As in [`super::neon_dot`], the sums are of the codes, converted to f32
//! per group of 32 k and multiplied into the results by the group's scales (each column
//! pair's two scales repeated for the two rows); the 2 x 2 blocks are unzipped into rows
//! at the end. A pass covers 4 rows by 8 columns. The decode GEMV (one row) stays on
//! `sdot`: half of each `smmla` would be wasted. Tested against the scalar twins under
//! `qemu-aarch64`.

use super::neon_dot::{codes, store, widen, DotPanel, LANES, PANEL_VECTORS};
use super::qgemm::{qgemm_entry, QCall};
use super::{Implementation, Microkernel, MicrokernelFn, PANEL, QUANT_GROUP};
use std::arch::aarch64::{
    float32x4_t, int32x4_t, int8x16_t, vcvtq_f32_s32, vdupq_laneq_u64, vdupq_n_f32, vdupq_n_s32,
    vfmaq_f32, vld1q_f32, vmulq_f32, vreinterpretq_f32_u64, vreinterpretq_s8_u32,
    vreinterpretq_s8_u64, vreinterpretq_u32_s8, vreinterpretq_u64_f32, vreinterpretq_u64_s8,
    vzip1q_u32, vzip1q_u64, vzip2q_u32, vzip2q_u64,
};
use std::arch::asm;

/// The features every kernel here needs.
const FEATURES: &[&str] = &["neon", "i8mm"];

/// One implementation row of this ISA.
const fn row(kernel: Microkernel, func: MicrokernelFn) -> Implementation {
    Implementation {
        kernel,
        isa: "neon+i8mm",
        features: FEATURES,
        func,
    }
}

/// The NEON `smmla` implementations.
pub(super) const IMPLEMENTATIONS: &[Implementation] = &[
    row(
        Microkernel::Qgemm4x16W8,
        MicrokernelFn::QGemmW8(qgemm_4x16_w8),
    ),
    row(
        Microkernel::Qgemm4x16W4,
        MicrokernelFn::QGemmW4(qgemm_4x16_w4),
    ),
];

qgemm_entry!(
    /// [`Microkernel::Qgemm4x16W8`] with NEON `smmla`.
    qgemm_4x16_w8, i8, 4 x 1, panels, "neon,i8mm"
);
qgemm_entry!(
    /// [`Microkernel::Qgemm4x16W4`] with NEON `smmla` (nibbles unpacked to bytes).
    qgemm_4x16_w4, u8, 4 x 1, panels, "neon,i8mm"
);

/// Row pairs of a block.
const ROW_PAIRS: usize = 2;
/// Vectors of 4 columns per pass.
const PASS_VECTORS: usize = 2;

/// 4 rows by the first `NQ` panels, in passes of [`pass`] over 8 columns.
///
/// # Safety
/// As [`super::QGemmFn`] for `call`'s operands (a block of at most 4 rows), with at least
/// one of the `cols` columns in panel `NQ - 1`; inlined into a function enabling `i8mm`,
/// which the CPU has.
#[inline(always)]
unsafe fn panels<W: DotPanel, const EP: usize, const NQ: usize>(call: &QCall<W>) {
    for q in 0..NQ {
        for v0 in (0..PANEL_VECTORS).step_by(PASS_VECTORS) {
            if q * PANEL + v0 * LANES >= call.cols {
                return;
            }
            // SAFETY: forwarded; panel `q` holds one of the `cols` columns.
            unsafe { pass(call, q, v0) };
        }
    }
}

/// The 2 x 2 int32 (then f32) blocks of one pass: `[row pair][vector][column pair]`.
type Blocks<T> = [[[T; 2]; PASS_VECTORS]; ROW_PAIRS];

/// Rows `0..4` by vectors `v0..v0 + 2` of panel `q`: per group, the 2 x 2 int32 sums of
/// the codes, then the f32 results times the group's weight scales and the rows' scales of
/// the group; finally the store of the `rows x cols` part.
///
/// # Safety
/// As [`panels`], with panel `q` lent.
#[inline(always)]
unsafe fn pass<W: DotPanel>(call: &QCall<W>, q: usize, v0: usize) {
    let panel = call.panel(q);
    let rows: [*const u8; 2 * ROW_PAIRS] = std::array::from_fn(|i| call.a_row(i));
    // Every depth read is below the call's whole groups, in rows and panels lent.
    // SAFETY: NEON is baseline on aarch64.
    let mut acc: Blocks<float32x4_t> = [[[unsafe { vdupq_n_f32(0.0) }; 2]; PASS_VECTORS]; 2];
    for g in 0..call.groups {
        // SAFETY: NEON is baseline on aarch64.
        let mut sums: Blocks<int32x4_t> = [[[unsafe { vdupq_n_s32(0) }; 2]; PASS_VECTORS]; 2];
        for k16 in (g * QUANT_GROUP..(g + 1) * QUANT_GROUP).step_by(16) {
            // SAFETY: bytes `k16..k16 + 16` of lent row `min(i, rows - 1)` lie in group
            // `g < groups`, readable (the contract).
            let codes: [int8x16_t; 4] = std::array::from_fn(|i| unsafe { codes(rows[i], k16) });
            for half in 0..2 {
                let k = k16 + half * 8;
                // SAFETY: register shuffles only; NEON is baseline on aarch64.
                let pairs: [int8x16_t; ROW_PAIRS] = std::array::from_fn(|p| unsafe {
                    row_pair(codes[2 * p], codes[2 * p + 1], half)
                });
                for v in 0..PASS_VECTORS {
                    // SAFETY: the quads of depths `k..k + 8` (in group `g < groups`) of
                    // vector `v0 + v < 4` of lent panel `q`; NEON baseline.
                    let columns = unsafe {
                        column_pairs(W::quad(panel, k, v0 + v), W::quad(panel, k + 4, v0 + v))
                    };
                    for (sums_p, &rows_p) in sums.iter_mut().zip(&pairs) {
                        for (sum, &cols) in sums_p[v].iter_mut().zip(&columns) {
                            // SAFETY: `i8mm` is enabled in the entry point (the contract).
                            *sum = unsafe { smmla(*sum, rows_p, cols) };
                        }
                    }
                }
            }
        }
        let scales = call.group_scales(q, g);
        // Each row pair's scales of the group as its 2 x 2 blocks need them: `[x0, x0, x1,
        // x1]` (rows past `rows` repeat the last one's).
        // SAFETY: `g < groups`; `a_scale` clamps rows past `rows` to the last lent one;
        // the load reads the 4-float local array.
        let row_scales: [float32x4_t; ROW_PAIRS] = std::array::from_fn(|p| unsafe {
            let (first, second) = (call.a_scale(2 * p, g), call.a_scale(2 * p + 1, g));
            vld1q_f32([first, first, second, second].as_ptr())
        });
        for v in 0..PASS_VECTORS {
            // SAFETY: scales `4 (v0 + v)..+4` of the 16 of group `g` of lent panel `q`.
            let scale = unsafe { widen(scales.add((v0 + v) * LANES)) };
            // SAFETY: register shuffles only; NEON is baseline on aarch64.
            let pair_scales = unsafe { pair_scales(scale) };
            for ((acc_p, sums_p), &rows_p) in acc.iter_mut().zip(&sums).zip(&row_scales) {
                for c in 0..2 {
                    // SAFETY: NEON is baseline on aarch64.
                    acc_p[v][c] = unsafe {
                        let group = vmulq_f32(vcvtq_f32_s32(sums_p[v][c]), rows_p);
                        vfmaq_f32(acc_p[v][c], group, pair_scales[c])
                    };
                }
            }
        }
    }
    for (p, acc_p) in acc.iter().enumerate() {
        for (v, blocks) in acc_p.iter().enumerate() {
            let j = q * PANEL + (v0 + v) * LANES;
            // SAFETY: rows below `rows` only; columns below `cols` only (`store`).
            unsafe {
                let rows_of = unzip_rows(blocks[0], blocks[1]);
                for (r, &values) in rows_of.iter().enumerate() {
                    let i = 2 * p + r;
                    if i < call.rows {
                        store(call, i, j, values);
                    }
                }
            }
        }
    }
}

/// The row pair's `smmla` operand for depths `half * 8..half * 8 + 8` of two rows' 16
/// codes: the first row's 8, then the second's.
#[inline(always)]
unsafe fn row_pair(first: int8x16_t, second: int8x16_t, half: usize) -> int8x16_t {
    // SAFETY: register operations (NEON).
    unsafe {
        let (first, second) = (vreinterpretq_u64_s8(first), vreinterpretq_u64_s8(second));
        vreinterpretq_s8_u64(match half {
            0 => vzip1q_u64(first, second),
            _ => vzip2q_u64(first, second),
        })
    }
}

/// The two column pairs' `smmla` operands of 4 columns from their quads of depths
/// `k..k + 4` (`low`) and `k + 4..k + 8` (`high`): per column its 8 weights, two columns
/// per operand.
#[inline(always)]
unsafe fn column_pairs(low: int8x16_t, high: int8x16_t) -> [int8x16_t; 2] {
    // SAFETY: register operations (NEON).
    unsafe {
        let (low, high) = (vreinterpretq_u32_s8(low), vreinterpretq_u32_s8(high));
        [
            vreinterpretq_s8_u32(vzip1q_u32(low, high)),
            vreinterpretq_s8_u32(vzip2q_u32(low, high)),
        ]
    }
}

/// The scales of 4 columns as each column pair's 2 x 2 block needs them: `[s0, s1, s0,
/// s1]` and `[s2, s3, s2, s3]`.
#[inline(always)]
unsafe fn pair_scales(scale: float32x4_t) -> [float32x4_t; 2] {
    // SAFETY: register operations (NEON).
    unsafe {
        let bits = vreinterpretq_u64_f32(scale);
        [
            vreinterpretq_f32_u64(vdupq_laneq_u64::<0>(bits)),
            vreinterpretq_f32_u64(vdupq_laneq_u64::<1>(bits)),
        ]
    }
}

/// The two rows of 4 columns held by the 2 x 2 blocks of two column pairs (`[r0c0, r0c1,
/// r1c0, r1c1]` each).
#[inline(always)]
unsafe fn unzip_rows(pair0: float32x4_t, pair1: float32x4_t) -> [float32x4_t; 2] {
    // SAFETY: register operations (NEON).
    unsafe {
        let (pair0, pair1) = (vreinterpretq_u64_f32(pair0), vreinterpretq_u64_f32(pair1));
        [
            vreinterpretq_f32_u64(vzip1q_u64(pair0, pair1)),
            vreinterpretq_f32_u64(vzip2q_u64(pair0, pair1)),
        ]
    }
}

/// `acc + rows * columns^T` on 2 x 2 int32 blocks: `smmla`.
///
/// # Safety
/// Inlined into a function enabling `i8mm`, which the CPU has.
#[inline(always)]
unsafe fn smmla(mut acc: int32x4_t, rows: int8x16_t, columns: int8x16_t) -> int32x4_t {
    // SAFETY: `smmla` reads and writes registers only (the `i8mm` feature: the caller's
    // contract).
    unsafe {
        asm!(
            "smmla {acc:v}.4s, {rows:v}.16b, {columns:v}.16b",
            acc = inout(vreg) acc,
            rows = in(vreg) rows,
            columns = in(vreg) columns,
            options(pure, nomem, nostack),
        );
    }
    acc
}
