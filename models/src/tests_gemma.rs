//! Gemma 3's weights (names and shapes as Hugging Face's), and what its exported
//! functions compute that the other models do not: window masks on sliding layers only,
//! the scaled embedding, `1 + w` norms, the tanh GELU; Mistral's and Qwen2's windows.

use crate::config::tests::gemma::gemma3;
use crate::*;
use oxrelax_dsl::nn::Module;
use oxrelax_dsl::wellformed::check_module;

fn model() -> CausalLM {
    model_of(&gemma3())
}

fn model_of(config: &serde_json::Value) -> CausalLM {
    let config = ModelConfig::from_json(&config.to_string()).unwrap();
    causal_lm(&config, oxrelax_dsl::DType::F32).unwrap()
}

/// The text of `model`'s exported `prefill`.
fn prefill(model: &CausalLM) -> String {
    let mut module = model.export(&ExportOptions::default()).unwrap().module;
    check_module(&module).unwrap();
    module.functions.retain(|name, _| name == "prefill");
    oxrelax_dsl::text::print_module(&module)
}

#[test]
fn gemma3_weights_are_named_and_shaped_as_hugging_face() {
    let model = model();
    let shapes = model.weight_shapes();
    assert_eq!(shapes.len(), 1 + 5 * 13 + 1, "tied: no lm_head");
    assert_eq!(
        shapes[0],
        ("model.embed_tokens.weight".into(), vec![300, 64])
    );
    let mut layer0: Vec<(String, Vec<i64>)> = shapes
        .iter()
        .filter_map(|(n, s)| Some((n.strip_prefix("model.layers.0.")?.to_string(), s.clone())))
        .collect();
    layer0.sort();
    let mut expected: Vec<(String, Vec<i64>)> = [
        ("input_layernorm.weight", vec![64]),
        ("post_attention_layernorm.weight", vec![64]),
        ("pre_feedforward_layernorm.weight", vec![64]),
        ("post_feedforward_layernorm.weight", vec![64]),
        ("self_attn.q_proj.weight", vec![64, 64]),
        ("self_attn.k_proj.weight", vec![16, 64]),
        ("self_attn.v_proj.weight", vec![16, 64]),
        ("self_attn.o_proj.weight", vec![64, 64]),
        ("self_attn.q_norm.weight", vec![16]),
        ("self_attn.k_norm.weight", vec![16]),
        ("mlp.gate_proj.weight", vec![96, 64]),
        ("mlp.up_proj.weight", vec![96, 64]),
        ("mlp.down_proj.weight", vec![64, 96]),
    ]
    .into_iter()
    .map(|(n, s)| (n.to_string(), s))
    .collect();
    expected.sort();
    assert_eq!(layer0, expected);
    assert_eq!(shapes.last().unwrap().0, "model.norm.weight");
    assert_eq!(model.parameters().len(), shapes.len());
}

#[test]
fn gemma3_attention_windows_only_its_sliding_layers() {
    let prefill = prefill(&model());
    // Layers 0, 1, 3 and 4 slide over 4 positions, layer 2 attends to every one.
    assert_eq!(prefill.matches("attention(").count(), 5, "{prefill}");
    assert_eq!(prefill.matches("window=4").count(), 4, "{prefill}");
    assert_eq!(prefill.matches("gelu(").count(), 5, "{prefill}");
    assert_eq!(prefill.matches("rms_norm(").count(), 5 * 6 + 1, "{prefill}");
}

#[test]
fn mistral_windows_every_layer_and_qwen2_those_from_max_window_layers() {
    let llama_like = serde_json::json!({
        "architectures": ["MistralForCausalLM"],
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 300,
        "sliding_window": 6,
    });
    let mistral = prefill(&model_of(&llama_like));
    assert_eq!(mistral.matches("window=6").count(), 3, "{mistral}");
    assert_eq!(mistral.matches("silu(").count(), 3, "{mistral}");
    let mut qwen2 = llama_like;
    qwen2["architectures"] = serde_json::json!(["Qwen2ForCausalLM"]);
    qwen2["use_sliding_window"] = serde_json::json!(true);
    qwen2["max_window_layers"] = serde_json::json!(1);
    assert_eq!(prefill(&model_of(&qwen2)).matches("window=6").count(), 2);
    qwen2["use_sliding_window"] = serde_json::json!(false);
    assert_eq!(prefill(&model_of(&qwen2)).matches("window=").count(), 0);
}
