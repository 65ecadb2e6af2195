//! What Gemma 3's config may ask for: the tanh GELU, no logit soft-capping; and the
//! RoPE base of its sliding layers.

use super::raw::RawConfig;
use super::{rope, ConfigError, LayerType};
use oxrelax_dsl::nn::Activation;

/// Rejects Gemma 3 features the model does not implement; returns the MLP's activation
/// (`hidden_activation`, or `hidden_act`; `gelu_pytorch_tanh` by default).
pub(super) fn check_supported(raw: &RawConfig) -> Result<Activation, ConfigError> {
    let (field, name) = match (&raw.hidden_activation, &raw.hidden_act) {
        (Some(name), _) => ("hidden_activation", name.as_str()),
        (None, Some(name)) => ("hidden_act", name.as_str()),
        (None, None) => ("hidden_activation", Activation::GeluTanh.name()),
    };
    if name != Activation::GeluTanh.name() {
        return Err(ConfigError::unsupported(field, name, "gelu_pytorch_tanh"));
    }
    let capping = [
        ("attn_logit_softcapping", raw.attn_logit_softcapping),
        ("final_logit_softcapping", raw.final_logit_softcapping),
    ];
    if let Some((field, Some(value))) = capping.into_iter().find(|(_, v)| v.is_some()) {
        return Err(ConfigError::unsupported(field, value, "null"));
    }
    Ok(Activation::GeluTanh)
}

/// transformers' `rope_local_base_freq` default.
const DEFAULT_LOCAL_THETA: f64 = 10000.0;

/// The sliding layers' RoPE base; transformers never scales their frequencies, so a
/// scaling given for them is refused.
pub(super) fn local_rope_theta(raw: &RawConfig) -> Result<f64, ConfigError> {
    let (theta, scaling) = rope::parse_rope(raw, LayerType::Sliding, DEFAULT_LOCAL_THETA)?;
    if let Some(scaling) = scaling {
        let field = "rope_parameters.sliding_attention";
        return Err(ConfigError::unsupported(
            field,
            format!("{scaling:?}"),
            "default",
        ));
    }
    Ok(theta)
}
