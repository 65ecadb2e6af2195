//! The NPU partition (`oxrelax dump-ir --npu qnn`) of every fixture model from its
//! existing DSL definition: every projection runs in an outlined graph of static shapes,
//! attention and the embedding stay on the CPU, the result is well formed and survives
//! print -> parse; snapshots of the tiny Llama's and tiny Qwen3's prefill.

use oxrelax::artifact::{extract_functions, modules_after_passes_of, source_module};
use oxrelax::model::Quantization;
use oxrelax::npu::{partition_pipeline, PartitionNpu, Soc, QNN_HTP};
use oxrelax::passes::Instrument;
use oxrelax_dsl::ir::{BindingValue, Callee};
use oxrelax_dsl::text::{parse_module, print_module};
use oxrelax_dsl::{AttrValue, Expr, Function, IRModule};
use oxrelax_models::{ExportOptions, KvDtype};
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The module of the model in `dir` after `partition-npu` (chunks of 32).
fn partitioned(dir: &Path) -> IRModule {
    let options = ExportOptions {
        max_context: 256,
        prefill_chunk: 64,
        kv_dtype: KvDtype::F32,
        ..ExportOptions::default()
    };
    let module = source_module(dir, &options, Quantization::Auto).unwrap();
    let partition = PartitionNpu {
        soc: Soc::named("SM8650").unwrap(),
        chunk: 32,
        capability: &QNN_HTP,
    };
    let pipeline = partition_pipeline(partition);
    let stages = modules_after_passes_of(pipeline, module, Instrument::default()).unwrap();
    let (stage, module) = stages.last().unwrap();
    assert_eq!(stage, "02-partition-npu");
    module.clone()
}

/// The ops `function` calls, in order.
fn ops(function: &Function) -> Vec<String> {
    let call = |b: &oxrelax_dsl::ir::Binding| match &b.value {
        BindingValue::Expr(Expr::Call(call)) => match &call.callee {
            Callee::Op(op) => Some(op.clone()),
            _ => None,
        },
        _ => None,
    };
    function.bindings().filter_map(call).collect()
}

fn layers(dir: &Path) -> usize {
    let text = std::fs::read_to_string(dir.join("config.json")).unwrap();
    let config: serde_json::Value = serde_json::from_str(&text).unwrap();
    config["num_hidden_layers"].as_u64().unwrap() as usize
}

fn models() -> Vec<PathBuf> {
    let fixtures = root().join("../shared/fixtures/models");
    let mut dirs = vec![root().join("models/assets/tiny-llama")];
    dirs.extend(["tiny-llama", "tiny-qwen2", "tiny-qwen3"].map(|m| fixtures.join(m)));
    dirs
}

#[test]
fn every_model_offloads_its_projections_in_static_graphs() {
    for dir in models() {
        let module = partitioned(&dir);
        let what = dir.display();
        oxrelax_dsl::wellformed::check_module(&module).unwrap_or_else(|e| panic!("{what}: {e}"));
        let text = print_module(&module);
        assert_eq!(
            parse_module(&text).unwrap(),
            module,
            "{what}: print -> parse"
        );
        for (caller, tokens) in [("prefill", 32), ("decode", 1)] {
            let kept = ops(&module.functions[caller]);
            assert!(
                !kept.contains(&"matmul".to_string()),
                "{what} {caller}: {kept:?}"
            );
            assert!(kept.contains(&"attention".to_string()), "{what} {caller}");
            assert!(kept.contains(&"take".to_string()), "{what} {caller}");
            let graphs: Vec<&Function> = (0..)
                .map_while(|k| module.functions.get(&format!("{caller}_npu{k}")))
                .collect();
            // One graph before each layer's attention, one after the last, one for the
            // head (after the CPU selects the last row).
            assert_eq!(graphs.len(), layers(&dir) + 2, "{what} {caller}");
            for graph in graphs {
                let graph_ops = ops(graph);
                assert!(graph_ops.contains(&"matmul".to_string()), "{what}");
                assert!(
                    graph_ops.iter().all(|op| QNN_HTP.rule(op).is_some()),
                    "{what}: {graph_ops:?}"
                );
                let values = graph.params.iter().chain(graph.bindings().map(|b| &b.var));
                assert!(
                    values.into_iter().all(|v| v.sinfo.sym_vars().is_empty()),
                    "{what}"
                );
                assert_eq!(graph.attrs.get("chunk"), Some(&AttrValue::Int(tokens)));
                assert_eq!(
                    graph.attrs.get("codegen"),
                    Some(&AttrValue::Str("qnn".into()))
                );
            }
        }
    }
}

#[test]
fn snapshots_of_partitioned_prefills() {
    let fixtures = root().join("../shared/fixtures/models");
    let cases = [
        ("tiny-llama", root().join("models/assets/tiny-llama")),
        ("tiny-qwen3", fixtures.join("tiny-qwen3")),
    ];
    for (name, dir) in cases {
        let module = partitioned(&dir);
        let mut functions = vec!["prefill".to_string()];
        functions.extend((0..layers(&dir) + 2).map(|k| format!("prefill_npu{k}")));
        let names: Vec<&str> = functions.iter().map(String::as_str).collect();
        let text = print_module(&extract_functions(&module, &names));
        let snapshot = format!("{name}.npu.prefill.partition-npu");
        insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false}, {
            insta::assert_snapshot!(snapshot, text);
        });
    }
}
