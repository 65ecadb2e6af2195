use super::*;
use oxrelax_dsl::nn::{Activation, Llama3RopeScaling};
#[path = "tests_gemma.rs"]
pub(crate) mod gemma;
use serde_json::{json, Value};

/// The tiny-llama fixture's config.json, as a JSON value to modify.
fn llama() -> Value {
    json!({
        "architectures": ["LlamaForCausalLM"],
        "attention_bias": false,
        "head_dim": 16,
        "hidden_act": "silu",
        "hidden_size": 64,
        "intermediate_size": 176,
        "max_position_embeddings": 2048,
        "mlp_bias": false,
        "model_type": "llama",
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-05,
        "rope_scaling": null,
        "rope_theta": 10000.0,
        "tie_word_embeddings": false,
        "torch_dtype": "float32",
        "vocab_size": 1024
    })
}

fn with(mut base: Value, key: &str, value: Value) -> Value {
    base[key] = value;
    base
}

fn without(mut base: Value, key: &str) -> Value {
    base.as_object_mut().unwrap().remove(key);
    base
}

fn parse(value: &Value) -> Result<ModelConfig, ConfigError> {
    ModelConfig::from_json(&value.to_string())
}

fn error(value: &Value) -> String {
    parse(value).unwrap_err().to_string()
}

#[test]
fn llama_config_parses_every_field() {
    let config = parse(&llama()).unwrap();
    let expected = ModelConfig {
        architecture: Architecture::Llama,
        hidden_size: 64,
        intermediate_size: 176,
        num_hidden_layers: 2,
        num_attention_heads: 4,
        num_key_value_heads: 2,
        head_dim: 16,
        vocab_size: 1024,
        rms_norm_eps: 1e-5,
        rope_theta: 10000.0,
        rope_scaling: None,
        max_position_embeddings: 2048,
        sliding_window: None,
        layer_types: vec![LayerType::Full; 2],
        rope_local_theta: None,
        attention_scale: 0.25,
        hidden_activation: Activation::Silu,
        tie_word_embeddings: false,
        torch_dtype: StoredDtype::F32,
        attention_bias: false,
        mlp_bias: false,
    };
    assert_eq!(config, expected);
    assert_eq!(config.context_window(512), 512);
    assert_eq!(config.context_window(1 << 20), 2048);
}

#[test]
fn absent_fields_take_transformers_defaults() {
    let mut minimal = llama();
    for key in [
        "head_dim",
        "num_key_value_heads",
        "rms_norm_eps",
        "rope_theta",
        "rope_scaling",
        "max_position_embeddings",
        "tie_word_embeddings",
        "torch_dtype",
        "hidden_act",
    ] {
        minimal = without(minimal, key);
    }
    let config = parse(&minimal).unwrap();
    assert_eq!(config.head_dim, 16);
    assert_eq!(config.num_key_value_heads, 4);
    assert_eq!(config.rms_norm_eps, 1e-6);
    assert_eq!(config.rope_theta, 10000.0);
    assert_eq!(config.max_position_embeddings, 2048);
    assert!(!config.tie_word_embeddings);
    assert_eq!(config.torch_dtype, StoredDtype::F32);
    let qwen3 = with(minimal, "architectures", json!(["Qwen3ForCausalLM"]));
    let config = parse(&qwen3).unwrap();
    assert_eq!(
        (config.architecture, config.head_dim),
        (Architecture::Qwen3, 128)
    );
    assert_eq!(config.max_position_embeddings, 32768);
}

#[test]
fn architecture_comes_from_architectures_or_model_type() {
    let qwen2 = with(llama(), "architectures", json!(["Qwen2ForCausalLM"]));
    assert_eq!(parse(&qwen2).unwrap().architecture, Architecture::Qwen2);
    let by_type = with(
        without(llama(), "architectures"),
        "model_type",
        json!("qwen3"),
    );
    assert_eq!(parse(&by_type).unwrap().architecture, Architecture::Qwen3);
    let unknown = with(llama(), "architectures", json!(["MixtralForCausalLM"]));
    let err = parse(&unknown).unwrap_err();
    assert!(
        matches!(err, ConfigError::UnknownArchitecture { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("MixtralForCausalLM"), "{err}");
    let unknown_type = with(
        without(llama(), "architectures"),
        "model_type",
        json!("gpt2"),
    );
    assert!(error(&unknown_type).contains("gpt2"));
}

#[test]
fn llama3_and_linear_rope_scaling_parse_and_other_types_are_unsupported() {
    let scaling = json!({
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192
    });
    let config = parse(&with(llama(), "rope_scaling", scaling.clone())).unwrap();
    assert_eq!(
        config.rope_scaling,
        Some(RopeScaling::Llama3(Llama3RopeScaling {
            factor: 8.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 8192.0,
        }))
    );
    let linear = json!({"rope_type": "linear", "factor": 4.0});
    let config = parse(&with(llama(), "rope_scaling", linear)).unwrap();
    assert_eq!(
        config.rope_scaling,
        Some(RopeScaling::Linear { factor: 4.0 })
    );
    let yarn = json!({"type": "yarn", "factor": 4.0});
    let err = parse(&with(llama(), "rope_scaling", yarn)).unwrap_err();
    assert!(matches!(err, ConfigError::Unsupported { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("rope_scaling.rope_type") && message.contains("`yarn`"),
        "{message}"
    );
    let mut incomplete = scaling;
    incomplete
        .as_object_mut()
        .unwrap()
        .remove("high_freq_factor");
    let message = error(&with(llama(), "rope_scaling", incomplete));
    assert!(
        message.contains("rope_scaling.high_freq_factor"),
        "{message}"
    );
}

#[test]
fn transformers_5_rope_parameters_are_read() {
    let params = json!({"rope_type": "default", "rope_theta": 500000.0});
    let config = parse(&with(
        without(llama(), "rope_theta"),
        "rope_parameters",
        params,
    ))
    .unwrap();
    assert_eq!((config.rope_theta, config.rope_scaling), (500000.0, None));
    let dtype = with(without(llama(), "torch_dtype"), "dtype", json!("bfloat16"));
    assert_eq!(parse(&dtype).unwrap().torch_dtype, StoredDtype::BF16);
}

#[test]
fn unsupported_values_name_the_field_and_the_value() {
    let cases = [
        ("hidden_act", json!("gelu"), "hidden_act `gelu`"),
        ("torch_dtype", json!("float8"), "torch_dtype `float8`"),
        (
            "partial_rotary_factor",
            json!(0.75),
            "partial_rotary_factor `0.75`",
        ),
    ];
    for (key, value, needle) in cases {
        let err = parse(&with(llama(), key, value)).unwrap_err();
        assert!(matches!(err, ConfigError::Unsupported { .. }), "{err}");
        assert!(err.to_string().contains(needle), "{err}");
    }
}

#[test]
fn heads_that_do_not_divide_the_hidden_size_need_a_head_dim() {
    let odd = with(
        without(llama(), "head_dim"),
        "num_attention_heads",
        json!(5),
    );
    let odd = with(odd, "num_key_value_heads", json!(5));
    let err = parse(&odd).unwrap_err().to_string();
    assert!(err.contains("5 does not divide hidden_size"), "{err}");
    assert!(parse(&with(odd, "head_dim", json!(16))).is_ok());
}

#[test]
fn inconsistent_sizes_are_invalid() {
    let cases = [
        ("num_key_value_heads", json!(3), "num_key_value_heads"),
        ("head_dim", json!(15), "even head_dim"),
        ("hidden_size", json!(0), "hidden_size"),
        ("rope_theta", json!(0.5), "rope_theta"),
        (
            "num_hidden_layers",
            json!(100_000_000),
            "100000000 is beyond",
        ),
        (
            "vocab_size",
            json!(1i64 << 40),
            "beyond this compiler's limit",
        ),
    ];
    for (key, value, needle) in cases {
        let err = parse(&with(llama(), key, value)).unwrap_err();
        assert!(matches!(err, ConfigError::Invalid { .. }), "{err}");
        assert!(err.to_string().contains(needle), "{err}");
    }
    let err = error(&without(llama(), "vocab_size"));
    assert!(err.contains("vocab_size"), "{err}");
}

#[test]
fn file_errors_name_the_file() {
    let dir = std::env::temp_dir().join(format!("oxrelax-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("config.json");
    std::fs::write(
        &path,
        with(llama(), "hidden_act", json!("relu")).to_string(),
    )
    .unwrap();
    let err = ModelConfig::from_file(&path).unwrap_err().to_string();
    assert!(err.contains("config.json") && err.contains("relu"), "{err}");
    let err = ModelConfig::from_file(&dir.join("absent.json"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("absent.json"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn phi3_caps_the_context_window_at_its_attention_window_and_others_ignore_it() {
    let phi3 = with(llama(), "architectures", json!(["Phi3ForCausalLM"]));
    let windowed = with(phi3.clone(), "sliding_window", json!(2047));
    let config = parse(&windowed).unwrap();
    assert_eq!(config.architecture, Architecture::Phi3);
    assert_eq!(config.context_window(4096), 2047);
    assert_eq!(config.context_window(1024), 1024);
    assert_eq!(parse(&phi3).unwrap().sliding_window, None);
    // Qwen2 configs give a window that applies only with `use_sliding_window`.
    let qwen2 = with(llama(), "architectures", json!(["Qwen2ForCausalLM"]));
    let qwen2 = with(qwen2, "sliding_window", json!(512));
    let config = parse(&qwen2).unwrap();
    assert_eq!(config.context_window(4096), 2048);
    assert_eq!(
        (config.sliding_window, config.layer_window(1)),
        (None, None)
    );
    let longrope = with(phi3, "rope_scaling", json!({"type": "longrope"}));
    let message = error(&longrope);
    assert!(message.contains("longrope"), "{message}");
}

#[test]
fn qwen2_and_mistral_windows_slide_instead_of_being_refused() {
    let qwen2 = with(llama(), "architectures", json!(["Qwen2ForCausalLM"]));
    let qwen2 = with(qwen2, "sliding_window", json!(512));
    let qwen2 = with(qwen2, "use_sliding_window", json!(true));
    let qwen2 = with(qwen2, "max_window_layers", json!(1));
    let config = parse(&qwen2).unwrap();
    assert_eq!(config.layer_types, [LayerType::Full, LayerType::Sliding]);
    assert_eq!(
        (config.layer_window(0), config.layer_window(1)),
        (None, Some(512))
    );
    assert_eq!(config.context_window(4096), 2048);
    let mistral = with(llama(), "architectures", json!(["MistralForCausalLM"]));
    assert_eq!(parse(&mistral).unwrap().layer_window(0), None);
    let config = parse(&with(mistral, "sliding_window", json!(7))).unwrap();
    assert_eq!(config.architecture, Architecture::Mistral);
    assert_eq!(config.layer_types, [LayerType::Sliding; 2]);
    assert_eq!(config.layer_window(1), Some(7));
}
