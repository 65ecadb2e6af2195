//! `oxrelax tokenize`: encode text, or render chats with the chat template and encode
//! them, with a model folder's tokenizer; one JSON line out per input.

use clap::{ArgGroup, Args};
use oxrelax_runtime::chat::{ChatError, ChatTemplate, Message, Tokenizer};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};
use std::path::PathBuf;

/// Arguments of `oxrelax tokenize`.
#[derive(Args)]
#[command(group(ArgGroup::new("input").required(true).args(["text", "stdin_jsonl"])))]
pub struct TokenizeArgs {
    /// A folder with tokenizer.json (and tokenizer_config.json for chats), or a GGUF file.
    dir: PathBuf,
    /// Encode this text without special tokens and print `{"ids": [...]}`.
    #[arg(long)]
    text: Option<String>,
    /// Read JSON lines from stdin. A JSON string is encoded without special tokens; an
    /// object `{"messages": [{"role", "content"}...], "add_generation_prompt": bool}` is
    /// rendered with the chat template and the rendering encoded as it stands (special
    /// tokens written by the template, such as `<s>`, are kept; none are added). Prints
    /// `{"ids": [...]}`, plus `"rendered"` for chats, one line per input line.
    #[arg(long)]
    stdin_jsonl: bool,
}

/// A failure of `oxrelax tokenize`.
#[derive(Debug, thiserror::Error)]
pub enum TokenizeError {
    /// Loading the tokenizer, rendering or encoding failed.
    #[error(transparent)]
    Chat(#[from] ChatError),
    /// An input line that failed; `line` counts from 1.
    #[error("stdin line {line}: {message}")]
    Line {
        /// The line number.
        line: usize,
        /// What was wrong.
        message: String,
    },
    /// Reading stdin or writing stdout failed.
    #[error("{what}: {error}")]
    Io {
        /// `reading stdin` or `writing stdout`.
        what: &'static str,
        /// The operating system's error.
        error: std::io::Error,
    },
}

/// A chat line of the input.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ChatRequest {
    messages: Vec<Message>,
    #[serde(default)]
    add_generation_prompt: bool,
}

/// One output line.
#[derive(Serialize)]
struct Encoded {
    ids: Vec<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rendered: Option<String>,
}

/// The tokenizer and, once a chat line needs it, its compiled chat template.
struct Session {
    tokenizer: Tokenizer,
    template: Option<ChatTemplate>,
}

impl Session {
    fn encode_text(&self, text: &str) -> Result<Encoded, ChatError> {
        let ids = self.tokenizer.encode(text, false)?;
        Ok(Encoded {
            ids,
            rendered: None,
        })
    }

    fn encode_chat(&mut self, request: &ChatRequest) -> Result<Encoded, ChatError> {
        let template = match self.template.take() {
            Some(template) => template,
            None => self.tokenizer.chat_template()?,
        };
        let rendered = template.render(&request.messages, request.add_generation_prompt);
        self.template = Some(template);
        let rendered = rendered?;
        let ids = self.tokenizer.encode(&rendered, false)?;
        Ok(Encoded {
            ids,
            rendered: Some(rendered),
        })
    }

    /// Handles one input line (a JSON string or a chat object).
    fn encode_line(&mut self, line: &str) -> Result<Encoded, String> {
        let value: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
        match value {
            serde_json::Value::String(text) => self.encode_text(&text).map_err(|e| e.to_string()),
            serde_json::Value::Object(_) => {
                let request = ChatRequest::deserialize(value)
                    .map_err(|e| format!("not a chat request: {e}"))?;
                self.encode_chat(&request).map_err(|e| e.to_string())
            }
            other => Err(format!(
                "expected a JSON string or {{\"messages\": [...]}}, got {}",
                json_kind(&other)
            )),
        }
    }
}

fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

fn write_line(out: &mut impl Write, encoded: &Encoded) -> Result<(), TokenizeError> {
    let write = |error| TokenizeError::Io {
        what: "writing stdout",
        error,
    };
    serde_json::to_writer(&mut *out, encoded).map_err(|e| write(e.into()))?;
    out.write_all(b"\n").map_err(write)
}

/// Runs `oxrelax tokenize`.
pub fn run(args: &TokenizeArgs) -> Result<(), TokenizeError> {
    let mut session = Session {
        tokenizer: match Tokenizer::for_model(&args.dir)? {
            Some(tokenizer) => tokenizer,
            None => Tokenizer::from_dir(&args.dir)?,
        },
        template: None,
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if let Some(text) = &args.text {
        write_line(&mut out, &session.encode_text(text)?)?;
    } else {
        for (index, line) in std::io::stdin().lock().lines().enumerate() {
            let line = line.map_err(|error| TokenizeError::Io {
                what: "reading stdin",
                error,
            })?;
            if line.trim().is_empty() {
                continue;
            }
            let encoded = session
                .encode_line(&line)
                .map_err(|message| TokenizeError::Line {
                    line: index + 1,
                    message,
                })?;
            write_line(&mut out, &encoded)?;
        }
    }
    out.flush().map_err(|error| TokenizeError::Io {
        what: "writing stdout",
        error,
    })
}
