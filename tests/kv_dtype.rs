//! `--kv-dtype f16` and `q8` on every fixture model (Llama; Qwen2 with biases; Qwen3 with
//! q/k norms; tied and untied embeddings). f16: the KV cache stores f16 (half the bytes),
//! attention widens it as it reads, and generation stays that of the f32 cache: the same
//! greedy ids over a prompt longer than a prefill chunk (later chunks and every decode step
//! read the f16 cache), logits within a small bound of f32's. q8: int8 codes with a scale
//! per position and KV head, fed the f32 cache's tokens (teacher forcing), logits within a
//! measured bound of f32's and the same most likely token on nearly every row.

mod common;
use common::{engine, fixture_models, greedy, load_with_kv};

use oxrelax::model::{LoadedModel, Quantization};
use oxrelax_models::KvDtype;

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

/// The largest |logit difference| of a q8 KV cache from f32's accepted, relative to the
/// largest |f32 logit|, over the teacher-forced rows: measured at most 3.5e-3 over the
/// fixtures (tiny-llama: 4.4e-2 of logits up to 12.6; int8 codes keep about 8 bits per
/// head row), so about 3x of margin.
const BOUND_Q8: f32 = 1e-2;

/// The share of teacher-forced rows whose most likely token must be f32's with a q8 KV
/// cache: measured 39 of 39 rows on three fixtures and 38 of 39 on tiny-qwen2 (its last
/// prompt row, whose top two f32 logits are 6.4e-4 apart, flips; so its free-running
/// greedy ids differ from the first), so one flip in 39 is allowed.
const TOP1_Q8: f64 = 0.95;

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
        let (f16_ids, rows) = generate(load_with_kv(&dir, Quantization::Q0f32, Some(KvDtype::F16)));
        assert_eq!(f16_ids, ids, "{name}: greedy ids");
        assert_eq!(rows.len(), reference.len(), "{name}");
        let (diff, scale) = max_diff(&rows, &reference);
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

/// The largest |difference| between `rows` and `reference`, and the largest |reference
/// logit|.
fn max_diff(rows: &[Vec<f32>], reference: &[Vec<f32>]) -> (f32, f32) {
    let scale = reference
        .iter()
        .flatten()
        .fold(0.0f32, |m, v| m.max(v.abs()));
    let diff = rows
        .iter()
        .zip(reference)
        .flat_map(|(r, f)| r.iter().zip(f).map(|(a, b)| (a - b).abs()))
        .fold(0.0f32, f32::max);
    (diff, scale)
}

/// The index of the largest logit of `row`.
fn argmax(row: &[f32]) -> usize {
    (0..row.len())
        .max_by(|&a, &b| row[a].total_cmp(&row[b]))
        .unwrap_or(0)
}

/// The logit rows of `model` fed the prompt, then each of `ids` but the last.
fn teacher_forced(model: LoadedModel, ids: &[u32]) -> Vec<Vec<f32>> {
    let mut engine = engine(model);
    let mut rows = engine.prefill_all(&PROMPT).unwrap();
    for &id in &ids[..ids.len() - 1] {
        rows.push(engine.decode(id).unwrap());
    }
    rows
}

#[test]
fn a_q8_kv_cache_keeps_logits_close_to_f32_fed_the_same_tokens() {
    for dir in fixture_models() {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let generation = greedy(
            load_with_kv(&dir, Quantization::Q0f32, None),
            &PROMPT,
            TOKENS,
        );
        // The prompt's rows, then the row after each generated token but the last.
        let reference = [
            generation.prefill_logits,
            generation.token_logits[1..].to_vec(),
        ]
        .concat();
        let q8 = || load_with_kv(&dir, Quantization::Q0f32, Some(KvDtype::Q8));
        let rows = teacher_forced(q8(), &generation.ids);
        assert_eq!(rows.len(), reference.len(), "{name}");
        let (diff, scale) = max_diff(&rows, &reference);
        let agree = rows
            .iter()
            .zip(&reference)
            .filter(|(a, b)| argmax(a) == argmax(b))
            .count();
        let top1 = agree as f64 / rows.len() as f64;
        let (free_ids, _) = generate(q8());
        let same_ids = free_ids
            .iter()
            .zip(&generation.ids)
            .take_while(|(a, b)| a == b)
            .count();
        println!(
            "{name}: q8 KV cache max |diff| {diff:.3e} (logits up to {scale:.3}, relative {:.3e}), \
             top-1 {agree}/{} rows, free-running greedy ids agree for {same_ids}/{TOKENS}",
            diff / scale,
            rows.len()
        );
        assert!(
            diff <= BOUND_Q8 * scale,
            "{name}: max |diff| {diff} vs {scale}"
        );
        assert!(top1 >= TOP1_Q8, "{name}: top-1 agreement {top1}");
    }
}
