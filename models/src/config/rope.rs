//! The RoPE fields of a config: `rope_theta` and `rope_scaling`, Gemma 3's
//! `rope_local_base_freq` (or transformers 5's `rope_parameters`, which holds them all).

use super::raw::RawConfig;
use super::{ConfigError, LayerType};
use oxrelax_dsl::nn::{Llama3RopeScaling, RopeScaling};
use serde_json::Value;

/// The RoPE of `layer`s: the base (`default_theta`, transformers' default, when absent)
/// and the frequency scaling (`None`: plain RoPE). Full layers read `rope_theta` and
/// `rope_scaling`, Gemma 3's sliding ones `rope_local_base_freq`; transformers 5 puts
/// both in `rope_parameters`, per layer type (`rope_parameters.full_attention`) or one
/// object for every layer.
pub(super) fn parse_rope(
    raw: &RawConfig,
    layer: LayerType,
    default_theta: f64,
) -> Result<(f64, Option<RopeScaling>), ConfigError> {
    let (explicit_theta, explicit_scaling) = match layer {
        LayerType::Full => (raw.rope_theta, raw.rope_scaling.as_ref()),
        LayerType::Sliding => (raw.rope_local_base_freq, None),
    };
    let parameters = raw.rope_parameters.as_ref().filter(|v| !v.is_null());
    let (field, parameters) = match (parameters.and_then(|p| p.get(layer.name())), layer) {
        (Some(own), _) => (format!("rope_parameters.{}", layer.name()), Some(own)),
        (None, LayerType::Full) => ("rope_parameters".to_string(), parameters),
        (None, LayerType::Sliding) => (String::new(), None),
    };
    let theta = match (explicit_theta, parameters.and_then(|p| p.get("rope_theta"))) {
        (Some(theta), _) => theta,
        (None, Some(value)) => value
            .as_f64()
            .ok_or_else(|| ConfigError::invalid(&format!("{field}.rope_theta"), "not a number"))?,
        (None, None) => default_theta,
    };
    if !(theta.is_finite() && theta > 1.0) {
        let name = match layer {
            LayerType::Full => "rope_theta",
            LayerType::Sliding => "rope_local_base_freq",
        };
        return Err(ConfigError::invalid(
            name,
            format!("must be above 1, got {theta}"),
        ));
    }
    let (field, scaling) = match explicit_scaling.filter(|v| !v.is_null()) {
        Some(scaling) => ("rope_scaling", Some(scaling)),
        None => (field.as_str(), parameters),
    };
    let scaling = scaling
        .map(|s| parse_scaling(field, s))
        .transpose()?
        .flatten();
    Ok((theta, scaling))
}

/// A `rope_scaling` object: `rope_type` (or `type`) `default`, `linear` or `llama3`.
fn parse_scaling(field: &str, value: &Value) -> Result<Option<RopeScaling>, ConfigError> {
    let object = value.as_object().ok_or_else(|| {
        ConfigError::invalid(field, format!("expected an object or null, got {value}"))
    })?;
    let kind = object
        .get("rope_type")
        .or_else(|| object.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("default");
    let number = |key: &str| {
        object.get(key).and_then(Value::as_f64).ok_or_else(|| {
            ConfigError::invalid(&format!("{field}.{key}"), "missing or not a number")
        })
    };
    match kind {
        "default" => Ok(None),
        "linear" => Ok(Some(RopeScaling::Linear {
            factor: number("factor")?,
        })),
        "llama3" => Ok(Some(RopeScaling::Llama3(Llama3RopeScaling {
            factor: number("factor")?,
            low_freq_factor: number("low_freq_factor")?,
            high_freq_factor: number("high_freq_factor")?,
            original_max_position_embeddings: number("original_max_position_embeddings")?,
        }))),
        other => Err(ConfigError::unsupported(
            &format!("{field}.rope_type"),
            other,
            "linear, llama3, default, or no rope_scaling",
        )),
    }
}
