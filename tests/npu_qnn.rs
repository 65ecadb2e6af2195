//! QNN emission of every fixture model from its DSL definition: partitioned, calibrated
//! on the evaluation text (float graphs on the host reference backend), quantized by the
//! W4A16 recipe, validated; the quantized graphs run in the reference backend's spec
//! mode agree with transformers' greedy ids; the written `npu/` folder passes
//! `qnn-validate`; a snapshot of the tiny Llama's graph structure.

use oxrelax::model::LoadOptions;
use oxrelax::npu::compile::{compile_npu, NpuCompileOptions};
use oxrelax::npu::load::{partition_model, Partitioned};
use oxrelax::npu::qnn::emit::{float_parts, net_file};
use oxrelax::npu::qnn::recipe::{quantize, Ranges};
use oxrelax::npu::qnn::validate::{validate, validate_dir, ValidateOptions};
use oxrelax::npu::{PartitionNpu, Soc, QNN_HTP};
use oxrelax_runtime::qnn::sim::SimMode;
use oxrelax_runtime::qnn::QnnDataType;
use std::fmt::Write;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/models")
        .join(name)
}

fn text() -> String {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/text/shakespeare-eval.txt");
    std::fs::read_to_string(path).unwrap()
}

fn load_options() -> LoadOptions {
    LoadOptions {
        max_context: 256,
        ..LoadOptions::default()
    }
}

fn partitioned(dir: &Path) -> Partitioned {
    let partition = PartitionNpu {
        soc: Soc::named("SM8650").unwrap(),
        chunk: 32,
        capability: &QNN_HTP,
    };
    partition_model(dir, &load_options(), partition).unwrap()
}

fn calibrated(model: &Partitioned, dir: &Path) -> Ranges {
    model.calibrate(dir, &text(), 256, 8).unwrap()
}

/// Greedy ids after `prompt` from `engine`.
fn greedy(mut engine: oxrelax_runtime::Engine, prompt: &[u32], steps: usize) -> Vec<u32> {
    let mut logits = engine.prefill(prompt).unwrap();
    let mut ids = Vec::new();
    for _ in 0..steps {
        let next = logits
            .iter()
            .enumerate()
            .fold((0, f32::MIN), |b, (i, &v)| if v > b.1 { (i, v) } else { b })
            .0 as u32;
        ids.push(next);
        logits = engine.decode(next).unwrap();
    }
    ids
}

fn agreement(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).filter(|(x, y)| x == y).count()
}

/// The float graphs on the reference backend reproduce transformers' greedy ids exactly
/// (partition, lowering, chunk padding and the backend's ops are right), and the W4A16
/// graphs validate and run. Their greedy agreement (spec mode against the int4 weights
/// alone, and against transformers) is printed, not yet asserted: it is far below the
/// NPU issue's 90% (see the README's status).
#[test]
fn npu_graphs_on_the_reference_backend_follow_transformers() {
    for name in ["tiny-llama", "tiny-qwen2", "tiny-qwen3"] {
        let dir = fixture(name);
        let model = partitioned(&dir);
        let ranges = calibrated(&model, &dir);
        let quantized = quantize(&model.net, &ranges).unwrap();
        let net = net_file(&model.net, &quantized.graph, "test");
        let report = validate(&net, &quantized.statics, &ValidateOptions::default());
        assert!(report.is_clean(), "{name}: {:?}", report.violations);
        let reference: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("reference.json")).unwrap())
                .unwrap();
        let (mut spec_vs_weights, mut spec_vs_hf, mut total) = (0, 0, 0);
        for prompt in reference["prompts"].as_array().unwrap() {
            let ids: Vec<u32> = serde_json::from_value(prompt["input_ids"].clone()).unwrap();
            let want: Vec<u32> = serde_json::from_value(prompt["greedy_ids"].clone()).unwrap();
            let (float_net, float_bin) = float_parts(&model.net);
            let float = greedy(
                model
                    .engine(float_net, float_bin, SimMode::Float, None)
                    .unwrap(),
                &ids,
                16,
            );
            assert_eq!(float, want[..16], "{name}: float NPU graphs");
            let engine = |mode| {
                model
                    .engine(net.clone(), quantized.statics.clone(), mode, None)
                    .unwrap()
            };
            let weights_only = greedy(engine(SimMode::Float), &ids, 16);
            let spec = greedy(engine(SimMode::Spec), &ids, 16);
            spec_vs_weights += agreement(&spec, &weights_only);
            spec_vs_hf += agreement(&spec, &want);
            total += 16;
        }
        eprintln!("{name}: W4A16 spec mode vs int4 weights alone {spec_vs_weights}/{total}, vs transformers {spec_vs_hf}/{total}");
    }
}

#[test]
fn compile_writes_a_folder_that_validates() {
    let dir = fixture("tiny-qwen2");
    let out = tempfile::tempdir().unwrap();
    let options = NpuCompileOptions {
        soc: Soc::named("SM8650").unwrap(),
        chunk: 32,
        calibration_text: text(),
        calibration_tokens: 128,
        load: load_options(),
        command: "oxrelax compile tiny-qwen2 --npu qnn".into(),
    };
    let npu = out.path().join("npu");
    let summary = compile_npu(&dir, &npu, &options).unwrap();
    for file in [
        "model.cpp",
        "model.bin",
        "model_net.json",
        "io_spec.json",
        "manifest.json",
        "build.sh",
        "htp_config.json",
        "htp_backend_extensions.json",
    ] {
        assert!(npu.join(file).is_file(), "{file}");
    }
    let report = validate_dir(out.path(), &ValidateOptions::default()).unwrap();
    assert!(report.is_clean(), "{:?}", report.violations);
    assert_eq!(report.graphs, summary.graphs);
    let cpp = std::fs::read_to_string(npu.join("model.cpp")).unwrap();
    assert!(cpp.contains("QnnModel_composeGraphs") && cpp.contains("\"Conv2d\""));
}

/// The tiny Llama's graphs: nodes in order with their op types, operands and params, and
/// every tensor's kind, type and dims (encodings depend on calibration, so they are left
/// out; the tests above check them).
#[test]
fn tiny_llama_graph_structure_snapshot() {
    let dir = fixture("tiny-llama");
    let model = partitioned(&dir);
    let ranges = calibrated(&model, &dir);
    let quantized = quantize(&model.net, &ranges).unwrap();
    let net = net_file(&model.net, &quantized.graph, "test");
    let mut text = String::new();
    for graph in &net.graphs {
        let _ = writeln!(
            text,
            "graph {} ({} tokens): inputs {:?} -> outputs {:?}",
            graph.name, graph.tokens, graph.inputs, graph.outputs
        );
        for node in &graph.nodes {
            let n = &net.graph.nodes[node];
            let params: Vec<String> = n
                .tensor_params
                .iter()
                .map(|(k, p)| format!("{k}={:?}", p.data))
                .chain(n.scalar_params.iter().map(|(k, v)| format!("{k}={v:?}")))
                .collect();
            let _ = writeln!(
                text,
                "  {} = {}({}) [{}]",
                n.output_names.join(", "),
                n.op_type,
                n.input_names.join(", "),
                params.join(", ")
            );
        }
    }
    for (name, t) in &net.graph.tensors {
        let dtype = t.dtype().map_or("?", QnnDataType::c_name);
        let _ = writeln!(text, "tensor {name}: type {} {dtype} {:?}", t.kind, t.dims);
    }
    insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!("tiny-llama.qnn-graphs", text);
    });
}
