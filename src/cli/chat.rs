//! `oxrelax chat`: the runtime's `chat` command on a Hugging Face folder (compiled now)
//! or an artifact.

use crate::cli::generate::{open_engine, ModelArgs};
use clap::Args;
use oxrelax_runtime::cli::{run_chat, ChatArgs, CliResult};

/// Arguments of `oxrelax chat`.
#[derive(Args)]
pub struct ChatCommand {
    #[command(flatten)]
    run: ChatArgs,
    #[command(flatten)]
    load: ModelArgs,
}

/// Runs `oxrelax chat`.
pub fn run(args: &ChatCommand) -> CliResult<()> {
    run_chat(&args.run, open_engine(&args.run.dir, &args.load)?)
}
