//! A partitioned model's NPU graphs as packed functions: each graph of an `npu/` folder
//! is registered as `npu.<graph>`, which the compiled CPU part calls on the graph's
//! activations, executed by a [`GraphRunner`]: the host reference backend
//! ([`super::sim`]) or Qualcomm's HTP library ([`super::htp`]). A
//! prefill graph runs full chunks: a shorter call runs the graph's variant with the
//! fewest tokens that holds it (graph selection), its rows padded with zeros along the
//! token axis and its outputs cut back (every NPU op works row by row, so padding changes
//! no real row).

use super::device::NpuDevice;
use super::htp::HtpContext;
use super::net::{GraphSpec, NetFile};
use super::sim::{Observer, SimContext, SimMode};
use crate::artifact::{ArtifactError, GraphBackend, NpuRecord, NPU_DIR};
use crate::packed::{Args, BuiltinError, BuiltinFailure};
use crate::{Registry, Tensor, Value, ValueKind};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// Receives every non-static tensor a graph call computes (its inputs first, padded to
/// the graph's tokens): the graph's name, the tensor's name and its values.
pub type TensorObserver = Arc<dyn Fn(&str, &str, &[f32]) + Send + Sync>;

/// Which backend runs an artifact's NPU graphs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NpuBackend {
    /// The host reference backend in this mode.
    Sim(SimMode),
    /// Qualcomm's HTP library (from this folder, else [`super::htp::LIB_DIR_ENV`]'s),
    /// running the artifact's context binary for a SoC.
    Htp {
        /// The folder holding `libQnnHtp.so`.
        lib_dir: Option<std::path::PathBuf>,
        /// The SoC whose context binary runs (default: the artifact's first).
        soc: Option<String>,
    },
}

/// The names of the backends (`--npu`, `oxrelax_open_npu`), in [`NpuBackend::named`].
pub const BACKEND_NAMES: [&str; 3] = ["htp", "sim", "sim-integer"];

impl NpuBackend {
    /// The backend named `name` (one of [`BACKEND_NAMES`]), HTP's from `lib_dir` for
    /// `soc`.
    pub fn named(
        name: &str,
        lib_dir: Option<std::path::PathBuf>,
        soc: Option<String>,
    ) -> Option<NpuBackend> {
        match name {
            "htp" => Some(NpuBackend::Htp { lib_dir, soc }),
            "sim" => Some(NpuBackend::Sim(SimMode::Spec)),
            "sim-integer" => Some(NpuBackend::Sim(SimMode::Integer)),
            _ => None,
        }
    }
}

/// The runner of the graphs in the `npu/` folder `npu_dir` (compiled for `soc`) on
/// `backend`.
pub fn open_runner(
    npu_dir: &std::path::Path,
    soc: &str,
    backend: &NpuBackend,
) -> Result<Arc<dyn GraphRunner>, Box<dyn std::error::Error + Send + Sync>> {
    Ok(match backend {
        NpuBackend::Sim(mode) => Arc::new(SimRunner {
            sim: SimContext::load(npu_dir)?,
            mode: *mode,
        }),
        NpuBackend::Htp { lib_dir, .. } => Arc::new(super::htp::stored::open_context_binary(
            npu_dir,
            soc,
            lib_dir.as_deref(),
        )?),
    })
}

impl GraphBackend for NpuBackend {
    /// Runs the graphs of the artifact's `npu/` folder: on the host reference backend for
    /// the SoC they were compiled for, or on HTP from the context binary of the SoC asked
    /// for (default: the record's).
    fn register(
        &self,
        dir: &Path,
        record: &NpuRecord,
        builtins: &mut Registry,
    ) -> Result<(), ArtifactError> {
        let path = dir.join(NPU_DIR);
        let failed = |source: Box<dyn std::error::Error + Send + Sync>| ArtifactError::Npu {
            path: path.clone(),
            source,
        };
        let soc = match self {
            NpuBackend::Htp { soc, .. } => {
                let soc = soc.clone().unwrap_or_else(|| record.soc.clone());
                let stored = record.context_binaries.keys();
                let found = stored
                    .clone()
                    .find(|s| s.eq_ignore_ascii_case(&soc))
                    .cloned();
                found.ok_or_else(|| ArtifactError::NoContextBinary {
                    path: path.clone(),
                    soc,
                    stored: stored.cloned().collect(),
                })?
            }
            NpuBackend::Sim(_) => record.soc.clone(),
        };
        let runner = open_runner(&path, &soc, self).map_err(failed)?;
        register_npu_graphs(builtins, runner, None).map_err(|e| failed(Box::new(e)))
    }
}

/// What executes a net's graphs on real values.
pub trait GraphRunner: Send + Sync {
    /// The net whose graphs it runs.
    fn net(&self) -> &NetFile;

    /// Runs `graph` on `inputs` (its app-written tensors in order) and returns its
    /// app-read tensors in order, showing `observer` every tensor it computes that the
    /// backend exposes.
    fn run_graph(
        &self,
        graph: &str,
        inputs: &[&[f32]],
        observer: &mut Observer,
    ) -> Result<Vec<Vec<f32>>, BuiltinFailure>;
}

/// The host reference backend in one of its modes.
pub struct SimRunner {
    /// The loaded net.
    pub sim: SimContext,
    /// How it computes.
    pub mode: SimMode,
}

impl GraphRunner for SimRunner {
    fn net(&self) -> &NetFile {
        self.sim.net()
    }

    fn run_graph(
        &self,
        graph: &str,
        inputs: &[&[f32]],
        observer: &mut Observer,
    ) -> Result<Vec<Vec<f32>>, BuiltinFailure> {
        Ok(self.sim.run_observed(graph, inputs, self.mode, observer)?)
    }
}

impl GraphRunner for HtpContext {
    fn net(&self) -> &NetFile {
        HtpContext::net(self)
    }

    /// HTP exposes only the graph's inputs and outputs, which `observer` is shown.
    fn run_graph(
        &self,
        graph: &str,
        inputs: &[&[f32]],
        observer: &mut Observer,
    ) -> Result<Vec<Vec<f32>>, BuiltinFailure> {
        let outputs = self.run(graph, inputs)?;
        if let Some(spec) = self.net().graphs.iter().find(|g| g.name == graph) {
            let shown = (spec.inputs.iter().zip(inputs.iter().copied()))
                .chain(spec.outputs.iter().zip(outputs.iter().map(Vec::as_slice)));
            for (name, values) in shown {
                observer(name, values);
            }
        }
        Ok(outputs)
    }
}

/// Registers `npu.<graph>` for every graph of `runner` in `registry`, taking the graph's
/// activations (its weights are its static tensors). The calls run on one [`NpuDevice`],
/// one at a time whichever thread makes them. With `observer`, every tensor each call
/// computes is shown to it.
pub fn register_npu_graphs(
    registry: &mut Registry,
    runner: Arc<dyn GraphRunner>,
    observer: Option<TensorObserver>,
) -> Result<(), BuiltinError> {
    let net: &NetFile = runner.net();
    let device = NpuDevice::new();
    let mut calls: BTreeMap<&str, Vec<Arc<GraphSpec>>> = BTreeMap::new();
    for graph in &net.graphs {
        let variants = calls.entry(graph.call_name()).or_default();
        variants.push(Arc::new(graph.clone()));
    }
    for (name, mut variants) in calls {
        variants.sort_by_key(|v| v.tokens);
        let params: Vec<(&str, ValueKind)> = variants[0]
            .inputs
            .iter()
            .map(|_| ("activation", ValueKind::Tensor))
            .collect();
        let call = GraphCall {
            runner: runner.clone(),
            variants,
            observer: observer.clone(),
            device: device.clone(),
        };
        registry.register(&format!("npu.{name}"), &params, move |args| call.run(args))?;
    }
    Ok(())
}

/// What an `npu.<graph>` function runs, and where.
struct GraphCall {
    runner: Arc<dyn GraphRunner>,
    /// The graph and its variants over fewer tokens, fewest tokens first.
    variants: Vec<Arc<GraphSpec>>,
    observer: Option<TensorObserver>,
    device: Arc<NpuDevice>,
}

impl GraphCall {
    /// Picks the variant with the least padding, checks and pads the inputs here, runs
    /// the graph on the device, and cuts the outputs back to the call's rows.
    fn run(&self, args: &Args<'_>) -> Result<Value, BuiltinError> {
        let spec = self.variant_for(args);
        let (inputs, rows) = self.padded_inputs(args, spec)?;
        let (runner, graph) = (self.runner.clone(), spec.clone());
        let observer = self.observer.clone();
        let outputs = self
            .device
            .run(&spec.name, move || {
                let refs: Vec<&[f32]> = inputs.iter().map(Vec::as_slice).collect();
                let mut observe = |tensor: &str, values: &[f32]| {
                    if let Some(observer) = &observer {
                        observer(&graph.name, tensor, values);
                    }
                };
                runner.run_graph(&graph.name, &refs, &mut observe)
            })
            .map_err(|e| args.fail(e))?
            .map_err(|e| args.fail(e))?;
        self.output_values(args, spec, outputs, rows)
    }

    /// The variant with the fewest tokens that holds the call's rows (the largest when
    /// none does, or when the call has no token axis: its check then reports the call).
    fn variant_for(&self, args: &Args<'_>) -> &Arc<GraphSpec> {
        let largest = &self.variants[self.variants.len() - 1];
        let rows = largest.inputs.iter().enumerate().find_map(|(i, name)| {
            let axis = self.axis_of(name)?;
            args.tensor(i).ok()?.shape().get(axis).copied()
        });
        let fits = |v: &&Arc<GraphSpec>| rows.is_some_and(|r| r <= i64::from(v.tokens));
        self.variants.iter().find(fits).unwrap_or(largest)
    }

    fn axis_of(&self, name: &str) -> Option<usize> {
        self.runner.net().token_axes.get(name).map(|&a| a as usize)
    }

    /// Every input checked against the graph's and padded to its tokens; the call's rows.
    fn padded_inputs(
        &self,
        args: &Args<'_>,
        spec: &GraphSpec,
    ) -> Result<(Vec<Vec<f32>>, i64), BuiltinError> {
        let tensors = &self.runner.net().graph.tensors;
        let mut rows = spec.tokens as i64;
        let mut inputs = Vec::with_capacity(spec.inputs.len());
        for (i, name) in spec.inputs.iter().enumerate() {
            let dims = &tensors[name].dims;
            let given = args.tensor(i)?;
            let axis = self.axis_of(name);
            let given_rows = axis.and_then(|a| given.shape().get(a).copied());
            let shape = with_rows(dims, axis, given_rows.unwrap_or(0));
            let fits = axis.is_none_or(|a| given_rows.is_some_and(|r| r <= dims[a] as i64));
            if !fits || shape.as_deref() != Some(given.shape()) {
                let reason =
                    format!("graph input `{name}` has dims {dims:?} (token axis {axis:?})");
                return Err(args.invalid(i, format!("{:?}", given.shape()), &reason));
            }
            if let Some(r) = given_rows {
                rows = r;
            }
            let mut padded = given.as_slice::<f32>().map_err(|e| args.fail(e))?.to_vec();
            padded.resize(tensors[name].numel() as usize, 0.0);
            inputs.push(padded);
        }
        Ok((inputs, rows))
    }

    /// The graph's outputs as tensors of the call's `rows`.
    fn output_values(
        &self,
        args: &Args<'_>,
        spec: &GraphSpec,
        outputs: Vec<Vec<f32>>,
        rows: i64,
    ) -> Result<Value, BuiltinError> {
        let tensors = &self.runner.net().graph.tensors;
        let mut values = Vec::with_capacity(outputs.len());
        for (name, data) in spec.outputs.iter().zip(outputs) {
            let dims = &tensors[name].dims;
            let shape = with_rows(dims, self.axis_of(name), rows).ok_or_else(|| {
                let reason = "its token axis is not the outermost non-unit one";
                args.invalid(0, name, reason)
            })?;
            let kept = shape.iter().product::<i64>() as usize;
            let tensor = Tensor::from_slice(&data[..kept], &shape).map_err(|e| args.fail(e))?;
            values.push(Value::Tensor(tensor));
        }
        Ok(Value::Tuple(values))
    }
}

/// `dims` with `rows` along the token `axis` (if any), when every axis before it has
/// length 1: then a call's rows are a prefix of the graph's padded tensor.
fn with_rows(dims: &[u32], axis: Option<usize>, rows: i64) -> Option<Vec<i64>> {
    if axis.is_some_and(|a| a >= dims.len() || dims[..a].iter().any(|&d| d != 1)) {
        return None;
    }
    let dim = |(a, &d): (usize, &u32)| if Some(a) == axis { rows } else { d as i64 };
    Some(dims.iter().enumerate().map(dim).collect())
}
