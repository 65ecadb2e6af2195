//! Snapshots of the tiny Llama's `prefill` and `decode` (with the primitive functions
//! they call) after each pass of the compile pipeline, from the embedded model in
//! `models/assets/tiny-llama` — the same machinery as `oxrelax dump-ir`; with
//! `--quant q8f32`, `q4f16_1` and `w4a8`, its `decode` and `transform_params` (where the
//! weights are quantized; with `w4a8`, each activation row too, at run time); and with `--kv-dtype f16`, its `decode` (k and v cast as they are
//! appended, attention over the f16 cache); and stored as Phi-3 stores its weights
//! (`qkv_proj`, `gate_up_proj` fused), its `w4a8` `decode`, which `rewrite-split` turns
//! into the separate projections' code.

mod common;

use oxrelax::artifact::{extract_functions, modules_after_each_pass, source_module};
use oxrelax::model::Quantization;
use oxrelax::passes::{compile_pipeline_for, Instrument};
use oxrelax_dsl::target::Target;
use oxrelax_dsl::text::{parse_module, print_module};
use oxrelax_models::{ExportOptions, KvDtype};
use std::path::Path;

#[test]
fn tiny_llama_prefill_and_decode_after_each_pass() {
    snapshot_passes(Quantization::Auto, "tiny-llama", &["prefill", "decode"]);
}

#[test]
fn tiny_llama_f16_kv_cache_decode_after_each_pass() {
    let options = ExportOptions {
        kv_dtype: KvDtype::F16,
        ..tiny_llama_options()
    };
    snapshot_passes_with(options, Quantization::Auto, "tiny-llama-f16kv", &["decode"]);
}

#[test]
fn tiny_llama_q8_kv_cache_decode_after_each_pass() {
    let options = ExportOptions {
        kv_dtype: KvDtype::Q8,
        ..tiny_llama_options()
    };
    snapshot_passes_with(options, Quantization::Auto, "tiny-llama-q8kv", &["decode"]);
}

#[test]
fn tiny_llama_q8f32_decode_and_weight_transform_after_each_pass() {
    let functions = ["decode", "transform_params"];
    snapshot_passes(Quantization::Q8f32, "tiny-llama-q8f32", &functions);
}

#[test]
fn tiny_llama_q4f16_1_decode_and_weight_transform_after_each_pass() {
    let functions = ["decode", "transform_params"];
    snapshot_passes(Quantization::Q4f16_1, "tiny-llama-q4f16_1", &functions);
}

#[test]
fn tiny_llama_w4a8_decode_and_weight_transform_after_each_pass() {
    let functions = ["decode", "transform_params"];
    snapshot_passes(Quantization::W4a8, "tiny-llama-w4a8", &functions);
}

#[test]
fn tiny_llama_as_phi3_w4a8_decode_after_each_pass() {
    let llama = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/assets/tiny-llama");
    let phi3 = common::phi3::phi3_copy(&llama);
    let functions = ["decode"];
    snapshot_model(
        phi3.path(),
        tiny_llama_options(),
        Quantization::W4a8,
        "tiny-phi3-w4a8",
        &functions,
    );
}

/// The tiny Llama's export options: 256 positions, prefill chunks of 32, an f32 KV cache.
fn tiny_llama_options() -> ExportOptions {
    ExportOptions {
        max_context: 256,
        prefill_chunk: 32,
        kv_dtype: KvDtype::F32,
        // The snapshots follow prefill and decode.
        max_batch: 0,
    }
}

/// Snapshots `functions` (those that exist at each stage) of the tiny Llama compiled with
/// `quantization`, as `{prefix}.{function}.{stage}`.
fn snapshot_passes(quantization: Quantization, prefix: &str, functions: &[&str]) {
    snapshot_passes_with(tiny_llama_options(), quantization, prefix, functions);
}

/// [`snapshot_passes`] with the tiny Llama exported with `options`.
fn snapshot_passes_with(
    options: ExportOptions,
    quantization: Quantization,
    prefix: &str,
    functions: &[&str],
) {
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/assets/tiny-llama");
    snapshot_model(&model, options, quantization, prefix, functions);
}

/// [`snapshot_passes`] of the model in `dir`.
fn snapshot_model(
    dir: &Path,
    options: ExportOptions,
    quantization: Quantization,
    prefix: &str,
    functions: &[&str],
) {
    let module = source_module(dir, &options, quantization).unwrap();
    // A named target, so the scheduled functions are the same on every host.
    let target = Target::new("x86_64-unknown-linux-gnu", &["avx2", "fma"]);
    let stages = modules_after_each_pass(module, &target, Instrument::default()).unwrap();
    let mut names: Vec<String> = vec!["input".into()];
    names.extend(
        compile_pipeline_for(&target)
            .pass_names()
            .into_iter()
            .map(String::from),
    );
    let stage_names: Vec<&str> = stages.iter().map(|(stage, _)| &stage[3..]).collect();
    assert_eq!(stage_names, names);
    for (stage, module) in &stages {
        for &function in functions {
            if !module.functions.contains_key(function) {
                continue;
            }
            let extracted = extract_functions(module, &[function]);
            assert_eq!(extracted.functions.len(), 1, "{stage}: {function}");
            let text = print_module(&extracted);
            let parsed = parse_module(&text).unwrap_or_else(|e| panic!("{stage}: {e}"));
            assert_eq!(parsed, extracted, "{stage} {function}: print -> parse");
            let name = format!("{prefix}.{function}.{stage}");
            insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false}, {
                insta::assert_snapshot!(name, text);
            });
        }
    }
}
