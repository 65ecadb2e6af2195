//! Microkernel calls: a statement that hands an inner register block of a loop nest to
//! a hand-written kernel of the runtime (a tensorized block), and the reference semantics
//! of the table's kernels that the interpreter runs. The table itself, with what each
//! kernel computes, is the ABI's ([`MICROKERNELS`], from `oxrelax-abi`).

use super::expr::PrimExpr;
use crate::DType;
pub use oxrelax_abi::microkernel::{MicrokernelKind, MicrokernelSpec, MICROKERNELS};
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
    /// The elements of `a`, `b` and `c` one call on panels `panel` wide of `weights`
    /// may touch (the interpreter's bounds check; `a` and `c` count the rows up to
    /// `rows`, `b` the panels holding the first `cols` columns).
    pub fn footprint(&self, (panel, weights): (i64, DType)) -> [i64; 3] {
        let rows = |stride: i64, len: i64| {
            if self.rows > 0 && len > 0 {
                (self.rows - 1) * stride + len
            } else {
                0
            }
        };
        [
            rows(self.lda, self.kc),
            self.panels_footprint(panel, weights),
            rows(self.ldc, self.cols),
        ]
    }

    /// The elements of `b` from the first panel's first group to the last group read of
    /// the last panel holding one of the `cols` columns.
    fn panels_footprint(&self, panel: i64, weights: DType) -> i64 {
        let panels = (self.cols.max(0) + panel - 1) / panel;
        if panels == 0 || self.kc <= 0 {
            return 0;
        }
        if weights == DType::U4 {
            let pairs = |k: i64| (k + 1) / 2 * 2 * panel;
            return (panels - 1) * pairs(self.lda) + pairs(self.kc);
        }
        (panels - 1) * self.lda * panel + self.kc * panel
    }

    /// The elements of a quantized kernel's `scales` one call may read: every group of the
    /// call's reduction, of each panel holding one of the `cols` columns.
    pub fn scales_footprint(&self, panel: i64) -> i64 {
        let panels = (self.cols.max(0) + panel - 1) / panel;
        if panels == 0 || self.kc <= 0 {
            return 0;
        }
        let groups = (self.lda + QUANT_GROUP - 1) / QUANT_GROUP;
        let read = (self.kc + QUANT_GROUP - 1) / QUANT_GROUP;
        ((panels - 1) * groups + read) * panel
    }

    /// The reference semantics (f64 arithmetic) on slices starting at each operand's
    /// offset, for panels `panel` wide of `weights`; the slices must hold
    /// [`GemmScalars::footprint`] elements (and `scales`, for quantized weights,
    /// [`GemmScalars::scales_footprint`]).
    pub fn reference(
        &self,
        (panel, weights): (i64, DType),
        (a, b, scales): (&[f64], &[f64], Option<&[f64]>),
        c: &mut [f64],
    ) {
        let groups = (self.lda + QUANT_GROUP - 1) / QUANT_GROUP;
        let scale = |k: i64, j: i64| match scales {
            Some(s) => s[(((j / panel) * groups + k / QUANT_GROUP) * panel + j % panel) as usize],
            None => 1.0,
        };
        let weight = |k: i64, j: i64| {
            let (q, lane) = (j / panel, j % panel);
            if weights == DType::U4 {
                let pairs = (self.lda + 1) / 2 * 2 * panel;
                b[(q * pairs + (k / 2) * 2 * panel + lane * 2 + k % 2) as usize] - 8.0
            } else {
                b[(q * self.lda * panel + k * panel + lane) as usize]
            }
        };
        for i in 0..self.rows {
            for j in 0..self.cols {
                let dot: f64 = (0..self.kc)
                    .map(|k| a[(i * self.lda + k) as usize] * (weight(k, j) * scale(k, j)))
                    .sum();
                let at = (i * self.ldc + j) as usize;
                c[at] = if self.accumulate { c[at] + dot } else { dot };
            }
        }
    }
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

    /// The elements of `(a, a_scales, b, scales, c)` one call on panels `panel` wide may
    /// touch.
    pub fn footprint(&self, panel: i64) -> [i64; 5] {
        let rows = |stride: i64, len: i64| {
            if self.rows > 0 && self.cols > 0 {
                (self.rows - 1) * stride + len
            } else {
                0
            }
        };
        let panels = if self.rows > 0 {
            (self.cols.max(0) + panel - 1) / panel
        } else {
            0
        };
        let groups = self.kc / QUANT_GROUP;
        [
            rows(self.lda, self.kc),
            rows(groups, groups),
            panels * self.kc * panel,
            panels * groups * panel,
            rows(self.ldc, self.cols),
        ]
    }

    /// The reference semantics (f64 arithmetic) on slices starting at each operand's
    /// offset, for panels `panel` wide of `weights` (i8 or u4 element values); the slices
    /// must hold [`IntGemmScalars::footprint`] elements.
    pub fn reference(
        &self,
        (panel, weights): (i64, DType),
        [a, a_scales, b, scales]: [&[f64]; 4],
        c: &mut [f64],
    ) {
        let groups = self.kc / QUANT_GROUP;
        let weight = |k: i64, j: i64| {
            let (q, lane) = (j / panel, j % panel);
            let start = q * self.kc * panel;
            if weights == DType::U4 {
                let at = start + (k / 8) * 8 * panel + lane * 8 + (k % 4) * 2 + (k / 4) % 2;
                b[at as usize] - 8.0
            } else {
                b[(start + (k / 4) * 4 * panel + lane * 4 + k % 4) as usize]
            }
        };
        let scale = |k: i64, j: i64| {
            scales[(((j / panel) * groups + k / QUANT_GROUP) * panel + j % panel) as usize]
        };
        for i in 0..self.rows.max(0) {
            for j in 0..self.cols.max(0) {
                let dot: f64 = (0..self.kc)
                    .map(|k| {
                        let a_scale = a_scales[(i * groups + k / QUANT_GROUP) as usize];
                        let code = a[(i * self.lda + k) as usize] - 128.0;
                        a_scale * scale(k, j) * code * weight(k, j)
                    })
                    .sum();
                c[(i * self.ldc + j) as usize] = dot;
            }
        }
    }
}
