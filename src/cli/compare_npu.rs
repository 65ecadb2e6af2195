//! `oxrelax compare MODEL --npu sim --calibration-text FILE`: how far a model's NPU graphs,
//! quantized by the recipe and run on the host reference backend with QNN's quantized
//! semantics, drift from the same graphs in f32, tensor by tensor. The f32 graphs generate
//! greedily from the prompt; the quantized graphs are fed the same tokens (teacher
//! forcing); every activation either computes is recorded, and each tensor's values over
//! the whole run are compared (SQNR, max |diff|, cosine), as are the logits.

use crate::cli::compare::{greedy_with_logits, teacher_forced_drift, CompareArgs, LogitDrift};
use crate::cli::npu::NpuCompileArgs;
use oxrelax::model::LoadOptions;
use oxrelax::npu::compile::quantized_graphs;
use oxrelax::npu::load::{partition_model, Partitioned};
use oxrelax::npu::qnn::emit::float_parts;
use oxrelax::npu::{PartitionNpu, QNN_HTP};
use oxrelax_runtime::engine::Engine;
use oxrelax_runtime::qnn::bind::NpuBackend;
use oxrelax_runtime::qnn::bind::TensorObserver;
use oxrelax_runtime::qnn::sim::{SimMode, TensorGap};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

type CliResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Tensors printed, worst SQNR first.
const SHOWN: usize = 12;

/// Every value each tensor took over a run, in call order.
type Recording = Arc<Mutex<BTreeMap<String, Vec<f32>>>>;

/// An observer appending every tensor's values to `recording`.
fn recorder(recording: Recording) -> TensorObserver {
    Arc::new(move |_graph, tensor, values| {
        let mut recording = recording.lock().unwrap_or_else(PoisonError::into_inner);
        recording
            .entry(tensor.to_string())
            .or_default()
            .extend_from_slice(values);
    })
}

/// An engine running `partitioned`'s graphs (`net` with static data `bin`) in `mode`,
/// and what it records.
fn recording_engine(
    partitioned: &Partitioned,
    net: oxrelax_runtime::qnn::NetFile,
    bin: BTreeMap<String, Vec<u8>>,
    backend: &NpuBackend,
) -> CliResult<(Engine, Recording)> {
    let recording = Recording::default();
    let engine = partitioned.engine(net, bin, backend, Some(recorder(recording.clone())))?;
    Ok((engine, recording))
}

/// The `--json` line of the NPU comparison.
#[derive(Serialize)]
struct NpuCompareJson<'a> {
    recipe: &'static str,
    mode: &'a str,
    #[serde(flatten)]
    drift: LogitDrift,
    generated: usize,
    tensors: Vec<TensorJson>,
}

/// One tensor's gap in the `--json` line.
#[derive(Serialize)]
struct TensorJson {
    name: String,
    sqnr_db: f64,
    max_abs: f64,
    cosine: f64,
}

/// Runs `oxrelax compare MODEL --npu htp|sim|sim-integer`.
pub fn run(args: &CompareArgs, npu: &NpuCompileArgs, backend: &NpuBackend) -> CliResult<()> {
    let compile = npu.npu_compile(args.load.npu.qnn_lib.as_deref())?;
    let load = LoadOptions {
        max_context: args
            .load
            .max_context
            .unwrap_or(LoadOptions::default().max_context),
        ..LoadOptions::default()
    };
    let partition = PartitionNpu {
        soc: compile.soc,
        chunk: compile.chunk,
        capability: &QNN_HTP,
    };
    let partitioned = partition_model(&args.model, &load, partition, &compile.chunk_variants)?;
    let graphs = quantized_graphs(&partitioned, &args.model, &compile, "oxrelax compare")?;
    let tokenizer = oxrelax_runtime::chat::Tokenizer::for_model(&args.model)?
        .ok_or_else(|| format!("{} has no tokenizer.json", args.model.display()))?;
    let prompt = tokenizer.encode(&args.prompt, true)?;

    let (net, bin) = float_parts(&partitioned.net);
    let (mut reference, float_values) =
        recording_engine(&partitioned, net, bin, &NpuBackend::Sim(SimMode::Float))?;
    let generation = greedy_with_logits(&mut reference, &prompt, args.max_new_tokens)?;
    drop(reference);

    let statics = graphs.quantized.statics.clone();
    let (mut quantized, quantized_values) =
        recording_engine(&partitioned, graphs.net, statics, backend)?;
    let drift = teacher_forced_drift(&mut quantized, &prompt, &generation)?;
    drop(quantized);

    let gaps = tensor_gaps(&float_values, &quantized_values);
    let recipe = graphs.quantized.recipe.name;
    // The `--npu` value that asked for `mode`.
    let backend = args.load.npu.npu.as_deref().unwrap_or("sim");
    print_report(recipe, backend, &drift, &gaps);
    if args.json {
        let line = NpuCompareJson {
            recipe,
            mode: backend,
            drift,
            generated: generation.ids.len(),
            tensors: gaps
                .into_iter()
                .map(|g| TensorJson {
                    name: g.name,
                    sqnr_db: g.sqnr_db,
                    max_abs: g.max_abs,
                    cosine: g.cosine,
                })
                .collect(),
        };
        println!("{}", serde_json::to_string(&line)?);
    }
    Ok(())
}

/// Each tensor both runs recorded, compared over all its values, worst SQNR first.
fn tensor_gaps(reference: &Recording, test: &Recording) -> Vec<TensorGap> {
    let lock = |r: &Recording| r.lock().unwrap_or_else(PoisonError::into_inner).clone();
    let (reference, test) = (lock(reference), lock(test));
    let mut gaps: Vec<TensorGap> = reference
        .iter()
        .filter_map(|(name, values)| {
            let other = test.get(name)?;
            Some(TensorGap::between(name, values, other))
        })
        .collect();
    gaps.sort_by(|a, b| a.sqnr_db.total_cmp(&b.sqnr_db));
    gaps
}

fn print_report(recipe: &str, backend: &str, drift: &LogitDrift, gaps: &[TensorGap]) {
    println!(
        "NPU graphs ({recipe}, --npu {}) against the same graphs in f32 over {} logit rows: \
         max |diff| {:.3e}, top-1 agreement {:.1}%",
        backend,
        drift.rows,
        drift.max_abs_diff,
        100.0 * drift.top1_agreement
    );
    println!("{} tensors compared; the worst by SQNR:", gaps.len());
    for gap in gaps.iter().take(SHOWN) {
        println!(
            "  {:>7.1} dB  max |diff| {:.3e}  cosine {:.6}  {}",
            gap.sqnr_db, gap.max_abs, gap.cosine, gap.name
        );
    }
}
