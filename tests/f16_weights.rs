//! f16 checkpoints run with their projection weights kept as f16 (widened by the kernels
//! as they read them): on every fixture, an f16 copy loaded as stored computes exactly
//! what the same values widened to f32 at load compute, in half the weight memory; an
//! f32 checkpoint asked for f16 rounds as the f16 copy did; an artifact keeps them f16.

mod common;
use common::{fixture_models, greedy, load_as};

use half::{bf16, f16};
use oxrelax::artifact::{
    compile_artifact, source_module, CompileOptions, MANIFEST_FILE, PARAMS_FILE,
};
use oxrelax::model::{load, LoadOptions, LoadedModel, Quantization};
use oxrelax_models::ExportOptions;
use oxrelax_runtime::engine::Generation;
use oxrelax_runtime::{DType, Value};
use safetensors::{Dtype, SafeTensors};
use std::path::Path;

/// Max |logit difference| between two computations over the same weight values (the
/// kernels widen f16 exactly, so only summation order could differ).
const SAME: f32 = 2e-5;
/// The prompt (ids every fixture's vocabulary of at least 1024 has).
const PROMPT: [u32; 7] = [1, 450, 996, 173, 701, 432, 29];
/// Files copied next to the converted weights.
const COPIED: [&str; 4] = [
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
];

/// The values of f32 or bf16 `bytes`.
fn floats(dtype: Dtype, bytes: &[u8]) -> Box<dyn Iterator<Item = f32> + '_> {
    match dtype {
        Dtype::F32 => Box::new(
            bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        ),
        Dtype::BF16 => Box::new(
            bytes
                .chunks_exact(2)
                .map(|b| bf16::from_le_bytes([b[0], b[1]]).to_f32()),
        ),
        other => panic!("a fixture weight stored as {other:?}"),
    }
}

/// Copies fixture `src` into `dst` with the weights `rounded` names stored as f16 (the
/// others as they are).
fn write_f16_copy(src: &Path, dst: &Path, rounded: fn(&str) -> bool) {
    for file in COPIED.iter().filter(|f| src.join(f).is_file()) {
        std::fs::copy(src.join(file), dst.join(file)).unwrap();
    }
    let bytes = std::fs::read(src.join("model.safetensors")).unwrap();
    let tensors = SafeTensors::deserialize(&bytes).unwrap();
    let converted: Vec<(String, Vec<usize>, Dtype, Vec<u8>)> = tensors
        .tensors()
        .into_iter()
        .map(|(name, view)| {
            if !rounded(&name) {
                return (
                    name,
                    view.shape().to_vec(),
                    view.dtype(),
                    view.data().to_vec(),
                );
            }
            let data = floats(view.dtype(), view.data())
                .flat_map(|v| f16::from_f32(v).to_le_bytes())
                .collect();
            (name, view.shape().to_vec(), Dtype::F16, data)
        })
        .collect();
    let views = converted.iter().map(|(name, shape, dtype, data)| {
        let view = safetensors::tensor::TensorView::new(*dtype, shape.clone(), data);
        (name.clone(), view.unwrap())
    });
    safetensors::serialize_to_file(views, None, &dst.join("model.safetensors")).unwrap();
}

/// Bytes of the loaded weights by dtype: (f16, f32).
fn weight_bytes(model: &LoadedModel) -> (usize, usize) {
    let tensors = model.weights.iter().filter_map(Value::as_tensor);
    tensors.fold((0, 0), |(half, single), t| match t.dtype() {
        DType::F16 => (half + t.nbytes(), single),
        DType::F32 => (half, single + t.nbytes()),
        other => panic!("a weight of dtype {other}"),
    })
}

/// Greedy generation of 6 tokens after [`PROMPT`], keeping every logit row.
fn generate(model: LoadedModel) -> Generation {
    greedy(model, &PROMPT, 6)
}

fn max_abs_diff(got: &Generation, want: &Generation) -> f32 {
    let rows = |g: &Generation| {
        let all = g.prefill_logits.iter().chain(&g.token_logits);
        all.flat_map(|row| row.iter().copied()).collect::<Vec<_>>()
    };
    let (got, want) = (rows(got), rows(want));
    assert_eq!(got.len(), want.len(), "logit counts");
    got.iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max)
}

#[test]
fn f16_checkpoints_keep_f16_weights_and_compute_what_their_f32_widening_does() {
    for fixture in fixture_models() {
        let name = fixture.file_name().unwrap().to_string_lossy().to_string();
        let dir = tempfile::tempdir().unwrap();
        write_f16_copy(&fixture, dir.path(), |_| true);

        let stored = load_as(dir.path(), Quantization::Auto);
        let widened = load_as(dir.path(), Quantization::Q0f32);
        let (half, single) = weight_bytes(&stored);
        let (none, all) = weight_bytes(&widened);
        assert_eq!(none, 0, "{name}: --quant q0f32 widens every weight");
        // Only the norms (and Qwen2's biases) stay f32: a few vectors per layer.
        assert!(single * 50 < half, "{name}: f16 {half} B, f32 {single} B");
        assert!(
            2 * (half + single) < all + all / 50,
            "{name}: {half}+{single} vs {all}"
        );

        let (stored, widened) = (generate(stored), generate(widened));
        assert_eq!(stored.ids, widened.ids, "{name}: greedy ids");
        let diff = max_abs_diff(&stored, &widened);
        assert!(diff <= SAME, "{name}: f16 kept vs widened: {diff}");

        // A checkpoint asked for f16 rounds its projections (not its norms and biases)
        // exactly as a copy with only those stored f16 was rounded.
        let mixed = tempfile::tempdir().unwrap();
        let projection = |name: &str| !name.ends_with("norm.weight") && !name.ends_with(".bias");
        write_f16_copy(&fixture, mixed.path(), projection);
        let mixed = generate(load_as(mixed.path(), Quantization::Auto));
        let rounded = generate(load_as(&fixture, Quantization::Q0f16));
        assert_eq!(rounded.ids, mixed.ids, "{name}: greedy ids");
        let diff = max_abs_diff(&rounded, &mixed);
        assert!(
            diff <= SAME,
            "{name}: rounded at load vs stored f16: {diff}"
        );
    }
}

#[test]
fn an_artifact_of_an_f16_checkpoint_stores_and_loads_f16_weights() {
    let fixture = &fixture_models()[0];
    let (src, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_f16_copy(fixture, src.path(), |_| true);
    let options = CompileOptions {
        max_context: 64,
        prefill_chunk: 16,
        ..CompileOptions::default()
    };
    let manifest = compile_artifact(src.path(), out.path(), &options, |_| {}).unwrap();
    assert_eq!(manifest.quantization, "q0f16");
    let params = std::fs::read(out.path().join(PARAMS_FILE)).unwrap();
    let stored = SafeTensors::deserialize(&params).unwrap();
    let dtypes: Vec<Dtype> = stored.tensors().iter().map(|(_, v)| v.dtype()).collect();
    assert!(dtypes.contains(&Dtype::F16) && dtypes.contains(&Dtype::F32));

    let from_artifact = generate(load(out.path(), &LoadOptions::default()).unwrap());
    let from_folder = generate(load_as(src.path(), Quantization::Auto));
    assert_eq!(from_artifact.ids, from_folder.ids);
    let diff = max_abs_diff(&from_artifact, &from_folder);
    assert!(diff <= SAME, "artifact vs folder: {diff}");

    // The scheme is a record for the compiler (the runtime checks the weights' recorded
    // dtypes and shapes instead): rebuilding the module from a manifest naming a scheme
    // this compiler does not know is a typed error.
    let manifest_path = out.path().join(MANIFEST_FILE);
    let text = std::fs::read_to_string(&manifest_path).unwrap();
    std::fs::write(&manifest_path, text.replace("\"q0f16\"", "\"q3\"")).unwrap();
    let export = ExportOptions::default();
    let err = source_module(out.path(), &export, Quantization::Auto)
        .err()
        .unwrap();
    let err = err.to_string();
    assert!(err.contains("quantization \"q3\""), "{err}");
}
