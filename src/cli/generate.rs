//! `oxrelax generate`: the runtime's `generate` command on a Hugging Face folder (compiled
//! now) or an artifact. Also the pieces `chat`, `bench`, `perplexity` and `compare`
//! share: how to load a model ([`ModelArgs`]) into an engine.

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::Args;
use oxrelax::artifact::open_artifact_with;
use oxrelax::memory::{manifest_estimate, parse_size, MemoryError};
use oxrelax::model::{load_hf, LoadOptions, Quantization};
use oxrelax_models::KvDtype;
use oxrelax_runtime::artifact::{is_artifact, GraphBackend, LoadedEngine};
use oxrelax_runtime::chat::{eos_ids, Tokenizer};
use oxrelax_runtime::cli::{run_generate, CliResult, GenerateArgs};
use oxrelax_runtime::engine::{Engine, EngineConfig};
use oxrelax_runtime::memory::{default_limit, MemoryEstimate};
use oxrelax_runtime::ThreadPool;
use std::path::Path;
use std::sync::Arc;

/// How to load a model for running.
#[derive(Args, Clone)]
pub struct ModelArgs {
    /// The longest context to support (KV cache positions; default 4096). An artifact
    /// keeps the one it was compiled with.
    #[arg(long)]
    pub max_context: Option<i64>,
    /// Tokens per prefill call at most (default 128); longer prompts are prefilled in
    /// chunks. An artifact keeps the one it was compiled with.
    #[arg(long)]
    pub prefill_chunk: Option<i64>,
    /// How to store the projection weights (auto: as the checkpoint stores them: for a
    /// GGUF file of quantized blocks w4a8_asym (Q4_1), w4a8 (Q4_0) or w8a8 (others),
    /// else q0f16 for an f16 embedding table, else q0f32);
    /// a compiled artifact keeps its own.
    #[arg(long, value_enum, default_value = "auto")]
    pub quant: Quantization,
    /// How the KV cache stores keys and values: f32, f16 (half the memory, widened in
    /// the attention kernel) or q8 (int8 codes with a scale per position and KV head,
    /// dequantized in the attention kernel). Default: f16 for the weight-quantized schemes
    /// (q8f32, q4f32_1, q4f16_1, w8a8, w4a8; --quant auto resolved first, so a GGUF file
    /// of quantized blocks gets f16), else f32. A compiled artifact keeps its own: asking
    /// it for another is an error.
    #[arg(long, value_parser = kv_dtype_parser())]
    pub kv_dtype: Option<KvDtype>,
    /// The backend of an artifact's NPU graphs.
    #[cfg(feature = "npu")]
    #[command(flatten)]
    pub npu: oxrelax_runtime::qnn::cli::NpuArgs,
    /// Participants of the thread pool the kernels run on. Default: the process-wide
    /// pool (the machine's cores, or OXRELAX_NUM_THREADS).
    #[arg(long, value_name = "T")]
    pub threads: Option<usize>,
    /// The most memory the model may take, in bytes or with a K, M, G or T suffix (8G,
    /// 512M): a model whose estimate (weights + KV cache + arenas) exceeds it is refused,
    /// for a folder or GGUF file before its weights are read, for a compiled artifact
    /// only after its weights are read (before its engine is built). Default: the
    /// physical memory (or `ulimit -v` when lower).
    #[arg(long, value_name = "BYTES", value_parser = memory_size_parser)]
    pub max_memory: Option<u64>,
}

/// The parser of `--max-memory` ([`parse_size`]).
pub fn memory_size_parser(text: &str) -> Result<u64, MemoryError> {
    parse_size(text)
}

/// The largest `--threads` accepted.
const MAX_THREADS: usize = 1024;

/// A pool of `threads` participants (1 to [`MAX_THREADS`]), or the process-wide one.
fn pool_of(threads: Option<usize>) -> CliResult<Arc<ThreadPool>> {
    match threads {
        None => Ok(ThreadPool::global()),
        Some(t) if !(1..=MAX_THREADS).contains(&t) => {
            Err(format!("bad --threads {t}: must be 1 to {MAX_THREADS}").into())
        }
        Some(t) => {
            Ok(Arc::new(ThreadPool::new(t).map_err(|e| {
                format!("cannot start a pool of {t} threads: {e}")
            })?))
        }
    }
}

impl ModelArgs {
    /// The pool `--threads` asks for, or the process-wide one.
    pub fn pool(&self) -> CliResult<Arc<ThreadPool>> {
        pool_of(self.threads)
    }

    /// The memory limit: `--max-memory`, or by default the physical memory.
    pub fn max_memory(&self) -> u64 {
        self.max_memory.unwrap_or_else(default_limit)
    }

    /// The backend asked for an artifact's NPU graphs, if any.
    fn graph_backend(&self) -> Option<Box<dyn GraphBackend>> {
        #[cfg(feature = "npu")]
        if let Some(npu) = self.npu.backend() {
            return Some(Box::new(npu));
        }
        None
    }

    /// An error naming the options given that an artifact cannot apply (it was compiled
    /// with its context, prefill chunk and weight scheme).
    fn check_applies_to_artifact(&self, dir: &Path) -> CliResult<()> {
        let given = [
            ("--max-context", self.max_context.is_some()),
            ("--prefill-chunk", self.prefill_chunk.is_some()),
            ("--quant", self.quant != Quantization::Auto),
        ];
        let given: Vec<&str> = given.iter().filter(|(_, g)| *g).map(|(o, _)| *o).collect();
        if given.is_empty() {
            return Ok(());
        }
        Err(format!(
            "{} is a compiled artifact, which keeps the context, prefill chunk and weight scheme it was compiled with: {} cannot apply (compile again with them)",
            dir.display(),
            given.join(", ")
        )
        .into())
    }
}

/// The parser of `--kv-dtype`: the name of a KV cache dtype (`f32`, `f16`, `q8`).
pub fn kv_dtype_parser() -> impl TypedValueParser<Value = KvDtype> {
    PossibleValuesParser::new(KvDtype::ALL.map(KvDtype::name))
        .try_map(|name| name.parse::<KvDtype>())
}

/// Arguments of `oxrelax generate`.
#[derive(Args)]
pub struct GenerateCommand {
    #[command(flatten)]
    run: GenerateArgs,
    #[command(flatten)]
    load: ModelArgs,
}

/// Runs `oxrelax generate`.
pub fn run(args: &GenerateCommand) -> CliResult<()> {
    run_generate(&args.run, open_engine(args.run.model(), &args.load)?)
}

/// Loads (compiles) the model at `dir` and builds an engine over it whose kernels run on
/// the pool `--threads` asks for ([`ModelArgs::pool`]; by default the process-wide one). EOS ids come from
/// `generation_config.json`, `config.json` and the tokenizer.
pub fn open_engine(dir: &Path, args: &ModelArgs) -> CliResult<LoadedEngine> {
    Ok(open_engine_on(dir, args, args.pool()?)?.0)
}

/// [`open_engine`] with the kernels' parallel loops launched on `pool`; also what the
/// model was estimated to allocate (checked against `--max-memory` before it did).
pub fn open_engine_on(
    dir: &Path,
    args: &ModelArgs,
    pool: Arc<ThreadPool>,
) -> CliResult<(LoadedEngine, MemoryEstimate)> {
    let defaults = LoadOptions::default();
    let options = LoadOptions {
        max_context: args.max_context.unwrap_or(defaults.max_context),
        prefill_chunk: args.prefill_chunk.unwrap_or(defaults.prefill_chunk),
        quantization: args.quant,
        kv_dtype: args.kv_dtype,
        max_memory: args.max_memory(),
        ..defaults
    };
    if is_artifact(dir) {
        args.check_applies_to_artifact(dir)?;
        let backend = args.graph_backend();
        let artifact = open_artifact_with(dir, args.kv_dtype, backend.as_deref())?;
        let memory = manifest_estimate(dir, artifact.manifest(), artifact.executable())?;
        memory.check(options.max_memory)?;
        return Ok((artifact.into_engine(pool)?, memory));
    }
    #[cfg(feature = "npu")]
    if args.npu.npu.is_some() {
        let message = "--npu runs an artifact's NPU graphs: compile the model with `oxrelax compile MODEL -o DIR --npu qnn --calibration-text FILE` first";
        return Err(format!("{}: {message}", dir.display()).into());
    }
    let model = load_hf(dir, &options)?;
    let tokenizer = Tokenizer::for_model(&model.dir)?;
    let eos_ids = eos_ids(&model.dir, tokenizer.as_ref())?;
    let config = EngineConfig {
        context_window: usize::try_from(model.context_window)?,
        prefill_chunk: usize::try_from(model.prefill_chunk)?,
        vocab_size: usize::try_from(model.config.vocab_size)?,
        eos_ids,
    };
    let vm = model.vm.with_thread_pool(pool);
    let engine = Engine::new(vm, model.weights, config)?;
    Ok((LoadedEngine { engine, tokenizer }, model.memory))
}

#[cfg(test)]
mod tests {
    use super::{pool_of, MAX_THREADS};

    #[test]
    fn bad_thread_counts_are_errors() {
        assert!(pool_of(Some(0)).is_err());
        assert!(pool_of(Some(MAX_THREADS + 1)).is_err());
        assert_eq!(pool_of(Some(3)).unwrap().threads(), 3);
    }
}
