//! The models (`oxrelax-models`) built from the Hugging Face fixtures in
//! `../shared/fixtures/models`, compiled and run in the VM with weights loaded by the
//! runtime, compared with the logits transformers produced: every prompt position of a
//! prefill and 16 greedy decode steps. Plus the errors a bad config or checkpoint gives.

use oxrelax::passes::Instrument;
use oxrelax::{build, Built};
use oxrelax_models::{causal_lm, ExportOptions, ModelConfig, ModelError};
use oxrelax_runtime::weights::{ExpectedTensor, WeightError, WeightStore};
use oxrelax_runtime::{DType, Tensor, Value};
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

/// Every fixture model folder, sorted.
fn fixture_models() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .expect("the fixtures folder (../shared/fixtures/models) exists")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.join("config.json").is_file())
        .collect();
    dirs.sort();
    assert!(
        dirs.len() >= 4,
        "expected the four fixture models, found {dirs:?}"
    );
    dirs
}

/// What the models expect to load: every weight as f32.
fn expected_weights(config: &ModelConfig) -> Vec<ExpectedTensor> {
    causal_lm(config)
        .unwrap()
        .weight_shapes()
        .into_iter()
        .map(|(name, shape)| ExpectedTensor {
            name,
            shape,
            dtype: DType::F32,
        })
        .collect()
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
        let model = causal_lm(&config).unwrap();
        let options = ExportOptions {
            max_context: 256,
            prefill_chunk: 64,
        };
        let exported = model.export(&options).unwrap();
        assert_eq!(exported.context_window, 256);
        let built = build(exported.module, Instrument::default()).unwrap();
        let store = WeightStore::open(dir).unwrap();
        let weights = store.load_expected(&expected_weights(&config)).unwrap();
        Loaded {
            built,
            weights: weights.into_iter().map(Value::Tensor).collect(),
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

fn f32_rows(refs: &SafeTensors<'_>, name: &str) -> Vec<Vec<f32>> {
    let view = refs.tensor(name).unwrap();
    assert_eq!(view.dtype(), safetensors::Dtype::F32, "{name}");
    let values: Vec<f32> = view
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    values
        .chunks(view.shape()[1])
        .map(<[f32]>::to_vec)
        .collect()
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
