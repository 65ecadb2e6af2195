//! `oxrelax-run`: generate and chat with a compiled artifact using the runtime alone (no
//! compiler inside): the kernels come from the artifact's shared library.

use clap::{Parser, Subcommand};
use oxrelax_runtime::artifact::{Artifact, LoadedEngine};
use oxrelax_runtime::cli::{
    print_error, run_chat, run_generate, ChatArgs, CliResult, GenerateArgs, NpuArgs,
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
    Generate {
        #[command(flatten)]
        run: GenerateArgs,
        #[command(flatten)]
        npu: NpuArgs,
    },
    /// Chat interactively (stdin lines; /help lists the commands).
    Chat {
        #[command(flatten)]
        run: ChatArgs,
        #[command(flatten)]
        npu: NpuArgs,
    },
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
        Command::Generate { run, npu } => run_generate(&run, open(run.model(), &npu)?),
        Command::Chat { run, npu } => run_chat(&run, open(&run.dir, &npu)?),
    }
}

/// Opens the artifact in `dir` (every check of [`Artifact::open`], its NPU graphs on the
/// backend `npu` asks for) into an engine on the process-wide thread pool.
fn open(dir: &Path, npu: &NpuArgs) -> CliResult<LoadedEngine> {
    Ok(Artifact::open_with(dir, npu.backend().as_ref())?.into_engine(ThreadPool::global())?)
}
