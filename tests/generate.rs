//! `oxrelax generate` run as a user would, against the transformers references of the
//! fixture models (the first part of `shared/checks/models.sh`), chunked prefill, the
//! context window, seeded sampling; and the engine's multi-turn chat reusing its KV cache.

mod common;
use common::fixture_models;

use oxrelax::model::{load, LoadOptions};
use oxrelax_runtime::chat::Tokenizer;
use oxrelax_runtime::engine::{
    Chat, ChatOptions, ContextOverflow, Engine, EngineConfig, GenerateOptions, Step,
};
use oxrelax_runtime::sampler::{Sampler, SamplingConfig};
use oxrelax_runtime::trace::Timeline;
use safetensors::SafeTensors;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Max |logit difference| accepted against transformers (float32 both sides).
const TOLERANCE: f32 = 1e-4;
/// Max |logit difference| between two ways of computing the same thing here (e.g. K/V of
/// a reply computed by the decode GEMV and the same K/V re-prefilled through the GEMM
/// microkernel: the same sums in another order).
const SAME: f32 = 2e-5;
/// A context window that keeps the compiled models small.
const CONTEXT: &str = "256";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/models")
        .join(name)
}

fn oxrelax(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_oxrelax"))
        .args(args)
        .output()
        .expect("the oxrelax binary runs")
}

/// A safetensors file's tensors: f32 ones as rows of their last dim, i64 ones flat.
struct Tensors {
    bytes: Vec<u8>,
}

impl Tensors {
    fn read(path: &Path) -> Tensors {
        Tensors {
            bytes: std::fs::read(path).unwrap(),
        }
    }

    fn rows(&self, name: &str) -> Vec<Vec<f32>> {
        let file = SafeTensors::deserialize(&self.bytes).unwrap();
        let view = file.tensor(name).unwrap();
        assert_eq!(view.dtype(), safetensors::Dtype::F32, "{name}");
        let values: Vec<f32> = view
            .data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let width = *view.shape().last().unwrap();
        values.chunks(width).map(<[f32]>::to_vec).collect()
    }

    fn ids(&self, name: &str) -> Vec<i64> {
        let file = SafeTensors::deserialize(&self.bytes).unwrap();
        let view = file.tensor(name).unwrap();
        assert_eq!(view.dtype(), safetensors::Dtype::I64, "{name}");
        view.data()
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
            .collect()
    }

    fn has(&self, name: &str) -> bool {
        SafeTensors::deserialize(&self.bytes)
            .unwrap()
            .tensor(name)
            .is_ok()
    }
}

fn max_abs_diff(got: &[Vec<f32>], want: &[Vec<f32>]) -> f32 {
    assert_eq!(got.len(), want.len(), "row counts");
    got.iter()
        .zip(want)
        .flat_map(|(g, w)| {
            assert_eq!(g.len(), w.len(), "row widths");
            g.iter().zip(w).map(|(a, b)| (a - b).abs())
        })
        .fold(0.0, f32::max)
}

fn join(ids: &[i64]) -> String {
    ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
}

/// Runs `generate` with `args` plus `--dump-logits`; returns the dump.
fn generate_dump(model: &Path, args: &[&str]) -> Tensors {
    let dump = tempfile::NamedTempFile::new().unwrap();
    let mut all = vec![
        "generate",
        "--model",
        model.to_str().unwrap(),
        "--dump-logits",
        dump.path().to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let out = oxrelax(&all);
    assert!(
        out.status.success(),
        "generate {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Tensors::read(dump.path())
}

/// Greedy generation of 17 tokens after `prompt`, dumped.
fn greedy_17(model: &Path, prompt: &str, extra: &[&str]) -> Tensors {
    let mut args = vec![
        "--max-new-tokens",
        "17",
        "--ignore-eos",
        "--max-context",
        CONTEXT,
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--prompt-ids", prompt]);
    generate_dump(model, &args)
}

#[test]
fn generate_matches_transformers_on_every_fixture_model_and_prompt() {
    for dir in fixture_models() {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let reference = Tensors::read(&dir.join("reference.safetensors"));
        for p in (0..).take_while(|p| reference.has(&format!("prompt{p}.input_ids"))) {
            let ids = reference.ids(&format!("prompt{p}.input_ids"));
            let got = greedy_17(&dir, &join(&ids), &[]);
            let generated = got.ids("generated_ids");
            assert_eq!(generated.len(), 17, "{name} prompt{p}");
            assert_eq!(
                generated[..16],
                reference.ids(&format!("prompt{p}.greedy_ids")),
                "{name} prompt{p}: greedy ids"
            );
            let prefill = got.rows("prefill_logits");
            let decode = got.rows("decode_logits");
            assert_eq!(decode.len(), 16, "{name} prompt{p}: G-1 decode rows");
            let prefill_diff = max_abs_diff(
                &prefill,
                &reference.rows(&format!("prompt{p}.prefill_logits")),
            );
            let decode_diff = max_abs_diff(
                &decode,
                &reference.rows(&format!("prompt{p}.decode_logits")),
            );
            println!("{name} prompt{p}: prefill {prefill_diff:.2e}, decode {decode_diff:.2e}");
            assert!(
                prefill_diff <= TOLERANCE && decode_diff <= TOLERANCE,
                "{name} prompt{p}: prefill {prefill_diff}, decode {decode_diff}"
            );
        }
    }
}

#[test]
fn chunked_prefill_equals_one_shot() {
    let dir = fixture("tiny-llama");
    let reference = Tensors::read(&dir.join("reference.safetensors"));
    let ids = join(&reference.ids("prompt2.input_ids"));
    let one_shot = greedy_17(&dir, &ids, &[]);
    let chunked = greedy_17(&dir, &ids, &["--prefill-chunk", "4"]);
    assert_eq!(chunked.rows("prefill_logits").len(), 42);
    for name in ["prefill_logits", "decode_logits"] {
        let diff = max_abs_diff(&chunked.rows(name), &one_shot.rows(name));
        assert!(diff <= SAME, "{name}: chunks of 4 vs one shot: {diff}");
    }
    assert_eq!(chunked.ids("generated_ids"), one_shot.ids("generated_ids"));
}

#[test]
fn text_prompts_are_encoded_as_the_references_were() {
    // Llama: BOS added by the post-processor; Qwen: the ChatML rendering of one message.
    let cases = [
        ("tiny-llama", 1, "To be, or not to be", false),
        ("tiny-qwen2", 2, "Hello! Who are you?", true),
    ];
    for (model, p, text, chat) in cases {
        let dir = fixture(model);
        let reference = Tensors::read(&dir.join("reference.safetensors"));
        let mut args = vec![
            "--max-new-tokens",
            "16",
            "--ignore-eos",
            "--max-context",
            CONTEXT,
        ];
        args.extend_from_slice(&["--prompt", text]);
        if chat {
            args.push("--chat");
        }
        let got = generate_dump(&dir, &args);
        let prefill = got.rows("prefill_logits");
        let want = reference.rows(&format!("prompt{p}.prefill_logits"));
        assert!(max_abs_diff(&prefill, &want) <= TOLERANCE, "{model}");
        assert_eq!(
            got.ids("generated_ids"),
            reference.ids(&format!("prompt{p}.greedy_ids")),
            "{model}"
        );
    }
}

#[test]
fn a_prompt_longer_than_the_context_window_is_a_clear_error() {
    let dir = fixture("tiny-llama");
    let reference = Tensors::read(&dir.join("reference.safetensors"));
    let ids = join(&reference.ids("prompt2.input_ids"));
    let model = dir.to_str().unwrap();
    let args = [
        "generate",
        "--model",
        model,
        "--prompt-ids",
        &ids,
        "--max-context",
        "16",
    ];
    let out = oxrelax(&args);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("context window of 16 tokens")
            && stderr.contains("42 more")
            && !stderr.contains("panicked"),
        "{stderr}"
    );
}

#[test]
fn seeded_sampling_is_reproducible() {
    let dir = fixture("tiny-qwen3");
    let sample = |seed: &str| {
        let args = [
            "--max-new-tokens",
            "24",
            "--ignore-eos",
            "--max-context",
            CONTEXT,
            "--temperature",
            "1.0",
            "--top-k",
            "50",
            "--seed",
            seed,
            "--prompt",
            "First",
        ];
        generate_dump(&dir, &args).ids("generated_ids")
    };
    let first = sample("7");
    assert_eq!(first.len(), 24);
    assert_eq!(sample("7"), first);
    let others = [sample("8"), sample("9")];
    assert!(others.iter().any(|o| *o != first), "{first:?} {others:?}");
}

/// An engine over fixture `name` with a small context and prefill chunk.
fn engine(name: &str, prefill_chunk: i64) -> (Engine, Tokenizer) {
    let dir = fixture(name);
    let options = LoadOptions {
        max_context: 256,
        prefill_chunk,
        ..LoadOptions::default()
    };
    let model = load(&dir, &options).unwrap();
    let tokenizer = Tokenizer::from_dir(&dir).unwrap();
    let config = EngineConfig {
        context_window: model.context_window as usize,
        prefill_chunk: model.prefill_chunk as usize,
        vocab_size: model.config.vocab_size as usize,
        eos_ids: tokenizer.eos_ids().to_vec(),
    };
    let engine = Engine::new(model.vm, model.weights, config).unwrap();
    (engine, tokenizer)
}

#[test]
fn a_chat_reuses_the_cache_and_equals_prefilling_the_whole_conversation() {
    let (engine, tokenizer) = engine("tiny-qwen2", 16);
    let options = ChatOptions {
        max_new_tokens: 8,
        keep_logits: true,
        ..ChatOptions::default()
    };
    let greedy = Sampler::new(SamplingConfig::default());
    let mut chat = Chat::new(engine, tokenizer, greedy, options).unwrap();
    let mut streamed = String::new();
    let first = chat
        .send("Hello! Who are you?", |t| {
            streamed.push_str(t);
            Step::Continue
        })
        .unwrap();
    assert_eq!(first.reused, 0);
    assert_eq!(streamed, first.text);
    let second = chat.send("Tell me of Rome.", |_| Step::Continue).unwrap();
    assert_eq!(chat.messages().len(), 4, "user, assistant, user, assistant");
    // The template's default system prompt and the first user message were not prefilled again.
    assert!(second.reused >= 20, "reused {}", second.reused);
    assert!(second.reused < second.prompt_ids.len());
    // What was reused is what the cache held: the first turn's prompt and reply.
    let held = [first.prompt_ids.as_slice(), &first.generation.ids].concat();
    assert_eq!(second.prompt_ids[..second.reused], held[..second.reused]);

    let engine = chat.engine_mut();
    engine.reset().unwrap();
    let options = GenerateOptions {
        max_new_tokens: 8,
        ignore_eos: false,
        keep_logits: true,
    };
    let mut greedy = Sampler::new(SamplingConfig::default());
    let fresh = engine
        .generate(&second.prompt_ids, options, &mut greedy, |_| {
            Ok(Step::Continue)
        })
        .unwrap();
    assert_eq!(fresh.ids, second.generation.ids);
    let diff = max_abs_diff(&fresh.token_logits, &second.generation.token_logits);
    assert!(diff <= SAME, "cached vs re-prefilled conversation: {diff}");
    let tail = &fresh.prefill_logits[second.reused..];
    let diff = max_abs_diff(tail, &second.generation.prefill_logits);
    assert!(diff <= SAME, "cached vs re-prefilled prompt logits: {diff}");
}

#[test]
fn a_conversation_past_the_window_is_an_error_that_keeps_the_chat() {
    let (engine, tokenizer) = engine("tiny-llama", 32);
    let options = ChatOptions {
        max_new_tokens: 4,
        ..ChatOptions::default()
    };
    let mut chat = Chat::new(
        engine,
        tokenizer,
        Sampler::new(SamplingConfig::default()),
        options,
    )
    .unwrap();
    let long = "Friends, Romans, countrymen, lend me your ears. ".repeat(30);
    let err = chat
        .send(&long, |_| Step::Continue)
        .unwrap_err()
        .to_string();
    assert!(err.contains("context window of 256 tokens"), "{err}");
    assert!(chat.messages().is_empty());
    let reply = chat
        .send("To be, or not to be", |_| Step::Continue)
        .unwrap();
    assert_eq!(reply.generation.ids.len(), 4);
    assert_eq!(chat.messages().len(), 2);
}

#[test]
fn a_chat_keeps_a_replys_generated_ids_instead_of_re_tokenizing_it() {
    let (engine, tokenizer) = engine("tiny-qwen2", 16);
    let options = ChatOptions {
        max_new_tokens: 12,
        ..ChatOptions::default()
    };
    let greedy = Sampler::new(SamplingConfig::default());
    let mut chat = Chat::new(engine, tokenizer, greedy, options).unwrap();
    let first = chat
        .send("To be, or not to be", |_| Step::Continue)
        .unwrap();
    let second = chat.send("Speak the speech.", |_| Step::Continue).unwrap();
    let ids = &first.generation.ids;
    let generated = match ids.last() {
        Some(&last) if chat.engine().is_eos(last) => &ids[..ids.len() - 1],
        _ => &ids[..],
    };
    let held = [first.prompt_ids.as_slice(), generated].concat();
    assert!(second.prompt_ids.starts_with(&held));
    // The cache held all of it but the last generated token, which was never fed back.
    assert!(
        second.reused + 1 >= held.len(),
        "{} of {}",
        second.reused,
        held.len()
    );
}

#[test]
fn a_chat_past_the_window_drops_its_oldest_turns_or_refuses_as_asked() {
    let speech = "Friends, Romans, countrymen, lend me your ears. ".repeat(4);
    for overflow in [ContextOverflow::Truncate, ContextOverflow::Error] {
        let (engine, tokenizer) = engine("tiny-llama", 32);
        let options = ChatOptions {
            max_new_tokens: 16,
            overflow,
            ..ChatOptions::default()
        };
        let greedy = Sampler::new(SamplingConfig::default());
        let mut chat = Chat::new(engine, tokenizer, greedy, options).unwrap();
        let mut dropped = 0;
        let mut refused = 0;
        for _ in 0..6 {
            match chat.send(&speech, |_| Step::Continue) {
                Ok(reply) => dropped += reply.dropped,
                Err(err) => {
                    assert!(err.to_string().contains("context window"), "{err}");
                    refused += 1;
                }
            }
            assert!(chat.engine().len() <= 256);
        }
        match overflow {
            ContextOverflow::Truncate => {
                assert!(dropped >= 2 && dropped % 2 == 0, "dropped {dropped}");
                assert_eq!(refused, 0);
                assert_eq!(chat.messages()[0].role, "user");
            }
            ContextOverflow::Error => {
                assert_eq!(dropped, 0);
                assert!(refused > 0);
            }
        }
    }
}

#[test]
fn a_pipelined_prefill_gives_the_logits_of_a_sequential_one() {
    let prompt: Vec<u32> = (0..37).map(|i| 100 + (i * 37) % 800).collect();
    let (mut sequential, _) = engine("tiny-llama", 8);
    let (mut pipelined, _) = engine("tiny-llama", 8);
    pipelined.enable_pipeline(None).unwrap();
    let timeline = Timeline::new();
    pipelined.set_timeline(Some(timeline.clone()));
    let want = sequential.prefill_all(&prompt).unwrap();
    let got = pipelined.prefill_all(&prompt).unwrap();
    assert_eq!(got, want, "every row of every chunk, bit for bit");
    let lanes: std::collections::BTreeSet<String> =
        timeline.spans().into_iter().map(|s| s.lane).collect();
    assert_eq!(lanes.into_iter().collect::<Vec<_>>(), ["cpu 0", "cpu 1"]);
    // A second prompt continues the cache; decoding after it agrees too.
    let more = [
        5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
    ];
    assert_eq!(
        pipelined.prefill(&more).unwrap(),
        sequential.prefill(&more).unwrap()
    );
    assert_eq!(
        pipelined.decode(42).unwrap(),
        sequential.decode(42).unwrap()
    );
    assert_eq!(pipelined.tokens(), sequential.tokens());
}

#[test]
fn a_pipelined_prefill_that_cannot_fit_changes_nothing() {
    let (mut engine, _) = engine("tiny-llama", 8);
    engine.enable_pipeline(None).unwrap();
    engine.prefill(&[5; 20]).unwrap();
    let err = engine.prefill(&[5; 250]).unwrap_err();
    assert!(err.to_string().contains("context window"), "{err}");
    let bad = engine
        .prefill(&[5, 6, 7, 8, 9, 10, 11, 12, 13, 999_999])
        .unwrap_err();
    assert!(bad.to_string().contains("out of range"), "{bad}");
    assert_eq!(engine.len(), 20);
    engine.decode(3).unwrap();
}
