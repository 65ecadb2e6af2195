//! The models (`oxrelax-models`) built from the Hugging Face fixtures in
//! `../shared/fixtures/models`, compiled and run in the VM with weights loaded by the
//! runtime, compared with the logits transformers produced: every prompt position of a
//! prefill and 16 greedy decode steps. Plus the errors a bad config or checkpoint gives.

mod common;
use common::fixture_models;

use oxrelax::passes::Instrument;
use oxrelax::{build, Built};
use oxrelax_dsl::DType;
use oxrelax_models::{causal_lm, ExportOptions, ModelConfig, ModelError};
use oxrelax_runtime::weights::{ExpectedTensor, WeightError, WeightStore};
use oxrelax_runtime::{Tensor, Value};
use safetensors::SafeTensors;
use std::path::{Path, PathBuf};

/// Max |logit difference| accepted against transformers (float32 both sides).
const TOLERANCE: f32 = 1e-4;
/// Greedy steps the references decode.
const DECODE_STEPS: usize = 16;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/models")
}

fn fixture(name: &str) -> PathBuf {
    fixtures().join(name)
}

/// What the models expect to load: every weight as f32.
fn expected_weights(config: &ModelConfig) -> Vec<ExpectedTensor> {
    oxrelax::model::expected_weights(&causal_lm(config, DType::F32).unwrap())
}

/// A fixture model compiled for the host, with its weights loaded.
struct Loaded {
    built: Built,
    weights: Vec<Value>,
    vocab: usize,
}

impl Loaded {
    fn new(dir: &Path) -> Loaded {
        let config = ModelConfig::from_file(&dir.join("config.json")).unwrap();
        let model = causal_lm(&config, DType::F32).unwrap();
        let options = ExportOptions {
            max_context: 256,
            prefill_chunk: 64,
            ..ExportOptions::default()
        };
        let exported = model.export(&options).unwrap();
        assert_eq!(exported.context_window, 256);
        let mut built = build(exported.module, Instrument::default()).unwrap();
        let store = WeightStore::open(dir).unwrap();
        let weights = store.load_expected(&expected_weights(&config)).unwrap();
        let weights = weights.into_iter().map(Value::Tensor).collect();
        let weights = oxrelax::model::transform_weights(&mut built, weights).unwrap();
        Loaded {
            built,
            weights,
            vocab: config.vocab_size as usize,
        }
    }

    /// Calls `function(ids, cache, weights...)` and returns the logits as rows of `vocab`.
    fn step(&mut self, function: &str, ids: &[i64], cache: &Value) -> Vec<Vec<f32>> {
        let ids: Vec<i32> = ids.iter().map(|&id| id as i32).collect();
        let ids = Tensor::from_slice(&ids, &[1, ids.len() as i64]).unwrap();
        let args: Vec<Value> = [Value::Tensor(ids), cache.clone()]
            .into_iter()
            .chain(self.weights.iter().cloned())
            .collect();
        let out = self.built.vm.call(function, &args).unwrap();
        let logits = out.as_tensor().unwrap();
        assert_eq!(logits.shape()[2] as usize, self.vocab);
        let values = logits.as_slice::<f32>().unwrap();
        values.chunks(self.vocab).map(<[f32]>::to_vec).collect()
    }

    /// Calls `function` with `args` and returns its f32 tensor result.
    fn call(&mut self, function: &str, args: Vec<Value>) -> Tensor {
        let out = self.built.vm.call(function, &args).unwrap();
        out.as_tensor().unwrap().clone()
    }

    fn new_cache(&mut self) -> Value {
        self.built.vm.call("create_kv_cache", &[]).unwrap()
    }
}

/// One prompt's references from `reference.safetensors`.
struct Reference {
    input_ids: Vec<i64>,
    prefill_logits: Vec<Vec<f32>>,
    decode_logits: Vec<Vec<f32>>,
    greedy_ids: Vec<i64>,
}

/// An f32 reference tensor as rows of its last dim.
fn f32_rows(refs: &SafeTensors<'_>, name: &str) -> Vec<Vec<f32>> {
    let view = refs.tensor(name).unwrap();
    assert_eq!(view.dtype(), safetensors::Dtype::F32, "{name}");
    let values: Vec<f32> = view
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let row = *view.shape().last().unwrap();
    values.chunks(row).map(<[f32]>::to_vec).collect()
}

fn i64_values(refs: &SafeTensors<'_>, name: &str) -> Vec<i64> {
    let view = refs.tensor(name).unwrap();
    assert_eq!(view.dtype(), safetensors::Dtype::I64, "{name}");
    view.data()
        .chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

/// Every prompt's references, in prompt order.
fn references(dir: &Path) -> Vec<Reference> {
    let bytes = std::fs::read(dir.join("reference.safetensors")).unwrap();
    let refs = SafeTensors::deserialize(&bytes).unwrap();
    (0..)
        .map(|n| format!("prompt{n}"))
        .take_while(|p| refs.tensor(&format!("{p}.input_ids")).is_ok())
        .map(|p| Reference {
            input_ids: i64_values(&refs, &format!("{p}.input_ids")),
            prefill_logits: f32_rows(&refs, &format!("{p}.prefill_logits")),
            decode_logits: f32_rows(&refs, &format!("{p}.decode_logits")),
            greedy_ids: i64_values(&refs, &format!("{p}.greedy_ids")),
        })
        .collect()
}

fn max_abs_diff(got: &[Vec<f32>], want: &[Vec<f32>]) -> f32 {
    assert_eq!(got.len(), want.len());
    got.iter()
        .zip(want)
        .flat_map(|(g, w)| {
            assert_eq!(g.len(), w.len());
            g.iter().zip(w).map(|(a, b)| (a - b).abs())
        })
        .fold(0.0, f32::max)
}

fn argmax(row: &[f32]) -> i64 {
    let mut best = 0;
    for (i, v) in row.iter().enumerate() {
        if *v > row[best] {
            best = i;
        }
    }
    best as i64
}

/// Max |diff| of prefill (all positions), of `prefill` (last position), and of the decode
/// steps; asserts the greedy ids match.
fn check_prompt(model: &mut Loaded, name: &str, reference: &Reference) -> [f32; 3] {
    let cache = model.new_cache();
    let prefill = model.step("prefill_all", &reference.input_ids, &cache);
    let prefill_diff = max_abs_diff(&prefill, &reference.prefill_logits);
    let last_cache = model.new_cache();
    let last = model.step("prefill", &reference.input_ids, &last_cache);
    let last_diff = max_abs_diff(&last, &reference.prefill_logits[prefill.len() - 1..]);
    let mut next = argmax(&prefill[prefill.len() - 1]);
    let mut decoded = Vec::with_capacity(DECODE_STEPS);
    let mut ids = Vec::with_capacity(DECODE_STEPS);
    for _ in 0..DECODE_STEPS {
        ids.push(next);
        let logits = model.step("decode", &[next], &cache);
        next = argmax(&logits[0]);
        decoded.extend(logits);
    }
    assert_eq!(ids, reference.greedy_ids, "{name}: greedy ids");
    let decode_diff = max_abs_diff(&decoded, &reference.decode_logits);
    [prefill_diff, last_diff, decode_diff]
}

#[test]
fn every_fixture_model_matches_transformers_over_prefill_and_greedy_decode() {
    let mut report = Vec::new();
    for dir in fixture_models() {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let mut model = Loaded::new(&dir);
        for (p, reference) in references(&dir).iter().enumerate() {
            let label = format!("{name} prompt{p}");
            let diffs = check_prompt(&mut model, &label, reference);
            println!(
                "{label} (L = {}): max |diff| prefill {:.2e}, prefill last {:.2e}, decode {:.2e}",
                reference.input_ids.len(),
                diffs[0],
                diffs[1],
                diffs[2]
            );
            report.push((label, diffs));
        }
    }
    let failing: Vec<_> = report
        .iter()
        .filter(|(_, d)| d.iter().any(|d| *d > TOLERANCE))
        .collect();
    assert!(failing.is_empty(), "above {TOLERANCE}: {failing:?}");
}

/// Copies fixture `name`'s config and writes its weights, transformed by `edit` (name,
/// dtype, shape, bytes), as `model.safetensors` into a new temporary folder.
fn edited_checkpoint(
    name: &str,
    edit: impl FnOnce(&mut Vec<(String, safetensors::Dtype, Vec<usize>, Vec<u8>)>),
) -> tempfile::TempDir {
    let src = fixture(name);
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(src.join("config.json"), dir.path().join("config.json")).unwrap();
    let bytes = std::fs::read(src.join("model.safetensors")).unwrap();
    let stored = SafeTensors::deserialize(&bytes).unwrap();
    let mut tensors: Vec<_> = stored
        .iter()
        .map(|(n, v)| {
            (
                n.to_string(),
                v.dtype(),
                v.shape().to_vec(),
                v.data().to_vec(),
            )
        })
        .collect();
    edit(&mut tensors);
    let views = tensors.iter().map(|(n, dtype, shape, data)| {
        let view = safetensors::tensor::TensorView::new(*dtype, shape.clone(), data).unwrap();
        (n.clone(), view)
    });
    safetensors::serialize_to_file(views, None, &dir.path().join("model.safetensors")).unwrap();
    dir
}

/// The error of loading the checkpoint in `dir` for the model of its config.
fn load_error(dir: &Path) -> WeightError {
    let config = ModelConfig::from_file(&dir.join("config.json")).unwrap();
    let store = WeightStore::open(dir).unwrap();
    store.load_expected(&expected_weights(&config)).unwrap_err()
}

#[test]
fn a_missing_tensor_is_named_with_its_shape() {
    let dir = edited_checkpoint("tiny-llama", |t| {
        t.retain(|(n, ..)| n != "model.layers.1.mlp.down_proj.weight")
    });
    let err = load_error(dir.path());
    assert!(matches!(err, WeightError::Missing { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("`model.layers.1.mlp.down_proj.weight`") && message.contains("[64, 176]"),
        "{message}"
    );
}

#[test]
fn an_unexpected_tensor_is_named_and_tied_models_have_no_lm_head() {
    let dir = edited_checkpoint("tiny-qwen2", |t| {
        let embed = t
            .iter()
            .find(|(n, ..)| n == "model.embed_tokens.weight")
            .unwrap();
        let head = (
            "lm_head.weight".to_string(),
            embed.1,
            embed.2.clone(),
            embed.3.clone(),
        );
        t.push(head);
    });
    let err = load_error(dir.path());
    assert!(matches!(err, WeightError::Unexpected { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("`lm_head.weight`") && message.contains("[1024, 64]"),
        "{message}"
    );
}

#[test]
fn a_wrongly_shaped_tensor_names_both_shapes() {
    let dir = edited_checkpoint("tiny-qwen3", |t| {
        let norm = t
            .iter_mut()
            .find(|(n, ..)| n == "model.layers.0.self_attn.q_norm.weight");
        let (_, _, shape, data) = norm.unwrap();
        *shape = vec![16];
        data.truncate(16 * 4);
    });
    let err = load_error(dir.path());
    assert!(matches!(err, WeightError::Shape { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("`model.layers.0.self_attn.q_norm.weight`")
            && message.contains("[16]")
            && message.contains("[32]"),
        "{message}"
    );
}

#[test]
fn a_truncated_checkpoint_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(fixture("tiny-llama").join("model.safetensors")).unwrap();
    let path = dir.path().join("model.safetensors");
    std::fs::write(&path, &bytes[..bytes.len() - 1000]).unwrap();
    let err = WeightStore::open(dir.path()).unwrap_err();
    assert!(matches!(err, WeightError::Malformed { .. }), "{err}");
    assert!(err.to_string().contains("model.safetensors"), "{err}");
}

/// The error of reading fixture `name`'s config with `key` set to `value`.
fn config_error(name: &str, key: &str, value: serde_json::Value) -> String {
    let text = std::fs::read_to_string(fixture(name).join("config.json")).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json[key] = value;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json");
    std::fs::write(&path, json.to_string()).unwrap();
    ModelConfig::from_file(&path).unwrap_err().to_string()
}

#[test]
fn bad_configs_are_errors_naming_the_field_and_value() {
    let err = config_error(
        "tiny-llama",
        "architectures",
        serde_json::json!(["GPT2LMHeadModel"]),
    );
    assert!(
        err.contains("config.json") && err.contains("GPT2LMHeadModel"),
        "{err}"
    );
    let yarn = serde_json::json!({"rope_type": "yarn", "factor": 4.0});
    let err = config_error("tiny-qwen2", "rope_scaling", yarn);
    assert!(
        err.contains("rope_scaling.rope_type") && err.contains("`yarn`"),
        "{err}"
    );
    let err = config_error("tiny-qwen3", "hidden_act", serde_json::json!("gelu"));
    assert!(err.contains("hidden_act `gelu`"), "{err}");
}

#[test]
fn a_model_class_rejects_another_architecture() {
    let config = ModelConfig::from_file(&fixture("tiny-qwen3").join("config.json")).unwrap();
    let err = oxrelax_models::LlamaForCausalLM::new(&config).unwrap_err();
    assert!(matches!(err, ModelError::WrongArchitecture { .. }), "{err}");
    assert!(err.to_string().contains("Qwen3ForCausalLM"), "{err}");
}

/// `prompt1.hidden_states[0]` (the token embeddings), `[L1, hidden]` flattened.
fn reference_embeddings(dir: &Path) -> Vec<f32> {
    let bytes = std::fs::read(dir.join("reference.safetensors")).unwrap();
    let refs = SafeTensors::deserialize(&bytes).unwrap();
    let rows = f32_rows(&refs, "prompt1.hidden_states");
    let len = i64_values(&refs, "prompt1.input_ids").len();
    rows[..len].concat()
}

#[test]
fn embed_matches_the_reference_embeddings_exactly() {
    // bf16 storage: the embedding rows are widened exactly.
    let dir = fixture("tiny-llama2-32k");
    let mut model = Loaded::new(&dir);
    let ids: Vec<i32> = references(&dir)[1]
        .input_ids
        .iter()
        .map(|&i| i as i32)
        .collect();
    let ids = Tensor::from_slice(&ids, &[1, ids.len() as i64]).unwrap();
    let args = [Value::Tensor(ids)]
        .into_iter()
        .chain(model.weights.iter().cloned());
    let hidden = model.call("embed", args.collect());
    assert_eq!(hidden.shape(), [1, 8, 64]);
    assert_eq!(
        hidden.as_slice::<f32>().unwrap(),
        reference_embeddings(&dir)
    );
}

#[test]
fn softmax_with_temperature_matches_a_direct_computation() {
    let mut model = Loaded::new(&fixture("tiny-llama"));
    let logits: Vec<f32> = (0..1024)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
        .collect();
    for t in [0.7f32, 1.0, 2.5] {
        let args = vec![
            Value::Tensor(Tensor::from_slice(&logits, &[1, 1, 1024]).unwrap()),
            Value::Tensor(Tensor::from_slice(&[t], &[]).unwrap()),
        ];
        let probs = model.call("softmax_with_temperature", args);
        let max = logits.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let exps: Vec<f64> = logits
            .iter()
            .map(|l| f64::from((l - max) / t).exp())
            .collect();
        let total: f64 = exps.iter().sum();
        let got = probs.as_slice::<f32>().unwrap();
        let diff = got
            .iter()
            .zip(&exps)
            .map(|(g, e)| (f64::from(*g) - e / total).abs())
            .fold(0.0, f64::max);
        assert!(diff < 1e-6, "t = {t}: max |diff| {diff}");
    }
}

#[test]
fn prefill_in_chunks_from_a_sharded_checkpoint_matches_one_pass() {
    // tiny-llama's weights in two shards with an index.
    let src = fixture("tiny-llama");
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(src.join("config.json"), dir.path().join("config.json")).unwrap();
    let bytes = std::fs::read(src.join("model.safetensors")).unwrap();
    let stored = SafeTensors::deserialize(&bytes).unwrap();
    let mut weight_map = serde_json::Map::new();
    let (first, second): (Vec<_>, Vec<_>) = stored
        .iter()
        .partition(|(name, _)| name.contains("layers.0") || name.contains("embed"));
    for (shard, tensors) in [
        ("model-00001-of-00002.safetensors", first),
        ("model-00002-of-00002.safetensors", second),
    ] {
        for (name, _) in &tensors {
            weight_map.insert(name.to_string(), shard.into());
        }
        safetensors::serialize_to_file(tensors, None, &dir.path().join(shard)).unwrap();
    }
    let index = serde_json::json!({"metadata": {}, "weight_map": weight_map});
    std::fs::write(
        dir.path().join("model.safetensors.index.json"),
        index.to_string(),
    )
    .unwrap();
    assert!(!dir.path().join("model.safetensors").exists());
    let mut model = Loaded::new(dir.path());
    // Prompt 2 (42 tokens) as chunks of 17, 1 and 24: later chunks attend to the cache.
    let reference = &references(&src)[2];
    let cache = model.new_cache();
    let mut rows = Vec::new();
    for range in [0..17, 17..18, 18..42] {
        rows.extend(model.step("prefill_all", &reference.input_ids[range], &cache));
    }
    let diff = max_abs_diff(&rows, &reference.prefill_logits);
    assert!(diff <= TOLERANCE, "chunked prefill: max |diff| {diff}");
    let next = model.step("decode", &[reference.greedy_ids[0]], &cache);
    assert!(max_abs_diff(&next, &reference.decode_logits[..1]) <= TOLERANCE);
}

#[test]
fn tiny_llamas_weights_fused_as_phi3_stores_them_match_transformers_llama() {
    let llama = fixture("tiny-llama");
    let phi3 = common::phi3::phi3_copy(&llama);
    let mut model = Loaded::new(phi3.path());
    // The transform (which slices the fused weights) ran once; its arena is freed.
    let transform = oxrelax::passes::TRANSFORM_PARAMS;
    assert!(model.built.module.functions.contains_key(transform));
    assert!(model.built.vm.arena(transform).is_none());
    for (p, reference) in references(&llama).iter().enumerate() {
        let label = format!("tiny-llama as Phi-3, prompt{p}");
        let diffs = check_prompt(&mut model, &label, reference);
        println!("{label}: max |diff| {diffs:?}");
        assert!(diffs.iter().all(|d| *d <= TOLERANCE), "{label}: {diffs:?}");
    }
}
