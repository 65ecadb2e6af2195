//! `oxrelax-run`: generate and chat with a compiled artifact using the runtime alone (no
//! compiler inside): the kernels come from the artifact's shared library.

use clap::{Parser, Subcommand};
use oxrelax_runtime::artifact::{Artifact, LoadedEngine};
use oxrelax_runtime::cli::{
    print_error, run_chat, run_generate, ChatArgs, CliResult, GenerateArgs,
};
use oxrelax_runtime::ThreadPool;
use std::path::Path;
use std::process::ExitCode;

/// Runs a model compiled by `oxrelax compile` (an artifact folder), without the compiler.
#[derive(Parser)]
#[command(name = "oxrelax-run", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate text from a prompt; optionally dump every logit row.
    Generate(GenerateArgs),
    /// Chat interactively (stdin lines; /reset, /stats, /exit).
    Chat(ChatArgs),
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            print_error(err.as_ref());
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> CliResult<()> {
    match cli.command {
        Command::Generate(args) => run_generate(&args, open(&args.model)?),
        Command::Chat(args) => run_chat(&args, open(&args.dir)?),
    }
}

/// Opens the artifact in `dir` (every check of [`Artifact::open`]) into an engine on the
/// process-wide thread pool.
fn open(dir: &Path) -> CliResult<LoadedEngine> {
    Ok(Artifact::open(dir)?.into_engine(ThreadPool::global())?)
}
