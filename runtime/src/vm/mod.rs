//! The virtual machine that runs compiled graph functions: symbolic shape expressions,
//! the bytecode, the serializable executable, and the interpreter.

mod bytecode;
mod check;
mod error;
mod exec;
mod machine;
mod profile;
mod run;
mod shape_expr;
#[cfg(test)]
mod tests;
mod validate;

pub use bytecode::{DimPattern, Immediate, Instr, KernelId, Placement, Reg};
pub use error::{ExecError, VmError};
pub use exec::{BufferSig, DimDecl, Executable, KernelDecl, Slot, VmFunction, FORMAT_VERSION};
pub use machine::VirtualMachine;
pub use profile::KernelProfile;
pub use shape_expr::{DimReg, EvalError, ShapeExpr, ShapeOp};
