//! `oxrelax-run`: generate and chat with a compiled artifact using the runtime alone (no
//! compiler inside): the kernels come from the artifact's shared library.

use clap::{Args, Parser, Subcommand};
use oxrelax_runtime::artifact::{Artifact, GraphBackend, LoadedEngine};
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
    Generate {
        #[command(flatten)]
        run: GenerateArgs,
        #[command(flatten)]
        graphs: GraphArgs,
    },
    /// Chat interactively (stdin lines; /help lists the commands).
    Chat {
        #[command(flatten)]
        run: ChatArgs,
        #[command(flatten)]
        graphs: GraphArgs,
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
        Command::Generate { run, graphs } => run_generate(&run, open(run.model(), &graphs)?),
        Command::Chat { run, graphs } => run_chat(&run, open(&run.dir, &graphs)?),
    }
}

/// The flags of the backends an artifact's graphs beside the CPU run on: the NPU's, with
/// the `npu` feature.
#[derive(Args)]
struct GraphArgs {
    #[cfg(feature = "npu")]
    #[command(flatten)]
    npu: oxrelax_runtime::qnn::cli::NpuArgs,
}

impl GraphArgs {
    /// The backend the flags ask for, if any.
    fn backend(&self) -> Option<Box<dyn GraphBackend>> {
        #[cfg(feature = "npu")]
        if let Some(npu) = self.npu.backend() {
            return Some(Box::new(npu));
        }
        None
    }
}

/// Opens the artifact in `dir` (every check of [`Artifact::open`], its NPU graphs on the
/// backend `graphs` asks for) into an engine on the process-wide thread pool.
fn open(dir: &Path, graphs: &GraphArgs) -> CliResult<LoadedEngine> {
    let backend = graphs.backend();
    Ok(Artifact::open_with(dir, backend.as_deref())?.into_engine(ThreadPool::global())?)
}
