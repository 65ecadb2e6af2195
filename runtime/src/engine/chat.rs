//! [`Chat`]: a multi-turn conversation over an [`Engine`], reusing the KV cache across
//! turns and streaming text.

use super::error::EngineError;
use super::generate::{GenerateOptions, Generation, Step};
use super::step::Engine;
use super::text_stream::TextStream;
use crate::chat::{ChatTemplate, Message, Tokenizer};
use crate::sampler::Sampler;

/// What a turn does when the conversation no longer fits the context window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextOverflow {
    /// Drop the oldest turns (the system message stays) until the conversation leaves
    /// room for a reply.
    Truncate,
    /// Refuse the turn with [`EngineError::ContextOverflow`] (the conversation is kept).
    Error,
}

/// How a chat generates replies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatOptions {
    /// Tokens per reply at most.
    pub max_new_tokens: usize,
    /// Text that ends a reply (not shown, not kept in the conversation).
    pub stop: Vec<String>,
    /// A system message opening the conversation.
    pub system: Option<String>,
    /// Keep the logits of every reply (see [`GenerateOptions::keep_logits`]).
    pub keep_logits: bool,
    /// What to do when the conversation outgrows the context window.
    pub overflow: ContextOverflow,
}

impl Default for ChatOptions {
    /// 256 tokens per reply, no stop strings or system message, oldest turns dropped on
    /// overflow.
    fn default() -> Self {
        ChatOptions {
            max_new_tokens: 256,
            stop: Vec::new(),
            system: None,
            keep_logits: false,
            overflow: ContextOverflow::Truncate,
        }
    }
}

/// One assistant reply.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The reply's text (without EOS or stop string).
    pub text: String,
    /// The whole conversation rendered for this turn, as ids.
    pub prompt_ids: Vec<u32>,
    /// How many of `prompt_ids` were already in the KV cache (not prefilled again).
    pub reused: usize,
    /// Messages dropped from the start of the conversation to fit the context window.
    pub dropped: usize,
    /// The generated ids, why generation stopped, timing (and logits if kept).
    pub generation: Generation,
}

/// A conversation: messages, the chat template, and an engine whose cache holds (a
/// prefix of) the rendered conversation.
#[derive(Debug)]
pub struct Chat {
    engine: Engine,
    tokenizer: Tokenizer,
    template: ChatTemplate,
    sampler: Sampler,
    options: ChatOptions,
    messages: Vec<Message>,
    /// The rendered conversation up to the end of the last reply and the ids it is held
    /// as: the prompt's ids and the generated ones, not the reply re-tokenized.
    held: Option<Held>,
}

/// Text and the ids that stand for it.
#[derive(Debug, Clone, Default)]
struct Held {
    text: String,
    ids: Vec<u32>,
}

impl Chat {
    /// A new conversation (the engine's cache is emptied).
    pub fn new(
        mut engine: Engine,
        tokenizer: Tokenizer,
        sampler: Sampler,
        options: ChatOptions,
    ) -> Result<Self, EngineError> {
        let template = tokenizer.chat_template()?;
        engine.reset()?;
        let mut chat = Chat {
            engine,
            tokenizer,
            template,
            sampler,
            options,
            messages: Vec::new(),
            held: None,
        };
        chat.start();
        Ok(chat)
    }

    fn start(&mut self) {
        self.held = None;
        self.messages = self
            .options
            .system
            .iter()
            .map(|system| Message::new("system", system.clone()))
            .collect();
    }

    /// The conversation so far.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The engine (its cache holds the conversation).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The engine, mutably (changing its cache makes the next turn re-prefill what
    /// differs).
    pub fn engine_mut(&mut self) -> &mut Engine {
        &mut self.engine
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Forgets the conversation (the system message stays) and empties the cache.
    pub fn reset(&mut self) -> Result<(), EngineError> {
        self.engine.reset()?;
        self.start();
        Ok(())
    }

    /// Adds a user message and generates the assistant's reply, calling `on_text` after
    /// each token with the text it completed (often empty); `on_text` may end the reply
    /// ([`Step::Stop`]). Only the part of the rendered conversation that the cache does not
    /// hold is prefilled, and an earlier reply is kept as the ids generated rather than
    /// re-tokenized. A conversation too long for the context window is handled as
    /// [`ChatOptions::overflow`] says; an error leaves the conversation unchanged.
    pub fn send(
        &mut self,
        user: &str,
        mut on_text: impl FnMut(&str) -> Step,
    ) -> Result<Reply, EngineError> {
        let mut messages = self.messages.clone();
        messages.push(Message::new("user", user));
        let (rendered, ids, dropped) = self.fit(&mut messages)?;
        let reused = self.engine.reuse_prefix(&ids)?;
        let options = GenerateOptions {
            max_new_tokens: self.options.max_new_tokens,
            ignore_eos: false,
            keep_logits: self.options.keep_logits,
        };
        let mut stream = TextStream::new(Some(&self.tokenizer), &ids, &self.options.stop);
        let mut text = String::new();
        let generation =
            self.engine
                .generate(&ids[reused..], options, &mut self.sampler, |token| {
                    let shown = stream.push(token.id, token.is_eos)?;
                    text.push_str(&shown);
                    let step = on_text(&shown);
                    Ok(if stream.stopped() {
                        Step::StopSequence
                    } else {
                        step
                    })
                })?;
        let rest = stream.finish()?;
        on_text(&rest);
        text.push_str(&rest);
        self.held = self.held_after(&rendered, &ids, &text, &generation, stream.stopped());
        messages.push(Message::new("assistant", text.clone()));
        self.messages = messages;
        Ok(Reply {
            text,
            prompt_ids: ids,
            reused,
            dropped,
            generation,
        })
    }

    /// Renders `messages` and encodes them, dropping the oldest turns first when the
    /// options say so and the conversation leaves no room for a reply; returns the text,
    /// its ids and how many messages were dropped.
    fn fit(&self, messages: &mut Vec<Message>) -> Result<(String, Vec<u32>, usize), EngineError> {
        let window = self.engine.config().context_window;
        let room = self.options.max_new_tokens.min(window / 2);
        let mut dropped = 0;
        loop {
            let rendered = self.template.render(messages, true)?;
            let ids = self.encode_continuing(&rendered)?;
            let fits = ids.len() + room <= window;
            let can_drop = self.options.overflow == ContextOverflow::Truncate;
            let oldest = can_drop.then(|| oldest_turn(messages)).flatten();
            match (fits, oldest) {
                (false, Some(turn)) => {
                    dropped += turn.len();
                    messages.drain(turn);
                }
                _ if ids.len() > window || ids.is_empty() => {
                    return Err(EngineError::ContextOverflow {
                        window,
                        cached: 0,
                        adding: ids.len(),
                    })
                }
                _ => return Ok((rendered, ids, dropped)),
            }
        }
    }

    /// The ids of `rendered`: those held for its start when it continues the held text,
    /// then the rest encoded.
    fn encode_continuing(&self, rendered: &str) -> Result<Vec<u32>, EngineError> {
        let held = self.held.as_ref().filter(|h| rendered.starts_with(&h.text));
        let Some(held) = held else {
            return Ok(self.tokenizer.encode(rendered, false)?);
        };
        let rest = self.tokenizer.encode(&rendered[held.text.len()..], false)?;
        Ok([held.ids.as_slice(), &rest].concat())
    }

    /// What the conversation is held as after a reply: the prompt and the generated ids
    /// (without a final EOS) stand for the rendered prompt and the reply's text. Not when
    /// a stop string ended the reply: the ids then run past the text.
    fn held_after(
        &self,
        rendered: &str,
        ids: &[u32],
        text: &str,
        generation: &Generation,
        stopped_by_string: bool,
    ) -> Option<Held> {
        if stopped_by_string {
            return None;
        }
        let generated = match generation.ids.split_last() {
            Some((&last, rest)) if self.engine.is_eos(last) => rest,
            _ => &generation.ids,
        };
        Some(Held {
            text: format!("{rendered}{text}"),
            ids: [ids, generated].concat(),
        })
    }
}

/// The oldest turn that may be dropped: the first user message after any system message,
/// through the assistant reply that follows it; never the last message (the new one).
fn oldest_turn(messages: &[Message]) -> Option<std::ops::Range<usize>> {
    let start = messages.iter().position(|m| m.role != "system")?;
    let end = messages[start + 1..]
        .iter()
        .position(|m| m.role == "user")
        .map_or(messages.len(), |i| start + 1 + i);
    (end < messages.len()).then_some(start..end)
}
