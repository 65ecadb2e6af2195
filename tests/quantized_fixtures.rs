//! Every quantized scheme runs on every fixture model (Llama; Qwen2 with biases; Qwen3
//! with q/k norms; tied and untied embeddings): every 2-D weight of the checkpoint (the
//! projections, the embedding table and an untied output head) is stored quantized, a
//! tied table once (4-bit schemes keep the table and the head at 8 bits), and the logits
//! over a prompt stay near f32's.

mod common;
use common::{fixture_models, greedy, load_as};

use oxrelax::model::{LoadedModel, Quantization};
use oxrelax_runtime::{DType, Value};
use safetensors::SafeTensors;
use std::path::Path;

/// Each scheme, the dtype of its weights, and its bounds on the prompt's logits: max
/// |diff| relative to the largest f32 logit, and the least top-1 agreement (4 bits on
/// these tiny models: 50-92%; that the kernels compute exactly what the 4-bit weights
/// say is `tests/odd_sizes.rs`'s, the perplexity drift `tests/accuracy.rs`'s).
const SCHEMES: [(Quantization, DType, f32, f32); 7] = [
    (Quantization::Q8f32, DType::I8, 0.02, 0.9),
    (Quantization::Q4f32_1, DType::U4, 0.15, 0.5),
    (Quantization::Q4f16_1, DType::U4, 0.15, 0.5),
    // Int8 activations flip near-ties: tiny-qwen2 agrees on 10 of 12 positions.
    (Quantization::W8a8, DType::I8, 0.03, 0.8),
    (Quantization::W4a8, DType::U4, 0.15, 0.5),
    (Quantization::Q4f16Asym, DType::U4, 0.15, 0.5),
    (Quantization::W4a8Asym, DType::U4, 0.15, 0.5),
];

/// The most stored weights a scheme may add to a checkpoint's, in percent: panels pad
/// rows to 16 and 4-bit pairs an odd row length; int8-activation panels pad the
/// reduction to whole groups of 32 (the fixtures' FFN of 176 to 192).
fn padding_percent(scheme: Quantization) -> usize {
    match scheme {
        Quantization::W8a8 | Quantization::W4a8 | Quantization::W4a8Asym => 12,
        _ => 5,
    }
}

/// A prompt every fixture's vocabulary (at least 1024 ids) has.
const PROMPT: [u32; 12] = [1, 450, 996, 173, 701, 432, 29, 88, 640, 12, 305, 901];

/// Elements of the checkpoint's 2-D tensors (the weights a scheme quantizes).
fn matrix_elements(dir: &Path) -> usize {
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let tensors = SafeTensors::deserialize(&bytes).unwrap();
    let matrices = tensors
        .tensors()
        .into_iter()
        .filter(|(_, v)| v.shape().len() == 2);
    matrices
        .map(|(_, v)| v.shape().iter().product::<usize>())
        .sum()
}

/// Elements of the loaded weights stored as `dtype`.
fn elements_of(model: &LoadedModel, dtype: DType) -> usize {
    let tensors = model.weights.iter().filter_map(Value::as_tensor);
    let stored = tensors.filter(|t| t.dtype() == dtype);
    stored
        .map(|t| t.shape().iter().product::<i64>() as usize)
        .sum()
}

/// The prompt's logit rows, one per position.
fn prompt_logits(model: LoadedModel) -> Vec<Vec<f32>> {
    greedy(model, &PROMPT, 1).prefill_logits
}

fn argmax(row: &[f32]) -> usize {
    let best = row.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1));
    best.map(|(i, _)| i).unwrap()
}

#[test]
fn every_scheme_quantizes_every_matrix_of_every_fixture_and_stays_near_f32() {
    for dir in fixture_models() {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let reference = prompt_logits(load_as(&dir, Quantization::Q0f32));
        let scale = reference
            .iter()
            .flatten()
            .fold(0.0f32, |m, v| m.max(v.abs()));
        let matrices = matrix_elements(&dir);
        for (scheme, dtype, bound, agreement) in SCHEMES {
            let what = format!("{name} {}", scheme.name());
            let model = load_as(&dir, scheme);
            let (int8, int4) = (
                elements_of(&model, DType::I8),
                elements_of(&model, DType::U4),
            );
            if dtype == DType::U4 {
                // The embedding table (and an untied head) at 8 bits, the projections at 4.
                assert!(int8 > 0 && int4 > 0, "{what}: {int8} int8, {int4} int4");
            }
            let quantized = int8 + int4;
            let most = matrices * (100 + padding_percent(scheme));
            assert!(
                quantized >= matrices && quantized * 100 <= most,
                "{what}: {quantized} quantized weights for {matrices} in the checkpoint"
            );
            let got = prompt_logits(model);
            assert_eq!(got.len(), reference.len(), "{what}");
            let pairs = || got.iter().zip(&reference);
            let diff = pairs()
                .flat_map(|(g, r)| g.iter().zip(r).map(|(a, b)| (a - b).abs()))
                .fold(0.0f32, f32::max);
            let agree = pairs().filter(|(g, r)| argmax(g) == argmax(r)).count();
            let agree = agree as f32 / got.len() as f32;
            println!("{what}: max |diff| {diff} (logits up to {scale}), top-1 {agree}");
            assert!(
                diff <= bound * scale,
                "{what}: max |diff| {diff} vs {scale}"
            );
            assert!(agree >= agreement, "{what}: top-1 agreement {agree}");
        }
    }
}

/// After the rewrite phases no weight is left dequantized or multiplied unpacked: every
/// linear layer and embedding lookup of every fixture (tied heads included) under every
/// scheme reads its quantized panels in a fused kernel.
#[test]
fn the_rewrite_phases_fuse_every_quantized_weight_of_every_fixture() {
    use oxrelax::artifact::{modules_after_each_pass, source_module};
    use oxrelax::passes::Instrument;
    use oxrelax_dsl::ir::Callee;
    for dir in fixture_models() {
        for (scheme, ..) in SCHEMES {
            let options = oxrelax_models::ExportOptions::default();
            let module = source_module(&dir, &options, scheme).unwrap();
            let target = oxrelax_dsl::Target::host();
            let stages = modules_after_each_pass(module, &target, Instrument::default()).unwrap();
            let (_, rewritten) = stages
                .iter()
                .find(|(stage, _)| stage.ends_with("rewrite-layout"))
                .unwrap();
            for (name, function) in &rewritten.functions {
                for binding in function.bindings() {
                    let oxrelax_dsl::Expr::Call(call) = binding.value.expr() else {
                        continue;
                    };
                    let unfused = matches!(&call.callee, Callee::Op(op)
                        if op == "dequantize_weight" || op == "matmul" || op == "take");
                    assert!(
                        !unfused,
                        "{} {scheme:?} @{name}: {} is {:?}",
                        dir.display(),
                        binding.var.name,
                        call.callee
                    );
                }
            }
        }
    }
}

/// A checkpoint storing its projections fused (Phi-3's `qkv_proj`, `gate_up_proj`) is
/// split back into one projection per part before quantization, so every scheme (and
/// f32 and f16 storage) packs each part as the separate checkpoint's and the logits are
/// the same.
#[test]
fn every_scheme_packs_fused_projections_as_the_separate_ones() {
    let llama = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/models/tiny-llama");
    let phi3 = common::phi3::phi3_copy(&llama);
    for scheme in Quantization::SCHEMES {
        let separate = prompt_logits(load_as(&llama, scheme));
        let fused = prompt_logits(load_as(phi3.path(), scheme));
        let diff = separate
            .iter()
            .flatten()
            .zip(fused.iter().flatten())
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        println!("{}: max |diff| {diff}", scheme.name());
        assert!(diff <= 1e-5, "{}: max |diff| {diff}", scheme.name());
    }
}
