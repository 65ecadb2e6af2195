//! `Phi3ForCausalLM`: Llama's block with its projections fused, as the checkpoint stores
//! them (`self_attn.qkv_proj`: q, k and v one after another; `mlp.gate_up_proj`: gate
//! then up), and no biases. Configs with RoPE over part of each head or with LongRoPE
//! scaling (Phi-3 128k, Phi-3.5, Phi-4-mini) are refused; the attention window caps the
//! context window.

use crate::class::causal_lm_class;
use crate::decoder::LayerOptions;
use crate::Architecture;

causal_lm_class!(
    /// Phi-3 as Hugging Face's `Phi3ForCausalLM`.
    Phi3ForCausalLM,
    Architecture::Phi3,
    |_| LayerOptions {
        qkv_bias: false,
        o_bias: false,
        qk_norm: false,
        mlp_bias: false,
        fused_projections: true,
        ..LayerOptions::default()
    }
);
