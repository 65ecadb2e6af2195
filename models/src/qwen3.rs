//! `Qwen3ForCausalLM`: Llama's block plus an RMSNorm over each q and k head before RoPE
//! (`q_norm`, `k_norm`), with the config's explicit `head_dim` (so `heads * head_dim` may
//! differ from the hidden size).

use crate::class::causal_lm_class;
use crate::decoder::LayerOptions;
use crate::Architecture;

causal_lm_class!(
    /// Qwen3 (dense) as Hugging Face's `Qwen3ForCausalLM`.
    Qwen3ForCausalLM,
    Architecture::Qwen3,
    |config| LayerOptions {
        qkv_bias: config.attention_bias,
        o_bias: config.attention_bias,
        qk_norm: true,
        mlp_bias: false,
        fused_projections: false,
        ..LayerOptions::default()
    }
);
