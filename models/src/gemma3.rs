//! `Gemma3ForCausalLM`: embeddings scaled by `sqrt(hidden_size)`, every RMSNorm of
//! `1 + weight`, each sublayer normed before and after (sandwich norms), per-head q/k
//! norms, a tanh-GELU gated MLP, sliding-window layers (their own RoPE base) between full
//! ones, and the attention scaled by `query_pre_attn_scalar ** -0.5`.

use crate::class::causal_lm_class;
use crate::decoder::LayerOptions;
use crate::Architecture;

causal_lm_class!(
    /// Gemma 3 (text) as Hugging Face's `Gemma3ForCausalLM`.
    Gemma3ForCausalLM,
    Architecture::Gemma3,
    |_| LayerOptions {
        qk_norm: true,
        unit_offset_norms: true,
        sandwich_norms: true,
        scaled_embedding: true,
        ..LayerOptions::default()
    }
);
