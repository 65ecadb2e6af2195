//! VM instructions. Registers hold [`Value`](crate::Value)s; a function's parameters arrive
//! in registers `0..params`. Dim registers hold the values of its symbolic dims, bound by
//! [`Instr::MatchShape`]. Code is straight-line and ends with [`Instr::Ret`].

use super::shape_expr::{DimReg, ShapeExpr};
use crate::dtype::DType;
use serde::{Deserialize, Serialize};

/// Index of a value register.
pub type Reg = u32;

/// Index of a kernel in [`Executable::kernels`](super::Executable::kernels).
pub type KernelId = u32;

/// What one extent of a matched tensor must be.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DimPattern {
    /// Exactly this value.
    Const(i64),
    /// Binds the dim register if unbound (checking its upper bound), else must equal it.
    Bind(DimReg),
    /// Must equal this expression over bound dim registers.
    Check(ShapeExpr),
}

/// Where [`Instr::AllocTensor`] puts a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// A view at the start of this memory-plan slot of the function's arena (reused by
    /// every call).
    Slot(u32),
    /// A fresh zeroed allocation (for values that outlive the call, e.g. results).
    Fresh,
}

/// A constant or computed scalar for [`Instr::Load`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Immediate {
    /// An integer, possibly computed from dims (e.g. a layer index, or `n`).
    Int(ShapeExpr),
    /// A float.
    Float(f64),
    /// A string.
    Str(String),
}

/// One VM instruction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Instr {
    /// Checks that `reg` holds a tensor of `dtype` whose extents match `dims` (binding dim
    /// registers on first sight and checking their upper bounds).
    MatchShape {
        /// The register checked.
        reg: Reg,
        /// The dtype it must have.
        dtype: DType,
        /// One pattern per axis.
        dims: Vec<DimPattern>,
    },
    /// Puts a row-major tensor of `shape` (over the function's dims) in `dst`.
    AllocTensor {
        /// The destination register.
        dst: Reg,
        /// Where its memory comes from.
        place: Placement,
        /// Its dtype.
        dtype: DType,
        /// Its extents.
        shape: Vec<ShapeExpr>,
    },
    /// Puts in `dst` the tensor in `src` viewed with extents `shape` (same elements,
    /// row-major, shared storage: a reshape, squeeze or expand_dims without a copy).
    View {
        /// The destination register.
        dst: Reg,
        /// The register holding the (contiguous) tensor viewed.
        src: Reg,
        /// The view's extents.
        shape: Vec<ShapeExpr>,
    },
    /// Checks the arguments against the kernel's signature, then calls it.
    CallKernel {
        /// The kernel.
        kernel: KernelId,
        /// Registers holding its tensor arguments, in parameter order.
        args: Vec<Reg>,
        /// Values of the kernel's dims, as expressions over the function's dims.
        dims: Vec<ShapeExpr>,
    },
    /// Calls a packed function from the builtin registry.
    CallBuiltin {
        /// The registered name (e.g. `kv_cache.append`).
        name: String,
        /// Registers holding its arguments.
        args: Vec<Reg>,
        /// Where the result goes, if anywhere.
        dst: Option<Reg>,
    },
    /// Puts a scalar in `dst`.
    Load {
        /// The destination register.
        dst: Reg,
        /// The value.
        value: Immediate,
    },
    /// Puts a tuple of the `fields` registers' values in `dst`.
    MakeTuple {
        /// The destination register.
        dst: Reg,
        /// Registers of the fields.
        fields: Vec<Reg>,
    },
    /// Puts field `index` of the tuple in `tuple` in `dst`.
    TupleGet {
        /// The destination register.
        dst: Reg,
        /// The register holding the tuple.
        tuple: Reg,
        /// The field.
        index: u32,
    },
    /// Returns the value of `reg` (arena-backed tensors in it are copied out).
    Ret {
        /// The register returned.
        reg: Reg,
    },
}

impl Instr {
    /// Every value register the instruction reads or writes.
    pub fn regs(&self) -> Vec<Reg> {
        match self {
            Instr::MatchShape { reg, .. } | Instr::Ret { reg } => vec![*reg],
            Instr::AllocTensor { dst, .. } | Instr::Load { dst, .. } => vec![*dst],
            Instr::CallKernel { args, .. } => args.clone(),
            Instr::CallBuiltin { args, dst, .. } => args.iter().chain(dst).copied().collect(),
            Instr::MakeTuple { dst, fields } => fields.iter().chain([dst]).copied().collect(),
            Instr::TupleGet { dst, tuple, .. } => vec![*dst, *tuple],
            Instr::View { dst, src, .. } => vec![*dst, *src],
        }
    }

    /// Every shape expression over the function's dim registers in the instruction.
    fn shape_exprs(&self) -> Vec<&ShapeExpr> {
        match self {
            Instr::MatchShape { dims, .. } => dims
                .iter()
                .filter_map(|p| match p {
                    DimPattern::Check(e) => Some(e),
                    DimPattern::Const(_) | DimPattern::Bind(_) => None,
                })
                .collect(),
            Instr::AllocTensor { shape, .. } | Instr::View { shape, .. } => shape.iter().collect(),
            Instr::CallKernel { dims, .. } => dims.iter().collect(),
            Instr::Load {
                value: Immediate::Int(e),
                ..
            } => vec![e],
            _ => Vec::new(),
        }
    }

    /// Every dim register the instruction binds or reads.
    pub fn dim_regs(&self) -> Vec<DimReg> {
        let bound = match self {
            Instr::MatchShape { dims, .. } => dims
                .iter()
                .filter_map(|p| match p {
                    DimPattern::Bind(r) => Some(*r),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        let read = self.shape_exprs().into_iter().flat_map(ShapeExpr::dims);
        bound.into_iter().chain(read).collect()
    }
}
