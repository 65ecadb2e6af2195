//! A Hugging Face model folder run with its `prefill` and `decode` partitioned for the
//! NPU: the CPU part compiled for the host, the NPU graphs lowered to QNN and executed by
//! the host reference backend. Calibration (the W4A16 recipe's activation ranges) runs
//! the float graphs over a text; `--npu sim` runs the quantized ones.

use super::qnn::emit::{float_parts, net_file};
use super::qnn::recipe::{quantize, Ranges, Recipe};
use super::qnn::variants::add_chunk_variant;
use super::qnn::{lower_module, FloatNet, QnnError};
use super::{partition_pipeline, PartitionNpu};
use crate::checkpoint::Checkpoint;
use crate::model::{
    expected_weights, export_for, transform_weights, LoadError, LoadOptions, Quantization,
};
use crate::passes::{Instrument, PassError};
use crate::{build_with_builtins, BuildError};
use oxrelax_dsl::{IRModule, Target};
use oxrelax_models::ExportOptions;
use oxrelax_runtime::engine::{Engine, EngineConfig, EngineError};
use oxrelax_runtime::packed::BuiltinError;
use oxrelax_runtime::qnn::bind::{
    register_npu_graphs, GraphRunner, NpuBackend, SimRunner, TensorObserver,
};
use oxrelax_runtime::qnn::htp::{
    library_dir, HtpBackend, HtpContext, HtpError, QnnLibrary, ValidateOps,
};
use oxrelax_runtime::qnn::net::NetFile;
use oxrelax_runtime::qnn::sim::{SimContext, SimError, SimMode};
use oxrelax_runtime::sampler::argmax;
use oxrelax_runtime::{
    DType, ExpectedTensor, Registry, Tokenizer, Value, WeightError, WeightStore,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Why a partitioned model could not be loaded or calibrated.
#[derive(Debug, thiserror::Error)]
pub enum NpuError {
    /// The model folder.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The partition.
    #[error(transparent)]
    Pass(#[from] PassError),
    /// QNN lowering or emission.
    #[error(transparent)]
    Qnn(#[from] QnnError),
    /// The host reference backend.
    #[error(transparent)]
    Sim(#[from] SimError),
    /// Qualcomm's HTP backend.
    #[error(transparent)]
    Htp(#[from] HtpError),
    /// Registering the NPU graphs.
    #[error(transparent)]
    Builtin(#[from] BuiltinError),
    /// Running the model.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The calibration text.
    #[error("calibration text: {0}")]
    Calibration(String),
    /// A chunk variant that is not a number of tokens between 1 and the chunk.
    #[error("chunk variant {0}: a variant has from 1 to fewer tokens than the chunk")]
    ChunkVariant(i64),
    /// The emitted graphs failed validation (a compiler bug).
    #[error("the emitted QNN graphs fail validation:\n{0}")]
    Invalid(String),
}

impl From<NpuError> for LoadError {
    fn from(error: NpuError) -> Self {
        LoadError::Offload(Box::new(error))
    }
}

/// An observer widening `ranges` to every tensor's values (calibration).
pub fn range_observer(ranges: Arc<Mutex<Ranges>>) -> TensorObserver {
    Arc::new(move |_graph, tensor, values| {
        let (lo, hi) = values
            .iter()
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), &v| {
                (l.min(v), h.max(v))
            });
        let mut ranges = ranges.lock().unwrap_or_else(|e| e.into_inner());
        let range = ranges.entry(tensor.to_string()).or_insert((lo, hi));
        *range = (range.0.min(lo), range.1.max(hi));
    })
}

/// A partitioned model folder: its module, the float QNN net of its NPU graphs, and what
/// running it needs (the weights it takes, the engine's sizes).
pub struct Partitioned {
    /// The module after the partition (callers call `npu.<graph>`).
    pub module: IRModule,
    /// The NPU graphs, f32.
    pub net: FloatNet,
    store: WeightStore,
    weights: Vec<ExpectedTensor>,
    sizes: EngineConfig,
    instrument: Instrument,
    soc: super::Soc,
}

/// Partitions the model in `dir` (f32 weights; prefill chunks of the partition's chunk)
/// and lowers its NPU graphs, with variants of its prefill graphs for each of
/// `chunk_variants` tokens per call (graph selection, [`add_chunk_variant`]).
pub fn partition_model(
    dir: &Path,
    options: &LoadOptions,
    partition: PartitionNpu,
    chunk_variants: &[i64],
) -> Result<Partitioned, NpuError> {
    let Checkpoint { config, store, .. } = Checkpoint::open(dir)?;
    let export = ExportOptions {
        max_context: options.max_context,
        prefill_chunk: partition.chunk,
        kv_dtype: options.kv_dtype.unwrap_or_default(),
        max_batch: options.max_batch,
    };
    let (model, exported) = export_for(&config, Quantization::Q0f32, &export)?;
    let (module, _) = partition_pipeline(partition.clone()).run(exported.module)?;
    let load = |name: &str| {
        let tensor = store.load(name, DType::F32)?;
        tensor
            .as_slice::<f32>()
            .map(<[f32]>::to_vec)
            .map_err(|source| WeightError::Tensor {
                tensor: name.to_string(),
                file: store.source().to_path_buf(),
                source,
            })
    };
    let mut net = lower_module(&module, &load)?;
    for &tokens in chunk_variants {
        if !(1..partition.chunk).contains(&tokens) {
            return Err(NpuError::ChunkVariant(tokens));
        }
        let export = ExportOptions {
            prefill_chunk: tokens,
            ..export
        };
        let (_, exported) = export_for(&config, Quantization::Q0f32, &export)?;
        let partition = PartitionNpu {
            chunk: tokens,
            ..partition.clone()
        };
        let (variant, _) = partition_pipeline(partition).run(exported.module)?;
        let tokens = u32::try_from(tokens).map_err(|_| NpuError::ChunkVariant(tokens))?;
        add_chunk_variant(&mut net, lower_module(&variant, &load)?, tokens);
    }
    let sizes = EngineConfig {
        context_window: exported.context_window as usize,
        prefill_chunk: exported.prefill_chunk as usize,
        vocab_size: config.vocab_size as usize,
        eos_ids: Vec::new(),
    };
    Ok(Partitioned {
        module,
        net,
        weights: expected_weights(&model),
        store,
        sizes,
        instrument: options.instrument.clone(),
        soc: partition.soc,
    })
}

impl Partitioned {
    /// An engine running the CPU part on the host and the NPU graphs of `net` (with
    /// static data `bin`) on `backend` (HTP: built for the partition's SoC), showing
    /// `observer` every tensor the graphs compute that the backend exposes.
    pub fn engine(
        &self,
        net: NetFile,
        bin: BTreeMap<String, Vec<u8>>,
        backend: &NpuBackend,
        observer: Option<TensorObserver>,
    ) -> Result<Engine, NpuError> {
        let runner = graph_runner(net, &bin, backend, &self.soc)?;
        let mut builtins = Registry::with_builtins();
        register_npu_graphs(&mut builtins, runner, observer)?;
        let target = Target::host();
        let mut built = build_with_builtins(
            self.module.clone(),
            self.instrument.clone(),
            &target,
            &builtins,
        )
        .map_err(|e: BuildError| LoadError::Build(Box::new(e)))?;
        let raw = self
            .store
            .load_expected(&self.weights)
            .map_err(LoadError::from)?;
        let weights = transform_weights(&mut built, raw.into_iter().map(Value::Tensor).collect())?;
        Ok(Engine::new(built.vm, weights, self.sizes.clone())?)
    }

    /// The first `tokens` ids of `text` (with BOS) by the tokenizer of the model in `dir`:
    /// what calibration runs.
    pub fn calibration_ids(
        &self,
        dir: &Path,
        text: &str,
        tokens: usize,
    ) -> Result<Vec<u32>, NpuError> {
        let tokenizer =
            Tokenizer::for_model(dir).map_err(|e| NpuError::Calibration(e.to_string()))?;
        let tokenizer = tokenizer.ok_or_else(|| {
            NpuError::Calibration(format!("{} has no tokenizer.json", dir.display()))
        })?;
        let mut ids = tokenizer
            .encode(text, true)
            .map_err(|e| NpuError::Calibration(e.to_string()))?;
        if ids.len() < 2 {
            return Err(NpuError::Calibration(format!(
                "{} tokens: too short to calibrate on",
                ids.len()
            )));
        }
        ids.truncate(tokens.min(self.sizes.context_window));
        Ok(ids)
    }

    /// The observed range of every NPU tensor over `ids` (see [`Partitioned::calibration_ids`]):
    /// the first half prefilled in chunks (by `prefill` and by `prefill_all`), the second
    /// half fed one token at a time through decode (teacher-forced), so the decode graphs
    /// see as many activations as the prefill graphs. Observed twice: with the float
    /// graphs, then with `recipe`'s weights (float activations), whose activations are
    /// the ones the encodings must hold.
    pub fn calibrate(&self, ids: &[u32], recipe: Recipe) -> Result<Ranges, NpuError> {
        let (net, bin) = float_parts(&self.net);
        let float = self.observe(net, bin, ids)?;
        let weights = quantize(&self.net, &float, recipe)?;
        let net = net_file(&self.net, &weights.graph, "calibration");
        self.observe(net, weights.statics, ids)
    }

    /// The most likely next id after each prefix of `ids` (teacher-forced, by
    /// `prefill_all`) with the graphs of `net` run in `mode`.
    pub fn top1(
        &self,
        net: NetFile,
        bin: BTreeMap<String, Vec<u8>>,
        mode: SimMode,
        ids: &[u32],
    ) -> Result<Vec<u32>, NpuError> {
        let mut engine = self.engine(net, bin, &NpuBackend::Sim(mode), None)?;
        let rows = engine.prefill_all(ids)?;
        Ok(rows.iter().map(|row| argmax(row)).collect())
    }

    /// The ranges the graphs of `net` compute (float mode) over `ids`: the first half
    /// through `prefill_all` and then `prefill`, the rest decoded.
    fn observe(
        &self,
        net: NetFile,
        bin: BTreeMap<String, Vec<u8>>,
        ids: &[u32],
    ) -> Result<Ranges, NpuError> {
        let ranges = Arc::new(Mutex::new(Ranges::new()));
        let observer = range_observer(ranges.clone());
        let mut engine = self.engine(net, bin, &NpuBackend::Sim(SimMode::Float), Some(observer))?;
        let ids = &ids[..ids.len().min(engine.config().context_window)];
        let (prompt, rest) = ids.split_at(ids.len().div_ceil(2));
        engine.prefill_all(prompt)?;
        for &id in rest {
            engine.decode(id)?;
        }
        engine.reset()?;
        engine.prefill(prompt)?;
        let ranges = ranges.lock().map(|r| r.clone()).unwrap_or_default();
        Ok(ranges)
    }
}

/// The graphs of `net` (static data `bin`) ready to run on `backend`: loaded into the host
/// reference backend, or built through Qualcomm's HTP library for `soc`.
pub fn graph_runner(
    net: NetFile,
    bin: &BTreeMap<String, Vec<u8>>,
    backend: &NpuBackend,
    soc: &super::Soc,
) -> Result<Arc<dyn GraphRunner>, NpuError> {
    Ok(match backend {
        NpuBackend::Sim(mode) => Arc::new(SimRunner {
            sim: SimContext::from_parts(net, bin.clone())?,
            mode: *mode,
        }),
        NpuBackend::Htp { lib_dir, .. } => {
            let library = QnnLibrary::load_htp(&library_dir(lib_dir.as_deref())?)?;
            let htp = HtpBackend::open(library, soc.name, soc.soc_model)?;
            Arc::new(HtpContext::build(htp, Arc::new(net), bin, ValidateOps::No)?)
        }
    })
}
