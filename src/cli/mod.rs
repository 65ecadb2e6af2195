//! The `oxrelax` commands, one module each (the runtime's shared front ends are in
//! `oxrelax_runtime::cli`).

pub mod bench;
pub mod bench_batch;
pub mod bench_serve;
pub mod chat;
pub mod compare;
#[cfg(feature = "npu")]
pub mod compare_npu;
pub mod compile;
pub mod dump_ir;
pub mod generate;
#[cfg(feature = "npu")]
pub mod npu;
pub mod perplexity;
#[cfg(feature = "npu")]
pub mod qnn_validate;
pub mod serve;
pub mod tokenize;
