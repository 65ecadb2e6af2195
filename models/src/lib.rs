//! Models written in the DSL — `LlamaForCausalLM`, `MistralForCausalLM`,
//! `Qwen2ForCausalLM`, `Qwen3ForCausalLM`, `Phi3ForCausalLM`, `Gemma3ForCausalLM` — with
//! their Hugging Face configs and weight names.
//!
//! All are a [`CausalLM`]: token embedding, decoder layers sharing one building block
//! ([`decoder`]) that differ only in [`decoder::LayerOptions`], a final RMSNorm and the
//! output projection. [`CausalLM::export`] builds the exported functions (`prefill`,
//! `decode`, `create_kv_cache`, ...) and [`CausalLM::weight_shapes`] lists the weights
//! they take, named as in the Hugging Face checkpoint.

pub mod causal_lm;
mod class;
pub mod config;
pub mod decoder;
mod error;
pub mod export;
pub mod gemma3;
pub mod llama;
pub mod mistral;
pub mod phi3;
pub mod qwen2;
pub mod qwen3;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_gemma;

pub use causal_lm::{CausalLM, Positions};
pub use config::{Architecture, ConfigError, LayerType, ModelConfig, StoredDtype};
pub use decoder::kv_cache::{KvDtype, UnknownKvDtype};
pub use error::ModelError;
pub use export::{ExportOptions, Exported};
pub use gemma3::Gemma3ForCausalLM;
pub use llama::LlamaForCausalLM;
pub use mistral::MistralForCausalLM;
pub use phi3::Phi3ForCausalLM;
pub use qwen2::Qwen2ForCausalLM;
pub use qwen3::Qwen3ForCausalLM;

use oxrelax_dsl::DType;

/// The model of `config`'s architecture, its projection weights and embedding table
/// stored as `weights` (f32, or f16 widened as the kernels read them).
pub fn causal_lm(config: &ModelConfig, weights: DType) -> Result<CausalLM, ModelError> {
    Ok(match config.architecture {
        Architecture::Llama => LlamaForCausalLM::with_weights(config, weights)?.into_inner(),
        Architecture::Qwen2 => Qwen2ForCausalLM::with_weights(config, weights)?.into_inner(),
        Architecture::Qwen3 => Qwen3ForCausalLM::with_weights(config, weights)?.into_inner(),
        Architecture::Phi3 => Phi3ForCausalLM::with_weights(config, weights)?.into_inner(),
        Architecture::Mistral => MistralForCausalLM::with_weights(config, weights)?.into_inner(),
        Architecture::Gemma3 => Gemma3ForCausalLM::with_weights(config, weights)?.into_inner(),
    })
}
