//! `chat`: an interactive, streaming, multi-turn conversation on stdin/stdout. The KV
//! cache is reused across turns. A `> ` marker on stderr asks for each line; `/help`
//! lists the commands. Ctrl-C ends the current reply (at the prompt, the program); a line
//! that is not UTF-8 or a turn that fails is reported and the conversation goes on; the
//! end of input ends the chat normally.

use super::interrupt::{self, Replying};
use super::{CliResult, SamplingArgs, SamplingDefaults};
use crate::artifact::LoadedEngine;
use crate::engine::{Chat, ChatOptions, ContextOverflow, Reply, Step, StopReason};
use clap::{Args, ValueEnum};
use std::io::{BufRead, Write};
use std::path::PathBuf;

/// What a turn does when the conversation outgrows the context window.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OverflowArg {
    /// Drop the oldest turns (the system message stays), saying so.
    Truncate,
    /// Refuse the turn; the conversation goes on (/reset to start over).
    Error,
}

/// Arguments of `chat` (`oxrelax chat`, `oxrelax-run chat`).
#[derive(Args)]
pub struct ChatArgs {
    /// The model (a compiled artifact; with `oxrelax`, also a Hugging Face folder or a
    /// GGUF file), with a tokenizer and chat template.
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
    /// When the conversation outgrows the context window: drop the oldest turns, or
    /// refuse the turn.
    #[arg(long, value_enum, default_value = "truncate")]
    context_overflow: OverflowArg,
    #[command(flatten)]
    sampling: SamplingArgs,
}

/// The chat's commands and what they do.
const COMMANDS: [(&str, &str); 4] = [
    ("/help", "list the commands"),
    (
        "/reset",
        "forget the conversation (the system message stays)",
    ),
    ("/stats", "messages, KV cache use and the last turn's speed"),
    ("/exit", "end the chat (so does the end of input)"),
];

/// What a line of input asks for.
#[derive(Debug, PartialEq, Eq)]
enum Input<'a> {
    Nothing,
    Command(&'static str),
    Unknown(&'a str),
    Message(&'a str),
}

/// Reads a line: a known `/command`, an unknown one, or a message (`//` starts a message
/// with `/`).
fn parse_line(line: &str) -> Input<'_> {
    let line = line.trim();
    if line.is_empty() {
        return Input::Nothing;
    }
    if let Some(rest) = line.strip_prefix("//") {
        return Input::Message(&line[line.len() - rest.len() - 1..]);
    }
    if !line.starts_with('/') {
        return Input::Message(line);
    }
    let word = line.split_whitespace().next().unwrap_or(line);
    match COMMANDS.iter().find(|(name, _)| *name == word) {
        Some((name, _)) => Input::Command(name),
        None => Input::Unknown(word),
    }
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
        overflow: match args.context_overflow {
            OverflowArg::Truncate => ContextOverflow::Truncate,
            OverflowArg::Error => ContextOverflow::Error,
        },
    };
    let sampler = args.sampling.sampler(&args.dir, SamplingDefaults::Model)?;
    let mut chat = Chat::new(engine, tokenizer, sampler, options)?;
    interrupt::install();
    eprintln!("chat ready: type a message; /help lists the commands; Ctrl-C ends a reply");
    let mut last: Option<Reply> = None;
    let mut stdin = std::io::stdin().lock();
    let mut line = Vec::new();
    for number in 1.. {
        eprint!("> ");
        line.clear();
        let read = stdin.read_until(b'\n', &mut line);
        if read.map_err(|e| format!("reading stdin: {e}"))? == 0 {
            eprintln!();
            break;
        }
        let Ok(text) = std::str::from_utf8(&line) else {
            eprintln!("[line {number} is not valid UTF-8: ignored]");
            continue;
        };
        match parse_line(text) {
            Input::Nothing => {}
            Input::Command("/exit") => break,
            Input::Command("/reset") => {
                chat.reset()?;
                last = None;
                eprintln!("[conversation reset]");
            }
            Input::Command("/stats") => print_stats(&chat, last.as_ref()),
            Input::Command(_) => print_help(),
            Input::Unknown(word) => eprintln!("[unknown command {word}: /help lists them]"),
            Input::Message(text) => match turn(&mut chat, text)? {
                Ok(reply) => last = Some(reply),
                Err(err) => super::print_error(err.as_ref()),
            },
        }
    }
    Ok(())
}

fn print_help() {
    for (name, what) in COMMANDS {
        eprintln!("  {name:<8} {what}");
    }
    eprintln!("  //text   send a message that starts with /");
}

/// One turn: the reply streams to stdout. The outer error (stdout closed) ends the chat;
/// the inner one (the turn failed: the conversation is unchanged) is reported.
fn turn(chat: &mut Chat, text: &str) -> CliResult<CliResult<Reply>> {
    let mut stdout = std::io::stdout().lock();
    let replying = Replying::start();
    let reply = chat.send(text, |piece| {
        // A closed stdout is noticed by the final newline below.
        let _ = stdout
            .write_all(piece.as_bytes())
            .and_then(|()| stdout.flush());
        match replying.interrupted() {
            true => Step::Stop,
            false => Step::Continue,
        }
    });
    drop(replying);
    writeln!(stdout)?;
    let reply = match reply {
        Ok(reply) => reply,
        Err(err) => return Ok(Err(err.into())),
    };
    report_turn(chat, &reply);
    Ok(Ok(reply))
}

/// Says what happened to the conversation in a turn besides the reply.
fn report_turn(chat: &Chat, reply: &Reply) {
    let window = chat.engine().config().context_window;
    if reply.dropped > 0 {
        eprintln!(
            "[dropped the {} oldest messages to fit the context window of {window} tokens]",
            reply.dropped
        );
    }
    match reply.generation.stop {
        Some(StopReason::Callback) => eprintln!("[interrupted]"),
        Some(StopReason::ContextFull) => {
            eprintln!("[the context window of {window} tokens is full: the reply was cut]")
        }
        _ => {}
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_commands_unknown_commands_or_messages() {
        assert_eq!(parse_line("  \n"), Input::Nothing);
        assert_eq!(parse_line("/reset\n"), Input::Command("/reset"));
        assert_eq!(parse_line("/help me"), Input::Command("/help"));
        assert_eq!(parse_line("/quit"), Input::Unknown("/quit"));
        assert_eq!(parse_line("hello /reset"), Input::Message("hello /reset"));
        assert_eq!(
            parse_line("//reset is a word"),
            Input::Message("/reset is a word")
        );
    }
}
