//! Chat templates: the Jinja `chat_template` of `tokenizer_config.json`, rendered with
//! minijinja the way transformers' `apply_chat_template` renders it with Jinja2.
//!
//! What transformers sets up and this mirrors: `trim_blocks` and `lstrip_blocks` on, a
//! single trailing newline of the template dropped, `break`/`continue` allowed, a
//! `raise_exception(message)` function, and the variables `messages`,
//! `add_generation_prompt`, `tools` and `documents` (both `none`) plus the special tokens
//! (`bos_token`, `eos_token`, `unk_token`, `pad_token`) that the config sets. Output is
//! never escaped (minijinja would JSON-escape a template named `*.json`), and booleans and
//! none print as Python prints them (`True`, `False`, `None`). Python string,
//! list and dict methods (`.strip()`, `.startswith()`, `.title()`, `.items()`, ...) come
//! from minijinja-contrib's pycompat layer. A render spends at most [`TEMPLATE_FUEL`]: one
//! fuel per instruction and one per 64 bytes of data the template creates (printed or
//! not), so no template hangs or builds more than about 64 MB, and it writes at most
//! [`TEMPLATE_OUTPUT_LIMIT`] bytes.

use super::error::ChatError;
use minijinja::syntax::SyntaxConfig;
use minijinja::value::ValueKind;
use minijinja::{AutoEscape, Environment, ErrorKind, Output, State, Value};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One turn of a conversation, as a chat template sees it (`message['role']`,
/// `message['content']`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// `system`, `user`, `assistant`, ...
    pub role: String,
    /// The turn's text.
    pub content: String,
}

impl Message {
    /// A message with this role and content.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Message {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// The special tokens a chat template sees as variables; unset ones are undefined there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpecialTokens {
    /// `bos_token`.
    pub bos_token: Option<String>,
    /// `eos_token`.
    pub eos_token: Option<String>,
    /// `unk_token`.
    pub unk_token: Option<String>,
    /// `pad_token`.
    pub pad_token: Option<String>,
}

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    name: String,
    tokens: SpecialTokens,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("name", &self.name)
            .field("tokens", &self.tokens)
            .finish_non_exhaustive()
    }
}

/// The error `raise_exception` attaches, so that rendering can tell it from other failures.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Raised(String);

fn raise_exception(message: String) -> Result<Value, minijinja::Error> {
    Err(
        minijinja::Error::new(ErrorKind::InvalidOperation, message.clone())
            .with_source(Raised(message)),
    )
}

/// Prints values as Jinja2 does: Python's `str` for booleans and none.
fn python_formatter(
    out: &mut Output,
    state: &mut State,
    value: &Value,
) -> Result<(), minijinja::Error> {
    let python = match value.kind() {
        ValueKind::Bool if value.is_true() => "True",
        ValueKind::Bool => "False",
        ValueKind::None => "None",
        _ => return minijinja::escape_formatter(out, state, value),
    };
    out.write_str(python).map_err(minijinja::Error::from)
}

/// The fuel of one render (minijinja charges one per instruction and one per 64 bytes a
/// template creates): a template that loops for ever, or builds strings past about
/// 64 MB, is a render error, never a hang or a runaway allocation. Real chat templates
/// spend a few hundred per message.
pub const TEMPLATE_FUEL: u64 = 1_000_000;

/// The most bytes one render may write: a template whose output grows past it (by
/// looping over its input, say) is an error, never a runaway allocation. The longest
/// context window's text is a few megabytes.
pub const TEMPLATE_OUTPUT_LIMIT: usize = 16 << 20;

/// A render's output, refusing to grow past [`TEMPLATE_OUTPUT_LIMIT`].
#[derive(Default)]
struct BoundedText {
    bytes: Vec<u8>,
    overflowed: bool,
}

impl std::io::Write for BoundedText {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() + buf.len() > TEMPLATE_OUTPUT_LIMIT {
            self.overflowed = true;
            return Err(std::io::Error::other("chat template output limit"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn transformers_syntax() -> SyntaxConfig {
    let mut builder = SyntaxConfig::builder();
    builder.trim_blocks(true).lstrip_blocks(true);
    // Only custom delimiters can make `build` fail, and none are set.
    builder.build().unwrap_or_default()
}

impl ChatTemplate {
    /// Compiles `source`; `name` (typically the config file it came from) names the
    /// template in errors.
    pub fn new(
        name: impl Into<String>,
        source: impl Into<String>,
        tokens: SpecialTokens,
    ) -> Result<Self, ChatError> {
        let name = name.into();
        let mut env = Environment::new();
        env.set_syntax(transformers_syntax());
        env.set_fuel(Some(TEMPLATE_FUEL));
        env.set_auto_escape_callback(|_| AutoEscape::None);
        env.set_formatter(python_formatter);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_template_owned(name.clone(), source.into())
            .map_err(|error| ChatError::TemplateSyntax {
                name: name.clone(),
                error,
            })?;
        Ok(ChatTemplate { env, name, tokens })
    }

    /// The template's name, as given to [`ChatTemplate::new`].
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Renders a conversation; with `add_generation_prompt` the template appends the
    /// header of the assistant's next turn.
    pub fn render(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
    ) -> Result<String, ChatError> {
        let template = self
            .env
            .get_template(&self.name)
            .map_err(|error| self.render_error(error))?;
        let mut out = BoundedText::default();
        let context = self.context(messages, add_generation_prompt);
        match template.render_captured_to(context, &mut out) {
            // Whole `str` writes only: the bytes are UTF-8.
            Ok(_) => Ok(String::from_utf8_lossy(&out.bytes).into_owned()),
            Err(_) if out.overflowed => Err(ChatError::TemplateTooLong {
                name: self.name.clone(),
                limit: TEMPLATE_OUTPUT_LIMIT,
            }),
            Err(error) => Err(self.render_error(error)),
        }
    }

    fn context(&self, messages: &[Message], add_generation_prompt: bool) -> Value {
        let messages: Vec<Value> = messages
            .iter()
            .map(|m| {
                Value::from_pairs([("role", m.role.as_str()), ("content", m.content.as_str())])
            })
            .collect();
        let mut vars: BTreeMap<&str, Value> = BTreeMap::new();
        vars.insert("messages", Value::from(messages));
        vars.insert("add_generation_prompt", Value::from(add_generation_prompt));
        vars.insert("tools", Value::from(()));
        vars.insert("documents", Value::from(()));
        let tokens = [
            ("bos_token", &self.tokens.bos_token),
            ("eos_token", &self.tokens.eos_token),
            ("unk_token", &self.tokens.unk_token),
            ("pad_token", &self.tokens.pad_token),
        ];
        for (key, token) in tokens {
            if let Some(text) = token {
                vars.insert(key, Value::from(text.as_str()));
            }
        }
        Value::from(vars)
    }

    fn render_error(&self, error: minijinja::Error) -> ChatError {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&error);
        while let Some(err) = cause {
            if let Some(Raised(message)) = err.downcast_ref::<Raised>() {
                return ChatError::TemplateRaised {
                    name: self.name.clone(),
                    message: message.clone(),
                };
            }
            cause = err.source();
        }
        ChatError::TemplateRender {
            name: self.name.clone(),
            error,
        }
    }
}
