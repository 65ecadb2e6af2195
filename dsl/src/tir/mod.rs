//! TIR: primitive functions as loop nests over buffers. Plain data that schedules
//! rewrite and codegen lowers.

pub mod eval;
mod expr;
mod microkernel;
mod microkernel_attention;
mod stmt;
mod visit;

pub use eval::{run_prim_func, run_with_inputs, EvalError};
pub use expr::{BinOp, Intrinsic, PrimCmp, PrimExpr, TVar};
pub use microkernel::{
    BufferRegion, GemmScalars, IntGemmScalars, MicrokernelCall, MicrokernelKind, MicrokernelSpec,
    MICROKERNELS, QUANT_GROUP,
};
pub use microkernel_attention::AttentionScalars;
pub use stmt::{Buffer, ForKind, PrimFunc, Stmt};
