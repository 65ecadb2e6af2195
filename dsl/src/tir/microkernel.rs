//! Microkernel calls: a statement that hands an inner register block of a loop nest to
//! a hand-written kernel of the runtime (a tensorized block), and the reference semantics
//! of the table's kernels that the interpreter runs. The table itself, with what each
//! kernel computes, is the ABI's ([`MICROKERNELS`], from `oxrelax-abi`).

use super::expr::PrimExpr;
use crate::DType;
use oxrelax_abi::layout::{scale_element, QuantLayout};
pub use oxrelax_abi::microkernel::{MicrokernelKind, MicrokernelSpec, MICROKERNELS};
use oxrelax_abi::PANEL;
use serde::{Deserialize, Serialize};

/// [`oxrelax_abi::QUANT_GROUP`] as the compiler's index type.
pub const QUANT_GROUP: i64 = oxrelax_abi::QUANT_GROUP as i64;

/// A buffer operand of a microkernel call: `buffer`'s elements from flat element index
/// `offset` on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BufferRegion {
    /// The buffer (a parameter or an allocation in scope).
    pub buffer: String,
    /// The first element, as a flat (row-major) element index.
    pub offset: PrimExpr,
}

/// A call of microkernel `kernel` on buffer regions and `i64` scalars.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MicrokernelCall {
    /// The microkernel's name in [`MICROKERNELS`].
    pub kernel: String,
    /// The buffer operands, in the kernel's order ([`MicrokernelKind::operands`]).
    pub operands: Vec<BufferRegion>,
    /// The scalar operands, in the kernel's order ([`MicrokernelKind::scalars`]).
    pub scalars: Vec<PrimExpr>,
}

/// The scalar operands of one block GEMM call, evaluated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmScalars {
    /// Reduction length.
    pub kc: i64,
    /// Row stride of `a`.
    pub lda: i64,
    /// Row stride of `c`.
    pub ldc: i64,
    /// Valid rows (`<= ep`).
    pub rows: i64,
    /// Valid columns (`<= hp`).
    pub cols: i64,
    /// Whether to add to `c` (else overwrite).
    pub accumulate: bool,
}

impl GemmScalars {
    /// The elements of `a`, `b` and `c` one call on panels of `weights` may touch (the
    /// interpreter's bounds check; `a` and `c` count the rows up to `rows`, `b` the panels
    /// holding the first `cols` columns).
    pub fn footprint(&self, weights: DType) -> [i64; 3] {
        let rows = |stride: i64, len: i64| {
            if self.rows > 0 && len > 0 {
                (self.rows - 1) * stride + len
            } else {
                0
            }
        };
        [
            rows(self.lda, self.kc),
            self.panels_footprint(weights),
            rows(self.ldc, self.cols),
        ]
    }

    /// The elements of `b` from the first panel's first group to the last group read of
    /// the last panel holding one of the `cols` columns.
    fn panels_footprint(&self, weights: DType) -> i64 {
        let panels = panels_of(self.cols);
        if panels == 0 || self.kc <= 0 {
            return 0;
        }
        let elements =
            |depth: i64| QuantLayout::Rows.panel_elements(weights.bits(), depth as usize);
        ((panels - 1) as usize * elements(self.lda) + elements(self.kc)) as i64
    }

    /// The elements of a quantized kernel's `scales` one call may read: every group of the
    /// call's reduction, of each panel holding one of the `cols` columns.
    pub fn scales_footprint(&self) -> i64 {
        let panels = panels_of(self.cols);
        if panels == 0 || self.kc <= 0 {
            return 0;
        }
        let groups = (self.lda + QUANT_GROUP - 1) / QUANT_GROUP;
        let read = (self.kc + QUANT_GROUP - 1) / QUANT_GROUP;
        ((panels - 1) * groups + read) * PANEL as i64
    }

    /// The reference semantics (f64 arithmetic) on slices starting at each operand's
    /// offset, for panels of `weights`; the slices must hold [`GemmScalars::footprint`]
    /// elements (and `scales`, for quantized weights, [`GemmScalars::scales_footprint`]).
    pub fn reference(
        &self,
        weights: DType,
        (a, b, scales): (&[f64], &[f64], Option<&[f64]>),
        c: &mut [f64],
    ) {
        let groups = ((self.lda + QUANT_GROUP - 1) / QUANT_GROUP) as usize;
        let scale = |at: (usize, usize)| scales.map_or(1.0, |s| s[scale_element(groups, at)]);
        let offset = if weights == DType::U4 { 8.0 } else { 0.0 };
        let weight = |at: (usize, usize)| {
            let lda = self.lda as usize;
            b[QuantLayout::Rows.weight_element(weights.bits(), lda, at)] - offset
        };
        for i in 0..self.rows {
            for j in 0..self.cols {
                let dot: f64 = (0..self.kc)
                    .map(|k| {
                        let at = (k as usize, j as usize);
                        a[(i * self.lda + k) as usize] * (weight(at) * scale(at))
                    })
                    .sum();
                let at = (i * self.ldc + j) as usize;
                c[at] = if self.accumulate { c[at] + dot } else { dot };
            }
        }
    }
}

/// The panels holding the first `cols` columns.
fn panels_of(cols: i64) -> i64 {
    (cols.max(0) as usize).div_ceil(PANEL) as i64
}

/// The scalar operands of one int8 block GEMM call, evaluated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntGemmScalars {
    /// The (padded) reduction length, a multiple of [`QUANT_GROUP`].
    pub kc: i64,
    /// Row stride of `a`.
    pub lda: i64,
    /// Row stride of `c`.
    pub ldc: i64,
    /// Valid rows (`<= ep`).
    pub rows: i64,
    /// Valid columns (`<= hp`).
    pub cols: i64,
}

impl IntGemmScalars {
    /// Whether the scalars are valid for a block `ep x hp`.
    pub fn valid(&self, (ep, hp): (i64, i64)) -> bool {
        (0..=ep).contains(&self.rows)
            && (0..=hp).contains(&self.cols)
            && self.kc > 0
            && self.kc % QUANT_GROUP == 0
            && self.lda >= self.kc
            && self.ldc >= self.cols
    }

    /// The elements of `(a, a_scales, b, scales, c)` one call may touch.
    pub fn footprint(&self) -> [i64; 5] {
        let rows = |stride: i64, len: i64| {
            if self.rows > 0 && self.cols > 0 {
                (self.rows - 1) * stride + len
            } else {
                0
            }
        };
        let panels = if self.rows > 0 {
            panels_of(self.cols)
        } else {
            0
        };
        let groups = self.kc / QUANT_GROUP;
        [
            rows(self.lda, self.kc),
            rows(groups, groups),
            panels * self.kc * PANEL as i64,
            panels * groups * PANEL as i64,
            rows(self.ldc, self.cols),
        ]
    }

    /// The reference semantics (f64 arithmetic) on slices starting at each operand's
    /// offset, for panels of `weights` (i8 or u4 element values); the slices must hold
    /// [`IntGemmScalars::footprint`] elements.
    pub fn reference(&self, weights: DType, [a, a_scales, b, scales]: [&[f64]; 4], c: &mut [f64]) {
        let groups = self.kc / QUANT_GROUP;
        let offset = if weights == DType::U4 { 8.0 } else { 0.0 };
        let kc = self.kc as usize;
        let weight = |at| b[QuantLayout::Quads.weight_element(weights.bits(), kc, at)] - offset;
        let scale = |at| scales[scale_element(groups as usize, at)];
        for i in 0..self.rows.max(0) {
            for j in 0..self.cols.max(0) {
                let dot: f64 = (0..self.kc)
                    .map(|k| {
                        let at = (k as usize, j as usize);
                        let a_scale = a_scales[(i * groups + k / QUANT_GROUP) as usize];
                        let code = a[(i * self.lda + k) as usize] - 128.0;
                        a_scale * scale(at) * code * weight(at)
                    })
                    .sum();
                c[(i * self.ldc + j) as usize] = dot;
            }
        }
    }
}
