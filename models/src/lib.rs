//! Models written in the DSL (Llama, Qwen2, Qwen3), their Hugging Face configs and weight
//! mappings.

pub mod config;

pub use config::{Architecture, ConfigError, ModelConfig, StoredDtype};
