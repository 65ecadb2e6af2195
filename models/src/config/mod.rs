//! Typed model configs parsed from Hugging Face `config.json` files.
//!
//! One [`ModelConfig`] covers Llama, Mistral, Qwen2, Qwen3, Phi-3 and Gemma 3: the fields
//! they share, with transformers' per-architecture defaults filled in. A field value the
//! models cannot honour (another activation, another RoPE scaling, logit soft-capping) is
//! a [`ConfigError`] naming the field and the value.

mod error;
mod gemma;
mod layers;
mod raw;
mod rope;
#[cfg(test)]
pub(crate) mod tests;

pub use error::ConfigError;
pub use layers::LayerType;

use oxrelax_dsl::nn::{Activation, RopeScaling};
use oxrelax_dsl::DType;
use raw::RawConfig;
use std::path::Path;

/// A supported model architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Architecture {
    /// `LlamaForCausalLM` (`model_type` `llama`).
    Llama,
    /// `Qwen2ForCausalLM` (`model_type` `qwen2`): bias on q/k/v.
    Qwen2,
    /// `Qwen3ForCausalLM` (`model_type` `qwen3`): per-head q/k RMSNorm, explicit head_dim.
    Qwen3,
    /// `Phi3ForCausalLM` (`model_type` `phi3`): Llama's block with fused projections
    /// (`qkv_proj`, `gate_up_proj`).
    Phi3,
    /// `MistralForCausalLM` (`model_type` `mistral`): Llama's block with sliding-window
    /// attention.
    Mistral,
    /// `Gemma3ForCausalLM` (`model_type` `gemma3_text`, or `gemma3`): sandwich norms of
    /// `1 + w`, GELU MLP, scaled embedding, sliding and full layers.
    Gemma3,
}

impl Architecture {
    const ALL: [Architecture; 6] = [
        Architecture::Llama,
        Architecture::Qwen2,
        Architecture::Qwen3,
        Architecture::Phi3,
        Architecture::Mistral,
        Architecture::Gemma3,
    ];

    /// The Hugging Face class name (`LlamaForCausalLM`).
    pub fn class_name(self) -> &'static str {
        match self {
            Architecture::Llama => "LlamaForCausalLM",
            Architecture::Qwen2 => "Qwen2ForCausalLM",
            Architecture::Qwen3 => "Qwen3ForCausalLM",
            Architecture::Phi3 => "Phi3ForCausalLM",
            Architecture::Mistral => "MistralForCausalLM",
            Architecture::Gemma3 => "Gemma3ForCausalLM",
        }
    }

    /// The Hugging Face `model_type` (`llama`).
    pub fn model_type(self) -> &'static str {
        match self {
            Architecture::Llama => "llama",
            Architecture::Qwen2 => "qwen2",
            Architecture::Qwen3 => "qwen3",
            Architecture::Phi3 => "phi3",
            Architecture::Mistral => "mistral",
            Architecture::Gemma3 => "gemma3_text",
        }
    }

    /// Whether `model_type` names this architecture (Gemma 3 also as `gemma3`).
    fn has_model_type(self, model_type: &str) -> bool {
        self.model_type() == model_type || (self == Architecture::Gemma3 && model_type == "gemma3")
    }

    /// The first of `architectures` that is supported, else the `model_type`'s.
    fn detect(architectures: &[String], model_type: Option<&str>) -> Result<Self, ConfigError> {
        let by_class = architectures
            .iter()
            .find_map(|name| Self::ALL.into_iter().find(|a| a.class_name() == name));
        let by_type = || {
            Self::ALL
                .into_iter()
                .find(|a| model_type.is_some_and(|t| a.has_model_type(t)))
        };
        by_class
            .or_else(|| architectures.is_empty().then(by_type).flatten())
            .ok_or_else(|| ConfigError::UnknownArchitecture {
                names: if architectures.is_empty() {
                    model_type.into_iter().map(str::to_string).collect()
                } else {
                    architectures.to_vec()
                },
            })
    }

    /// transformers' `max_position_embeddings` default.
    fn default_max_positions(self) -> i64 {
        match self {
            Architecture::Llama => 2048,
            Architecture::Qwen2 | Architecture::Qwen3 => 32768,
            Architecture::Phi3 => 4096,
            Architecture::Mistral | Architecture::Gemma3 => 131072,
        }
    }
}

impl std::fmt::Display for Architecture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.class_name())
    }
}

/// The dtype the checkpoint's weights are stored in (`torch_dtype`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoredDtype {
    /// `float32`.
    F32,
    /// `float16`.
    F16,
    /// `bfloat16`.
    BF16,
}

impl StoredDtype {
    const NAMES: [(&'static str, StoredDtype); 3] = [
        ("float32", StoredDtype::F32),
        ("float16", StoredDtype::F16),
        ("bfloat16", StoredDtype::BF16),
    ];

    fn parse(name: &str) -> Result<Self, ConfigError> {
        Self::NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, d)| *d)
            .ok_or_else(|| {
                ConfigError::unsupported("torch_dtype", name, "float32, float16, bfloat16")
            })
    }

    /// The DSL data type of the same name.
    pub fn data_type(self) -> DType {
        match self {
            StoredDtype::F32 => DType::F32,
            StoredDtype::F16 => DType::F16,
            StoredDtype::BF16 => DType::BF16,
        }
    }
}

/// A decoder-only model's hyperparameters, as `config.json` gives them (with transformers'
/// defaults for absent fields).
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    /// The architecture.
    pub architecture: Architecture,
    /// The residual stream's width.
    pub hidden_size: i64,
    /// The MLP's inner width.
    pub intermediate_size: i64,
    /// Decoder layers.
    pub num_hidden_layers: i64,
    /// Query heads.
    pub num_attention_heads: i64,
    /// Key/value heads (divides `num_attention_heads`).
    pub num_key_value_heads: i64,
    /// Lanes per head (explicit for Qwen3, else `hidden_size / num_attention_heads`).
    pub head_dim: i64,
    /// Rows of the embedding and of the output matrix (may exceed the tokenizer's size).
    pub vocab_size: i64,
    /// The epsilon of every RMSNorm.
    pub rms_norm_eps: f64,
    /// The RoPE base.
    pub rope_theta: f64,
    /// RoPE frequency scaling (`linear`, Llama 3.1's `llama3`), if any; Gemma 3 scales
    /// only its full layers.
    pub rope_scaling: Option<RopeScaling>,
    /// The longest context the model was trained for.
    pub max_position_embeddings: i64,
    /// The attention window of the sliding layers (`layer_types`): a query sees only the
    /// last this many positions. Phi-3's layers are all full: its window caps the context
    /// window instead, so every query sees them all.
    pub sliding_window: Option<i64>,
    /// Each layer's attention, full or over the `sliding_window`.
    pub layer_types: Vec<LayerType>,
    /// Gemma 3's sliding layers' own RoPE base (`rope_local_base_freq`, never scaled);
    /// `None`: every layer rotates with `rope_theta` and `rope_scaling`.
    pub rope_local_theta: Option<f64>,
    /// The factor of every attention score (`head_dim ** -0.5`; Gemma 3:
    /// `query_pre_attn_scalar ** -0.5`).
    pub attention_scale: f64,
    /// The MLP's gate activation (`hidden_act`; Gemma's `hidden_activation`).
    pub hidden_activation: Activation,
    /// Whether the output matrix is the embedding (no `lm_head.weight`).
    pub tie_word_embeddings: bool,
    /// How the checkpoint stores its weights.
    pub torch_dtype: StoredDtype,
    /// Bias on every attention projection (Llama, Qwen3; Qwen2 always has q/k/v bias).
    pub attention_bias: bool,
    /// Bias on the MLP's projections (Llama).
    pub mlp_bias: bool,
}

/// The largest `config.json` read (real ones are a few kilobytes).
pub const CONFIG_FILE_LIMIT: u64 = 1 << 20;

impl ModelConfig {
    /// Reads and checks the `config.json` at `path`: a regular file (never a FIFO or a
    /// device, which could block or never end) of at most [`CONFIG_FILE_LIMIT`] bytes.
    pub fn from_file(path: &Path) -> Result<ModelConfig, ConfigError> {
        let io = |source| ConfigError::Io {
            path: path.to_path_buf(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(io)?;
        if !meta.is_file() || meta.len() > CONFIG_FILE_LIMIT {
            let reason = format!("is not a regular file of at most {CONFIG_FILE_LIMIT} bytes");
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                reason,
            )));
        }
        let text = std::fs::read_to_string(path).map_err(io)?;
        ModelConfig::from_json(&text).map_err(|e| ConfigError::InFile {
            path: path.to_path_buf(),
            source: Box::new(e),
        })
    }

    /// Parses and checks `config.json` text.
    pub fn from_json(text: &str) -> Result<ModelConfig, ConfigError> {
        let raw: RawConfig = serde_json::from_str(text)?;
        let architecture = Architecture::detect(&raw.architectures, raw.model_type.as_deref())?;
        let gemma = architecture == Architecture::Gemma3;
        let default_theta = if gemma { 1e6 } else { 1e4 };
        let (rope_theta, rope_scaling) = rope::parse_rope(&raw, LayerType::Full, default_theta)?;
        let rope_local_theta = gemma.then(|| gemma::local_rope_theta(&raw)).transpose()?;
        let hidden_activation = check_supported(&raw, gemma)?;
        let (layer_types, sliding_window) = layers::parse_layers(architecture, &raw)?;
        let heads = raw.num_attention_heads;
        let (head_dim, attention_scale) = head_dim(architecture, &raw)?;
        let config = ModelConfig {
            architecture,
            hidden_size: raw.hidden_size,
            intermediate_size: raw.intermediate_size,
            num_hidden_layers: raw.num_hidden_layers,
            num_attention_heads: heads,
            num_key_value_heads: raw.num_key_value_heads.unwrap_or(heads),
            head_dim,
            vocab_size: raw.vocab_size,
            rms_norm_eps: raw.rms_norm_eps.unwrap_or(match architecture {
                Architecture::Phi3 => 1e-5,
                _ => 1e-6,
            }),
            rope_theta,
            rope_scaling,
            max_position_embeddings: raw
                .max_position_embeddings
                .unwrap_or(architecture.default_max_positions()),
            sliding_window,
            layer_types,
            rope_local_theta,
            attention_scale,
            hidden_activation,
            tie_word_embeddings: raw.tie_word_embeddings.unwrap_or(gemma),
            torch_dtype: match raw.torch_dtype.as_deref().or(raw.dtype.as_deref()) {
                Some(name) => StoredDtype::parse(name)?,
                None => StoredDtype::F32,
            },
            attention_bias: raw.attention_bias.unwrap_or(false),
            mlp_bias: raw.mlp_bias.unwrap_or(false),
        };
        config.check()?;
        Ok(config)
    }

    /// Checks sizes are positive, within [`SIZE_LIMITS`] and consistent.
    fn check(&self) -> Result<(), ConfigError> {
        let sizes = [
            ("hidden_size", self.hidden_size),
            ("intermediate_size", self.intermediate_size),
            ("num_hidden_layers", self.num_hidden_layers),
            ("num_attention_heads", self.num_attention_heads),
            ("num_key_value_heads", self.num_key_value_heads),
            ("head_dim", self.head_dim),
            ("vocab_size", self.vocab_size),
            ("max_position_embeddings", self.max_position_embeddings),
            ("sliding_window", self.sliding_window.unwrap_or(1)),
        ];
        if let Some((field, value)) = sizes.iter().find(|(_, v)| *v <= 0) {
            return Err(ConfigError::invalid(
                field,
                format!("must be positive, got {value}"),
            ));
        }
        for (field, value) in sizes {
            let limit = SIZE_LIMITS
                .iter()
                .find(|(f, _)| *f == field)
                .map(|&(_, l)| l);
            if let Some(limit) = limit.filter(|&l| value > l) {
                return Err(ConfigError::invalid(
                    field,
                    format!("{value} is beyond this compiler's limit of {limit}"),
                ));
            }
        }
        if self.num_attention_heads % self.num_key_value_heads != 0 {
            return Err(ConfigError::invalid(
                "num_key_value_heads",
                format!(
                    "{} does not divide num_attention_heads {}",
                    self.num_key_value_heads, self.num_attention_heads
                ),
            ));
        }
        if self.head_dim % 2 != 0 {
            return Err(ConfigError::invalid(
                "head_dim",
                format!("RoPE needs an even head_dim, got {}", self.head_dim),
            ));
        }
        let bounded = [
            ("rms_norm_eps", self.rms_norm_eps, 0.0),
            ("query_pre_attn_scalar", self.attention_scale, 0.0),
        ];
        for (field, value, above) in bounded {
            if !(value.is_finite() && value > above) {
                let reason = format!("must be finite and above {above}, got {value}");
                return Err(ConfigError::invalid(field, reason));
            }
        }
        Ok(())
    }

    /// The context window: `max_position_embeddings`, capped at Phi-3's attention window
    /// and at `cap`.
    pub fn context_window(&self, cap: i64) -> i64 {
        let window = match self.architecture {
            Architecture::Phi3 => self.sliding_window.unwrap_or(i64::MAX),
            _ => i64::MAX,
        };
        self.max_position_embeddings.min(window).min(cap)
    }

    /// The attention window of layer `layer`: `None` for a full layer.
    pub fn layer_window(&self, layer: usize) -> Option<i64> {
        match self.layer_types.get(layer) {
            Some(LayerType::Sliding) => self.sliding_window,
            _ => None,
        }
    }
}

/// The lanes per head (explicit, else the architecture's default) and the factor of the
/// attention scores (`head_dim ** -0.5`; Gemma 3: `query_pre_attn_scalar ** -0.5`).
fn head_dim(architecture: Architecture, raw: &RawConfig) -> Result<(i64, f64), ConfigError> {
    let heads = raw.num_attention_heads;
    let default = match architecture {
        Architecture::Qwen3 => 128,
        Architecture::Gemma3 => 256,
        _ if heads > 0 && raw.hidden_size % heads != 0 && raw.head_dim.is_none() => {
            let reason = format!(
                "{heads} does not divide hidden_size {} (and no head_dim is given)",
                raw.hidden_size
            );
            return Err(ConfigError::invalid("num_attention_heads", reason));
        }
        _ if heads > 0 => raw.hidden_size / heads,
        _ => 0,
    };
    let head_dim = raw.head_dim.unwrap_or(default);
    let query_scalar = match architecture {
        Architecture::Gemma3 => raw.query_pre_attn_scalar.unwrap_or(256.0),
        _ => head_dim as f64,
    };
    Ok((head_dim, 1.0 / query_scalar.sqrt()))
}

/// The largest value each size may take: far beyond any released model's (so a config
/// past them is a mistake), and small enough that building the model's functions cannot
/// exhaust memory before its weights are checked.
pub const SIZE_LIMITS: &[(&str, i64)] = &[
    ("hidden_size", 1 << 16),
    ("intermediate_size", 1 << 18),
    ("num_hidden_layers", 1 << 10),
    ("num_attention_heads", 1 << 10),
    ("num_key_value_heads", 1 << 10),
    ("head_dim", 1 << 12),
    ("vocab_size", 1 << 22),
    ("max_position_embeddings", 1 << 24),
    ("sliding_window", 1 << 24),
];

/// Rejects features no model implements (RoPE over part of each head), and Llama's
/// family's activations other than SiLU (Gemma 3's: [`gemma::check_supported`]); returns
/// the MLP's activation.
fn check_supported(raw: &RawConfig, gemma: bool) -> Result<Activation, ConfigError> {
    if let Some(factor) = raw.partial_rotary_factor.filter(|f| *f != 1.0) {
        return Err(ConfigError::unsupported(
            "partial_rotary_factor",
            factor,
            "1.0",
        ));
    }
    if gemma {
        return gemma::check_supported(raw);
    }
    if let Some(act) = raw.hidden_act.as_deref().filter(|a| *a != "silu") {
        return Err(ConfigError::unsupported("hidden_act", act, "silu"));
    }
    Ok(Activation::Silu)
}
