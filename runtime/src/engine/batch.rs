//! [`BatchEngine`]: many sequences over one model, each with its own KV cache, decoded
//! together: one `batch_decode` call runs a token of every sequence in the batch, so each
//! weight is streamed once per step for all of them (a decode GEMV becomes a small GEMM).
//! A sequence's prompt is prefilled alone (the single-sequence `prefill`, in chunks), and
//! so is a batch of one decoded (`decode`).
//!
//! The caches take pages from one pool ([`PagePool`]); sequences sharing a prompt prefix
//! share its pages. A sequence is admitted with the positions it may reach (its prompt and
//! its token budget) only while the pool can keep that promise to every live sequence,
//! after dropping ended ones kept for their prefixes; so a step never runs out of pages.

use super::error::EngineError;
use super::step::{common_prefix, Engine, EngineConfig};
use crate::kv_cache::{KvBatch, PagePool, PageStats, PoolSize, SharedKvCache};
use crate::tensor::Tensor;
use crate::value::{Object, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

/// The exported function that decodes a batch.
const BATCH_DECODE: &str = "batch_decode";

/// A sequence of a [`BatchEngine`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SequenceId(u64);

/// One sequence: its cache, the ids it holds and the positions it may reach.
#[derive(Clone)]
struct Sequence {
    cache: Value,
    tokens: Vec<u32>,
    promised: usize,
}

/// A model and the sequences it decodes in batches.
pub struct BatchEngine {
    /// The model (its own cache is swapped with a sequence's to prefill that sequence).
    engine: Engine,
    max_batch: usize,
    sequences: BTreeMap<SequenceId, Sequence>,
    /// Ended sequences, oldest first, at most `max_batch`: a new sequence takes over the
    /// one holding the longest prefix of its prompt (or an empty one).
    idle: Vec<Sequence>,
    next_id: u64,
    pool: Arc<PagePool>,
}

impl std::fmt::Debug for BatchEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchEngine")
            .field("max_batch", &self.max_batch)
            .field("sequences", &self.sequences.len())
            .finish_non_exhaustive()
    }
}

impl BatchEngine {
    /// A batch engine over `engine`'s model, which must export `batch_decode` (compiled
    /// with a maximum batch above 0); its bound is the largest batch one call decodes.
    /// Its page pool holds `max_batch` full contexts.
    pub fn new(engine: Engine) -> Result<BatchEngine, EngineError> {
        BatchEngine::with_pool(engine, None)
    }

    /// [`BatchEngine::new`] with a page pool of `size` (`None`: `max_batch` full
    /// contexts).
    pub fn with_pool(engine: Engine, size: Option<PoolSize>) -> Result<BatchEngine, EngineError> {
        let max_batch = BatchEngine::bound(&engine)?;
        // The engine's own cache has the shape the pool's caches take.
        let size = size.unwrap_or(PoolSize::Contexts(max_batch));
        let pool = PagePool::new(&lock(shared(&engine.cache)?), size)
            .map_err(|e| EngineError::Config(format!("the KV page pool: {e}")))?;
        Ok(BatchEngine {
            engine,
            max_batch,
            sequences: BTreeMap::new(),
            idle: Vec::new(),
            next_id: 0,
            pool,
        })
    }

    /// The most sequences one `batch_decode` call of `engine`'s model takes (the bound of
    /// its symbolic batch), or [`EngineError::NoBatchDecode`].
    pub fn bound(engine: &Engine) -> Result<usize, EngineError> {
        let function = engine.vm.executable().functions.get(BATCH_DECODE);
        let bound = function
            .and_then(|f| f.dims.iter().find(|d| d.name == "b"))
            .and_then(|d| d.upper_bound)
            .filter(|&b| b > 0)
            .ok_or(EngineError::NoBatchDecode)?;
        usize::try_from(bound).map_err(|_| EngineError::NoBatchDecode)
    }

    /// How the KV page pool is used.
    pub fn page_stats(&self) -> PageStats {
        self.pool.stats()
    }

    /// The sizes the model was compiled for, and its EOS ids.
    pub fn config(&self) -> &EngineConfig {
        self.engine.config()
    }

    /// Sequences one `batch_decode` call takes at most ([`BatchEngine::decode`] splits
    /// larger batches).
    pub fn max_batch(&self) -> usize {
        self.max_batch
    }

    /// The sequences alive.
    pub fn len(&self) -> usize {
        self.sequences.len()
    }

    /// Whether no sequence is alive.
    pub fn is_empty(&self) -> bool {
        self.sequences.is_empty()
    }

    /// Whether `id` ends generation.
    pub fn is_eos(&self, id: u32) -> bool {
        self.engine.is_eos(id)
    }

    /// Starts an empty sequence that may reach the full context.
    pub fn add_sequence(&mut self) -> Result<SequenceId, EngineError> {
        let context = self.config().context_window;
        self.add_sequence_for(&[], context).map(|(id, _)| id)
    }

    /// Starts a sequence for a prompt of `ids` that may reach `positions` positions (the
    /// prompt and the tokens it may generate; at least the prompt, at most the context):
    /// [`EngineError::KvPoolBusy`] while the page pool cannot promise them besides what
    /// it promised the live sequences, [`EngineError::KvPoolTooSmall`] if it never can.
    /// The sequence holds the longest prefix of `ids` any
    /// sequence holds (at least one of `ids` left to prefill, as
    /// [`Engine::reuse_prefix`]), so that prefix is not computed again. An ended sequence
    /// that `ids` continues is taken over; otherwise the prefix is copied (from a live
    /// sequence, or an ended one, which stays for later prompts) into a new cache, or
    /// into the least recently used ended sequence's once [`max_batch`] are kept.
    /// Returns the sequence and the prefix's length.
    ///
    /// [`max_batch`]: BatchEngine::max_batch
    pub fn add_sequence_for(
        &mut self,
        ids: &[u32],
        positions: usize,
    ) -> Result<(SequenceId, usize), EngineError> {
        let promised = positions.max(ids.len()).min(self.config().context_window);
        self.make_room(promised)?;
        let reusable = |held: &[u32]| common_prefix(held, ids).min(ids.len().saturating_sub(1));
        let idle = (0..self.idle.len()).max_by_key(|&i| reusable(&self.idle[i].tokens));
        let idle_len = idle.map_or(0, |i| reusable(&self.idle[i].tokens));
        let live = (self.sequences.values())
            .map(|s| (s, reusable(&s.tokens)))
            .max_by_key(|&(_, len)| len)
            .filter(|&(_, len)| len > idle_len)
            .map(|(s, len)| (s.clone(), len));
        let id = SequenceId(self.next_id);
        self.next_id += 1;
        // The ended sequence holding the prefix, out of the list meanwhile.
        let idle = idle.filter(|_| live.is_none() && idle_len > 0);
        let mut idle = idle.map(|i| self.idle.remove(i));
        if let Some(taken) = idle.take_if(|s| s.tokens.len() == idle_len) {
            self.sequences.insert(id, Sequence { promised, ..taken });
            return Ok((id, idle_len));
        }
        let copied = self.empty_cache().and_then(|cache| {
            let tokens = Vec::new();
            let sequence = Sequence {
                cache,
                tokens,
                promised,
            };
            self.sequences.insert(id, sequence);
            match (&idle, live) {
                (Some(source), _) => self.copy_prefix(source, id, idle_len).map(|()| idle_len),
                (None, Some((source, len))) => self.copy_prefix(&source, id, len).map(|()| len),
                (None, None) => Ok(0),
            }
        });
        // The source stays, as the most recently used.
        if let Some(source) = idle {
            self.idle.push(source);
        }
        copied.map(|len| (id, len)).inspect_err(|_| {
            self.sequences.remove(&id);
        })
    }

    /// [`EngineError::KvPoolTooSmall`] if a sequence that may reach `positions` positions
    /// (at most the context) needs more pages than the pool holds.
    pub fn check_fits(&self, positions: usize) -> Result<(), EngineError> {
        let positions = positions.min(self.config().context_window);
        let (needed, pages) = (self.pool.pages_for(positions), self.pool.pages());
        if needed > pages {
            return Err(EngineError::KvPoolTooSmall {
                positions,
                needed,
                pages,
            });
        }
        Ok(())
    }

    /// Drops ended sequences, least recently used first, until the pool can promise
    /// `positions` more positions besides the pages live sequences hold or were promised
    /// and those ended ones hold (shared pages counted for each holder).
    fn make_room(&mut self, positions: usize) -> Result<(), EngineError> {
        self.check_fits(positions)?;
        let (needed, pages) = (self.pool.pages_for(positions), self.pool.pages());
        loop {
            let held = |s: &Sequence| shared(&s.cache).map_or(0, |c| lock(c).pages_held());
            let live = (self.sequences.values())
                .map(|s| held(s).max(self.pool.pages_for(s.promised)))
                .sum::<usize>();
            let committed = live + self.idle.iter().map(held).sum::<usize>();
            if committed + needed <= pages {
                return Ok(());
            }
            if self.idle.is_empty() {
                let free = pages.saturating_sub(committed);
                return Err(EngineError::KvPoolBusy { needed, free });
            }
            self.idle.remove(0);
        }
    }

    /// An empty cache: a new one over the pool while fewer than `max_batch` ended
    /// sequences are kept, else the least recently used one's, emptied.
    fn empty_cache(&mut self) -> Result<Value, EngineError> {
        if self.idle.len() < self.max_batch {
            let cache = (self.pool.new_cache())
                .map_err(|e| EngineError::Config(format!("a paged KV cache: {e}")))?;
            return Ok(Value::Object(Object::new(Mutex::new(cache))));
        }
        let evicted = self.idle.remove(0);
        clear(&evicted.cache)?;
        Ok(evicted.cache)
    }

    /// Makes sequence `target` hold the first `len` positions of `source` (copied).
    fn copy_prefix(
        &mut self,
        source: &Sequence,
        target: SequenceId,
        len: usize,
    ) -> Result<(), EngineError> {
        let target_cache = &self.sequence(target)?.cache;
        let from = lock(shared(&source.cache)?);
        let mut to = lock(shared(target_cache)?);
        to.copy_prefix(&from, len)
            .map_err(|e| EngineError::Config(format!("copying a prompt prefix: {e}")))?;
        drop((from, to));
        if let Some(sequence) = self.sequences.get_mut(&target) {
            sequence.tokens = source.tokens[..len].to_vec();
        }
        Ok(())
    }

    /// Ends sequence `id` and empties it.
    pub fn remove_sequence(&mut self, id: SequenceId) {
        if let Some(mut sequence) = self.sequences.remove(&id) {
            if clear(&sequence.cache).is_ok() {
                sequence.tokens.clear();
                self.keep_idle(sequence);
            }
        }
    }

    /// Ends sequence `id`, keeping what it holds for a later sequence whose prompt
    /// starts the same ([`BatchEngine::add_sequence_for`]).
    pub fn retire_sequence(&mut self, id: SequenceId) {
        if let Some(sequence) = self.sequences.remove(&id) {
            self.keep_idle(sequence);
        }
    }

    /// Keeps `sequence` idle, dropping the oldest idle one past `max_batch`.
    fn keep_idle(&mut self, sequence: Sequence) {
        self.idle.push(sequence);
        if self.idle.len() > self.max_batch {
            self.idle.remove(0);
        }
    }

    /// The ids sequence `id` holds.
    pub fn tokens(&self, id: SequenceId) -> Result<&[u32], EngineError> {
        Ok(&self.sequence(id)?.tokens)
    }

    fn sequence(&self, id: SequenceId) -> Result<&Sequence, EngineError> {
        self.sequences
            .get(&id)
            .ok_or(EngineError::UnknownSequence(id.0))
    }

    /// Runs `f` on the engine with sequence `id`'s cache and ids swapped in.
    fn with_sequence<T>(
        &mut self,
        id: SequenceId,
        f: impl FnOnce(&mut Engine) -> Result<T, EngineError>,
    ) -> Result<T, EngineError> {
        let sequence = self
            .sequences
            .get_mut(&id)
            .ok_or(EngineError::UnknownSequence(id.0))?;
        let engine = &mut self.engine;
        std::mem::swap(&mut engine.cache, &mut sequence.cache);
        std::mem::swap(&mut engine.tokens, &mut sequence.tokens);
        let result = f(engine);
        std::mem::swap(&mut engine.cache, &mut sequence.cache);
        std::mem::swap(&mut engine.tokens, &mut sequence.tokens);
        result
    }

    /// Appends `ids` to sequence `id` (in prefill chunks); returns the logits of the last.
    pub fn prefill(&mut self, id: SequenceId, ids: &[u32]) -> Result<Vec<f32>, EngineError> {
        self.with_sequence(id, |engine| engine.prefill(ids))
    }

    /// Decodes one token for each `(sequence, token)` (distinct sequences, each with room
    /// for one more position) in `batch_decode` calls of at most [`max_batch`] sequences;
    /// returns each one's logits, in order. Nothing is appended when a check fails.
    ///
    /// [`max_batch`]: BatchEngine::max_batch
    pub fn decode(&mut self, steps: &[(SequenceId, u32)]) -> Result<Vec<Vec<f32>>, EngineError> {
        self.check_steps(steps)?;
        let mut logits = Vec::with_capacity(steps.len());
        for chunk in steps.chunks(self.max_batch) {
            logits.extend(self.decode_call(chunk)?);
        }
        Ok(logits)
    }

    /// Checks that `steps` name distinct live sequences with room for a token and ids
    /// inside the vocabulary.
    fn check_steps(&self, steps: &[(SequenceId, u32)]) -> Result<(), EngineError> {
        let window = self.config().context_window;
        for (i, &(id, token)) in steps.iter().enumerate() {
            let cached = self.sequence(id)?.tokens.len();
            if cached >= window {
                return Err(EngineError::ContextOverflow {
                    window,
                    cached,
                    adding: 1,
                });
            }
            if steps[..i].iter().any(|&(other, _)| other == id) {
                return Err(EngineError::RepeatedSequence(id.0));
            }
            self.engine.ids_tensor(&[token])?;
        }
        Ok(())
    }

    /// One `batch_decode` call over `steps` (at most `max_batch`, checked); a single
    /// sequence runs `decode` (the GEMV, which streams the weights faster than a GEMM of
    /// one row; its logits may differ from a batched row's by rounding).
    fn decode_call(&mut self, steps: &[(SequenceId, u32)]) -> Result<Vec<Vec<f32>>, EngineError> {
        if let [(id, token)] = *steps {
            return Ok(vec![self.with_sequence(id, |engine| engine.decode(token))?]);
        }
        let ids: Vec<u32> = steps.iter().map(|&(_, token)| token).collect();
        let mut caches = Vec::with_capacity(steps.len());
        let mut positions = Vec::with_capacity(steps.len());
        for &(id, _) in steps {
            let sequence = self.sequence(id)?;
            caches.push(sequence.cache.clone());
            positions.push(sequence.tokens.len() as i32);
        }
        let vm = &self.engine.vm;
        let batch = KvBatch::new(caches, *vm.microkernels(), vm.thread_pool().clone())
            .map_err(|e| EngineError::Config(format!("batching the KV caches: {e}")))?;
        let input = self.engine.ids_tensor(&ids)?;
        let positions = Tensor::from_slice(&positions, &[positions.len() as i64])
            .map_err(|e| EngineError::Config(format!("positions tensor: {e}")))?;
        let args: Vec<Value> = [
            Value::Tensor(input),
            Value::Tensor(positions),
            Value::Object(Object::new(batch)),
        ]
        .into_iter()
        .chain(self.engine.weights.iter().cloned())
        .collect();
        let out = self.engine.vm.call(BATCH_DECODE, &args);
        let out = match out {
            Ok(out) => out,
            Err(source) => {
                // A failed call may have appended to some layers of some caches.
                self.roll_back(steps)?;
                return Err(EngineError::vm(BATCH_DECODE, source));
            }
        };
        for &(id, token) in steps {
            if let Some(sequence) = self.sequences.get_mut(&id) {
                sequence.tokens.push(token);
            }
        }
        let vocab = self.config().vocab_size;
        let flat = self.engine.logits_rows(BATCH_DECODE, &out, steps.len())?;
        Ok(flat.chunks(vocab).map(<[f32]>::to_vec).collect())
    }

    /// Cuts the caches of `steps`' sequences back to the ids they hold.
    fn roll_back(&mut self, steps: &[(SequenceId, u32)]) -> Result<(), EngineError> {
        for &(id, _) in steps {
            self.with_sequence(id, |engine| engine.cut_cache_to(engine.tokens.len()))?;
        }
        Ok(())
    }
}

/// The KV cache object `cache` holds.
fn shared(cache: &Value) -> Result<&SharedKvCache, EngineError> {
    (cache.as_object::<SharedKvCache>()).ok_or_else(|| EngineError::NotACache(cache.describe()))
}

/// `cache` locked. (A poisoned lock is taken over: every cache method leaves the cache
/// consistent before anything that could panic.)
fn lock(cache: &SharedKvCache) -> std::sync::MutexGuard<'_, crate::kv_cache::KvCache> {
    cache.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Empties `cache`.
fn clear(cache: &Value) -> Result<(), EngineError> {
    lock(shared(cache)?).clear();
    Ok(())
}
