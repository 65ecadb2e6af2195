//! A model of odd sizes is a normal input: a random Llama whose MLP width (259) is not a
//! multiple of the panel (16), the GEMV block (64) or the quantization group (32), and
//! whose hidden size (48) is not a multiple of the group either, runs in every scheme; the
//! int8 scheme stays within rounding of f32.

mod common;
use common::{greedy, load_as};

use oxrelax::model::{LoadedModel, Quantization};
use oxrelax_runtime::engine::Generation;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use safetensors::tensor::TensorView;
use std::path::Path;

const HIDDEN: usize = 48;
const INTERMEDIATE: usize = 259;
const VOCAB: usize = 1024;
const LAYERS: usize = 2;
const HEADS: usize = 3;
const KV_HEADS: usize = 1;
const HEAD_DIM: usize = 16;

/// Writes `config.json` and random f32 weights of the odd-sized Llama into `dir`.
fn write_model(dir: &Path) {
    let config = serde_json::json!({
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "vocab_size": VOCAB,
        "max_position_embeddings": 256,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": false,
        "hidden_act": "silu",
        "torch_dtype": "float32"
    });
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let mut shapes = vec![
        ("model.embed_tokens.weight".to_string(), vec![VOCAB, HIDDEN]),
        ("model.norm.weight".to_string(), vec![HIDDEN]),
        ("lm_head.weight".to_string(), vec![VOCAB, HIDDEN]),
    ];
    for layer in 0..LAYERS {
        let p = format!("model.layers.{layer}");
        let (q, kv) = (HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM);
        shapes.extend([
            (format!("{p}.input_layernorm.weight"), vec![HIDDEN]),
            (format!("{p}.post_attention_layernorm.weight"), vec![HIDDEN]),
            (format!("{p}.self_attn.q_proj.weight"), vec![q, HIDDEN]),
            (format!("{p}.self_attn.k_proj.weight"), vec![kv, HIDDEN]),
            (format!("{p}.self_attn.v_proj.weight"), vec![kv, HIDDEN]),
            (format!("{p}.self_attn.o_proj.weight"), vec![HIDDEN, q]),
            (
                format!("{p}.mlp.gate_proj.weight"),
                vec![INTERMEDIATE, HIDDEN],
            ),
            (
                format!("{p}.mlp.up_proj.weight"),
                vec![INTERMEDIATE, HIDDEN],
            ),
            (
                format!("{p}.mlp.down_proj.weight"),
                vec![HIDDEN, INTERMEDIATE],
            ),
        ]);
    }
    let mut rng = StdRng::seed_from_u64(259);
    let data: Vec<(String, Vec<usize>, Vec<u8>)> = shapes
        .into_iter()
        .map(|(name, shape)| {
            let norm = shape.len() == 1;
            let bytes = (0..shape.iter().product::<usize>())
                .flat_map(|_| {
                    let v: f32 = if norm { 1.0 } else { rng.gen_range(-0.3..0.3) };
                    v.to_le_bytes()
                })
                .collect();
            (name, shape, bytes)
        })
        .collect();
    let views: Vec<(String, TensorView<'_>)> = data
        .iter()
        .map(|(name, shape, bytes)| {
            let view = TensorView::new(safetensors::Dtype::F32, shape.clone(), bytes).unwrap();
            (name.clone(), view)
        })
        .collect();
    safetensors::serialize_to_file(views, None, &dir.join("model.safetensors")).unwrap();
}

/// Greedy generation of 8 tokens after a 21-token prompt, keeping every logit row.
fn generate(model: LoadedModel) -> Generation {
    let prompt: Vec<u32> = (0..21).map(|i| (i * 37 + 5) % VOCAB as u32).collect();
    greedy(model, &prompt, 8)
}

/// Every logit row of a generation, flat.
fn logits(g: &Generation) -> Vec<f32> {
    let rows = g.prefill_logits.iter().chain(&g.token_logits);
    rows.flat_map(|row| row.iter().copied()).collect()
}

#[test]
fn odd_sizes_run_in_every_scheme_and_int8_stays_near_f32() {
    let dir = tempfile::tempdir().unwrap();
    write_model(dir.path());
    let f32_run = generate(load_as(dir.path(), Quantization::Q0f32));
    let reference = logits(&f32_run);
    let scale = reference.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    assert!(scale > 0.1, "the logits are not trivial: {scale}");
    for (scheme, bound) in [(Quantization::Q0f16, 0.01), (Quantization::Q8f32, 0.05)] {
        let run = generate(load_as(dir.path(), scheme));
        assert_eq!(run.ids.len(), f32_run.ids.len());
        let got = logits(&run);
        assert_eq!(got.len(), reference.len());
        let diff = got
            .iter()
            .zip(&reference)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(
            diff <= bound * scale,
            "{}: max |diff| {diff} against logits up to {scale}",
            scheme.name()
        );
    }
}
