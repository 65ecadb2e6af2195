//! The `oxrelax` commands, one module each (the runtime's shared front ends are in
//! `oxrelax_runtime::cli`).

pub mod bench;
pub mod chat;
pub mod compare;
pub mod compare_npu;
pub mod compile;
pub mod dump_ir;
pub mod generate;
pub mod perplexity;
pub mod qnn_validate;
pub mod serve;
pub mod tokenize;
