//! `Qwen2ForCausalLM`: Llama's block plus a bias on the q, k and v projections (none on
//! o_proj).

use crate::class::causal_lm_class;
use crate::decoder::LayerOptions;
use crate::Architecture;

causal_lm_class!(
    /// Qwen2 and Qwen2.5 as Hugging Face's `Qwen2ForCausalLM`.
    Qwen2ForCausalLM,
    Architecture::Qwen2,
    |_| LayerOptions {
        qkv_bias: true,
        o_bias: false,
        qk_norm: false,
        mlp_bias: false,
        fused_projections: false,
        ..LayerOptions::default()
    }
);
