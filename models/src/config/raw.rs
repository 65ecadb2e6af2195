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
}
