//! oxrelax: a Relax-style tensor-expression compiler for on-device LLM inference.
//!
//! This crate holds the compiler passes and the pipeline that runs them ([`passes`]), the
//! lowering to the VM's bytecode ([`lower_vm`]), [`build()`] (a module in, a VM out), and
//! the kernel benchmark behind `oxrelax bench-kernel` ([`mod@bench`]); the language (graph IR,
//! TIR, tensor expressions, nn modules) lives in [`oxrelax_dsl`].

pub mod artifact;
pub mod bench;
pub mod build;
pub mod checkpoint;
pub mod lower_vm;
pub mod memory;
pub mod model;
#[cfg(feature = "npu")]
pub mod npu;
pub mod passes;
pub mod quantization;
pub mod serve;

pub use build::{build, build_for, build_with_builtins, BuildError, Built};
pub use oxrelax_dsl as dsl;
