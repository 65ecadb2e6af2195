//! [`Chat`]: a multi-turn conversation over an [`Engine`], reusing the KV cache across
//! turns and streaming text.

use super::error::EngineError;
use super::generate::{GenerateOptions, Generation, Step};
use super::step::Engine;
use super::stop::StopMatcher;
use crate::chat::{ChatTemplate, Detokenizer, Message, Tokenizer};
use crate::sampler::Sampler;

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
}

impl Default for ChatOptions {
    fn default() -> Self {
        ChatOptions {
            max_new_tokens: 256,
            stop: Vec::new(),
            system: None,
            keep_logits: false,
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
}

/// The length of the longest common prefix of `a` and `b`.
pub fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
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
        };
        chat.start();
        Ok(chat)
    }

    fn start(&mut self) {
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

    /// Adds a user message and generates the assistant's reply, calling `on_text` with
    /// each piece of text as it becomes complete. Only the part of the rendered
    /// conversation that the cache does not hold is prefilled. A conversation too long
    /// for the context window is an error and leaves the conversation unchanged.
    pub fn send(
        &mut self,
        user: &str,
        mut on_text: impl FnMut(&str),
    ) -> Result<Reply, EngineError> {
        let mut messages = self.messages.clone();
        messages.push(Message::new("user", user));
        let rendered = self.template.render(&messages, true)?;
        let ids = self.tokenizer.encode(&rendered, false)?;
        // At least one token is prefilled: its logits start the reply.
        let reused = common_prefix(self.engine.tokens(), &ids).min(ids.len().saturating_sub(1));
        let window = self.engine.config().context_window;
        if ids.len() > window {
            return Err(EngineError::ContextOverflow {
                window,
                cached: reused,
                adding: ids.len() - reused,
            });
        }
        self.engine.truncate(reused)?;
        let options = GenerateOptions {
            max_new_tokens: self.options.max_new_tokens,
            ignore_eos: false,
            keep_logits: self.options.keep_logits,
        };
        let mut detokenizer = Detokenizer::with_context(&self.tokenizer, &ids, true);
        let mut stops = StopMatcher::new(&self.options.stop);
        let mut text = String::new();
        let mut show = |piece: String, text: &mut String| {
            if !piece.is_empty() {
                on_text(&piece);
                text.push_str(&piece);
            }
        };
        let generation =
            self.engine
                .generate(&ids[reused..], options, &mut self.sampler, |token| {
                    if token.is_eos {
                        return Ok(Step::Continue);
                    }
                    if let Some(piece) = detokenizer.push(token.id)? {
                        show(stops.push(&piece), &mut text);
                    }
                    Ok(if stops.stopped() {
                        Step::Stop
                    } else {
                        Step::Continue
                    })
                })?;
        if !stops.stopped() {
            let rest = detokenizer.finish()?;
            show(stops.push(&rest), &mut text);
            show(stops.finish(), &mut text);
        }
        messages.push(Message::new("assistant", text.clone()));
        self.messages = messages;
        Ok(Reply {
            text,
            prompt_ids: ids,
            reused,
            generation,
        })
    }
}
