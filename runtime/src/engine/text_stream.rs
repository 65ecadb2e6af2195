//! [`TextStream`]: generated ids turned into the text to show, as they come.

use super::error::EngineError;
use super::stop::StopMatcher;
use crate::chat::{Detokenizer, Tokenizer};

/// Generated ids as text: detokenized with the prompt as context (special tokens and EOS
/// not rendered; without a tokenizer, each id and a space), held back while it may be the
/// start of a stop string, and ended by one (which is not shown).
pub struct TextStream<'a> {
    detokenizer: Option<Detokenizer<'a>>,
    stops: StopMatcher,
}

impl<'a> TextStream<'a> {
    /// A stream of what follows `prompt`, ended by any of `stops`.
    pub fn new(tokenizer: Option<&'a Tokenizer>, prompt: &[u32], stops: &[String]) -> Self {
        TextStream {
            detokenizer: tokenizer.map(|t| Detokenizer::with_context(t, prompt, true)),
            stops: StopMatcher::new(stops),
        }
    }

    /// The text that can be shown once `id` (an EOS id when `is_eos`) is generated:
    /// often empty.
    pub fn push(&mut self, id: u32, is_eos: bool) -> Result<String, EngineError> {
        let piece = match self.detokenizer.as_mut() {
            Some(_) if is_eos => None,
            Some(detokenizer) => detokenizer.push(id)?,
            None => Some(format!("{id} ")),
        };
        Ok(piece.map_or_else(String::new, |p| self.stops.push(&p)))
    }

    /// Whether a stop string was seen (nothing more is shown).
    pub fn stopped(&self) -> bool {
        self.stops.stopped()
    }

    /// The text still held, once generation has ended (nothing after a stop string).
    pub fn finish(&mut self) -> Result<String, EngineError> {
        if self.stops.stopped() {
            return Ok(String::new());
        }
        let rest = match self.detokenizer.as_mut() {
            Some(detokenizer) => detokenizer.finish()?,
            None => String::new(),
        };
        Ok(self.stops.push(&rest) + &self.stops.finish())
    }
}
