//! Gemma 3's config: transformers' defaults, layer types from `layer_types` or the
//! pattern, typed errors for what the model does not implement.

use super::{error, parse, with, without};
use crate::config::{Architecture, ConfigError, LayerType};
use oxrelax_dsl::nn::{Activation, RopeScaling};
use serde_json::{json, Value};

/// A tiny Gemma 3 text config as transformers writes it.
pub(crate) fn gemma3() -> Value {
    json!({
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_hidden_layers": 5,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "head_dim": 16,
        "vocab_size": 300,
        "sliding_window": 4,
        "sliding_window_pattern": 3,
        "query_pre_attn_scalar": 16,
        "hidden_activation": "gelu_pytorch_tanh",
        "attn_logit_softcapping": null,
        "final_logit_softcapping": null,
        "rope_scaling": null,
        "torch_dtype": "float32"
    })
}

#[test]
fn gemma3_takes_transformers_defaults() {
    let config = parse(&gemma3()).unwrap();
    assert_eq!(config.architecture, Architecture::Gemma3);
    assert_eq!(config.rms_norm_eps, 1e-6);
    assert_eq!(config.rope_theta, 1e6);
    assert_eq!(config.rope_local_theta, Some(1e4));
    assert_eq!(config.rope_scaling, None);
    assert_eq!(config.attention_scale, 0.25);
    assert_eq!(config.hidden_activation, Activation::GeluTanh);
    assert!(config.tie_word_embeddings);
    assert_eq!(config.max_position_embeddings, 131072);
    assert_eq!(config.sliding_window, Some(4));
    // The context is not capped at the window: masking implements it.
    assert_eq!(config.context_window(1 << 20), 131072);
    let minimal = [
        "sliding_window_pattern",
        "sliding_window",
        "hidden_activation",
    ]
    .into_iter()
    .fold(gemma3(), without);
    let minimal = with(minimal, "num_hidden_layers", json!(12));
    let config = parse(&minimal).unwrap();
    assert_eq!(config.sliding_window, Some(4096));
    assert_eq!(config.hidden_activation, Activation::GeluTanh);
    let full: Vec<usize> = (0..12)
        .filter(|&i| config.layer_window(i).is_none())
        .collect();
    assert_eq!(full, [5, 11]);
    let scaled = with(gemma3(), "query_pre_attn_scalar", json!(256));
    assert_eq!(parse(&scaled).unwrap().attention_scale, 1.0 / 16.0);
    let by_type = with(gemma3(), "architectures", json!([]));
    for model_type in ["gemma3_text", "gemma3"] {
        let config = parse(&with(by_type.clone(), "model_type", json!(model_type))).unwrap();
        assert_eq!(config.architecture, Architecture::Gemma3);
    }
}

#[test]
fn layer_types_come_from_the_list_or_else_the_pattern() {
    use LayerType::{Full, Sliding};
    let config = parse(&gemma3()).unwrap();
    assert_eq!(
        config.layer_types,
        [Sliding, Sliding, Full, Sliding, Sliding]
    );
    assert_eq!(config.layer_window(0), Some(4));
    assert_eq!(config.layer_window(2), None);
    let names = json!([
        "full_attention",
        "sliding_attention",
        "full_attention",
        "full_attention",
        "sliding_attention"
    ]);
    let listed = parse(&with(gemma3(), "layer_types", names)).unwrap();
    assert_eq!(listed.layer_types, [Full, Sliding, Full, Full, Sliding]);
    let short = with(gemma3(), "layer_types", json!(["full_attention"]));
    assert!(matches!(parse(&short), Err(ConfigError::Invalid { .. })));
    let message = error(&with(
        gemma3(),
        "layer_types",
        json!(vec!["chunked_attention"; 5]),
    ));
    assert!(
        message.contains("layer_types `chunked_attention`"),
        "{message}"
    );
    let message = error(&with(gemma3(), "sliding_window_pattern", json!(0)));
    assert!(message.contains("sliding_window_pattern"), "{message}");
    let message = error(&with(gemma3(), "rope_local_base_freq", json!(0.5)));
    assert!(
        message.contains("invalid rope_local_base_freq"),
        "{message}"
    );
    let message = error(&with(gemma3(), "sliding_window", json!(0)));
    assert!(message.contains("sliding_window"), "{message}");
}

#[test]
fn transformers_5_rope_parameters_per_layer_type_are_read() {
    let nested = json!({
        "full_attention": {"rope_type": "default", "rope_theta": 500000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 20000.0}
    });
    let config = without(without(gemma3(), "rope_scaling"), "rope_theta");
    let config = parse(&with(config, "rope_parameters", nested.clone())).unwrap();
    assert_eq!(
        (config.rope_theta, config.rope_local_theta),
        (500000.0, Some(20000.0))
    );
    let mut linear = nested;
    linear["full_attention"] = json!({"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6});
    let config = parse(&with(gemma3(), "rope_parameters", linear.clone())).unwrap();
    let factor = RopeScaling::Linear { factor: 8.0 };
    assert_eq!(config.rope_scaling, Some(factor), "the full layers' only");
    linear["sliding_attention"] = json!({"rope_type": "linear", "factor": 2.0});
    let message = error(&with(gemma3(), "rope_parameters", linear));
    assert!(
        message.contains("rope_parameters.sliding_attention `Linear"),
        "{message}"
    );
}

#[test]
fn gemma3_features_it_lacks_are_typed_errors_naming_field_and_value() {
    let cases = [
        (
            "hidden_activation",
            json!("gelu"),
            "hidden_activation `gelu`",
        ),
        (
            "attn_logit_softcapping",
            json!(50.0),
            "attn_logit_softcapping `50`",
        ),
        (
            "final_logit_softcapping",
            json!(30.0),
            "final_logit_softcapping `30`",
        ),
        (
            "rope_scaling",
            json!({"rope_type": "yarn", "factor": 8.0}),
            "rope_scaling.rope_type `yarn`",
        ),
    ];
    for (key, value, needle) in cases {
        let err = parse(&with(gemma3(), key, value)).unwrap_err();
        assert!(matches!(err, ConfigError::Unsupported { .. }), "{err}");
        assert!(err.to_string().contains(needle), "{err}");
    }
    let act = with(
        without(gemma3(), "hidden_activation"),
        "hidden_act",
        json!("silu"),
    );
    assert!(error(&act).contains("hidden_act `silu`"));
}
