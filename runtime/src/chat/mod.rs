//! Chat text handling: the Hugging Face tokenizer, the chat template, and streaming
//! detokenization.
//!
//! A model folder (or an artifact) carries `tokenizer.json` and `tokenizer_config.json` as
//! Hugging Face writes them. [`Tokenizer`] loads both with the `tokenizers` crate — the same
//! library that produced the reference ids — and reads the special tokens and the chat
//! template from the config. [`ChatTemplate`] renders a conversation the way transformers'
//! `apply_chat_template` does, with minijinja. [`Detokenizer`] turns generated ids into text
//! one id at a time, emitting only complete characters. [`eos_ids`] gathers a model's
//! end-of-sequence ids from its configs and tokenizer, [`sampling_defaults`] its
//! sampling defaults.

mod config;
mod detokenizer;
mod eos;
mod error;
mod generation;
mod template;
mod tokenizer;

#[cfg(test)]
mod tests;

pub use config::TokenizerConfig;
pub use detokenizer::Detokenizer;
pub use eos::{eos_ids, eos_ids_of, eos_token_ids};
pub use error::ChatError;
pub use generation::{sampling_defaults, GENERATION_CONFIG};
pub use template::{ChatTemplate, Message, SpecialTokens, TEMPLATE_FUEL, TEMPLATE_OUTPUT_LIMIT};
pub use tokenizer::Tokenizer;
