//! Microkernel calls: a statement that hands an inner register block of a loop nest to
//! a hand-written kernel of the runtime (a tensorized block), and the table of the
//! microkernels TIR may call, with the reference semantics the interpreter runs.
//!
//! Every microkernel today is an f32 block GEMM with block shape `EP x HP` and operands
//! `(a, b, c; kc, ldc, rows, cols, accumulate)`: for `i < rows`, `j < cols`,
//! `c[i*ldc + j] = (accumulate ? c[i*ldc + j] : 0) + sum_{k < kc} a[k*EP + i] * b[k*HP + j]`,
//! where `a` is a packed activation block (`kc` groups of `EP` values) and `b` a packed
//! weight panel (`kc` groups of `HP` values). The runtime's microkernel table implements
//! each name per CPU feature, with a scalar twin.

use super::expr::PrimExpr;
use serde::{Deserialize, Serialize};

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
    /// The buffer operands, in the kernel's order (`a`, `b`, `c`).
    pub operands: Vec<BufferRegion>,
    /// The scalar operands, in the kernel's order (`kc`, `ldc`, `rows`, `cols`,
    /// `accumulate`).
    pub scalars: Vec<PrimExpr>,
}

/// A microkernel TIR may call: an f32 block GEMM of block shape `ep x hp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MicrokernelSpec {
    /// The name (shared with the runtime's table).
    pub name: &'static str,
    /// Rows of the register block (activation rows per call).
    pub ep: i64,
    /// Columns of the register block (the weight panel width).
    pub hp: i64,
}

/// The operand names of the block GEMM microkernels, in order.
pub const GEMM_OPERANDS: [&str; 3] = ["a", "b", "c"];

/// The scalar names of the block GEMM microkernels, in order.
pub const GEMM_SCALARS: [&str; 5] = ["kc", "ldc", "rows", "cols", "accumulate"];

/// Every microkernel TIR may call.
pub const MICROKERNELS: &[MicrokernelSpec] = &[
    MicrokernelSpec {
        name: "sgemm_6x16",
        ep: 6,
        hp: 16,
    },
    MicrokernelSpec {
        name: "sgemm_1x16",
        ep: 1,
        hp: 16,
    },
];

/// The scalar operands of one block GEMM call, evaluated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmScalars {
    /// Reduction length.
    pub kc: i64,
    /// Row stride of `c`.
    pub ldc: i64,
    /// Valid rows (`<= ep`).
    pub rows: i64,
    /// Valid columns (`<= hp`).
    pub cols: i64,
    /// Whether to add to `c` (else overwrite).
    pub accumulate: bool,
}

impl MicrokernelSpec {
    /// The microkernel named `name`.
    pub fn lookup(name: &str) -> Option<&'static MicrokernelSpec> {
        MICROKERNELS.iter().find(|k| k.name == name)
    }

    /// The elements of `a`, `b` and `c` one call may touch, given its scalars (the
    /// interpreter's bounds check; `c` counts the rows up to `rows`).
    pub fn footprint(&self, s: &GemmScalars) -> [i64; 3] {
        let c = if s.rows > 0 && s.cols > 0 {
            (s.rows - 1) * s.ldc + s.cols
        } else {
            0
        };
        [s.kc * self.ep, s.kc * self.hp, c]
    }

    /// The reference semantics (f64 arithmetic) on slices starting at each operand's
    /// offset; the slices must hold [`MicrokernelSpec::footprint`] elements.
    pub fn reference(&self, a: &[f64], b: &[f64], c: &mut [f64], s: &GemmScalars) {
        for i in 0..s.rows {
            for j in 0..s.cols {
                let dot: f64 = (0..s.kc)
                    .map(|k| a[(k * self.ep + i) as usize] * b[(k * self.hp + j) as usize])
                    .sum();
                let at = (i * s.ldc + j) as usize;
                c[at] = if s.accumulate { c[at] + dot } else { dot };
            }
        }
    }
}
