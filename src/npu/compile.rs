//! `oxrelax compile --npu qnn`: the model's prefill, prefill_all and decode partitioned,
//! their NPU graphs lowered to QNN, calibrated on a text (on the host reference backend),
//! quantized by a recipe (W4A16 by default) and validated; the artifact writer then
//! compiles the partitioned CPU part and writes the graphs to `npu/`.

use super::load::{partition_model, NpuError};
use super::qnn::emit::net_file;
use super::qnn::recipe::{quantize, QuantizedNet, Recipe};
use super::qnn::validate::{validate, ValidateOptions};
use super::{PartitionNpu, Soc, QNN_HTP};
use crate::model::LoadOptions;
use oxrelax_dsl::IRModule;
use oxrelax_runtime::qnn::net::NetFile;
use std::path::Path;

/// Tokens of the calibration text run, by default (half through prefill, half through
/// decode).
pub const CALIBRATION_TOKENS: usize = 256;

/// How to compile a model's NPU part.
#[derive(Debug, Clone)]
pub struct NpuCompile {
    /// The SoC.
    pub soc: Soc,
    /// Tokens per prefill graph call (also the CPU part's prefill chunk).
    pub chunk: i64,
    /// The quantization recipe.
    pub recipe: Recipe,
    /// The calibration text.
    pub calibration_text: String,
    /// How many of its tokens to run.
    pub calibration_tokens: usize,
}

/// A model's NPU part: the partitioned module (its CPU part calls `npu.<graph>`) and the
/// graphs, quantized and validated.
pub struct NpuParts {
    /// The module after the partition.
    pub module: IRModule,
    /// The graphs (`model_net.json`).
    pub net: NetFile,
    /// Their types, encodings and static data.
    pub quantized: QuantizedNet,
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
    let partitioned = partition_model(model, load, partition)?;
    let ranges = partitioned.calibrate(
        model,
        &npu.calibration_text,
        npu.calibration_tokens,
        npu.recipe,
    )?;
    let quantized = quantize(&partitioned.net, &ranges, npu.recipe)?;
    let net = net_file(&partitioned.net, &quantized.graph, command);
    let report = validate(&net, &quantized.statics, &ValidateOptions::default());
    if !report.is_clean() {
        let violations: Vec<String> = report.violations.iter().map(ToString::to_string).collect();
        return Err(NpuError::Invalid(violations.join("\n")));
    }
    Ok(NpuParts {
        module: partitioned.module,
        net,
        quantized,
    })
}
