//! `oxrelax generate`: load a model, encode a prompt (or take ids), generate, print the
//! text; optionally dump every logit row as safetensors. Also the pieces `chat` and
//! `bench` share: loading a model into an [`Engine`] and the sampling options.

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{ArgGroup, Args};
use oxrelax::model::{load, LoadOptions, Quantization};
use oxrelax_models::KvDtype;
use oxrelax_runtime::chat::{eos_ids, Message, Tokenizer};
use oxrelax_runtime::engine::{
    Engine, EngineConfig, GenerateOptions, Generation, Step, StopReason,
};
use oxrelax_runtime::sampler::{Sampler, SamplingConfig};
use oxrelax_runtime::ThreadPool;
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

type CliResult<T> = Result<T, Box<dyn std::error::Error>>;

/// How to load a model for running.
#[derive(Args, Clone)]
pub struct ModelArgs {
    /// The longest context to support (KV cache positions).
    #[arg(long, default_value_t = 4096)]
    pub max_context: i64,
    /// Tokens per prefill call at most; longer prompts are prefilled in chunks.
    #[arg(long, default_value_t = 128)]
    pub prefill_chunk: i64,
    /// How to store the projection weights (auto: as the checkpoint stores them, q0f16
    /// or else q0f32); a compiled artifact keeps its own.
    #[arg(long, value_enum, default_value = "auto")]
    pub quant: Quantization,
    /// How the KV cache stores keys and values: f32, f16 (half the memory, widened in
    /// the attention kernel) or q8 (int8 codes with a scale per position and KV head,
    /// dequantized in the attention kernel); f32 when absent. A compiled artifact keeps its own:
    /// asking it for another is an error.
    #[arg(long, value_parser = kv_dtype_parser())]
    pub kv_dtype: Option<KvDtype>,
}

/// The parser of `--kv-dtype`: the name of a KV cache dtype (`f32`, `f16`, `q8`).
pub fn kv_dtype_parser() -> impl TypedValueParser<Value = KvDtype> {
    PossibleValuesParser::new(KvDtype::ALL.map(KvDtype::name))
        .try_map(|name| name.parse::<KvDtype>())
}

/// How to pick tokens (greedy unless a temperature is given).
#[derive(Args, Clone)]
pub struct SamplingArgs {
    /// Sampling temperature (0 or absent: greedy).
    #[arg(long)]
    pub temperature: Option<f32>,
    /// Nucleus sampling: keep the most likely tokens up to this probability mass.
    #[arg(long, default_value_t = 1.0)]
    pub top_p: f32,
    /// Keep only this many most likely tokens (0: all).
    #[arg(long, default_value_t = 0)]
    pub top_k: usize,
    /// Penalize tokens seen already (1: off).
    #[arg(long, default_value_t = 1.0)]
    pub repetition_penalty: f32,
    /// Seed of the random generator.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

impl SamplingArgs {
    /// The sampler these options describe.
    pub fn sampler(&self) -> Sampler {
        Sampler::new(SamplingConfig {
            temperature: self.temperature.unwrap_or(0.0),
            top_p: self.top_p,
            top_k: self.top_k,
            repetition_penalty: self.repetition_penalty,
            seed: self.seed,
        })
    }
}

/// Arguments of `oxrelax generate`.
#[derive(Args)]
#[command(group(ArgGroup::new("input").required(true).args(["prompt", "prompt_ids"])))]
pub struct GenerateArgs {
    /// A Hugging Face model folder (or a compiled artifact).
    #[arg(long)]
    model: PathBuf,
    /// The prompt text, encoded with the model's tokenizer (special tokens added as its
    /// post-processor does).
    #[arg(long)]
    prompt: Option<String>,
    /// The prompt as comma-separated token ids.
    #[arg(long, value_delimiter = ',')]
    prompt_ids: Option<Vec<u32>>,
    /// Render the prompt as a user message with the chat template first.
    #[arg(long, requires = "prompt")]
    chat: bool,
    /// Tokens to generate at most.
    #[arg(long, default_value_t = 128)]
    max_new_tokens: usize,
    /// Go on past EOS tokens.
    #[arg(long)]
    ignore_eos: bool,
    /// Write `prefill_logits` [L, vocab], `generated_ids` [G] and `decode_logits`
    /// [G-1, vocab] to this safetensors file.
    #[arg(long)]
    dump_logits: Option<PathBuf>,
    /// Print one JSON object (text, ids, stop reason, stats) as the only line of stdout
    /// instead of streaming the text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    sampling: SamplingArgs,
    #[command(flatten)]
    load: ModelArgs,
}

/// A model loaded into an engine, with its tokenizer when the folder has one.
pub struct LoadedEngine {
    /// The engine.
    pub engine: Engine,
    /// The tokenizer of the model folder, if any.
    pub tokenizer: Option<Tokenizer>,
}

/// Loads (compiles) the model at `dir` and builds an engine over it whose kernels run on
/// the process-wide pool ([`ThreadPool::global`]). EOS ids come from
/// `generation_config.json`, `config.json` and the tokenizer.
pub fn open_engine(dir: &Path, args: &ModelArgs) -> CliResult<LoadedEngine> {
    open_engine_on(dir, args, ThreadPool::global())
}

/// [`open_engine`] with the kernels' parallel loops launched on `pool`.
pub fn open_engine_on(
    dir: &Path,
    args: &ModelArgs,
    pool: Arc<ThreadPool>,
) -> CliResult<LoadedEngine> {
    let options = LoadOptions {
        max_context: args.max_context,
        prefill_chunk: args.prefill_chunk,
        quantization: args.quant,
        kv_dtype: args.kv_dtype,
        ..LoadOptions::default()
    };
    let model = load(dir, &options)?;
    let tokenizer = if model.dir.join("tokenizer.json").is_file() {
        Some(Tokenizer::from_dir(&model.dir)?)
    } else {
        None
    };
    let eos_ids = eos_ids(&model.dir, tokenizer.as_ref())?;
    let config = EngineConfig {
        context_window: usize::try_from(model.context_window)?,
        prefill_chunk: usize::try_from(model.prefill_chunk)?,
        vocab_size: usize::try_from(model.config.vocab_size)?,
        eos_ids,
    };
    let vm = model.vm.with_thread_pool(pool);
    let engine = Engine::new(vm, model.weights, config)?;
    Ok(LoadedEngine { engine, tokenizer })
}

/// The prompt ids: given, or the text encoded (rendered as a chat first with `--chat`).
fn prompt_ids(args: &GenerateArgs, tokenizer: Option<&Tokenizer>) -> CliResult<Vec<u32>> {
    if let Some(ids) = &args.prompt_ids {
        return Ok(ids.clone());
    }
    let text = args.prompt.as_deref().unwrap_or_default();
    let tokenizer = tokenizer.ok_or_else(|| {
        format!(
            "{} has no tokenizer.json: pass --prompt-ids",
            args.model.display()
        )
    })?;
    if args.chat {
        let template = tokenizer.chat_template()?;
        let rendered = template.render(&[Message::new("user", text)], true)?;
        return Ok(tokenizer.encode(&rendered, false)?);
    }
    Ok(tokenizer.encode(text, true)?)
}

/// The short word `generate --json` reports for why generation ended: `eos`, `length`
/// (the token budget, also when it is 0), `context_full` or `stopped` (the output was
/// closed).
pub fn stop_word(stop: Option<StopReason>) -> &'static str {
    match stop {
        Some(StopReason::Eos) => "eos",
        Some(StopReason::Length) | None => "length",
        Some(StopReason::ContextFull) => "context_full",
        Some(StopReason::Callback) => "stopped",
    }
}

/// What `generate --json` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GenerateReport {
    /// The generated text (EOS not rendered); without a tokenizer, the ids separated by
    /// spaces.
    pub text: String,
    /// The generated ids (an EOS id that ended generation included).
    pub ids: Vec<u32>,
    /// Why generation ended ([`stop_word`]).
    pub stop_reason: &'static str,
    /// Timing.
    pub stats: StatsReport,
}

/// The timing part of [`GenerateReport`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatsReport {
    /// Prompt tokens prefilled.
    pub prefill_tokens: usize,
    /// Prompt tokens per second.
    pub prefill_tok_s: f64,
    /// Decode steps run (one fewer than the tokens generated).
    pub decode_tokens: usize,
    /// Decode steps per second.
    pub decode_tok_s: f64,
    /// Time to first token in milliseconds.
    pub ttft_ms: f64,
}

impl GenerateReport {
    /// The report of `generation`, whose text is `text`.
    pub fn new(text: String, generation: &Generation) -> GenerateReport {
        let stats = &generation.stats;
        GenerateReport {
            text,
            ids: generation.ids.clone(),
            stop_reason: stop_word(generation.stop),
            stats: StatsReport {
                prefill_tokens: stats.prefill_tokens,
                prefill_tok_s: stats.prefill_tokens_per_s(),
                decode_tokens: stats.decode_tokens,
                decode_tok_s: stats.decode_tokens_per_s(),
                ttft_ms: stats.time_to_first_token.as_secs_f64() * 1e3,
            },
        }
    }

    /// The report as one JSON line (no newline).
    pub fn json_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

/// Runs `oxrelax generate`: streams the text to stdout, or with `--json` prints only
/// the JSON line.
pub fn run(args: &GenerateArgs) -> CliResult<()> {
    let LoadedEngine {
        mut engine,
        tokenizer,
    } = open_engine(&args.model, &args.load)?;
    let prompt = prompt_ids(args, tokenizer.as_ref())?;
    let options = GenerateOptions {
        max_new_tokens: args.max_new_tokens,
        ignore_eos: args.ignore_eos,
        keep_logits: args.dump_logits.is_some(),
    };
    let mut sampler = args.sampling.sampler();
    let mut stdout = std::io::stdout().lock();
    let mut detokenizer = tokenizer
        .as_ref()
        .map(|t| oxrelax_runtime::Detokenizer::with_context(t, &prompt, true));
    // With --json the text is kept for the JSON line instead of being streamed.
    let mut text = String::new();
    let generation = engine.generate(&prompt, options, &mut sampler, |token| {
        let piece = match detokenizer.as_mut() {
            Some(detokenizer) if !token.is_eos => detokenizer.push(token.id)?,
            Some(_) => None,
            None => Some(format!("{} ", token.id)),
        };
        if let Some(piece) = piece {
            if args.json {
                text.push_str(&piece);
            } else if stdout
                .write_all(piece.as_bytes())
                .and_then(|()| stdout.flush())
                .is_err()
            {
                // A closed stdout (`| head`) ends generation rather than failing it.
                return Ok(Step::Stop);
            }
        }
        Ok(Step::Continue)
    })?;
    let rest = match detokenizer.as_mut() {
        Some(detokenizer) => detokenizer.finish()?,
        None => String::new(),
    };
    if args.json {
        text.push_str(&rest);
        if detokenizer.is_none() {
            text.truncate(text.trim_end().len());
        }
        writeln!(
            stdout,
            "{}",
            GenerateReport::new(text, &generation).json_line()
        )?;
    } else {
        writeln!(stdout, "{rest}")?;
    }
    eprintln!(
        "{} tokens generated (stop: {}); {}",
        generation.ids.len(),
        generation
            .stop
            .map_or_else(|| "none".to_string(), |s| s.to_string()),
        generation.stats
    );
    if let Some(path) = &args.dump_logits {
        dump_logits(path, &generation)?;
    }
    Ok(())
}

fn f32_bytes(rows: &[Vec<f32>]) -> Vec<u8> {
    rows.iter()
        .flatten()
        .flat_map(|v| v.to_le_bytes())
        .collect()
}

/// Writes the logits and ids of a generation as safetensors (see [`GenerateArgs`]).
fn dump_logits(path: &Path, generation: &Generation) -> CliResult<()> {
    use safetensors::tensor::TensorView;
    use safetensors::Dtype;
    let vocab = generation.prefill_logits.first().map_or(0, Vec::len);
    let decode_rows = generation.token_logits.get(1..).unwrap_or_default();
    let prefill = f32_bytes(&generation.prefill_logits);
    let decode = f32_bytes(decode_rows);
    let ids: Vec<u8> = generation
        .ids
        .iter()
        .flat_map(|&id| i64::from(id).to_le_bytes())
        .collect();
    let tensors = [
        (
            "prefill_logits",
            TensorView::new(
                Dtype::F32,
                vec![generation.prefill_logits.len(), vocab],
                &prefill,
            )?,
        ),
        (
            "generated_ids",
            TensorView::new(Dtype::I64, vec![generation.ids.len()], &ids)?,
        ),
        (
            "decode_logits",
            TensorView::new(Dtype::F32, vec![decode_rows.len(), vocab], &decode)?,
        ),
    ];
    safetensors::serialize_to_file(tensors, None, path)
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxrelax_runtime::engine::GenerationStats;
    use std::time::Duration;

    fn sorted_keys(json: &serde_json::Value) -> Vec<&str> {
        let mut keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        keys
    }

    #[test]
    fn the_json_line_has_text_ids_stop_reason_and_stats() {
        let generation = Generation {
            ids: vec![5, 7, 2],
            stop: Some(StopReason::Eos),
            stats: GenerationStats {
                prefill_tokens: 4,
                prefill_time: Duration::from_millis(2),
                decode_tokens: 2,
                decode_time: Duration::from_millis(4),
                time_to_first_token: Duration::from_millis(3),
            },
            ..Generation::default()
        };
        let line = GenerateReport::new("a \"quoted\"\nline".into(), &generation).json_line();
        assert!(!line.contains('\n'), "{line}");
        let json: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(sorted_keys(&json), ["ids", "stats", "stop_reason", "text"]);
        assert_eq!(json["text"], "a \"quoted\"\nline");
        assert_eq!(json["ids"], serde_json::json!([5, 7, 2]));
        assert_eq!(json["stop_reason"], "eos");
        let stats = &json["stats"];
        assert_eq!(
            sorted_keys(stats),
            [
                "decode_tok_s",
                "decode_tokens",
                "prefill_tok_s",
                "prefill_tokens",
                "ttft_ms"
            ]
        );
        assert_eq!(stats["prefill_tokens"], 4);
        assert_eq!(stats["prefill_tok_s"], 2000.0);
        assert_eq!(stats["decode_tok_s"], 500.0);
        assert_eq!(stats["ttft_ms"], 3.0);
    }

    #[test]
    fn stop_reasons_are_short_words() {
        let words = [
            (Some(StopReason::Eos), "eos"),
            (Some(StopReason::Length), "length"),
            (Some(StopReason::ContextFull), "context_full"),
            (Some(StopReason::Callback), "stopped"),
            (None, "length"),
        ];
        for (stop, word) in words {
            assert_eq!(stop_word(stop), word);
        }
    }
}
