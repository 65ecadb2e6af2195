use super::*;
use oxrelax_dsl::nn::Module;
use oxrelax_dsl::wellformed::check_module;

/// A tiny config of `architecture` (the fixtures' sizes: hidden 64, 2 layers, 4 heads,
/// 2 kv heads, head_dim 16 — 32 for Qwen3 — ffn 176, vocab 1024).
fn config(architecture: &str, tied: bool) -> ModelConfig {
    let head_dim = if architecture == "Qwen3ForCausalLM" {
        32
    } else {
        16
    };
    let json = serde_json::json!({
        "architectures": [architecture],
        "hidden_size": 64,
        "intermediate_size": 176,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": head_dim,
        "vocab_size": 1024,
        "max_position_embeddings": 2048,
        "tie_word_embeddings": tied,
    });
    ModelConfig::from_json(&json.to_string()).unwrap()
}

/// The weights of layer 0's attention, with shapes.
fn attention_weights(model: &CausalLM) -> Vec<(String, Vec<i64>)> {
    model
        .weight_shapes()
        .into_iter()
        .filter(|(name, _)| name.starts_with("model.layers.0.self_attn."))
        .map(|(name, shape)| (name["model.layers.0.self_attn.".len()..].to_string(), shape))
        .collect()
}

fn named(pairs: &[(&str, &[i64])]) -> Vec<(String, Vec<i64>)> {
    pairs
        .iter()
        .map(|(n, s)| (n.to_string(), s.to_vec()))
        .collect()
}

#[test]
fn llama_weights_are_named_and_shaped_as_hugging_face() {
    let model = LlamaForCausalLM::new(&config("LlamaForCausalLM", false)).unwrap();
    let shapes = model.weight_shapes();
    assert_eq!(shapes.len(), 1 + 2 * 9 + 1 + 1);
    assert_eq!(
        shapes[0],
        ("model.embed_tokens.weight".to_string(), vec![1024, 64])
    );
    let layer0: Vec<_> = shapes[1..10]
        .iter()
        .map(|(n, s)| (n.as_str(), s.clone()))
        .collect();
    let expected: Vec<(&str, Vec<i64>)> = vec![
        ("model.layers.0.input_layernorm.weight", vec![64]),
        ("model.layers.0.self_attn.q_proj.weight", vec![64, 64]),
        ("model.layers.0.self_attn.k_proj.weight", vec![32, 64]),
        ("model.layers.0.self_attn.v_proj.weight", vec![32, 64]),
        ("model.layers.0.self_attn.o_proj.weight", vec![64, 64]),
        ("model.layers.0.post_attention_layernorm.weight", vec![64]),
        ("model.layers.0.mlp.gate_proj.weight", vec![176, 64]),
        ("model.layers.0.mlp.up_proj.weight", vec![176, 64]),
        ("model.layers.0.mlp.down_proj.weight", vec![64, 176]),
    ];
    assert_eq!(layer0, expected);
    assert_eq!(shapes[19].0, "model.norm.weight");
    assert_eq!(shapes[20], ("lm_head.weight".to_string(), vec![1024, 64]));
    assert_eq!(model.parameters().len(), shapes.len());
}

#[test]
fn tied_models_have_no_lm_head_weight() {
    let model = causal_lm(&config("LlamaForCausalLM", true), DType::F32).unwrap();
    let names: Vec<String> = model.weight_shapes().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names.len(), 20);
    assert!(!names.iter().any(|n| n.starts_with("lm_head")));
    assert_eq!(names.last().unwrap(), "model.norm.weight");
}

#[test]
fn qwen2_adds_qkv_bias_and_qwen3_adds_head_norms_with_explicit_head_dim() {
    let qwen2 = Qwen2ForCausalLM::new(&config("Qwen2ForCausalLM", true)).unwrap();
    let expected = named(&[
        ("q_proj.weight", &[64, 64]),
        ("q_proj.bias", &[64]),
        ("k_proj.weight", &[32, 64]),
        ("k_proj.bias", &[32]),
        ("v_proj.weight", &[32, 64]),
        ("v_proj.bias", &[32]),
        ("o_proj.weight", &[64, 64]),
    ]);
    assert_eq!(attention_weights(&qwen2), expected);
    let qwen3 = Qwen3ForCausalLM::new(&config("Qwen3ForCausalLM", true)).unwrap();
    let expected = named(&[
        ("q_proj.weight", &[128, 64]),
        ("k_proj.weight", &[64, 64]),
        ("v_proj.weight", &[64, 64]),
        ("o_proj.weight", &[64, 128]),
        ("q_norm.weight", &[32]),
        ("k_norm.weight", &[32]),
    ]);
    assert_eq!(attention_weights(&qwen3), expected);
}

#[test]
fn llama_attention_and_mlp_bias_follow_the_config() {
    let mut with_bias = config("LlamaForCausalLM", false);
    with_bias.attention_bias = true;
    with_bias.mlp_bias = true;
    let names: Vec<String> = causal_lm(&with_bias, DType::F32)
        .unwrap()
        .weight_shapes()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    for proj in ["self_attn.q_proj", "self_attn.o_proj", "mlp.down_proj"] {
        assert!(
            names.contains(&format!("model.layers.1.{proj}.bias")),
            "{proj}"
        );
    }
}

#[test]
fn f16_weights_cover_projections_and_embeddings_not_norms_or_biases() {
    for tied in [false, true] {
        let model = causal_lm(&config("Qwen2ForCausalLM", tied), DType::F16).unwrap();
        for param in model.parameters() {
            let f32_kept = param.name.ends_with("norm.weight") || param.name.ends_with(".bias");
            let want = if f32_kept { DType::F32 } else { DType::F16 };
            assert_eq!(param.dtype(), Some(want), "{}", param.name);
        }
        let module = model.export(&ExportOptions::default()).unwrap().module;
        check_module(&module).unwrap();
    }
}

#[test]
fn a_class_rejects_configs_of_other_architectures() {
    let err = Qwen2ForCausalLM::new(&config("LlamaForCausalLM", false)).unwrap_err();
    assert!(matches!(
        err,
        ModelError::WrongArchitecture {
            model: Architecture::Qwen2,
            got: Architecture::Llama
        }
    ));
    assert_eq!(
        err.to_string(),
        "Qwen2ForCausalLM cannot be built from a LlamaForCausalLM config"
    );
}

#[test]
fn export_builds_every_function_with_bounded_dims() {
    let model = causal_lm(&config("Qwen3ForCausalLM", true), DType::F32).unwrap();
    let options = ExportOptions {
        max_context: 512,
        prefill_chunk: 32,
        ..ExportOptions::default()
    };
    let exported = model.export(&options).unwrap();
    assert_eq!((exported.context_window, exported.prefill_chunk), (512, 32));
    check_module(&exported.module).unwrap();
    let functions = &exported.module.functions;
    let names: Vec<&str> = functions.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "batch_decode",
            "create_kv_cache",
            "decode",
            "embed",
            "prefill",
            "prefill_all",
            "softmax_with_temperature"
        ]
    );
    let ret = |name: &str| functions[name].ret_sinfo().to_string();
    assert_eq!(ret("prefill"), "Tensor((1, 1, 1024), f32)");
    assert_eq!(ret("prefill_all"), "Tensor((1, n, 1024), f32)");
    assert_eq!(ret("decode"), "Tensor((1, 1, 1024), f32)");
    assert_eq!(ret("batch_decode"), "Tensor((1, b, 1024), f32)");
    let batch = &functions["batch_decode"].params;
    assert_eq!(batch[1].sinfo.to_string(), "Tensor((b,), i32)");
    assert_eq!(batch.len(), 3 + model.weight_shapes().len());
    assert_eq!(ret("embed"), "Tensor((1, n, 64), f32)");
    assert_eq!(ret("softmax_with_temperature"), "Tensor((1, 1, 1024), f32)");
    assert_eq!(ret("create_kv_cache"), "Object");
    let weights = model.weight_shapes().len();
    assert_eq!(functions["prefill"].params.len(), 2 + weights);
    assert_eq!(functions["embed"].params.len(), 1 + weights);
    let ids = functions["prefill"].params[0].sinfo.to_string();
    assert_eq!(ids, "Tensor((1, n), i32)");
    let bound = functions["prefill"].params[0]
        .sinfo
        .sym_vars()
        .into_iter()
        .next()
        .unwrap();
    assert_eq!(bound.upper(), Some(32));
    // The context window is max_position_embeddings when the cap is larger.
    let wide = ExportOptions {
        max_context: 1 << 20,
        ..options
    };
    assert_eq!(model.export(&wide).unwrap().context_window, 2048);
}

#[test]
fn export_rejects_non_positive_options() {
    let model = causal_lm(&config("LlamaForCausalLM", false), DType::F32).unwrap();
    let options = ExportOptions {
        prefill_chunk: 0,
        ..ExportOptions::default()
    };
    let err = model.export(&options).unwrap_err().to_string();
    assert!(err.contains("prefill_chunk") && err.contains('0'), "{err}");
}

#[test]
fn kv_dtypes_are_named_f32_f16_and_q8() {
    for dtype in KvDtype::ALL {
        assert_eq!(dtype.name().parse::<KvDtype>(), Ok(dtype));
    }
    let err = "bf16".parse::<KvDtype>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown KV cache dtype `bf16` (expected one of f32, f16, q8)"
    );
    assert_eq!(KvDtype::default(), KvDtype::F32);
    assert_eq!(KvDtype::Q8.element(), DType::I8);
}

#[test]
fn an_f16_kv_cache_is_created_appended_to_and_viewed_as_f16() {
    let model = causal_lm(&config("Qwen2ForCausalLM", true), DType::F32).unwrap();
    let options = ExportOptions {
        kv_dtype: KvDtype::F16,
        ..ExportOptions::default()
    };
    let exported = model.export(&options).unwrap();
    assert_eq!(exported.kv_dtype, KvDtype::F16);
    check_module(&exported.module).unwrap();
    let text = oxrelax_dsl::text::print_module(&exported.module);
    assert!(
        text.contains(
            r#"call_packed("kv_cache.create", [i64(2), i64(2), i64(16), i64(2048), "f16"]"#
        ),
        "{text}"
    );
    // k and v appended as f32 (the cache rounds them as it copies), viewed as f16.
    assert!(!text.contains("astype("), "{text}");
    assert!(
        text.contains("match_cast(kv_view[0], Tensor((m, 2, 16), f16))"),
        "{text}"
    );
    assert!(!text.contains("Tensor((m, 2, 16), f32)"), "{text}");
}

#[test]
fn a_q8_kv_cache_is_quantized_by_compiled_ops_and_read_by_attention_q8kv() {
    let model = causal_lm(&config("Qwen2ForCausalLM", true), DType::F32).unwrap();
    let options = ExportOptions {
        kv_dtype: KvDtype::Q8,
        ..ExportOptions::default()
    };
    let exported = model.export(&options).unwrap();
    assert_eq!(exported.kv_dtype, KvDtype::Q8);
    check_module(&exported.module).unwrap();
    let text = oxrelax_dsl::text::print_module(&exported.module);
    for wanted in [
        r#"call_packed("kv_cache.create", [i64(2), i64(2), i64(16), i64(2048), "q8"]"#,
        "activation_scales(",
        "quantize_kv(",
        r#"call_packed("kv_cache.append_q8""#,
        "match_cast(kv_view[0], Tensor((m, 2, 16), i8))",
        "match_cast(kv_view[3], Tensor((m, 2), f32))",
        "attention_q8kv(",
    ] {
        assert!(text.contains(wanted), "{wanted}: {text}");
    }
    assert!(!text.contains("attention("), "{text}");
    assert!(
        !text.contains(r#"call_packed("kv_cache.append","#),
        "{text}"
    );
}
