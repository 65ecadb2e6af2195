//! Continuous batching: the requests in flight share each decode step. Between steps new
//! requests join (their prompts prefilled a chunk per step, so the others keep streaming)
//! and finished ones leave; each samples with its own settings, streams its text, and
//! stops at EOS, a stop string, its token budget, the context window or a disconnect.

use super::api::Usage;
use super::error::ApiError;
use super::stats::Stats;
use super::worker::{engine_error, Event, FinishReason, Job};
use oxrelax_runtime::chat::Tokenizer;
use oxrelax_runtime::engine::{BatchEngine, EngineConfig, EngineError, SequenceId, TextStream};
use oxrelax_runtime::kv_cache::PageStats;
use oxrelax_runtime::sampler::Sampler;
use std::sync::Arc;
use std::time::Instant;

/// A request in the batch.
pub struct Active<'t> {
    /// The request and where its events go.
    pub job: Job,
    /// Its sequence in the engine, once its prefill starts.
    sequence: Option<SequenceId>,
    /// Prompt ids not prefilled yet (all of them before the sequence is chosen).
    pending: Vec<u32>,
    /// The prompt's length.
    prompt_len: usize,
    /// Prompt ids the sequence already held (reused from an earlier request).
    pub reused: usize,
    sampler: Sampler,
    stream: TextStream<'t>,
    /// Ids generated so far.
    generated: usize,
    /// The last id sampled, to decode next.
    next: Option<u32>,
    /// When the request was admitted.
    pub start: Instant,
}

/// How a request ended: `None` when the client went away.
pub struct Finished<'t> {
    /// The request.
    pub active: Active<'t>,
    /// Why it ended, or the error that ended it.
    pub result: Result<Option<FinishReason>, ApiError>,
}

impl<'t> Active<'t> {
    /// `job` with prompt `ids` (checked to fit). Its sequence is chosen when its prefill
    /// starts, so that a prefix it shares with requests prefilled before it is copied.
    pub fn new(job: Job, ids: Vec<u32>, tokenizer: &'t Tokenizer) -> Active<'t> {
        let _ = job.events.send(Event::Accepted);
        Active {
            sampler: Sampler::new(job.request.sampling.clone()),
            stream: TextStream::new(Some(tokenizer), &ids, &job.request.stop),
            prompt_len: ids.len(),
            pending: ids,
            reused: 0,
            sequence: None,
            job,
            generated: 0,
            next: None,
            start: Instant::now(),
        }
    }

    /// The token counts so far.
    pub fn usage(&self) -> Usage {
        Usage::new(self.prompt_len, self.generated)
    }

    /// Whether the prompt is still being prefilled.
    fn prefilling(&self) -> bool {
        self.sequence.is_none() || !self.pending.is_empty()
    }
}

/// The requests in flight over one engine.
pub struct Batch<'t> {
    engine: BatchEngine,
    /// Where admitted prompts and their reused prefixes are counted.
    stats: Arc<Stats>,
    active: Vec<Active<'t>>,
    /// Requests decoded together at most.
    max_batch: usize,
}

impl<'t> Batch<'t> {
    /// An empty batch over `engine`, of at most `max_batch` requests, counting into
    /// `stats`.
    pub fn new(engine: BatchEngine, max_batch: usize, stats: Arc<Stats>) -> Self {
        Batch {
            engine,
            stats,
            active: Vec::new(),
            max_batch: max_batch.max(1),
        }
    }

    /// The sizes the model was compiled for.
    pub fn config(&self) -> &EngineConfig {
        self.engine.config()
    }

    /// An error unless the page pool can ever hold a request that may reach `positions`
    /// positions (at most the context).
    pub fn check_fits(&self, positions: usize) -> Result<(), EngineError> {
        self.engine.check_fits(positions)
    }

    /// How the KV page pool is used.
    pub fn page_stats(&self) -> PageStats {
        self.engine.page_stats()
    }

    /// Requests in flight.
    pub fn len(&self) -> usize {
        self.active.len()
    }

    /// Requests in flight that hold a sequence (the others wait for KV pages).
    pub fn running(&self) -> usize {
        self.active.iter().filter(|a| a.sequence.is_some()).count()
    }

    /// Whether no request is in flight.
    pub fn is_empty(&self) -> bool {
        self.active.is_empty()
    }

    /// Whether another request may join.
    pub fn has_room(&self) -> bool {
        self.active.len() < self.max_batch
    }

    /// Ends every request in flight (after a panic left the engine in an unknown state):
    /// their sequences are emptied and their event channels closed. Returns how many.
    pub fn clear(&mut self) -> usize {
        let count = self.active.len();
        for sequence in self.active.drain(..).filter_map(|a| a.sequence) {
            self.engine.remove_sequence(sequence);
        }
        count
    }

    /// Adds an admitted request.
    pub fn push(&mut self, active: Active<'t>) {
        self.active.push(active);
    }

    /// One step: a prefill chunk of the first request still prefilling, then a decode
    /// step of every request with a token to decode. Returns the requests that ended.
    pub fn step(&mut self) -> Vec<Finished<'t>> {
        let mut finished = Vec::new();
        if let Some(index) = self.active.iter().position(Active::prefilling) {
            if let Err(error) = self.prefill_chunk(index) {
                finished.push(self.finish(index, Err(engine_error(error))));
            }
        }
        let decoding: Vec<usize> = (0..self.active.len())
            .filter(|&i| self.active[i].next.is_some())
            .collect();
        let steps: Vec<(SequenceId, u32)> = decoding
            .iter()
            .filter_map(|&i| Some((self.active[i].sequence?, self.active[i].next?)))
            .collect();
        if !steps.is_empty() {
            match self.engine.decode(&steps) {
                Ok(logits) => {
                    for (&i, row) in decoding.iter().zip(&logits) {
                        self.sample(i, row);
                    }
                }
                Err(error) => {
                    let error = engine_error(error);
                    for &i in decoding.iter().rev() {
                        finished.push(self.finish(i, Err(error.clone())));
                    }
                }
            }
        }
        // Retire from the back so earlier indices stay valid.
        for i in (0..self.active.len()).rev() {
            if let Some(reason) = self.ended(i) {
                finished.push(self.finish(i, Ok(reason)));
            }
        }
        finished
    }

    /// Prefills the next chunk of request `index`'s prompt; the last one samples its
    /// first token. A request whose pages the pool cannot promise yet waits.
    fn prefill_chunk(&mut self, index: usize) -> Result<(), EngineError> {
        let chunk = self.engine.config().prefill_chunk;
        let active = &mut self.active[index];
        let sequence = match active.sequence {
            Some(sequence) => sequence,
            None => {
                let positions = active
                    .prompt_len
                    .saturating_add(active.job.request.max_tokens);
                let added = self.engine.add_sequence_for(&active.pending, positions);
                if let Err(EngineError::KvPoolBusy { .. }) = added {
                    return Ok(());
                }
                let (sequence, reused) = added?;
                active.pending.drain(..reused);
                (active.sequence, active.reused) = (Some(sequence), reused);
                self.stats.add_prompt(active.prompt_len, reused);
                sequence
            }
        };
        let take = active.pending.len().min(chunk);
        let ids: Vec<u32> = active.pending.drain(..take).collect();
        let logits = self.engine.prefill(sequence, &ids)?;
        if self.active[index].pending.is_empty() {
            self.sample(index, &logits);
        }
        Ok(())
    }

    /// Samples request `index`'s next token from `logits` and streams its text.
    fn sample(&mut self, index: usize, logits: &[f32]) {
        let active = &mut self.active[index];
        let seen = (active.sequence)
            .and_then(|s| self.engine.tokens(s).ok())
            .unwrap_or_default();
        let id = active.sampler.sample(logits, seen);
        active.generated += 1;
        let is_eos = self.engine.is_eos(id);
        match active.stream.push(id, is_eos) {
            Ok(text) if !text.is_empty() => {
                let _ = active.job.events.send(Event::Text(text));
            }
            _ => {}
        }
        active.next = Some(id).filter(|_| !is_eos);
    }

    /// Why request `index` ends now, if it does: `Some(None)` when its client left.
    fn ended(&self, index: usize) -> Option<Option<FinishReason>> {
        let active = &self.active[index];
        if active.job.events.is_closed() {
            return Some(None);
        }
        if active.prefilling() || active.generated == 0 {
            return None;
        }
        let window = self.engine.config().context_window;
        let held = (active.sequence)
            .and_then(|s| self.engine.tokens(s).ok())
            .map_or(0, <[u32]>::len);
        if active.stream.stopped() || active.next.is_none() {
            Some(Some(FinishReason::Stop))
        } else if active.generated >= active.job.request.max_tokens || held >= window {
            Some(Some(FinishReason::Length))
        } else {
            None
        }
    }

    /// Takes request `index` out of the batch (its sequence kept idle for a later
    /// request's prefix) and sends its last events.
    fn finish(
        &mut self,
        index: usize,
        result: Result<Option<FinishReason>, ApiError>,
    ) -> Finished<'t> {
        let mut active = self.active.remove(index);
        if let Some(sequence) = active.sequence {
            self.engine.retire_sequence(sequence);
        }
        let usage = active.usage();
        let events = &active.job.events;
        match &result {
            Ok(Some(finish_reason)) => {
                if let Ok(text) = active.stream.finish() {
                    if !text.is_empty() {
                        let _ = events.send(Event::Text(text));
                    }
                }
                let finish_reason = *finish_reason;
                let _ = active.job.events.send(Event::Done {
                    finish_reason,
                    usage,
                });
            }
            Ok(None) => {}
            Err(error) => {
                let _ = events.send(Event::Failed(error.clone()));
            }
        }
        Finished { active, result }
    }
}
