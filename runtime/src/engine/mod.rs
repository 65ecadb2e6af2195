//! The chat engine (no compiler inside): runs a compiled model's exported functions
//! (`create_kv_cache`, `prefill`, `prefill_all`, `decode`) in the VM over one KV cache.
//!
//! [`Engine`] owns the cache and the ids it holds: chunked prefill, decode steps, reset and
//! roll-back, and the generation loop ([`Engine::generate`]) with EOS ids, a callback that
//! can stop on anything (stop strings: [`StopMatcher`]) and timing statistics. [`Chat`]
//! keeps a multi-turn conversation on top: it renders the chat template, prefills only
//! the part of the conversation the cache does not hold yet, and streams text through the
//! [`Detokenizer`](crate::chat::Detokenizer). [`Engine::perplexity`] scores a text by
//! llama.cpp's perplexity protocol. With [`Engine::enable_pipeline`] a prompt's chunks
//! are prefilled two at a time (the CPU/NPU pipeline), and [`Engine::set_timeline`]
//! records the busy time of each device.

mod batch;
mod chat;
mod error;
mod generate;
mod perplexity;
mod pipeline;
mod step;
mod stop;
mod text_stream;

#[cfg(test)]
mod tests;

pub use batch::{BatchEngine, SequenceId};
pub use chat::{Chat, ChatOptions, ContextOverflow, Reply};
pub use error::EngineError;
pub use generate::{GenerateOptions, Generation, GenerationStats, Step, StopReason, Token};
pub use perplexity::{negative_log_likelihood, Perplexity};
pub use step::{Engine, EngineConfig};
pub use stop::StopMatcher;
pub use text_stream::TextStream;
