//! What Gemma 3's config may ask for: the tanh GELU, no logit soft-capping, no RoPE
//! scaling.

use super::raw::RawConfig;
use super::ConfigError;
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
    if let Some(scaling) = raw.rope_scaling.as_ref().filter(|v| !v.is_null()) {
        return Err(ConfigError::unsupported("rope_scaling", scaling, "null"));
    }
    Ok(Activation::GeluTanh)
}
