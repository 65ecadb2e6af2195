//! Each layer's attention, full or sliding-window, as transformers derives it per
//! architecture: Gemma 3's `layer_types` (or `sliding_window_pattern`), Mistral's
//! `sliding_window` on every layer, Qwen2/Qwen3's `use_sliding_window` from
//! `max_window_layers` on.

use super::raw::RawConfig;
use super::{Architecture, ConfigError};

/// The attention of one decoder layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerType {
    /// Over every past position (`full_attention`).
    Full,
    /// Over the last `sliding_window` positions (`sliding_attention`).
    Sliding,
}

impl LayerType {
    /// The Hugging Face name (`full_attention`).
    pub fn name(self) -> &'static str {
        match self {
            LayerType::Full => "full_attention",
            LayerType::Sliding => "sliding_attention",
        }
    }

    fn parse(name: &str) -> Result<Self, ConfigError> {
        [LayerType::Full, LayerType::Sliding]
            .into_iter()
            .find(|t| t.name() == name)
            .ok_or_else(|| {
                ConfigError::unsupported("layer_types", name, "full_attention, sliding_attention")
            })
    }
}

/// transformers' `sliding_window` default (Gemma 3, Mistral, Qwen2, Qwen3).
const DEFAULT_WINDOW: i64 = 4096;

/// Gemma 3's default `sliding_window_pattern`: five sliding layers, then a full one.
const DEFAULT_PATTERN: i64 = 6;

/// Qwen2/Qwen3's default `max_window_layers`.
const DEFAULT_MAX_WINDOW_LAYERS: i64 = 28;

/// Every layer's type and the window of the sliding ones (`None` when no layer slides;
/// Phi-3's window, which caps the context instead, is passed through with full layers).
pub(super) fn parse_layers(
    architecture: Architecture,
    raw: &RawConfig,
) -> Result<(Vec<LayerType>, Option<i64>), ConfigError> {
    let layers = raw.num_hidden_layers.max(0);
    let uniform = |t| Ok(vec![t; layers as usize]);
    let window = raw.sliding_window.unwrap_or(DEFAULT_WINDOW);
    let qwen_sliding = raw.use_sliding_window == Some(true);
    let types = match (&raw.layer_types, architecture) {
        (_, Architecture::Llama) => uniform(LayerType::Full),
        (_, Architecture::Phi3) => return Ok((uniform(LayerType::Full)?, raw.sliding_window)),
        (_, Architecture::Qwen2 | Architecture::Qwen3) if !qwen_sliding => uniform(LayerType::Full),
        (Some(names), _) => names.iter().map(|n| LayerType::parse(n)).collect(),
        (None, Architecture::Gemma3) => {
            let pattern = raw.sliding_window_pattern.unwrap_or(DEFAULT_PATTERN);
            if pattern <= 0 {
                let reason = format!("must be positive, got {pattern}");
                return Err(ConfigError::invalid("sliding_window_pattern", reason));
            }
            Ok(by_index(layers, |i| (i + 1) % pattern != 0))
        }
        (None, Architecture::Mistral) => match raw.sliding_window {
            Some(_) => uniform(LayerType::Sliding),
            None => uniform(LayerType::Full),
        },
        (None, Architecture::Qwen2 | Architecture::Qwen3) => {
            let first = raw.max_window_layers.unwrap_or(DEFAULT_MAX_WINDOW_LAYERS);
            Ok(by_index(layers, |i| i >= first))
        }
    }?;
    if types.len() as i64 != layers {
        let reason = format!(
            "lists {} layers, num_hidden_layers is {layers}",
            types.len()
        );
        return Err(ConfigError::invalid("layer_types", reason));
    }
    let sliding = types.contains(&LayerType::Sliding);
    Ok((types, sliding.then_some(window)))
}

/// `layers` layers, sliding where `sliding(index)`.
fn by_index(layers: i64, sliding: impl Fn(i64) -> bool) -> Vec<LayerType> {
    (0..layers)
        .map(|i| {
            if sliding(i) {
                LayerType::Sliding
            } else {
                LayerType::Full
            }
        })
        .collect()
}
