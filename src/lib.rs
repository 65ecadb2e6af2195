//! oxrelax: a Relax-style tensor-expression compiler for on-device LLM inference.
//!
//! This crate holds the compiler passes and the pipeline that runs them; the language
//! (graph IR, TIR, tensor expressions, nn modules) lives in [`oxrelax_dsl`].

pub mod build;
pub mod lower_vm;
pub mod passes;

pub use build::{build, BuildError, Built};
pub use oxrelax_dsl as dsl;
