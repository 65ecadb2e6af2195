//! Statements, buffers and primitive functions of TIR.

use super::expr::{PrimExpr, TVar};
use super::microkernel::MicrokernelCall;
use crate::attrs::Attrs;
use crate::{DType, SymExpr, SymVar};
use serde::{Deserialize, Serialize};

/// A multi-dimensional array a primitive function reads or writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Buffer {
    /// Name, unique within the primitive function.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Shape, possibly symbolic.
    pub shape: Vec<SymExpr>,
    /// Element strides; `None` means dense row-major.
    pub strides: Option<Vec<SymExpr>>,
}

impl Buffer {
    /// A dense row-major buffer.
    pub fn new(name: &str, dtype: DType, shape: Vec<SymExpr>) -> Self {
        Buffer {
            name: name.to_string(),
            dtype,
            shape,
            strides: None,
        }
    }

    /// The strides in elements (row-major when not given).
    pub fn effective_strides(&self) -> Vec<SymExpr> {
        if let Some(strides) = &self.strides {
            return strides.clone();
        }
        let mut strides = vec![SymExpr::int(1); self.shape.len()];
        for i in (0..self.shape.len().saturating_sub(1)).rev() {
            strides[i] = &strides[i + 1] * &self.shape[i + 1];
        }
        strides
    }
}

/// How a loop runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ForKind {
    /// One iteration after another.
    Serial,
    /// Iterations split across the runtime's thread pool.
    Parallel,
    /// Iterations mapped onto vector lanes (with a scalar tail).
    Vectorized,
    /// Fully unrolled by codegen.
    Unrolled,
}

impl ForKind {
    /// The name used in the text form.
    pub fn name(self) -> &'static str {
        match self {
            ForKind::Serial => "serial",
            ForKind::Parallel => "parallel",
            ForKind::Vectorized => "vectorized",
            ForKind::Unrolled => "unrolled",
        }
    }
}

/// A TIR statement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Stmt {
    /// Statements in order.
    Seq(Vec<Stmt>),
    /// `for var in 0..extent { body }`.
    For {
        /// The loop variable (`i64`).
        var: TVar,
        /// Trip count.
        extent: PrimExpr,
        /// How the loop runs.
        kind: ForKind,
        /// Loop body.
        body: Box<Stmt>,
    },
    /// `buffer[indices] = value`.
    Store {
        /// Buffer name.
        buffer: String,
        /// One index per buffer dim.
        indices: Vec<PrimExpr>,
        /// Value of the buffer's dtype.
        value: PrimExpr,
    },
    /// `let var = value in body`.
    Let {
        /// The bound variable.
        var: TVar,
        /// Its value.
        value: PrimExpr,
        /// Where it is visible.
        body: Box<Stmt>,
    },
    /// `if cond { then } else { otherwise }`.
    If {
        /// A bool condition.
        cond: PrimExpr,
        /// Taken when true.
        then: Box<Stmt>,
        /// Taken when false, if present.
        otherwise: Option<Box<Stmt>>,
    },
    /// A buffer local to `body` (an intermediate of a fused computation).
    Allocate {
        /// The allocated buffer.
        buffer: Buffer,
        /// Where it is visible.
        body: Box<Stmt>,
    },
    /// An expression evaluated for its effect.
    Evaluate(PrimExpr),
    /// A call of a runtime microkernel on buffer regions (a tensorized inner block).
    Microkernel(MicrokernelCall),
}

/// A primitive function in destination-passing style: the last `num_outputs`
/// parameters are outputs the caller allocates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PrimFunc {
    /// Buffer parameters: inputs, then outputs.
    pub params: Vec<Buffer>,
    /// How many of the trailing parameters are outputs.
    pub num_outputs: usize,
    /// The symbolic dims the caller passes (the kernel ABI's `dims` array, in order).
    pub dims: Vec<SymVar>,
    /// The loop nest.
    pub body: Stmt,
    /// Attributes (e.g. `op_pattern` for fusion).
    pub attrs: Attrs,
}

impl PrimFunc {
    /// The input buffers.
    pub fn inputs(&self) -> &[Buffer] {
        &self.params[..self.params.len().saturating_sub(self.num_outputs)]
    }

    /// The output buffers.
    pub fn outputs(&self) -> &[Buffer] {
        &self.params[self.params.len().saturating_sub(self.num_outputs)..]
    }
}
