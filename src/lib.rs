//! oxrelax: a Relax-style tensor-expression compiler for on-device LLM inference.
//!
//! This crate holds the compiler passes and the pipeline that runs them, and the kernel
//! benchmark behind `oxrelax bench-kernel` ([`bench`]); the language
//! (graph IR, TIR, tensor expressions, nn modules) lives in [`oxrelax_dsl`].

pub mod bench;
pub mod passes;

pub use oxrelax_dsl as dsl;
