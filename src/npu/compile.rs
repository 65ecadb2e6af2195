//! `oxrelax compile --npu qnn`: the model's prefill and decode partitioned, their NPU
//! graphs lowered to QNN, calibrated on a text (on the host reference backend),
//! quantized by a recipe (W4A16 by default), validated, and written to `npu/`.

use super::load::{partition_model, NpuError};
use super::qnn::emit::{net_file, write_npu_dir};
use super::qnn::recipe::{quantize, Recipe};
use super::qnn::validate::{validate, ValidateOptions};
use super::{PartitionNpu, Soc, QNN_HTP};
use crate::model::LoadOptions;
use std::path::Path;

/// Tokens of the calibration text run, by default (half through prefill, half through
/// decode).
pub const CALIBRATION_TOKENS: usize = 256;

/// How to compile a model's NPU part.
#[derive(Debug, Clone)]
pub struct NpuCompileOptions {
    /// The SoC.
    pub soc: Soc,
    /// Tokens per prefill graph call.
    pub chunk: i64,
    /// The quantization recipe.
    pub recipe: Recipe,
    /// The calibration text.
    pub calibration_text: String,
    /// How many of its tokens to run.
    pub calibration_tokens: usize,
    /// Context and KV options of the CPU part.
    pub load: LoadOptions,
    /// The command line, recorded in the emitted files.
    pub command: String,
}

/// What was written.
#[derive(Debug, Clone)]
pub struct NpuSummary {
    /// Graphs in the context.
    pub graphs: usize,
    /// QNN nodes in all graphs.
    pub nodes: usize,
    /// Bytes of static data (`model.bin`'s payload).
    pub static_bytes: usize,
    /// Tensors calibrated.
    pub calibrated: usize,
}

/// Compiles the NPU part of the model in `model` into `npu_dir`.
pub fn compile_npu(
    model: &Path,
    npu_dir: &Path,
    options: &NpuCompileOptions,
) -> Result<NpuSummary, NpuError> {
    let partition = PartitionNpu {
        soc: options.soc,
        chunk: options.chunk,
        capability: &QNN_HTP,
    };
    let partitioned = partition_model(model, &options.load, partition)?;
    let ranges = partitioned.calibrate(
        model,
        &options.calibration_text,
        options.calibration_tokens,
        options.recipe,
    )?;
    let quantized = quantize(&partitioned.net, &ranges, options.recipe)?;
    let net = net_file(&partitioned.net, &quantized.graph, &options.command);
    let report = validate(&net, &quantized.statics, &ValidateOptions::default());
    if !report.is_clean() {
        let violations: Vec<String> = report.violations.iter().map(ToString::to_string).collect();
        return Err(NpuError::Invalid(violations.join("\n")));
    }
    write_npu_dir(npu_dir, &net, &quantized, &options.soc)?;
    Ok(NpuSummary {
        graphs: net.graphs.len(),
        nodes: net.graph.nodes.len(),
        static_bytes: quantized.statics.values().map(Vec::len).sum(),
        calibrated: ranges.len(),
    })
}
