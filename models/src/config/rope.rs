//! The RoPE fields of a config: `rope_theta` and `rope_scaling` (or transformers 5's
//! `rope_parameters`, which holds both).

use super::raw::RawConfig;
use super::ConfigError;
use oxrelax_dsl::nn::Llama3RopeScaling;
use serde_json::Value;

/// `rope_theta` (`default_theta`, transformers' default, when absent) and the frequency
/// scaling (`None`: plain RoPE).
pub(super) fn parse_rope(
    raw: &RawConfig,
    default_theta: f64,
) -> Result<(f64, Option<Llama3RopeScaling>), ConfigError> {
    let parameters = raw.rope_parameters.as_ref().filter(|v| !v.is_null());
    let theta = match (raw.rope_theta, parameters.and_then(|p| p.get("rope_theta"))) {
        (Some(theta), _) => theta,
        (None, Some(value)) => value
            .as_f64()
            .ok_or_else(|| ConfigError::invalid("rope_parameters.rope_theta", "not a number"))?,
        (None, None) => default_theta,
    };
    if !(theta.is_finite() && theta > 1.0) {
        return Err(ConfigError::invalid(
            "rope_theta",
            format!("must be above 1, got {theta}"),
        ));
    }
    let (field, scaling) = match raw.rope_scaling.as_ref().filter(|v| !v.is_null()) {
        Some(scaling) => ("rope_scaling", Some(scaling)),
        None => ("rope_parameters", parameters),
    };
    let scaling = scaling
        .map(|s| parse_scaling(field, s))
        .transpose()?
        .flatten();
    Ok((theta, scaling))
}

/// A `rope_scaling` object: `rope_type` (or `type`) `default` or `llama3`.
fn parse_scaling(field: &str, value: &Value) -> Result<Option<Llama3RopeScaling>, ConfigError> {
    let object = value.as_object().ok_or_else(|| {
        ConfigError::invalid(field, format!("expected an object or null, got {value}"))
    })?;
    let kind = object
        .get("rope_type")
        .or_else(|| object.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("default");
    match kind {
        "default" => Ok(None),
        "llama3" => {
            let number = |key: &str| {
                object.get(key).and_then(Value::as_f64).ok_or_else(|| {
                    ConfigError::invalid(&format!("{field}.{key}"), "missing or not a number")
                })
            };
            Ok(Some(Llama3RopeScaling {
                factor: number("factor")?,
                low_freq_factor: number("low_freq_factor")?,
                high_freq_factor: number("high_freq_factor")?,
                original_max_position_embeddings: number("original_max_position_embeddings")?,
            }))
        }
        other => Err(ConfigError::unsupported(
            &format!("{field}.rope_type"),
            other,
            "llama3, default, or no rope_scaling",
        )),
    }
}
