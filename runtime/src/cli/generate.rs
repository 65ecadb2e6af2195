//! `generate`: encode a prompt (or take ids), generate, stream the text; optionally
//! report one JSON line, and dump every logit row as safetensors.

use super::{CliResult, SamplingArgs, SamplingDefaults};
use crate::artifact::LoadedEngine;
use crate::chat::{Message, Tokenizer};
use crate::engine::{GenerateOptions, Generation, Step, StopReason, TextStream};
use clap::{ArgGroup, Args};
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Arguments of `generate` (`oxrelax generate`, `oxrelax-run generate`).
#[derive(Args)]
#[command(group(ArgGroup::new("input").required(true).args(["prompt", "prompt_ids"])))]
#[command(group(ArgGroup::new("model_given").required(true).args(["model", "model_option"])))]
pub struct GenerateArgs {
    /// The model: a compiled artifact (with `oxrelax`, also a Hugging Face folder or a
    /// GGUF file).
    #[arg(value_name = "MODEL")]
    model: Option<PathBuf>,
    /// The model, as an option (the same as MODEL).
    #[arg(long = "model", value_name = "MODEL", conflicts_with = "model")]
    model_option: Option<PathBuf>,
    /// The prompt text, encoded with the model's tokenizer (special tokens added as its
    /// post-processor does). An empty prompt is those special tokens alone (a BOS token);
    /// one that encodes to no tokens at all is an error.
    #[arg(long)]
    prompt: Option<String>,
    /// The prompt as comma-separated token ids.
    #[arg(long, value_delimiter = ',')]
    prompt_ids: Option<Vec<u32>>,
    /// Render the prompt as a user message with the chat template first.
    #[arg(long, requires = "prompt")]
    chat: bool,
    /// A system message before the prompt (implies --chat).
    #[arg(long, requires = "prompt")]
    system: Option<String>,
    /// Text that ends generation (repeatable); it is not printed. The JSON line's
    /// stop_reason is then `stop`.
    #[arg(long)]
    stop: Vec<String>,
    /// Tokens to generate at most (0: prefill only, nothing generated); generation also
    /// ends when the context window is full.
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
}

impl GenerateArgs {
    /// The model folder (given as MODEL or `--model`).
    pub fn model(&self) -> &Path {
        self.model
            .as_deref()
            .or(self.model_option.as_deref())
            .unwrap_or(Path::new("."))
    }
}

/// The prompt ids: given, or the text encoded (rendered as a chat first with `--chat` or
/// `--system`). No ids at all is an error.
fn prompt_ids(args: &GenerateArgs, tokenizer: Option<&Tokenizer>) -> CliResult<Vec<u32>> {
    let ids = match &args.prompt_ids {
        Some(ids) => ids.clone(),
        None => encode_prompt(args, tokenizer)?,
    };
    if ids.is_empty() {
        return Err(
            "the prompt is empty (and the tokenizer adds no BOS token): nothing to generate from"
                .into(),
        );
    }
    Ok(ids)
}

fn encode_prompt(args: &GenerateArgs, tokenizer: Option<&Tokenizer>) -> CliResult<Vec<u32>> {
    let text = args.prompt.as_deref().unwrap_or_default();
    let tokenizer = tokenizer.ok_or_else(|| {
        format!(
            "{} has no tokenizer.json: pass --prompt-ids",
            args.model().display()
        )
    })?;
    if args.chat || args.system.is_some() {
        let system = args
            .system
            .iter()
            .map(|s| Message::new("system", s.clone()));
        let messages: Vec<Message> = system.chain([Message::new("user", text)]).collect();
        let rendered = tokenizer.chat_template()?.render(&messages, true)?;
        return Ok(tokenizer.encode(&rendered, false)?);
    }
    Ok(tokenizer.encode(text, true)?)
}

/// Where generated text goes: stdout as it comes, or kept for the JSON line.
struct TextOut<'a> {
    json: bool,
    text: String,
    stdout: std::io::StdoutLock<'a>,
}

impl TextOut<'_> {
    /// Shows (or keeps) `piece`; false when stdout is closed.
    fn write(&mut self, piece: &str) -> bool {
        if self.json {
            self.text.push_str(piece);
            return true;
        }
        let stdout = &mut self.stdout;
        stdout
            .write_all(piece.as_bytes())
            .and_then(|()| stdout.flush())
            .is_ok()
    }
}

/// The short word `generate --json` reports for why generation ended: `eos`, `length`
/// (the token budget, also when it is 0), `context_full`, `stop` (a stop string) or
/// `stopped` (the output was closed).
pub fn stop_word(stop: Option<StopReason>) -> &'static str {
    match stop {
        Some(StopReason::Eos) => "eos",
        Some(StopReason::Length) | None => "length",
        Some(StopReason::ContextFull) => "context_full",
        Some(StopReason::Callback) => "stopped",
        Some(StopReason::StopSequence) => "stop",
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

/// Runs `generate` on `model` (opened from `args.model`): streams the text to stdout,
/// or with `--json` prints only the JSON line.
pub fn run_generate(args: &GenerateArgs, model: LoadedEngine) -> CliResult<()> {
    let LoadedEngine {
        mut engine,
        tokenizer,
    } = model;
    let prompt = prompt_ids(args, tokenizer.as_ref())?;
    let options = GenerateOptions {
        max_new_tokens: args.max_new_tokens,
        ignore_eos: args.ignore_eos,
        keep_logits: args.dump_logits.is_some(),
    };
    let mut sampler = args
        .sampling
        .sampler(args.model(), SamplingDefaults::Greedy)?;
    let mut stream = TextStream::new(tokenizer.as_ref(), &prompt, &args.stop);
    let mut out = TextOut {
        json: args.json,
        text: String::new(),
        stdout: std::io::stdout().lock(),
    };
    let generation = engine.generate(&prompt, options, &mut sampler, |token| {
        if !out.write(&stream.push(token.id, token.is_eos)?) {
            // A closed stdout (`| head`) ends generation rather than failing it.
            return Ok(Step::Stop);
        }
        Ok(if stream.stopped() {
            Step::StopSequence
        } else {
            Step::Continue
        })
    })?;
    out.write(&stream.finish()?);
    if args.json {
        let mut text = out.text;
        if tokenizer.is_none() {
            text.truncate(text.trim_end().len());
        }
        let line = GenerateReport::new(text, &generation).json_line();
        writeln!(out.stdout, "{line}")?;
    } else {
        writeln!(out.stdout)?;
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
    let bytes = safetensors::serialize(tensors, None)?;
    // Written through `path` as it is (a symlink's target, a device, a FIFO), never
    // replaced by another file.
    std::fs::write(path, bytes).map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::GenerationStats;
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
            (Some(StopReason::StopSequence), "stop"),
            (None, "length"),
        ];
        for (stop, word) in words {
            assert_eq!(stop_word(stop), word);
        }
    }
}
