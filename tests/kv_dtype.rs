//! `--kv-dtype f16` on every fixture model (Llama; Qwen2 with biases; Qwen3 with q/k
//! norms; tied and untied embeddings): the KV cache stores f16 (half the bytes), attention
//! widens it as it reads, and generation stays that of the f32 cache: the same greedy ids
//! over a prompt longer than a prefill chunk (later chunks and every decode step read the
//! f16 cache), logits within a small bound of f32's.

mod common;
use common::{fixture_models, greedy, load_with_kv};

use oxrelax::model::{LoadedModel, Quantization};
use oxrelax_dsl::DataType;

/// A prompt every fixture's vocabulary (at least 1024 ids) has, longer than the 16-token
/// prefill chunks `load_with_kv` compiles for.
const PROMPT: [u32; 24] = [
    1, 450, 996, 173, 701, 432, 29, 88, 640, 12, 305, 901, 77, 512, 64, 990, 3, 250, 811, 46, 129,
    700, 18, 333,
];

/// Tokens generated greedily after the prompt.
const TOKENS: usize = 16;

/// The largest |logit difference| from f32's accepted, relative to the largest |f32
/// logit|: measured at most 1.5e-4 over the fixtures (tiny-qwen3; f16 keeps 11
/// significant bits), so over 6x of margin.
const BOUND: f32 = 1e-3;

/// Every logit row of a greedy generation: the prompt's, then each generated token's.
fn generate(model: LoadedModel) -> (Vec<u32>, Vec<Vec<f32>>) {
    let generation = greedy(model, &PROMPT, TOKENS);
    let rows = [generation.prefill_logits, generation.token_logits].concat();
    (generation.ids, rows)
}

#[test]
fn an_f16_kv_cache_generates_the_f32_caches_ids_with_logits_close_to_f32() {
    for dir in fixture_models() {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let (ids, reference) = generate(load_with_kv(&dir, Quantization::Q0f32, None));
        let (f16_ids, rows) =
            generate(load_with_kv(&dir, Quantization::Q0f32, Some(DataType::F16)));
        assert_eq!(f16_ids, ids, "{name}: greedy ids");
        assert_eq!(rows.len(), reference.len(), "{name}");
        let scale = reference
            .iter()
            .flatten()
            .fold(0.0f32, |m, v| m.max(v.abs()));
        let diff = rows
            .iter()
            .zip(&reference)
            .flat_map(|(r, f)| r.iter().zip(f).map(|(a, b)| (a - b).abs()))
            .fold(0.0f32, f32::max);
        println!(
            "{name}: f16 KV cache max |diff| {diff:.3e} (logits up to {scale:.3}, relative {:.3e})",
            diff / scale
        );
        assert!(
            diff <= BOUND * scale,
            "{name}: max |diff| {diff} vs {scale}"
        );
    }
}
