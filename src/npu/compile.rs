//! `oxrelax compile --npu qnn`: the model's prefill, prefill_all and decode partitioned,
//! their NPU graphs lowered to QNN, calibrated on a text (on the host reference backend),
//! quantized by a recipe (by default the fewest weight bits that keep the float graphs'
//! next-token predictions on the text, [`RecipeChoice::Auto`]) and validated; the artifact writer then
//! compiles the partitioned CPU part and writes the graphs to `npu/`.

use super::load::{partition_model, NpuError, Partitioned};
use super::qnn::emit::{float_parts, net_file};
use super::qnn::recipe::{quantize, QuantizedNet, RecipeChoice, AUTO_MIN_AGREEMENT};
use super::qnn::validate::{validate, ValidateOptions};
use super::{PartitionNpu, Soc, QNN_HTP};
use crate::model::LoadOptions;
use oxrelax_dsl::IRModule;
use oxrelax_runtime::qnn::net::NetFile;
use oxrelax_runtime::qnn::sim::SimMode;
use std::path::{Path, PathBuf};

/// Tokens of the calibration text run, by default (half through prefill, half through
/// decode).
pub const CALIBRATION_TOKENS: usize = 256;

/// How to compile a model's NPU part.
#[derive(Debug, Clone)]
pub struct NpuCompile {
    /// The SoC the graphs are partitioned for, and the first of [`NpuCompile::socs`].
    pub soc: Soc,
    /// More SoCs to store a context binary for (with `qnn_lib`), after `soc`'s.
    pub more_socs: Vec<Soc>,
    /// Tokens per prefill graph call (also the CPU part's prefill chunk).
    pub chunk: i64,
    /// Fewer tokens per call that the prefill graphs also get variants for (a call runs
    /// the one with the least padding).
    pub chunk_variants: Vec<i64>,
    /// The quantization recipe, or how to choose it.
    pub recipe: RecipeChoice,
    /// The calibration text.
    pub calibration_text: String,
    /// How many of its tokens to run.
    pub calibration_tokens: usize,
    /// The folder holding Qualcomm's libQnnHtp.so, to build the graphs with it and store
    /// the SoC's context binary; without it the artifact has no context binary
    /// (`--npu htp` refuses it; `--npu sim` runs it).
    pub qnn_lib: Option<PathBuf>,
}

impl NpuCompile {
    /// Every SoC a context binary is stored for: `soc`, then `more_socs`.
    pub fn socs(&self) -> Vec<Soc> {
        std::iter::once(self.soc)
            .chain(self.more_socs.iter().copied())
            .collect()
    }
}

/// A model's NPU part: the partitioned module (its CPU part calls `npu.<graph>`) and the
/// graphs, quantized and validated.
pub struct NpuParts {
    /// The module after the partition.
    pub module: IRModule,
    /// The graphs, quantized and validated.
    pub graphs: QuantizedGraphs,
}

/// Partitions, lowers, calibrates, quantizes and validates the NPU part of the model in
/// `model` (`load` gives the context and KV options; the prefill chunk is the NPU's).
pub fn npu_parts(
    model: &Path,
    load: &LoadOptions,
    npu: &NpuCompile,
    command: &str,
) -> Result<NpuParts, NpuError> {
    let partition = PartitionNpu {
        soc: npu.soc,
        chunk: npu.chunk,
        capability: &QNN_HTP,
    };
    let partitioned = partition_model(model, load, partition, &npu.chunk_variants)?;
    let graphs = quantized_graphs(&partitioned, model, npu, command)?;
    Ok(NpuParts {
        module: partitioned.module,
        graphs,
    })
}

/// The NPU graphs of a partitioned model, quantized and validated.
pub struct QuantizedGraphs {
    /// The graphs (`model_net.json`).
    pub net: NetFile,
    /// Their types, encodings and static data.
    pub quantized: QuantizedNet,
    /// With [`RecipeChoice::Auto`]: each recipe tried, with the share of the calibration
    /// text's positions where its graphs predict the float graphs' next token.
    pub agreement: Vec<(&'static str, f64)>,
}

/// Calibrates `partitioned`'s graphs on the text `npu` names (tokenized by the model in
/// `model`), quantizes them by its recipe (trying each in turn for
/// [`RecipeChoice::Auto`]) and validates them.
pub fn quantized_graphs(
    partitioned: &Partitioned,
    model: &Path,
    npu: &NpuCompile,
    command: &str,
) -> Result<QuantizedGraphs, NpuError> {
    let ids = partitioned.calibration_ids(model, &npu.calibration_text, npu.calibration_tokens)?;
    let auto = npu.recipe == RecipeChoice::Auto;
    let reference = match auto {
        true => {
            let (net, bin) = float_parts(&partitioned.net);
            Some(partitioned.top1(net, bin, SimMode::Float, &ids)?)
        }
        false => None,
    };
    let candidates = npu.recipe.candidates();
    let mut agreement = Vec::new();
    for (i, recipe) in candidates.iter().enumerate() {
        let ranges = partitioned.calibrate(&ids, *recipe)?;
        let quantized = quantize(&partitioned.net, &ranges, *recipe)?;
        let net = net_file(&partitioned.net, &quantized.graph, command);
        if let Some(reference) = &reference {
            let top1 =
                partitioned.top1(net.clone(), quantized.statics.clone(), SimMode::Spec, &ids)?;
            let same = top1.iter().zip(reference).filter(|(a, b)| a == b).count();
            let share = same as f64 / reference.len().max(1) as f64;
            agreement.push((recipe.name, share));
            if share < AUTO_MIN_AGREEMENT && i + 1 < candidates.len() {
                continue;
            }
        }
        let report = validate(&net, &quantized.statics, &ValidateOptions::default());
        if !report.is_clean() {
            let violations: Vec<String> =
                report.violations.iter().map(ToString::to_string).collect();
            return Err(NpuError::Invalid(violations.join("\n")));
        }
        return Ok(QuantizedGraphs {
            net,
            quantized,
            agreement,
        });
    }
    Err(NpuError::Calibration("no NPU recipe to apply".into()))
}
