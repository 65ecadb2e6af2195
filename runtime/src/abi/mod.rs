//! The runtime's side of the kernel ABI (declared in `oxrelax-abi`, re-exported here): the
//! services behind [`RtEnv`] ([`RuntimeEnv`]) and kernel libraries loaded from shared
//! libraries ([`SharedKernelLibrary`]).

mod env;
mod shared_library;
#[cfg(test)]
mod tests;

pub use env::RuntimeEnv;
pub use oxrelax_abi::{
    kernel_symbol, BinaryF32Fn, F32ToHalfFn, HalfToF32Fn, KernelFn, KernelLibrary, KernelTable,
    ParallelBody, ParallelForFn, RtEnv, RtEnvField, UnaryF32Fn, INVALID_ARGUMENT, TASK_PANICKED,
};

pub use shared_library::{SharedKernelLibrary, SharedLibraryError, SIGNATURES_SYMBOL};
