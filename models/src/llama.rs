//! `LlamaForCausalLM`: the common decoder block as it is, with optional biases
//! (`attention_bias` on every attention projection, `mlp_bias` on the MLP).

use crate::class::causal_lm_class;
use crate::decoder::LayerOptions;
use crate::Architecture;

causal_lm_class!(
    /// Llama (and Llama 2/3, TinyLlama, ...) as Hugging Face's `LlamaForCausalLM`.
    LlamaForCausalLM,
    Architecture::Llama,
    |config| LayerOptions {
        qkv_bias: config.attention_bias,
        o_bias: config.attention_bias,
        qk_norm: false,
        mlp_bias: config.mlp_bias,
        fused_projections: false,
        ..LayerOptions::default()
    }
);
