//! `oxrelax generate`: load a model, encode a prompt (or take ids), generate, print the
//! text; optionally dump every logit row as safetensors. Also the pieces `chat` and
//! `bench` share: loading a model into an [`Engine`] and the sampling options.

use clap::{ArgGroup, Args};
use oxrelax::model::{load, LoadOptions};
use oxrelax_runtime::chat::{Message, Tokenizer};
use oxrelax_runtime::engine::{Engine, EngineConfig, GenerateOptions, Generation, Step};
use oxrelax_runtime::sampler::{Sampler, SamplingConfig};
use std::io::Write;
use std::path::{Path, PathBuf};

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
    #[command(flatten)]
    sampling: SamplingArgs,
    #[command(flatten)]
    load: ModelArgs,
}

/// Reads `eos_token_id` (a number or a list) from a JSON file, if present.
fn eos_ids_in(path: &Path) -> CliResult<Vec<u32>> {
    if !path.is_file() {
        return Ok(Vec::new());
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let ids = match &json["eos_token_id"] {
        serde_json::Value::Array(list) => list.iter().filter_map(|v| v.as_u64()).collect(),
        value => value.as_u64().into_iter().collect::<Vec<_>>(),
    };
    Ok(ids
        .into_iter()
        .filter_map(|id| u32::try_from(id).ok())
        .collect())
}

/// A model loaded into an engine, with its tokenizer when the folder has one.
pub struct LoadedEngine {
    /// The engine.
    pub engine: Engine,
    /// The tokenizer of the model folder, if any.
    pub tokenizer: Option<Tokenizer>,
}

/// Loads (compiles) the model at `dir` and builds an engine over it. EOS ids come from
/// `generation_config.json`, `config.json` and the tokenizer.
pub fn open_engine(dir: &Path, args: &ModelArgs) -> CliResult<LoadedEngine> {
    let options = LoadOptions {
        max_context: args.max_context,
        prefill_chunk: args.prefill_chunk,
        ..LoadOptions::default()
    };
    let model = load(dir, &options)?;
    let tokenizer = if model.dir.join("tokenizer.json").is_file() {
        Some(Tokenizer::from_dir(&model.dir)?)
    } else {
        None
    };
    let mut eos_ids = eos_ids_in(&model.dir.join("generation_config.json"))?;
    eos_ids.extend(eos_ids_in(&model.dir.join("config.json"))?);
    eos_ids.extend(tokenizer.iter().flat_map(|t| t.eos_ids().to_vec()));
    eos_ids.sort_unstable();
    eos_ids.dedup();
    let config = EngineConfig {
        context_window: usize::try_from(model.context_window)?,
        prefill_chunk: usize::try_from(model.prefill_chunk)?,
        vocab_size: usize::try_from(model.config.vocab_size)?,
        eos_ids,
    };
    let engine = Engine::new(model.built.vm, model.weights, config)?;
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

/// Runs `oxrelax generate`.
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
    let generation = engine.generate(&prompt, options, &mut sampler, |token| {
        let text = match detokenizer.as_mut() {
            Some(detokenizer) if !token.is_eos => detokenizer.push(token.id)?,
            Some(_) => None,
            None => Some(format!("{} ", token.id)),
        };
        if let Some(text) = text {
            // A closed stdout (`| head`) ends generation rather than failing it.
            if stdout
                .write_all(text.as_bytes())
                .and_then(|()| stdout.flush())
                .is_err()
            {
                return Ok(Step::Stop);
            }
        }
        Ok(Step::Continue)
    })?;
    if let Some(detokenizer) = detokenizer.as_mut() {
        write!(stdout, "{}", detokenizer.finish()?)?;
    }
    writeln!(stdout)?;
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
