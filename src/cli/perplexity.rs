//! `oxrelax perplexity`: a model's perplexity on a text file by llama.cpp's protocol
//! ([`Engine::perplexity`](oxrelax_runtime::engine::Engine::perplexity)), so the figure
//! compares with `llama-perplexity` on the same model, text and context.

use crate::cli::generate::{open_engine, ModelArgs};
use clap::Args;
use oxrelax::checkpoint::Checkpoint;
use oxrelax::model::Quantization;
use oxrelax_runtime::artifact::{is_artifact, Manifest};
use serde::Serialize;
use std::path::{Path, PathBuf};

type CliResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Arguments of `oxrelax perplexity`.
#[derive(Args)]
pub struct PerplexityArgs {
    /// A Hugging Face model folder, a GGUF file, or a compiled artifact, with a tokenizer.
    model: PathBuf,
    /// The text to score (UTF-8), tokenized whole with the model's tokenizer, BOS first.
    #[arg(long)]
    text: PathBuf,
    /// Tokens per chunk: each chunk runs from an empty cache and its second half is
    /// scored.
    #[arg(long, default_value_t = 512)]
    ctx: usize,
    /// Print one JSON object (`ppl`, `nll`: the mean negative log-likelihood, natural log,
    /// of the scored tokens, `tokens`, `chunks`, `ctx`, `quant`: the scheme that ran,
    /// `--quant auto` resolved or an artifact's own) as the last line of stdout.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    load: ModelArgs,
}

/// The `--json` line.
#[derive(Serialize)]
struct PerplexityJson {
    ppl: f64,
    nll: f64,
    tokens: usize,
    chunks: usize,
    ctx: usize,
    quant: String,
}

/// The scheme the model at `dir` runs with: a compiled artifact's recorded one, else
/// `quant` resolved against the checkpoint ([`Quantization::resolve`]).
fn scheme_ran(dir: &Path, quant: Quantization) -> CliResult<String> {
    if is_artifact(dir) {
        return Ok(Manifest::read(dir)?.quantization);
    }
    if quant != Quantization::Auto {
        return Ok(quant.name().to_string());
    }
    Ok(quant
        .resolve(&Checkpoint::open(dir)?.store)
        .name()
        .to_string())
}

/// Runs `oxrelax perplexity`.
pub fn run(args: &PerplexityArgs) -> CliResult<()> {
    let text = oxrelax_runtime::files::read_text(&args.text)
        .map_err(|e| format!("cannot read {}: {e}", args.text.display()))?;
    let mut loaded = open_engine(&args.model, &args.load)?;
    let tokenizer = loaded.tokenizer.as_ref().ok_or_else(|| {
        format!(
            "{} has no tokenizer.json: perplexity needs the model's tokenizer",
            args.model.display()
        )
    })?;
    let tokens = tokenizer.encode(&text, true)?;
    let bos = tokenizer.bos_id().filter(|&b| tokens.first() == Some(&b));
    eprintln!(
        "{}: {} tokens, {} chunks of {}",
        args.text.display(),
        tokens.len(),
        tokens.len() / args.ctx.max(1),
        args.ctx
    );
    let result = loaded
        .engine
        .perplexity(&tokens, args.ctx, bos, |chunk, chunks, ppl| {
            eprintln!("[{chunk}/{chunks}] {ppl:.4}");
        })?;
    println!(
        "perplexity {:.4} over {} tokens ({} chunks of {})",
        result.ppl, result.tokens, result.chunks, args.ctx
    );
    if args.json {
        let line = PerplexityJson {
            ppl: result.ppl,
            nll: result.nll,
            tokens: result.tokens,
            chunks: result.chunks,
            ctx: args.ctx,
            quant: scheme_ran(&args.model, args.load.quant)?,
        };
        println!("{}", serde_json::to_string(&line)?);
    }
    Ok(())
}
