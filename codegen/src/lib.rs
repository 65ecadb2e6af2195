//! Codegen: primitive functions (TIR) to native code with Cranelift, using the runtime's
//! kernel ABI (`oxrelax_abi::KernelFn`, see docs/compiler.md):
//! `fn(args: *const *mut u8, dims: *const i64, env: *const RtEnv) -> i32`, with `args`
//! the tensor data pointers in parameter order, `dims` the symbolic dims' values in
//! order, and 0 returned on success.

mod cache;
mod convert;
mod error;
pub mod isa;
mod jit;
mod lower;
mod math;
mod object;
#[cfg(test)]
mod tests;

pub use error::CodegenError;
pub use jit::{clif_text, JitLibrary, RawKernel};
pub use object::{compile_object, kernel_symbol};
