//! QNN emission of every fixture model from its DSL definition: partitioned, calibrated
//! on the evaluation text (float graphs on the host reference backend), quantized by the
//! W4A16 recipe, validated; the quantized graphs run in the reference backend's spec
//! mode agree with transformers' greedy ids; the written `npu/` folder passes
//! `qnn-validate`; a snapshot of the tiny Llama's graph structure.

mod common;

use common::{eval_text, fixture};
use oxrelax::artifact::{compile_artifact, open_artifact_with, CompileOptions};
use oxrelax::model::LoadOptions;
use oxrelax::npu::compile::NpuCompile;
use oxrelax::npu::load::{partition_model, Partitioned};
use oxrelax::npu::qnn::emit::{float_parts, net_file, write_npu_dir, NPU_FILES};
use oxrelax::npu::qnn::recipe::{quantize, QuantizedNet, Recipe, RecipeChoice, RECIPES};
use oxrelax::npu::qnn::validate::{validate, validate_dir, ValidateOptions};
use oxrelax::npu::{PartitionNpu, Soc, QNN_HTP};
use oxrelax_runtime::qnn::bind::NpuBackend;
use oxrelax_runtime::qnn::sim::SimMode;
use oxrelax_runtime::qnn::{NetFile, QnnDataType};
use oxrelax_runtime::trace::Timeline;
use oxrelax_runtime::Engine;
use std::fmt::Write;
use std::path::Path;
use std::sync::Arc;

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
    partition_model(dir, &load_options(), partition, &[]).unwrap()
}

/// The W4A16 graphs of `model` (calibrated on 256 tokens of the evaluation text).
fn w4a16(model: &Partitioned, dir: &Path) -> (NetFile, QuantizedNet) {
    let ids = model.calibration_ids(dir, &eval_text(), 256).unwrap();
    let ranges = model.calibrate(&ids, W4A16).unwrap();
    let quantized = quantize(&model.net, &ranges, W4A16).unwrap();
    (net_file(&model.net, &quantized.graph, "test"), quantized)
}

const W4A16: Recipe = RECIPES[0];

/// Greedy ids after `prompt` from `engine`.
fn greedy(mut engine: Engine, prompt: &[u32], steps: usize) -> Vec<u32> {
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

/// Perplexity of the tokens of `ids` after the first, fed one at a time (prefill of one
/// token, then decode: both kinds of graph run).
fn teacher_forced_ppl(mut engine: Engine, ids: &[u32]) -> f64 {
    let mut logits = engine.prefill(&ids[..1]).unwrap();
    let mut nll = 0.0f64;
    for &next in &ids[1..] {
        let max = logits.iter().fold(f32::MIN, |a, &b| a.max(b));
        let z: f64 = logits.iter().map(|&l| ((l - max) as f64).exp()).sum();
        nll += z.ln() - (logits[next as usize] - max) as f64;
        logits = engine.decode(next).unwrap();
    }
    (nll / (ids.len() - 1) as f64).exp()
}

/// On every fixture: the float graphs on the reference backend reproduce transformers'
/// greedy ids exactly (partition, lowering, chunk padding and the backend's ops are
/// right); W4A16 in spec mode (uint16 activations requantized after every op) follows
/// its int4 weights alone (float mode) on >= 90% of greedy ids, and its perplexity
/// drifts <= 5% from the float graphs' (on text past the calibration's); W8A16 follows
/// transformers' greedy ids on >= 90%. W4A16's own greedy agreement with transformers
/// is printed: int4 weights move a 64-wide model's greedy path (the CPU's q4f32_1 too).
#[test]
fn npu_graphs_on_the_reference_backend_follow_transformers() {
    let text = eval_text();
    for name in ["tiny-llama", "tiny-qwen2", "tiny-qwen3"] {
        let dir = fixture(name);
        let model = partitioned(&dir);
        let reference: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("reference.json")).unwrap())
                .unwrap();
        let prompts: Vec<(Vec<u32>, Vec<u32>)> = reference["prompts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let ids = serde_json::from_value(p["input_ids"].clone()).unwrap();
                let want: Vec<u32> = serde_json::from_value(p["greedy_ids"].clone()).unwrap();
                (ids, want[..16].to_vec())
            })
            .collect();
        let float_engine = || {
            let (net, bin) = float_parts(&model.net);
            model
                .engine(net, bin, &NpuBackend::Sim(SimMode::Float), None)
                .unwrap()
        };
        for (ids, want) in &prompts {
            assert_eq!(
                &greedy(float_engine(), ids, 16),
                want,
                "{name}: float NPU graphs"
            );
        }
        let total = 16 * prompts.len();
        let mut figures = Vec::new();
        for recipe in RECIPES {
            let ids = model.calibration_ids(&dir, &text, 256).unwrap();
            let ranges = model.calibrate(&ids, *recipe).unwrap();
            let quantized = quantize(&model.net, &ranges, *recipe).unwrap();
            let net = net_file(&model.net, &quantized.graph, "test");
            let report = validate(&net, &quantized.statics, &ValidateOptions::default());
            assert!(
                report.is_clean(),
                "{name} {}: {:?}",
                recipe.name,
                report.violations
            );
            let engine = |mode| {
                model
                    .engine(
                        net.clone(),
                        quantized.statics.clone(),
                        &NpuBackend::Sim(mode),
                        None,
                    )
                    .unwrap()
            };
            let (mut vs_weights, mut vs_hf) = (0, 0);
            for (ids, want) in &prompts {
                let spec = greedy(engine(SimMode::Spec), ids, 16);
                vs_weights += agreement(&spec, &greedy(engine(SimMode::Float), ids, 16));
                vs_hf += agreement(&spec, want);
            }
            let held_out = oxrelax_runtime::Tokenizer::from_dir(&dir)
                .unwrap()
                .encode(&text[text.len() / 2..], true)
                .unwrap();
            let ids = &held_out[..160];
            let (float, spec) = (
                teacher_forced_ppl(float_engine(), ids),
                teacher_forced_ppl(engine(SimMode::Spec), ids),
            );
            let drift = (spec - float) / float;
            figures.push(format!(
                "{}: greedy vs weights alone {vs_weights}/{total}, vs transformers {vs_hf}/{total}, ppl {spec:.3} (float {float:.3}, drift {:+.2}%)",
                recipe.name,
                100.0 * drift
            ));
            assert!(
                vs_weights * 10 >= total * 9,
                "{name}: {}",
                figures.join("; ")
            );
            assert!(drift <= 0.05, "{name}: {}", figures.join("; "));
            if recipe.weight_bits == 8 {
                assert!(vs_hf * 10 >= total * 9, "{name}: {}", figures.join("; "));
            }
        }
        eprintln!("{name}: {}", figures.join("; "));
    }
}

/// `compile --npu qnn` writes an artifact whose `npu/` folder validates, which refuses to
/// load without an NPU backend, and which runs with the reference backend (its CPU part
/// calling the graphs) as the graphs did before they were written; a tampered graph file
/// fails the artifact's hash check.
#[test]
fn an_npu_artifact_validates_and_runs_on_the_reference_backend() {
    let dir = fixture("tiny-qwen2");
    let out = tempfile::tempdir().unwrap();
    let artifact = out.path().join("artifact");
    let options = CompileOptions {
        max_context: 256,
        npu: Some(Arc::new(NpuCompile {
            soc: Soc::named("SM8650").unwrap(),
            more_socs: Vec::new(),
            chunk: 32,
            chunk_variants: vec![8],
            recipe: RecipeChoice::Named(W4A16),
            calibration_text: eval_text(),
            calibration_tokens: 256,
            qnn_lib: None,
        })),
        ..CompileOptions::default()
    };
    let manifest = compile_artifact(&dir, &artifact, &options, |_| {}).unwrap();
    let npu = artifact.join("npu");
    let record = manifest.npu.as_ref().unwrap();
    for file in &record.files {
        assert!(artifact.join(file).is_file(), "{file}");
    }
    let report = validate_dir(&artifact, &ValidateOptions::default()).unwrap();
    assert!(report.is_clean(), "{:?}", report.violations);
    let cpp = std::fs::read_to_string(npu.join("model.cpp")).unwrap();
    assert!(cpp.contains("QnnModel_composeGraphs") && cpp.contains("\"Conv2d\""));

    let err = open_artifact_with(&artifact, None, None)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("--npu sim"), "{err}");
    let htp = NpuBackend::Htp {
        lib_dir: None,
        soc: None,
    };
    let err = open_artifact_with(&artifact, None, Some(&htp))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("has no context binary for SM8650"), "{err}");
    let engine = |mode| {
        let opened = open_artifact_with(&artifact, None, Some(&NpuBackend::Sim(mode))).unwrap();
        opened
            .into_engine(oxrelax_runtime::ThreadPool::global())
            .unwrap()
            .engine
    };
    let model = partitioned(&dir);
    let (net, quantized) = w4a16(&model, &dir);
    let prompt = [
        1u32, 13, 988, 260, 968, 961, 975, 301, 275, 368, 824, 328, 828, 291, 269, 281, 732, 13,
        988,
    ];
    let in_memory = greedy(
        model
            .engine(
                net,
                quantized.statics,
                &NpuBackend::Sim(SimMode::Spec),
                None,
            )
            .unwrap(),
        &prompt,
        8,
    );
    assert_eq!(greedy(engine(SimMode::Spec), &prompt, 8), in_memory);
    assert_eq!(greedy(engine(SimMode::Integer), &prompt, 8).len(), 8);

    let net_path = npu.join("model_net.json");
    let mut text = std::fs::read_to_string(&net_path).unwrap();
    text = text.replacen("\"scale\": ", "\"scale\": 1", 1);
    std::fs::write(&net_path, text).unwrap();
    let err = open_artifact_with(&artifact, None, Some(&NpuBackend::Sim(SimMode::Spec)))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("model_net.json"), "{err}");
}

/// The tiny Llama's graphs: nodes in order with their op types, operands and params, and
/// every tensor's kind, type and dims (encodings depend on calibration, so they are left
/// out; the tests above check them).
#[test]
fn tiny_llama_graph_structure_snapshot() {
    let dir = fixture("tiny-llama");
    let model = partitioned(&dir);
    let (net, _) = w4a16(&model, &dir);
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

/// Per graph of the tiny Llama (a layer's projections each), on the inputs a real prompt
/// gives it: how far spec mode (uint16 activations) is from float mode (the same int4
/// weights, f32 activations), and integer mode from spec mode, as the worst SQNR over the
/// graph's tensors. Printed for the record; each must keep 40 dB.
#[test]
fn per_graph_sqnr_of_the_quantized_modes() {
    use oxrelax_runtime::qnn::bind::TensorObserver;
    use oxrelax_runtime::qnn::sim::SimContext;
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};
    let dir = fixture("tiny-llama");
    let model = partitioned(&dir);
    let (net, quantized) = w4a16(&model, &dir);
    let inputs: Arc<Mutex<BTreeMap<String, Vec<f32>>>> = Arc::default();
    let captured = inputs.clone();
    let graph_inputs: Vec<String> = net.graphs.iter().flat_map(|g| g.inputs.clone()).collect();
    let observer: TensorObserver = Arc::new(move |_, tensor, values| {
        if graph_inputs.iter().any(|i| i == tensor) {
            captured
                .lock()
                .unwrap()
                .entry(tensor.to_string())
                .or_insert_with(|| values.to_vec());
        }
    });
    let engine = model
        .engine(
            net.clone(),
            quantized.statics.clone(),
            &NpuBackend::Sim(SimMode::Float),
            Some(observer),
        )
        .unwrap();
    let prompt: Vec<u32> = (0..40).map(|i| (i * 37 + 5) % 1000 + 3).collect();
    greedy(engine, &prompt, 4);
    let sim = SimContext::from_parts(net.clone(), quantized.statics).unwrap();
    let inputs = inputs.lock().unwrap();
    let worst = |a, b, values: &[&[f32]], graph: &str| {
        let gaps = sim.gaps(graph, values, a, b).unwrap();
        gaps.iter().map(|g| g.sqnr_db).fold(f64::INFINITY, f64::min)
    };
    let mut lines = Vec::new();
    for graph in net
        .graphs
        .iter()
        .filter(|g| !g.name.starts_with("prefill_all"))
    {
        let values: Vec<&[f32]> = graph.inputs.iter().map(|i| inputs[i].as_slice()).collect();
        let spec = worst(SimMode::Float, SimMode::Spec, &values, &graph.name);
        let integer = worst(SimMode::Spec, SimMode::Integer, &values, &graph.name);
        lines.push(format!(
            "{}: spec vs float {spec:.1} dB, integer vs spec {integer:.1} dB",
            graph.name
        ));
        assert!(spec >= 40.0 && integer >= 40.0, "{}", lines.join("\n"));
    }
    eprintln!("{}", lines.join("\n"));
}

/// A copy of the tiny Llama with its first layer only, in `out`.
fn one_layer_llama(out: &Path) {
    let dir = fixture("tiny-llama");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if path.is_file() && !name.ends_with(".safetensors") && name != "config.json" {
            std::fs::write(out.join(&name), std::fs::read(&path).unwrap()).unwrap();
        }
    }
    let config = std::fs::read_to_string(dir.join("config.json")).unwrap();
    let mut config: serde_json::Value = serde_json::from_str(&config).unwrap();
    config["num_hidden_layers"] = 1.into();
    std::fs::write(out.join("config.json"), config.to_string()).unwrap();
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let tensors = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let kept: Vec<_> = (tensors.tensors().into_iter())
        .filter(|(name, _)| !name.contains("layers.1."))
        .collect();
    safetensors::serialize_to_file(kept, None, &out.join("model.safetensors")).unwrap();
}

/// Entries of a long array kept in a snapshot.
const SHOWN: usize = 4;

/// `json` with every array of more than [`SHOWN`] numbers or objects (scales, encodings)
/// cut to its first ones and a count.
fn elide_json(json: &mut serde_json::Value) {
    match json {
        serde_json::Value::Array(items)
            if items.len() > SHOWN && (items[0].is_number() || items[0].is_object()) =>
        {
            let n = items.len();
            items.truncate(SHOWN);
            items.push(format!("... {n} values").into());
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(elide_json),
        serde_json::Value::Object(fields) => fields.values_mut().for_each(elide_json),
        _ => {}
    }
}

/// `cpp` with every static array initializer (`[] = {...};`) of more than [`SHOWN`]
/// entries cut to its first ones and a count.
fn elide_cpp(cpp: &str) -> String {
    let line = |line: &str| {
        let Some((head, rest)) = line.split_once("[] = {") else {
            return line.to_string();
        };
        let body = rest.trim_end_matches("};");
        let separator = if body.starts_with('{') { "}, {" } else { ", " };
        let entries: Vec<&str> = body.split(separator).collect();
        if entries.len() <= SHOWN {
            return line.to_string();
        }
        let n = entries.len();
        let shown = entries[..SHOWN].join(separator);
        let close = if separator == ", " { "" } else { "}" };
        format!("{head}[] = {{{shown}{close}, /* ... {n} entries */}};")
    };
    cpp.lines().map(line).collect::<Vec<_>>().join("\n")
}

/// What `compile --npu qnn` writes for a one-layer model, file by file (all but the
/// binary `model.bin`; long arrays of numbers cut to their first entries). Activation
/// encodings come from fixed ranges ([-4, 4]) rather than a calibration, whose ranges
/// move in the last digits with the CPU's kernels.
#[test]
fn one_layer_npu_files_snapshots() {
    let model = tempfile::tempdir().unwrap();
    one_layer_llama(model.path());
    let partitioned = partitioned(model.path());
    let ranges = (partitioned.net.graph.tensors.keys())
        .map(|name| (name.clone(), (-4.0, 4.0)))
        .collect();
    let quantized = quantize(&partitioned.net, &ranges, W4A16).unwrap();
    let net = net_file(&partitioned.net, &quantized.graph, "snapshot");
    let out = tempfile::tempdir().unwrap();
    write_npu_dir(
        out.path(),
        &net,
        &quantized,
        &[Soc::named("SM8650").unwrap()],
        None,
    )
    .unwrap();
    let written = validate_dir(out.path(), &ValidateOptions::default()).unwrap();
    assert!(written.is_clean(), "{written:?}");
    for file in NPU_FILES.iter().filter(|f| !f.ends_with(".bin")) {
        let mut text = std::fs::read_to_string(out.path().join(file)).unwrap();
        if file.ends_with(".json") {
            let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
            elide_json(&mut json);
            text = serde_json::to_string_pretty(&json).unwrap();
        } else if file.ends_with(".cpp") {
            text = elide_cpp(&text);
        }
        insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false}, {
            insta::assert_snapshot!(format!("one-layer-llama.npu.{file}"), text);
        });
    }
}

/// `compare --npu sim`: every NPU tensor of the W8A16 graphs against the same graphs in
/// f32 over a generation, and the logits.
#[test]
fn compare_reports_every_npu_tensor_against_f32() {
    let text =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/text/shakespeare-eval.txt");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_oxrelax"))
        .args([
            "compare",
            fixture("tiny-llama").to_str().unwrap(),
            "--npu",
            "sim",
        ])
        .args([
            "--calibration-text",
            text.to_str().unwrap(),
            "--npu-recipe",
            "w8a16",
        ])
        .args(["--prompt", "To be, or not to be", "--max-new-tokens", "8"])
        .args(["--max-context", "256", "--json"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(json["recipe"], "w8a16");
    let tensors = json["tensors"].as_array().unwrap();
    assert!(tensors.len() > 20, "{}", tensors.len());
    for tensor in tensors {
        let sqnr = tensor["sqnr_db"].as_f64().unwrap_or(f64::INFINITY);
        assert!(sqnr > 25.0, "{tensor}");
        assert!(tensor["cosine"].as_f64().unwrap() > 0.99, "{tensor}");
    }
    assert!(json["top1_agreement"].as_f64().unwrap() >= 0.9, "{json}");
}

/// Graph selection: with variants of 8 tokens, a 40-token prompt runs its last 8 tokens
/// on the 8-token variants (no padding to 32), with the logits of the 32-token graphs; the
/// quantized net with its variants validates.
#[test]
fn a_short_chunk_runs_the_variant_with_the_least_padding() {
    let dir = fixture("tiny-llama");
    let plain = partitioned(&dir);
    let partition = PartitionNpu {
        soc: Soc::named("SM8650").unwrap(),
        chunk: 32,
        capability: &QNN_HTP,
    };
    let with = partition_model(&dir, &load_options(), partition, &[8]).unwrap();
    let names: Vec<&str> = with.net.graphs.iter().map(|g| g.name.as_str()).collect();
    assert!(names.contains(&"prefill_npu0_t8") && names.contains(&"prefill_all_npu0_t8"));
    assert!(!names
        .iter()
        .any(|n| n.starts_with("decode") && n.ends_with("_t8")));
    let prompt: Vec<u32> = (0..40).map(|i| 100 + i * 7).collect();
    let logits = |model: &Partitioned, timeline: Option<Arc<Timeline>>| {
        let (net, bin) = float_parts(&model.net);
        let mut engine = model
            .engine(net, bin, &NpuBackend::Sim(SimMode::Float), None)
            .unwrap();
        engine.set_timeline(timeline);
        engine.prefill_all(&prompt).unwrap()
    };
    let timeline = Timeline::new();
    assert_eq!(logits(&with, Some(timeline.clone())), logits(&plain, None));
    let ran: Vec<String> = timeline.spans().into_iter().map(|s| s.name).collect();
    assert!(ran.iter().any(|n| n == "prefill_all_npu0_t8"), "{ran:?}");
    assert_eq!(
        ran.iter()
            .filter(|n| n.as_str() == "prefill_all_npu0")
            .count(),
        1
    );

    let (net, quantized) = w4a16(&with, &dir);
    let report = validate(&net, &quantized.statics, &ValidateOptions::default());
    assert!(report.is_clean(), "{:?}", report.violations);
}
