//! Perplexity by the llama-perplexity protocol, so the figure is directly comparable with
//! llama.cpp's on the same model and text: the token stream (BOS first when the tokenizer
//! adds one) is cut into non-overlapping chunks of `ctx` tokens (a shorter tail is
//! dropped); each chunk runs from an empty KV cache with its first token replaced by BOS
//! (when there is one), and the tokens of its second half are scored: the logits at
//! position `j` predict token `j + 1` for `ctx / 2 <= j <= ctx - 2`. The result is
//! `exp(mean negative log-likelihood)` over every scored token.

use super::{Engine, EngineError};

/// What a perplexity run measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Perplexity {
    /// `exp(nll)`.
    pub ppl: f64,
    /// The mean negative log-likelihood of the scored tokens (natural log).
    pub nll: f64,
    /// Tokens scored.
    pub tokens: usize,
    /// Chunks of `ctx` tokens run.
    pub chunks: usize,
}

impl Engine {
    /// The perplexity of `tokens` in chunks of `ctx` (see the module docs), with `bos`
    /// put first in every chunk. `progress(chunk, chunks, ppl so far)` is called after
    /// each chunk. Leaves the KV cache empty.
    pub fn perplexity(
        &mut self,
        tokens: &[u32],
        ctx: usize,
        bos: Option<u32>,
        mut progress: impl FnMut(usize, usize, f64),
    ) -> Result<Perplexity, EngineError> {
        if ctx < 4 || tokens.len() < 2 * ctx {
            return Err(EngineError::TooFewTokens {
                tokens: tokens.len(),
                ctx,
            });
        }
        let chunks = tokens.len() / ctx;
        let first = ctx / 2;
        let (mut sum, mut count) = (0.0f64, 0usize);
        for (index, chunk) in tokens.chunks_exact(ctx).enumerate() {
            self.reset()?;
            let mut input = chunk.to_vec();
            if let Some(bos) = bos {
                input[0] = bos;
            }
            let logits = self.prefill_all(&input)?;
            for j in first..ctx - 1 {
                sum += negative_log_likelihood(&logits[j], chunk[j + 1]);
                count += 1;
            }
            progress(index + 1, chunks, (sum / count as f64).exp());
        }
        self.reset()?;
        let nll = sum / count as f64;
        Ok(Perplexity {
            ppl: nll.exp(),
            nll,
            tokens: count,
            chunks,
        })
    }
}

/// `-log softmax(logits)[token]`, in f64 (an id outside the row scores as impossible).
pub fn negative_log_likelihood(logits: &[f32], token: u32) -> f64 {
    let Some(&chosen) = logits.get(token as usize) else {
        return f64::INFINITY;
    };
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let total: f64 = logits.iter().map(|&l| f64::from(l - max).exp()).sum();
    total.ln() - f64::from(chosen - max)
}
