//! Streaming detokenization: generated ids in, complete text out.
//!
//! Decoding ids one at a time does not work: a character may span several byte tokens
//! (`<0xF0><0x9F><0xA6><0x99>` with byte fallback, or byte-level BPE pieces), and
//! SentencePiece-style decoders drop the space of the first token they see. So the
//! detokenizer keeps a window: the ids of the text it emitted last (context) followed by
//! the ids not emitted yet (pending). After each id it decodes the context alone and the
//! whole window; what the window adds after the context is the new text. It is held back
//! while it ends in U+FFFD (the decoders' mark for an incomplete UTF-8 sequence), and
//! emitted once the character is complete. Concatenating everything emitted (and the
//! [`Detokenizer::finish`] remainder) gives the decoding of the whole sequence.

use super::error::ChatError;
use super::tokenizer::Tokenizer;

/// How many ids of an earlier text (such as the prompt) to keep as context.
const CONTEXT_IDS: usize = 4;

/// An incremental, UTF-8-safe detokenizer over a [`Tokenizer`].
#[derive(Debug)]
pub struct Detokenizer<'a> {
    tokenizer: &'a Tokenizer,
    skip_special_tokens: bool,
    /// Context ids (already shown) followed by pending ids (not shown yet).
    ids: Vec<u32>,
    /// How many of `ids` are context.
    shown: usize,
}

impl<'a> Detokenizer<'a> {
    /// A detokenizer for a sequence that starts here (nothing shown before it).
    pub fn new(tokenizer: &'a Tokenizer, skip_special_tokens: bool) -> Self {
        Self::with_context(tokenizer, &[], skip_special_tokens)
    }

    /// A detokenizer for ids that continue `context` (typically the prompt), so that the
    /// first generated token keeps the leading space the decoder gives it mid-sequence.
    pub fn with_context(
        tokenizer: &'a Tokenizer,
        context: &[u32],
        skip_special_tokens: bool,
    ) -> Self {
        let ids = context[context.len().saturating_sub(CONTEXT_IDS)..].to_vec();
        Detokenizer {
            tokenizer,
            skip_special_tokens,
            shown: ids.len(),
            ids,
        }
    }

    /// Adds one id; returns the text that became complete, or `None` while the pending ids
    /// end inside a character (or add no text yet).
    pub fn push(&mut self, id: u32) -> Result<Option<String>, ChatError> {
        self.ids.push(id);
        let (shown, all) = self.decode_window()?;
        if all.ends_with(char::REPLACEMENT_CHARACTER) {
            return Ok(None);
        }
        let new = text_after(&all, &shown);
        if new.is_empty() {
            return Ok(None);
        }
        let new = new.to_string();
        self.mark_shown();
        Ok(Some(new))
    }

    /// Emits whatever is pending, incomplete characters included (as U+FFFD), for the end
    /// of generation. The detokenizer can go on afterwards.
    pub fn finish(&mut self) -> Result<String, ChatError> {
        let (shown, all) = self.decode_window()?;
        let rest = text_after(&all, &shown).to_string();
        self.mark_shown();
        Ok(rest)
    }

    /// The decoded context alone, and context plus pending.
    fn decode_window(&self) -> Result<(String, String), ChatError> {
        let skip = self.skip_special_tokens;
        let shown = self.tokenizer.decode(&self.ids[..self.shown], skip)?;
        let all = self.tokenizer.decode(&self.ids, skip)?;
        Ok((shown, all))
    }

    /// The pending ids become the context of what comes next.
    fn mark_shown(&mut self) {
        self.ids.drain(..self.shown);
        self.shown = self.ids.len();
    }
}

/// The part of `all` after `shown`. Decoders used with LLMs only append, so `shown` is a
/// prefix of `all`; should a decoder rewrite earlier text, the text after the longest common
/// prefix is returned.
fn text_after<'t>(all: &'t str, shown: &str) -> &'t str {
    if let Some(rest) = all.strip_prefix(shown) {
        return rest;
    }
    let common = all
        .char_indices()
        .zip(shown.chars())
        .find(|((_, a), b)| a != b)
        .map_or(all.len(), |((i, _), _)| i);
    &all[common..]
}
