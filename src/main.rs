//! The `oxrelax` command line.

mod cli;

use clap::{Parser, Subcommand};
use oxrelax::passes::{default_pipeline, Instrument};
use std::path::PathBuf;
use std::process::ExitCode;

/// A Relax-style tensor compiler for on-device LLM inference.
#[derive(Parser)]
#[command(name = "oxrelax", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Read a module in the text form, run the host's front-end pipeline (normalize, the
    /// split and rewrite phases, weight quantization in quantized functions, lifting
    /// weight-only computations into transform_params, legalize ops, fuse ops, dead code
    /// elimination) and print the result.
    Opt {
        /// The module's text form.
        file: PathBuf,
        /// Write the module before the first pass and after each pass into this folder.
        #[arg(long)]
        dump_dir: Option<PathBuf>,
        /// Print the wall time of each pass, and what the rewrite phases did, to stderr.
        #[arg(long)]
        time: bool,
        /// Check well-formedness after every pass.
        #[arg(long)]
        verify: bool,
    },
    /// Time the compiled matmul, softmax and rms_norm kernels and a decode GEMV on cold
    /// weights (f32 activations, weights stored as --cold-quant says: f32 by default;
    /// symbolic token count) next to measured memory bandwidth and fp32 FMA peak, and
    /// numpy; `--json` adds one JSON line of rows.
    BenchKernel(oxrelax::bench::BenchArgs),
    /// Encode text, or render chats with the chat template and encode them, with a model
    /// folder's tokenizer; prints one JSON line per input.
    Tokenize(cli::tokenize::TokenizeArgs),
    /// Compile a Hugging Face model folder or a GGUF file into an artifact folder
    /// (bytecode, module, converted weights, tokenizer, manifest with hashes).
    Compile(cli::compile::CompileArgs),
    /// Print a model's IR after a pass of the compile pipeline, or write it after every
    /// pass into a folder.
    DumpIr(cli::dump_ir::DumpIrArgs),
    /// Generate text from a prompt with a model; optionally dump every logit row.
    Generate(cli::generate::GenerateCommand),
    /// Chat with a model interactively (stdin lines; /help lists the commands; a line
    /// that is not UTF-8 is reported and skipped; the end of input ends the chat without
    /// an error).
    Chat(cli::chat::ChatCommand),
    /// Measure a model's prefill and decode speed (median tok/s) and peak memory.
    Bench(cli::bench::BenchArgs),
    /// Load-test an OpenAI-compatible server (this one's `serve`, llama.cpp's
    /// llama-server): concurrent clients streaming greedy completions with a shared
    /// prompt prefix; throughput, time to first token and between tokens.
    BenchServe(cli::bench_serve::BenchServeArgs),
    /// A model's perplexity on a text file, by llama.cpp's protocol (chunks of --ctx
    /// tokens, the second half of each scored).
    Perplexity(cli::perplexity::PerplexityArgs),
    /// How far a quantized model's logits drift from the q0f32 model's over one greedy
    /// generation (max |diff|, top-1 agreement).
    Compare(cli::compare::CompareArgs),
    /// Check an artifact's `npu/` folder (model_net.json, model.bin) against QNN's op
    /// definitions and the runtime's rules; prints every violation.
    #[cfg(feature = "npu")]
    QnnValidate(cli::qnn_validate::QnnValidateArgs),
    /// Serve a model over an OpenAI-compatible HTTP API (`POST /v1/completions`,
    /// `POST /v1/chat/completions`, `GET /v1/models`, `GET /v1/models/{id}`,
    /// `GET /health`, `GET /stats`) until SIGTERM or Ctrl-C.
    Serve(cli::serve::ServeCommand),
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            oxrelax_runtime::cli::print_error(err.as_ref());
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<(), Box<dyn std::error::Error>> {
    match cli.command {
        Command::Opt {
            file,
            dump_dir,
            time,
            verify,
        } => {
            let text = oxrelax_runtime::files::read_text(&file)
                .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            let module = oxrelax_dsl::text::parse_module(&text)
                .map_err(|e| format!("{}: {e}", file.display()))?;
            let pipeline = default_pipeline().instrumented(Instrument {
                dump_dir,
                verify,
                verify_text: false,
                verbose: time,
            });
            let (module, report) = pipeline.run(module)?;
            if time {
                for timing in &report.timings {
                    eprintln!(
                        "{:>10.3} ms  {}",
                        timing.elapsed.as_secs_f64() * 1e3,
                        timing.pass
                    );
                }
            }
            print!("{}", oxrelax_dsl::text::print_module(&module));
            Ok(())
        }
        Command::BenchKernel(args) => Ok(oxrelax::bench::run(&args, &mut std::io::stdout())?),
        Command::Tokenize(args) => Ok(cli::tokenize::run(&args)?),
        Command::Compile(args) => cli::compile::run(&args),
        Command::DumpIr(args) => cli::dump_ir::run(&args),
        Command::Generate(args) => cli::generate::run(&args),
        Command::Chat(args) => cli::chat::run(&args),
        Command::Bench(args) => cli::bench::run(&args),
        Command::BenchServe(args) => cli::bench_serve::run(&args),
        Command::Perplexity(args) => cli::perplexity::run(&args),
        Command::Compare(args) => cli::compare::run(&args),
        #[cfg(feature = "npu")]
        Command::QnnValidate(args) => cli::qnn_validate::run(&args),
        Command::Serve(args) => cli::serve::run(&args),
    }
}
