//! `config.json` as Hugging Face writes it: every field the models read, optional where
//! transformers has a default.

use serde::Deserialize;

/// The fields of a Hugging Face `config.json` the models read.
#[derive(Debug, Deserialize)]
pub(super) struct RawConfig {
    #[serde(default)]
    pub architectures: Vec<String>,
    pub model_type: Option<String>,
    pub hidden_size: i64,
    pub intermediate_size: i64,
    pub num_hidden_layers: i64,
    pub num_attention_heads: i64,
    pub num_key_value_heads: Option<i64>,
    pub head_dim: Option<i64>,
    pub vocab_size: i64,
    pub rms_norm_eps: Option<f64>,
    pub rope_theta: Option<f64>,
    pub rope_scaling: Option<serde_json::Value>,
    /// transformers 5's layout: `rope_theta` and the scaling in one object.
    pub rope_parameters: Option<serde_json::Value>,
    pub max_position_embeddings: Option<i64>,
    pub tie_word_embeddings: Option<bool>,
    pub torch_dtype: Option<String>,
    /// transformers 5's name for `torch_dtype`.
    pub dtype: Option<String>,
    pub hidden_act: Option<String>,
    pub attention_bias: Option<bool>,
    pub mlp_bias: Option<bool>,
    pub use_sliding_window: Option<bool>,
    /// Phi-3's attention window (Qwen2 gives one too, used only with `use_sliding_window`).
    pub sliding_window: Option<i64>,
    /// The share of each head RoPE rotates (Phi-3 family).
    pub partial_rotary_factor: Option<f64>,
    /// Qwen2/Qwen3: layers from this index on slide their window (with `use_sliding_window`).
    pub max_window_layers: Option<i64>,
    /// Each layer's attention, `sliding_attention` or `full_attention` (Gemma 3, Qwen2, ...).
    pub layer_types: Option<Vec<String>>,
    /// Gemma 3 without `layer_types`: every this-many-th layer is full, the others slide.
    pub sliding_window_pattern: Option<i64>,
    /// Gemma 3: the RoPE base of sliding layers.
    pub rope_local_base_freq: Option<f64>,
    /// Gemma 3: attention scores are scaled by this to the power -1/2.
    pub query_pre_attn_scalar: Option<f64>,
    /// Gemma's name for `hidden_act`.
    pub hidden_activation: Option<String>,
    /// Gemma 2's tanh capping of attention scores (must be null).
    pub attn_logit_softcapping: Option<f64>,
    /// Gemma 2's tanh capping of the logits (must be null).
    pub final_logit_softcapping: Option<f64>,
}
