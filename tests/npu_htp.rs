//! The NPU graphs against Qualcomm's own HTP backend (`libQnnHtp.so`, found through
//! `OXRELAX_QNN_LIB_DIR`; `.ci/run` downloads it. Without it these tests say so and pass).
//! Every graph of every fixture and recipe is built through the QNN API with each op
//! validated by the backend, and every tensor it computes (intermediates exposed as
//! outputs) is compared with the reference backend's spec mode; an artifact compiled with
//! the library runs from its context binary.

mod common;

use common::{eval_text, fixture};
use oxrelax::artifact::{compile_artifact, open_artifact_with, CompileOptions};
use oxrelax::model::LoadOptions;
use oxrelax::npu::compile::NpuCompile;
use oxrelax::npu::load::partition_model;
use oxrelax::npu::qnn::emit::net_file;
use oxrelax::npu::qnn::recipe::{quantize, RecipeChoice, RECIPES};
use oxrelax::npu::{PartitionNpu, Soc, QNN_HTP};
use oxrelax_runtime::qnn::bind::NpuBackend;
use oxrelax_runtime::qnn::codes::tensor_type;
use oxrelax_runtime::qnn::htp::{library_dir, HtpBackend, HtpContext, QnnLibrary, ValidateOps};
use oxrelax_runtime::qnn::sim::{SimContext, SimMode};
use oxrelax_runtime::qnn::NetFile;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

/// The largest difference from the reference a tensor may show, in its LSBs (of 65536):
/// each backend runs a graph of up to ~35 ops on its own values, and HTP computes RmsNorm
/// and Sigmoid with its own approximations (where the largest gaps are, up to 12 LSB).
const MAX_LSB: f32 = 16.0;

/// The tests here run one at a time: a process opens one HTP backend at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn qnn_lib() -> Option<PathBuf> {
    let dir = library_dir(None).ok();
    if dir.is_none() {
        eprintln!("OXRELAX_QNN_LIB_DIR is not set: skipping the HTP tests");
    }
    dir
}

/// `net` with every intermediate tensor of each graph also an output of that graph (an
/// APP_READ tensor), so a backend shows every value it computes.
fn expose_intermediates(mut net: NetFile) -> NetFile {
    for graph in &mut net.graphs {
        for node in &graph.nodes {
            for output in &net.graph.nodes[node].output_names {
                let tensor = net.graph.tensors.get_mut(output).unwrap();
                if tensor.kind == tensor_type::NATIVE {
                    tensor.kind = tensor_type::APP_READ;
                    graph.outputs.push(output.clone());
                }
            }
        }
    }
    net
}

/// Deterministic values spread over the middle half of each of `graph`'s inputs'
/// encoding ranges.
fn inputs(net: &NetFile, graph: &str) -> Vec<Vec<f32>> {
    let spec = net.graphs.iter().find(|g| g.name == graph).unwrap();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    spec.inputs
        .iter()
        .map(|name| {
            let tensor = &net.graph.tensors[name];
            let so = tensor.quant_params.scale_offset.unwrap();
            let (lo, hi) = (
                so.scale * so.offset as f32,
                so.scale * (65535 + so.offset) as f32,
            );
            (0..tensor.numel())
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    let u = (state >> 40) as f32 / (1u64 << 24) as f32;
                    lo + (hi - lo) * (0.25 + 0.5 * u)
                })
                .collect()
        })
        .collect()
}

/// Every graph of every fixture and recipe, on HTP and on the reference backend (spec
/// mode): each tensor within [`MAX_LSB`].
#[test]
fn every_graph_computes_on_htp_what_the_reference_backend_computes() {
    let Some(dir) = qnn_lib() else { return };
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let library = QnnLibrary::load_htp(&dir).unwrap();
    let backend = HtpBackend::open(library, "SM8650", 57).unwrap();
    let mut report = String::new();
    let mut failures = Vec::new();
    for name in ["tiny-llama", "tiny-qwen2", "tiny-qwen3"] {
        let model_dir = fixture(name);
        let partition = PartitionNpu {
            soc: Soc::named("SM8650").unwrap(),
            chunk: 32,
            capability: &QNN_HTP,
        };
        let load = LoadOptions {
            max_context: 256,
            ..LoadOptions::default()
        };
        let model = partition_model(&model_dir, &load, partition, &[8]).unwrap();
        let ids = model
            .calibration_ids(&model_dir, &eval_text(), 256)
            .unwrap();
        for recipe in RECIPES {
            let ranges = model.calibrate(&ids, *recipe).unwrap();
            let quantized = quantize(&model.net, &ranges, *recipe).unwrap();
            let net = expose_intermediates(net_file(&model.net, &quantized.graph, "test"));
            let sim = SimContext::from_parts(net.clone(), quantized.statics.clone()).unwrap();
            let htp = HtpContext::build(
                backend.clone(),
                Arc::new(net.clone()),
                &quantized.statics,
                ValidateOps::Yes,
            )
            .unwrap();
            for graph in &net.graphs {
                let values = inputs(&net, &graph.name);
                let refs: Vec<&[f32]> = values.iter().map(Vec::as_slice).collect();
                let want = sim.run(&graph.name, &refs, SimMode::Spec).unwrap();
                let got = htp.run(&graph.name, &refs).unwrap();
                let mut worst = (0.0f32, String::new());
                for ((tensor, a), b) in graph.outputs.iter().zip(&want).zip(&got) {
                    let scale = net.graph.tensors[tensor]
                        .quant_params
                        .scale_offset
                        .unwrap()
                        .scale;
                    let gap = a
                        .iter()
                        .zip(b)
                        .map(|(x, y)| (x - y).abs() / scale)
                        .fold(0.0f32, f32::max);
                    if gap > worst.0 {
                        worst = (gap, tensor.clone());
                    }
                }
                let line = format!(
                    "{name} {} {}: {} tensors, largest gap {:.1} LSB ({})",
                    recipe.name,
                    graph.name,
                    graph.outputs.len(),
                    worst.0,
                    worst.1
                );
                if worst.0 > MAX_LSB {
                    failures.push(line.clone());
                }
                report.push_str(&line);
                report.push('\n');
            }
        }
    }
    eprintln!("{report}");
    assert!(
        failures.is_empty(),
        "beyond {MAX_LSB} LSB:\n{}",
        failures.join("\n")
    );
}

/// `compile` with the library stores a context binary per SoC, recorded and hashed; the
/// artifact runs from either (`--npu htp`, `--npu-soc`) as it runs on the reference
/// backend; a SoC it holds no binary for, and a tampered binary, are refused naming them.
#[test]
fn an_artifact_runs_from_its_context_binaries() {
    let Some(dir) = qnn_lib() else { return };
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let out = tempfile::tempdir().unwrap();
    let artifact = out.path().join("artifact");
    let options = CompileOptions {
        max_context: 256,
        npu: Some(Arc::new(NpuCompile {
            soc: Soc::named("SM8550").unwrap(),
            more_socs: vec![Soc::named("SM8750").unwrap()],
            chunk: 32,
            chunk_variants: vec![8],
            recipe: RecipeChoice::Named(RECIPES[1]),
            calibration_text: eval_text(),
            calibration_tokens: 256,
            qnn_lib: Some(dir.clone()),
        })),
        ..CompileOptions::default()
    };
    let manifest = compile_artifact(&fixture("tiny-qwen2"), &artifact, &options, |_| {}).unwrap();
    let record = manifest.npu.as_ref().unwrap();
    for soc in ["SM8550", "SM8750"] {
        let binary = format!("npu/context-{soc}.bin");
        assert_eq!(record.context_binaries.get(soc), Some(&binary));
        assert!(record.files.contains(&binary));
        assert!(record.files.contains(&format!("npu/context-{soc}.json")));
    }

    let greedy = |backend: NpuBackend| {
        let opened = open_artifact_with(&artifact, None, Some(&backend)).unwrap();
        let mut engine = opened
            .into_engine(oxrelax_runtime::ThreadPool::global())
            .unwrap()
            .engine;
        let prompt = [1u32, 13, 988, 260, 968, 961, 975, 301, 275, 368];
        let mut ids = vec![oxrelax_runtime::sampler::argmax(
            &engine.prefill(&prompt).unwrap(),
        )];
        for _ in 0..7 {
            let logits = engine.decode(ids[ids.len() - 1]).unwrap();
            ids.push(oxrelax_runtime::sampler::argmax(&logits));
        }
        ids
    };
    let htp = |soc: Option<&str>| NpuBackend::Htp {
        lib_dir: Some(dir.clone()),
        soc: soc.map(str::to_string),
    };
    let sim = greedy(NpuBackend::Sim(SimMode::Spec));
    assert_eq!(greedy(htp(None)), sim);
    assert_eq!(greedy(htp(Some("SM8750"))), sim);

    let err = open_artifact_with(&artifact, None, Some(&htp(Some("SM8650"))))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("no context binary for SM8650 (it holds SM8550, SM8750"),
        "{err}"
    );
    let path = artifact.join("npu/context-SM8550.bin");
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    let err = open_artifact_with(&artifact, None, Some(&htp(None)))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("context-SM8550.bin"), "{err}");
}
