//! `batch_decode` through [`BatchEngine`] on every fixture model, weight scheme and KV
//! cache dtype: sequences joining and leaving a running batch (so decoded in batches of
//! 1 to 4) generate the same greedy ids as each one served alone (a batch of one runs
//! `decode`) and as the single-sequence engine, token for token, with logits within a
//! small bound of `decode`'s (whose GEMV sums in another order).

mod common;
use common::{engine, fixture_models, load_with_kv};

use oxrelax::model::Quantization;
use oxrelax_models::KvDtype;
use oxrelax_runtime::engine::{BatchEngine, Engine, EngineError, SequenceId};
use oxrelax_runtime::kv_cache::PoolSize;

/// Prompts of several lengths (one past a 16-token prefill chunk), ids every fixture's
/// vocabulary has.
const PROMPTS: [&[u32]; 4] = [
    &[1, 450, 996, 173, 701],
    &[
        1, 29, 88, 640, 12, 305, 901, 77, 512, 64, 990, 3, 250, 811, 46, 129, 700, 18,
    ],
    &[1, 700],
    &[1, 333, 18, 640, 88, 9],
];

/// Tokens each sequence generates.
const TOKENS: usize = 10;

/// The step at which sequence `i` joins the batch, and how many tokens it generates
/// before it leaves (so sequences join and leave mid-batch).
const SCHEDULE: [(usize, usize); 4] = [(0, TOKENS), (0, 6), (3, TOKENS), (7, TOKENS)];

/// The largest |logit difference| from the single-sequence decode's accepted, relative
/// to the largest |logit|: measured 0 for float weights, below 7e-6 for the 8-bit and
/// int8-activation schemes.
const BOUND: f32 = 1e-4;

/// [`BOUND`] for the 4-bit schemes with f32 activations, whose x86 decode GEMV rounds
/// the activations to 16 bits (the batch's GEMM does not): measured up to 2.6e-4.
const BOUND_4_BIT: f32 = 1e-3;

fn argmax(logits: &[f32]) -> u32 {
    let best = logits
        .iter()
        .enumerate()
        .fold((0, f32::NEG_INFINITY), |best, (i, &v)| {
            if v > best.1 {
                (i, v)
            } else {
                best
            }
        });
    best.0 as u32
}

/// Greedy ids and the logits they came from, for each prompt run through `batch` on
/// its `schedule` entry (several sequences per step).
fn run_batch(
    batch: &mut BatchEngine,
    prompts: &[&[u32]],
    schedule: &[(usize, usize)],
) -> Vec<(Vec<u32>, Vec<Vec<f32>>)> {
    let mut out = vec![(Vec::new(), Vec::new()); schedule.len()];
    let mut live: Vec<(usize, SequenceId, Vec<f32>)> = Vec::new();
    for step in 0.. {
        for (i, &(join, _)) in schedule.iter().enumerate() {
            if join == step {
                let id = batch.add_sequence().unwrap();
                let logits = batch.prefill(id, prompts[i]).unwrap();
                live.push((i, id, logits));
            }
        }
        let mut steps = Vec::new();
        for (i, id, logits) in &live {
            let token = argmax(logits);
            out[*i].0.push(token);
            out[*i].1.push(logits.clone());
            steps.push((*id, token));
        }
        let finished: Vec<SequenceId> = live
            .iter()
            .filter(|(i, ..)| out[*i].0.len() >= schedule[*i].1)
            .map(|(_, id, _)| *id)
            .collect();
        steps.retain(|(id, _)| !finished.contains(id));
        live.retain(|(_, id, _)| !finished.contains(id));
        for id in finished {
            batch.remove_sequence(id);
        }
        if live.is_empty() && schedule.iter().all(|&(join, _)| join <= step) {
            break;
        }
        let logits = batch.decode(&steps).unwrap();
        for ((_, _, row), new) in live.iter_mut().zip(logits) {
            *row = new;
        }
    }
    out
}

/// Greedy ids and logits of `prompt` through the single-sequence engine.
fn run_single(engine: &mut Engine, prompt: &[u32], tokens: usize) -> (Vec<u32>, Vec<Vec<f32>>) {
    engine.reset().unwrap();
    let mut logits = engine.prefill(prompt).unwrap();
    let (mut ids, mut rows) = (Vec::new(), Vec::new());
    loop {
        let token = argmax(&logits);
        ids.push(token);
        rows.push(logits.clone());
        if ids.len() >= tokens {
            return (ids, rows);
        }
        logits = engine.decode(token).unwrap();
    }
}

fn check(scheme: Quantization, kv: Option<KvDtype>) {
    for dir in fixture_models() {
        let name = format!(
            "{} {scheme:?} {kv:?}",
            dir.file_name().unwrap().to_string_lossy()
        );
        let mut single = engine(load_with_kv(&dir, scheme, kv));
        let mut batch = BatchEngine::new(engine(load_with_kv(&dir, scheme, kv))).unwrap();
        let together = run_batch(&mut batch, &PROMPTS, &SCHEDULE);
        assert!(batch.is_empty(), "{name}: every sequence left");
        let mut worst = 0f32;
        for (i, (ids, rows)) in together.iter().enumerate() {
            let alone = run_batch(&mut batch, &[PROMPTS[i]], &[(0, SCHEDULE[i].1)]);
            assert_eq!(
                &alone[0].0, ids,
                "{name}: sequence {i} alone and in the batch"
            );
            let (single_ids, single_rows) = run_single(&mut single, PROMPTS[i], ids.len());
            for (row, reference) in rows.iter().zip(&single_rows) {
                let scale = reference.iter().fold(0f32, |m, v| m.max(v.abs()));
                let diff = row
                    .iter()
                    .zip(reference)
                    .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
                worst = worst.max(diff / scale);
            }
            assert_eq!(
                &single_ids, ids,
                "{name}: sequence {i} batched and through decode"
            );
        }
        println!("{name}: logits within {worst:.2e} of decode's");
        let bound = match scheme {
            Quantization::Q4f32_1 | Quantization::Q4f16_1 => BOUND_4_BIT,
            _ => BOUND,
        };
        assert!(worst <= bound, "{name}: {worst:.2e} from decode's logits");
    }
}

#[test]
fn float_weights_batch_like_single_sequences() {
    for scheme in [Quantization::Q0f32, Quantization::Q0f16] {
        check(scheme, None);
    }
}

#[test]
fn quantized_weights_batch_like_single_sequences() {
    for scheme in [
        Quantization::Q8f32,
        Quantization::Q4f32_1,
        Quantization::Q4f16_1,
    ] {
        check(scheme, None);
    }
}

#[test]
fn int8_activations_batch_like_single_sequences() {
    for scheme in [Quantization::W8a8, Quantization::W4a8] {
        check(scheme, None);
    }
}

#[test]
fn f16_and_int8_kv_caches_batch_like_single_sequences() {
    for kv in [KvDtype::F16, KvDtype::Q8] {
        check(Quantization::Q0f32, Some(kv));
    }
}

#[test]
fn a_full_sequence_and_unknown_or_repeated_ones_are_refused_before_anything_runs() {
    let dir = &fixture_models()[0];
    let mut batch = BatchEngine::new(engine(load_with_kv(dir, Quantization::Q0f32, None))).unwrap();
    let a = batch.add_sequence().unwrap();
    let logits = batch.prefill(a, PROMPTS[0]).unwrap();
    let token = argmax(&logits);
    let repeated = batch.decode(&[(a, token), (a, token)]);
    assert!(
        matches!(repeated, Err(EngineError::RepeatedSequence(_))),
        "{repeated:?}"
    );
    batch.remove_sequence(a);
    let unknown = batch.decode(&[(a, token)]);
    assert!(
        matches!(unknown, Err(EngineError::UnknownSequence(_))),
        "{unknown:?}"
    );
    let b = batch.add_sequence().unwrap();
    let window = batch.config().context_window;
    let long: Vec<u32> = (0..window as u32).map(|i| 1 + i % 100).collect();
    batch.prefill(b, &long).unwrap();
    let full = batch.decode(&[(b, token)]);
    assert!(
        matches!(full, Err(EngineError::ContextOverflow { .. })),
        "{full:?}"
    );
    assert_eq!(batch.tokens(b).unwrap().len(), window, "nothing appended");
}

#[test]
fn a_prompt_prefix_is_copied_from_a_live_sequence_or_taken_over_from_an_ended_one() {
    let shared: Vec<u32> = (0..20).map(|i| 1 + i * 37 % 900).collect();
    let prompt = |tail: &[u32]| [shared.as_slice(), tail].concat();
    let (first, second, third) = (prompt(&[5, 6, 7]), prompt(&[8, 9]), prompt(&[10]));
    for dir in fixture_models() {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let mut single = engine(load_with_kv(&dir, Quantization::W4a8, None));
        let mut batch =
            BatchEngine::new(engine(load_with_kv(&dir, Quantization::W4a8, None))).unwrap();
        let (a, reused) = batch.add_sequence_for(&first, first.len() + 8).unwrap();
        assert_eq!(reused, 0, "{name}: nothing to reuse yet");
        batch.prefill(a, &first).unwrap();
        // A live sequence's prefix is copied.
        let (b, reused) = batch.add_sequence_for(&second, second.len() + 8).unwrap();
        assert_eq!(reused, shared.len(), "{name}");
        assert_eq!(batch.tokens(b).unwrap(), shared.as_slice(), "{name}");
        assert!(
            batch.page_stats().shared > 0,
            "{name}: the prefix's pages are shared"
        );
        let copied = greedy_tokens(&mut batch, b, &second[reused..], TOKENS);
        assert_eq!(
            copied,
            run_single(&mut single, &second, TOKENS).0,
            "{name}: copied prefix"
        );
        // An ended sequence is taken over.
        batch.retire_sequence(b);
        let (c, reused) = batch.add_sequence_for(&second, second.len() + 8).unwrap();
        assert_eq!(
            reused,
            second.len() - 1,
            "{name}: all but the last prompt id"
        );
        let taken = greedy_tokens(&mut batch, c, &second[reused..], TOKENS);
        assert_eq!(taken, copied, "{name}: taken-over prefix");
        batch.remove_sequence(c);
        let (d, reused) = batch.add_sequence_for(&third, third.len() + 8).unwrap();
        assert_eq!(reused, shared.len(), "{name}: the shared prefix");
        let third_ids = greedy_tokens(&mut batch, d, &third[reused..], TOKENS);
        assert_eq!(
            third_ids,
            run_single(&mut single, &third, TOKENS).0,
            "{name}"
        );
    }
}

#[test]
fn a_sequence_waits_for_pages_promised_to_others_and_one_larger_than_the_pool_is_refused() {
    let dir = &fixture_models()[0];
    let load = || engine(load_with_kv(dir, Quantization::Q0f32, None));
    let mut one_page = BatchEngine::with_pool(load(), Some(PoolSize::Pages(1))).unwrap();
    let page = one_page.page_stats().page_positions;
    let too_large = one_page.add_sequence_for(PROMPTS[0], page + 1);
    assert!(
        matches!(
            too_large,
            Err(EngineError::KvPoolTooSmall {
                needed: 2,
                pages: 1,
                ..
            })
        ),
        "{too_large:?}"
    );
    let mut batch = BatchEngine::with_pool(load(), Some(PoolSize::Pages(2))).unwrap();
    assert!(batch.config().context_window >= 2 * page);
    let (a, _) = batch.add_sequence_for(PROMPTS[0], page).unwrap();
    let busy = batch.add_sequence_for(PROMPTS[3], 2 * page);
    assert!(
        matches!(busy, Err(EngineError::KvPoolBusy { needed: 2, free: 1 })),
        "{busy:?}"
    );
    let (b, _) = batch.add_sequence_for(PROMPTS[3], page).unwrap();
    // An ended sequence's pages are given back when a new one needs them.
    batch.prefill(a, PROMPTS[0]).unwrap();
    batch.retire_sequence(a);
    let (c, _) = batch.add_sequence_for(PROMPTS[1], page).unwrap();
    let mut single = load();
    for (id, prompt) in [(b, PROMPTS[3]), (c, PROMPTS[1])] {
        let tokens = page - prompt.len();
        let ids = greedy_tokens(&mut batch, id, prompt, tokens);
        assert_eq!(ids, run_single(&mut single, prompt, tokens).0);
    }
    let stats = batch.page_stats();
    assert_eq!((stats.pages, stats.used), (2, 2), "{stats:?}");
}

/// `tokens` greedy ids of sequence `id` after prefilling `prompt` (the rest of its
/// prompt), alone.
fn greedy_tokens(
    batch: &mut BatchEngine,
    id: SequenceId,
    prompt: &[u32],
    tokens: usize,
) -> Vec<u32> {
    let mut logits = batch.prefill(id, prompt).unwrap();
    let mut ids = Vec::new();
    while ids.len() < tokens {
        let token = argmax(&logits);
        ids.push(token);
        logits = batch.decode(&[(id, token)]).unwrap().remove(0);
    }
    ids
}
