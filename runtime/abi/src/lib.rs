//! The contracts between oxrelax's compiler and its runtime, each written once: element
//! types ([`DType`]), the microkernel table ([`Microkernel`], [`MICROKERNELS`]) with the
//! packed-weight constants ([`QUANT_GROUP`], [`PANEL`]) and layouts ([`layout`]), the kernel ABI ([`KernelFn`],
//! [`RtEnv`] and its field offsets) and the host's CPU feature probe ([`host`]).
//!
//! The compiler (dsl, codegen) and the runtime depend on this crate and on nothing of each
//! other for these.

pub mod dtype;
mod env;
pub mod host;
mod kernel;
pub mod layout;
pub mod microkernel;

pub use dtype::{DType, UnknownDType};
pub use env::{
    BinaryF32Fn, F32ToHalfFn, HalfToF32Fn, ParallelBody, ParallelForFn, RtEnv, RtEnvField,
    UnaryF32Fn,
};
pub use kernel::{
    kernel_symbol, KernelFn, KernelLibrary, KernelTable, INVALID_ARGUMENT, TASK_PANICKED,
};
pub use layout::QuantLayout;
pub use microkernel::{
    GemmBlock, Microkernel, MicrokernelKind, MicrokernelSpec, MICROKERNELS, PANEL, QUANT_GROUP,
};
