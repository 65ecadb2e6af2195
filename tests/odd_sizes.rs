//! A model of odd sizes is a normal input: a random Llama (and a Qwen2 with biases and a
//! tied output head) whose MLP width (259) is not a
//! multiple of the panel (16), the GEMV block (64) or the quantization group (32), and
//! whose hidden size (48) is not a multiple of the group either, runs in every scheme. Its
//! weights lie on the 4-bit grid, so the 4-bit schemes and f16 storage must match f32 to
//! rounding (any slip in a tail group, a panel edge or the nibble order shows), and int8
//! stays within its step.

mod common;
use common::{engine, greedy, load_as, load_with_kv, on_the_4_bit_grid};

use oxrelax::model::{LoadedModel, Quantization};
use oxrelax_models::KvDtype;
use oxrelax_runtime::engine::Generation;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The quantization group along a weight row.
use std::path::Path;

const HIDDEN: usize = 48;
const INTERMEDIATE: usize = 259;
const VOCAB: usize = 1024;
const LAYERS: usize = 2;
const HEADS: usize = 3;
const KV_HEADS: usize = 1;
const HEAD_DIM: usize = 16;

/// The two odd-sized models: a Llama with its own output head, and a Qwen2 (biases on
/// the q/k/v projections) whose output head is its embedding table.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    UntiedLlama,
    TiedQwen2,
}

/// Writes `config.json` and random f32 weights of the odd-sized `kind` into `dir`.
fn write_model(dir: &Path, kind: Kind) {
    let (architecture, model_type) = match kind {
        Kind::UntiedLlama => ("LlamaForCausalLM", "llama"),
        Kind::TiedQwen2 => ("Qwen2ForCausalLM", "qwen2"),
    };
    let tied = kind == Kind::TiedQwen2;
    let config = serde_json::json!({
        "architectures": [architecture],
        "model_type": model_type,
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
        "tie_word_embeddings": tied,
        "hidden_act": "silu",
        "torch_dtype": "float32"
    });
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let mut shapes = vec![
        ("model.embed_tokens.weight".to_string(), vec![VOCAB, HIDDEN]),
        ("model.norm.weight".to_string(), vec![HIDDEN]),
    ];
    if !tied {
        shapes.push(("lm_head.weight".to_string(), vec![VOCAB, HIDDEN]));
    }
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
        if tied {
            shapes.extend(["q", "k", "v"].map(|m| {
                let width = if m == "q" { q } else { kv };
                (format!("{p}.self_attn.{m}_proj.bias"), vec![width])
            }));
        }
    }
    let mut rng = StdRng::seed_from_u64(259);
    let data: Vec<(String, Vec<usize>, Vec<f32>)> = shapes
        .into_iter()
        .map(|(name, shape)| {
            let values = match shape[..] {
                [rows, depth] => on_the_4_bit_grid(&mut rng, rows, depth),
                _ if name.ends_with(".bias") => {
                    (0..shape[0]).map(|_| rng.gen_range(-0.2..0.2)).collect()
                }
                _ => vec![1.0; shape[0]],
            };
            (name, shape, values)
        })
        .collect();
    let tensors = data.iter().map(|(n, s, v)| (n.as_str(), &s[..], &v[..]));
    common::write_f32_weights(dir, tensors);
}

/// The 21-token prompt every run is given.
fn prompt() -> Vec<u32> {
    (0..21).map(|i| (i * 37 + 5) % VOCAB as u32).collect()
}

/// Greedy generation of 8 tokens after [`prompt`], keeping every logit row.
fn generate(model: LoadedModel) -> Generation {
    greedy(model, &prompt(), 8)
}

/// Every logit row of a generation, flat: the prompt's, then each generated token's
/// (the first token comes from the prompt's last row).
fn logits(g: &Generation) -> Vec<f32> {
    let rows = g.prefill_logits.iter().chain(&g.token_logits[1..]);
    rows.flat_map(|row| row.iter().copied()).collect()
}

/// The logit rows `model` computes for the prompt and tokens of `g` (fed the tokens `g`
/// generated, so a scheme is compared on the same inputs even where its own greedy
/// choice would differ), flat.
fn forced_logits(model: LoadedModel, g: &Generation) -> Vec<f32> {
    let mut engine = engine(model);
    let mut rows = engine.prefill_all(&prompt()).unwrap();
    for &id in &g.ids[..g.ids.len() - 1] {
        rows.push(engine.decode(id).unwrap());
    }
    rows.into_iter().flatten().collect()
}

#[test]
fn odd_sizes_run_in_every_scheme_and_stay_near_f32() {
    for kind in [Kind::UntiedLlama, Kind::TiedQwen2] {
        odd_sizes_run_in_every_scheme(kind);
    }
}

fn odd_sizes_run_in_every_scheme(kind: Kind) {
    let dir = tempfile::tempdir().unwrap();
    write_model(dir.path(), kind);
    let f32_run = generate(load_as(dir.path(), Quantization::Q0f32));
    let reference = logits(&f32_run);
    let scale = reference.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    assert!(scale > 0.1, "the logits are not trivial: {scale}");
    // f16 storage holds these weights exactly, and so do the 4-bit schemes' projections:
    // rounding only (the KV cache kept f32, as the reference's, so only the schemes' own
    // rounding counts, the 4-bit decode GEMVs' 16-bit activations included: 7.3e-5 here).
    // The 4-bit schemes keep the embedding table and the output head at 8 bits, whose
    // grid is not the 4-bit one: q8f32's bound.
    let bounds = [
        (Quantization::Q0f16, 1e-4),
        (Quantization::Q8f32, 0.05),
        (Quantization::Q4f32_1, 0.05),
        (Quantization::Q4f16_1, 0.05),
        // Int8 activations round each activation to 1/254 of its row's range.
        (Quantization::W8a8, 0.05),
        (Quantization::W4a8, 0.05),
    ];
    for (scheme, bound) in bounds {
        let got = forced_logits(
            load_with_kv(dir.path(), scheme, Some(KvDtype::F32)),
            &f32_run,
        );
        assert_eq!(got.len(), reference.len());
        let diff = got
            .iter()
            .zip(&reference)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(
            diff <= bound * scale,
            "{kind:?} {}: max |diff| {diff} against logits up to {scale}",
            scheme.name()
        );
    }
}
