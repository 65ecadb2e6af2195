//! Errors of the chat engine.

use crate::chat::ChatError;
use crate::vm::VmError;

/// Why an engine call failed. Nothing runs when the request itself is invalid.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The tokens would not fit in the KV cache.
    #[error(
        "context window of {window} tokens exceeded: {cached} tokens are in the KV cache \
         and {adding} more were asked for (total {})",
        total(*cached, *adding)
    )]
    ContextOverflow {
        /// Positions the KV cache holds at most.
        window: usize,
        /// Tokens already in the cache.
        cached: usize,
        /// Tokens the call would add.
        adding: usize,
    },
    /// A prefill of no tokens (nothing to compute logits from).
    #[error("`{function}`: the prompt is empty")]
    EmptyPrompt {
        /// The engine call.
        function: &'static str,
    },
    /// Too few tokens for a perplexity run (two chunks at least, of 4 tokens or more).
    #[error(
        "perplexity needs at least 2 chunks of the context ({ctx} tokens, at least 4): \
         the text has {tokens} tokens"
    )]
    TooFewTokens {
        /// Tokens in the text.
        tokens: usize,
        /// The chunk length asked for.
        ctx: usize,
    },
    /// A token id the model has no embedding for.
    #[error("token id {id} at position {position} is out of range for a vocabulary of {vocab}")]
    TokenOutOfRange {
        /// The id.
        id: u32,
        /// Its index in the ids passed.
        position: usize,
        /// The model's vocabulary size.
        vocab: usize,
    },
    /// The configuration cannot work.
    #[error("engine configuration: {0}")]
    Config(String),
    /// A VM function failed.
    #[error("calling `{function}`: {source}")]
    Vm {
        /// The exported function.
        function: &'static str,
        /// The VM's error.
        #[source]
        source: Box<VmError>,
    },
    /// A function returned something other than the logits tensor it should.
    #[error("`{function}` returned {got}, expected f32 logits [1, {tokens}, {vocab}]")]
    BadOutput {
        /// The exported function.
        function: &'static str,
        /// A description of what came back.
        got: String,
        /// Tokens passed.
        tokens: usize,
        /// The vocabulary size.
        vocab: usize,
    },
    /// `create_kv_cache` did not return a KV cache object.
    #[error("`create_kv_cache` returned {0}, not a KV cache")]
    NotACache(String),
    /// The model exports no `batch_decode` (compiled before it existed, or with a
    /// maximum batch of 0).
    #[error("the model exports no `batch_decode`: compile it again with --max-batch above 0")]
    NoBatchDecode,
    /// A sequence id that is not (or no longer) in the batch engine.
    #[error("no sequence {0} in the batch engine")]
    UnknownSequence(u64),
    /// A batched step names a sequence twice.
    #[error("sequence {0} appears twice in one batched step")]
    RepeatedSequence(u64),
    /// A sequence would need more KV pages than the pool holds at all.
    #[error("a sequence of {positions} positions needs {needed} KV pages; the pool holds {pages} (raise --kv-pages or --kv-memory)")]
    KvPoolTooSmall {
        /// Positions asked for.
        positions: usize,
        /// Pages they take.
        needed: usize,
        /// Pages in the pool.
        pages: usize,
    },
    /// The KV pages a new sequence needs are promised to live sequences: retry once some
    /// end.
    #[error(
        "the KV page pool is busy: {needed} pages needed, {free} not promised to live sequences"
    )]
    KvPoolBusy {
        /// Pages the sequence needs.
        needed: usize,
        /// Pages neither held nor promised.
        free: usize,
    },
    /// Tokenizing, rendering the chat template or detokenizing failed.
    #[error(transparent)]
    Chat(Box<ChatError>),
}

impl From<ChatError> for EngineError {
    fn from(error: ChatError) -> Self {
        EngineError::Chat(Box::new(error))
    }
}

/// `cached + adding` in words, also past `usize::MAX`.
fn total(cached: usize, adding: usize) -> String {
    cached.checked_add(adding).map_or_else(
        || format!("more than {}", usize::MAX),
        |total| total.to_string(),
    )
}

impl EngineError {
    /// A failure of the VM function `function`.
    pub(crate) fn vm(function: &'static str, source: VmError) -> Self {
        EngineError::Vm {
            function,
            source: Box::new(source),
        }
    }
}
