//! `MistralForCausalLM`: Llama's block (no biases) whose layers attend over the last
//! `sliding_window` positions when the config gives one.

use crate::class::causal_lm_class;
use crate::decoder::LayerOptions;
use crate::Architecture;

causal_lm_class!(
    /// Mistral as Hugging Face's `MistralForCausalLM`.
    MistralForCausalLM,
    Architecture::Mistral,
    |_| LayerOptions::default()
);
