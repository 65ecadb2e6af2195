//! `chat`: an interactive, streaming, multi-turn conversation on stdin/stdout. The KV
//! cache is reused across turns. Commands: `/reset`, `/stats`, `/exit`.

use super::{CliResult, SamplingArgs};
use crate::artifact::LoadedEngine;
use crate::engine::{Chat, ChatOptions, Reply};
use clap::Args;
use std::io::{BufRead, Write};
use std::path::PathBuf;

/// Arguments of `chat` (`oxrelax chat`, `oxrelax-run chat`).
#[derive(Args)]
pub struct ChatArgs {
    /// The model (a compiled artifact; with `oxrelax`, also a Hugging Face folder), with
    /// a tokenizer and chat template.
    pub dir: PathBuf,
    /// Tokens per reply at most.
    #[arg(long, default_value_t = 256)]
    max_new_tokens: usize,
    /// A system message.
    #[arg(long)]
    system: Option<String>,
    /// Text that ends a reply (repeatable).
    #[arg(long)]
    stop: Vec<String>,
    #[command(flatten)]
    sampling: SamplingArgs,
}

/// Runs `chat` on `model` (opened from `args.dir`) until `/exit` or the end of stdin.
pub fn run_chat(args: &ChatArgs, model: LoadedEngine) -> CliResult<()> {
    let LoadedEngine { engine, tokenizer } = model;
    let tokenizer =
        tokenizer.ok_or_else(|| format!("{} has no tokenizer.json", args.dir.display()))?;
    let options = ChatOptions {
        max_new_tokens: args.max_new_tokens,
        stop: args.stop.clone(),
        system: args.system.clone(),
        keep_logits: false,
    };
    let mut chat = Chat::new(engine, tokenizer, args.sampling.sampler()?, options)?;
    eprintln!("chat ready: /reset forgets the conversation, /stats, /exit (or end of input)");
    let mut last: Option<Reply> = None;
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let line = line.map_err(|e| format!("reading stdin: {e}"))?;
        match line.trim() {
            "" => continue,
            "/exit" => break,
            "/reset" => {
                chat.reset()?;
                last = None;
                eprintln!("[conversation reset]");
            }
            "/stats" => print_stats(&chat, last.as_ref()),
            text => last = Some(turn(&mut chat, text)?),
        }
    }
    Ok(())
}

/// One turn: the reply streams to stdout. A conversation that outgrew the context
/// window is reported and the turn dropped; other errors end the chat.
fn turn(chat: &mut Chat, text: &str) -> CliResult<Reply> {
    let mut stdout = std::io::stdout().lock();
    let reply = chat.send(text, |piece| {
        // A closed stdout is noticed by the final newline below.
        let _ = stdout
            .write_all(piece.as_bytes())
            .and_then(|()| stdout.flush());
    })?;
    writeln!(stdout)?;
    Ok(reply)
}

fn print_stats(chat: &Chat, last: Option<&Reply>) {
    let engine = chat.engine();
    eprintln!(
        "[{} messages, {} of {} context tokens in the KV cache]",
        chat.messages().len(),
        engine.len(),
        engine.config().context_window
    );
    if let Some(reply) = last {
        eprintln!(
            "[last turn: {} of {} prompt tokens reused from the cache; {}]",
            reply.reused,
            reply.prompt_ids.len(),
            reply.generation.stats
        );
    }
}
