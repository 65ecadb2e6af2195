//! TIR: primitive functions as loop nests over buffers. Plain data that schedules
//! rewrite and codegen lowers.

mod expr;
mod stmt;
mod visit;

pub use expr::{BinOp, Intrinsic, PrimCmp, PrimExpr, TVar};
pub use stmt::{Buffer, ForKind, PrimFunc, Stmt};
