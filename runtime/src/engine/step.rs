//! [`Engine`]: one sequence's KV cache and the model steps that extend it.

use super::error::EngineError;
use crate::kv_cache::SharedKvCache;
use crate::pool::ThreadPool;
use crate::tensor::Tensor;
use crate::trace::Timeline;
use crate::value::Value;
use crate::vm::{KernelProfile, VirtualMachine};
use std::sync::{Arc, PoisonError};

/// The sizes a model was compiled for, and the ids that end generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineConfig {
    /// Positions the KV cache holds.
    pub context_window: usize,
    /// Tokens per `prefill` call at most; longer prompts are prefilled in chunks.
    pub prefill_chunk: usize,
    /// Rows of the logits (ids at or past it are rejected before running).
    pub vocab_size: usize,
    /// Ids that end generation (from `generation_config.json`, `config.json`, the
    /// tokenizer).
    pub eos_ids: Vec<u32>,
}

/// A model in a VM with its weights and one KV cache, and the ids the cache holds.
pub struct Engine {
    pub(super) vm: VirtualMachine,
    pub(super) weights: Vec<Value>,
    config: EngineConfig,
    pub(super) cache: Value,
    /// The ids whose keys and values are in the cache, in order.
    pub(super) tokens: Vec<u32>,
    /// With the prefill pipeline on: the VM that runs every other chunk.
    pub(super) second_vm: Option<VirtualMachine>,
    /// Where prefill records its busy time per device.
    pub(super) timeline: Option<Arc<Timeline>>,
    /// With the pipeline on a pool of its own: the pool to go back to without it.
    pub(super) sequential_pool: Option<Arc<ThreadPool>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("config", &self.config)
            .field("tokens", &self.tokens.len())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine over `vm` (which exports `create_kv_cache`, `prefill`, `prefill_all` and
    /// `decode`, each taking its inputs then `weights`); creates the KV cache.
    pub fn new(
        mut vm: VirtualMachine,
        weights: Vec<Value>,
        config: EngineConfig,
    ) -> Result<Self, EngineError> {
        if config.prefill_chunk == 0 || config.context_window == 0 || config.vocab_size == 0 {
            return Err(EngineError::Config(format!(
                "context window ({}), prefill chunk ({}) and vocabulary size ({}) must be positive",
                config.context_window, config.prefill_chunk, config.vocab_size
            )));
        }
        let cache = new_cache(&mut vm)?;
        Ok(Engine {
            vm,
            weights,
            config,
            cache,
            tokens: Vec::new(),
            second_vm: None,
            timeline: None,
            sequential_pool: None,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Tokens in the KV cache.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether the KV cache is empty.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The ids the KV cache holds, in order.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// Bytes of the weight tensors the engine holds (tensors inside tuples included).
    pub fn weights_bytes(&self) -> usize {
        fn bytes(value: &Value) -> usize {
            match value {
                Value::Tensor(t) => t.nbytes(),
                Value::Tuple(fields) => fields.iter().map(bytes).sum(),
                _ => 0,
            }
        }
        self.weights.iter().map(bytes).sum()
    }

    /// Bytes the KV cache allocates: K and V of every layer at its capacity
    /// ([`KvCache::bytes`](crate::kv_cache::KvCache::bytes)).
    pub fn kv_cache_bytes(&self) -> Result<usize, EngineError> {
        let shared = self
            .cache
            .as_object::<SharedKvCache>()
            .ok_or_else(|| EngineError::NotACache(self.cache.describe()))?;
        let cache = shared.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(cache.bytes())
    }

    /// Bytes of the VM's arenas as allocated: one per function of the executable, each
    /// of the size its static memory plan asks for (allocated once when the VM is made).
    pub fn arena_bytes(&self) -> usize {
        self.vm
            .executable()
            .functions
            .keys()
            .filter_map(|name| self.vm.arena(name))
            .map(|arena| arena.size())
            .sum()
    }

    /// Switches per-kernel timing on or off for every function (off by default);
    /// switching it on starts a new profile.
    pub fn set_profiling(&mut self, on: bool) {
        if on {
            self.vm.reset_profile();
        }
        self.vm.set_profiling(on);
    }

    /// The kernels `function` (`prefill`, `decode`, ...) called while profiling was on,
    /// slowest first; `None` for a function the model does not export.
    pub fn profile(&self, function: &str) -> Option<Vec<KernelProfile>> {
        self.vm.profile(function)
    }

    /// Whether `id` ends generation.
    pub fn is_eos(&self, id: u32) -> bool {
        self.config.eos_ids.contains(&id)
    }

    /// Empties the KV cache.
    pub fn reset(&mut self) -> Result<(), EngineError> {
        self.truncate(0)
    }

    /// Keeps the longest prefix of the cache that `ids` starts with, but at least one of
    /// `ids` (non-empty) is left to prefill, whose logits start what follows; returns
    /// how many of `ids` the cache still holds.
    pub fn reuse_prefix(&mut self, ids: &[u32]) -> Result<usize, EngineError> {
        let reused = common_prefix(&self.tokens, ids).min(ids.len().saturating_sub(1));
        self.truncate(reused)?;
        Ok(reused)
    }

    /// Keeps the first `len` tokens of the KV cache and drops the rest (no-op when it
    /// holds `len` or fewer).
    pub fn truncate(&mut self, len: usize) -> Result<(), EngineError> {
        if len >= self.tokens.len() {
            return Ok(());
        }
        self.cut_cache_to(len)?;
        self.tokens.truncate(len);
        Ok(())
    }

    /// Sets every layer of the cache to `len` positions (at most what each holds).
    pub(super) fn cut_cache_to(&self, len: usize) -> Result<(), EngineError> {
        let shared = self
            .cache
            .as_object::<SharedKvCache>()
            .ok_or_else(|| EngineError::NotACache(self.cache.describe()))?;
        let mut cache = shared.lock().unwrap_or_else(PoisonError::into_inner);
        let drop = cache.len().saturating_sub(len);
        cache
            .pop(drop)
            .map_err(|e| EngineError::Config(format!("rolling back the KV cache: {e}")))
    }

    /// Runs `ids` through the model, appending them to the cache; returns the logits of
    /// the last position. Prompts longer than the prefill chunk go in chunks.
    pub fn prefill(&mut self, ids: &[u32]) -> Result<Vec<f32>, EngineError> {
        self.check_prefill("prefill", ids)?;
        let chunks: Vec<&[u32]> = ids.chunks(self.config.prefill_chunk).collect();
        let mut logits = self.run_chunks("prefill", &chunks)?;
        Ok(logits.pop().unwrap_or_default())
    }

    /// Like [`Engine::prefill`], but returns the logits of every position: row j follows
    /// `ids[j]`.
    pub fn prefill_all(&mut self, ids: &[u32]) -> Result<Vec<Vec<f32>>, EngineError> {
        self.check_prefill("prefill_all", ids)?;
        let vocab = self.config.vocab_size;
        let chunks: Vec<&[u32]> = ids.chunks(self.config.prefill_chunk).collect();
        let logits = self.run_chunks("prefill_all", &chunks)?;
        Ok(logits
            .iter()
            .flat_map(|l| l.chunks(vocab).map(<[f32]>::to_vec))
            .collect())
    }

    /// Runs one token through the model; returns its logits.
    pub fn decode(&mut self, id: u32) -> Result<Vec<f32>, EngineError> {
        self.check_fits(1)?;
        self.step("decode", &[id])
    }

    /// An error unless `adding` more tokens fit in the context window (any `adding`, up
    /// to `usize::MAX`, is checked without overflow).
    pub fn check_fits(&self, adding: usize) -> Result<(), EngineError> {
        let window = self.config.context_window;
        let room = window.saturating_sub(self.tokens.len());
        if adding > room {
            return Err(EngineError::ContextOverflow {
                window,
                cached: self.tokens.len(),
                adding,
            });
        }
        Ok(())
    }

    fn check_prefill(&self, function: &'static str, ids: &[u32]) -> Result<(), EngineError> {
        if ids.is_empty() {
            return Err(EngineError::EmptyPrompt { function });
        }
        self.check_fits(ids.len())
    }

    /// Calls `function(ids [1, n], cache, weights...)` and returns its logits, flat.
    pub(super) fn step(
        &mut self,
        function: &'static str,
        ids: &[u32],
    ) -> Result<Vec<f32>, EngineError> {
        let input = self.ids_tensor(ids)?;
        let args: Vec<Value> = [Value::Tensor(input), self.cache.clone()]
            .into_iter()
            .chain(self.weights.iter().cloned())
            .collect();
        let out = self
            .vm
            .call(function, &args)
            .map_err(|source| EngineError::vm(function, source))?;
        self.tokens.extend_from_slice(ids);
        self.logits(function, &out, ids.len())
    }

    pub(super) fn ids_tensor(&self, ids: &[u32]) -> Result<Tensor, EngineError> {
        let vocab = self.config.vocab_size;
        let values = ids
            .iter()
            .enumerate()
            .map(|(position, &id)| {
                i32::try_from(id)
                    .ok()
                    .filter(|&v| (v as usize) < vocab)
                    .ok_or(EngineError::TokenOutOfRange {
                        id,
                        position,
                        vocab,
                    })
            })
            .collect::<Result<Vec<i32>, _>>()?;
        let shape = [1, values.len() as i64];
        Tensor::from_slice(&values, &shape)
            .map_err(|e| EngineError::Config(format!("ids tensor {shape:?}: {e}")))
    }

    pub(super) fn logits(
        &self,
        function: &'static str,
        out: &Value,
        tokens: usize,
    ) -> Result<Vec<f32>, EngineError> {
        // `prefill_all` returns a row per token, the others the last token's row.
        let rows = if function == "prefill_all" { tokens } else { 1 };
        self.logits_rows(function, out, rows)
    }

    /// The `[1, rows, vocab]` logits `function` returned, flat.
    pub(super) fn logits_rows(
        &self,
        function: &'static str,
        out: &Value,
        rows: usize,
    ) -> Result<Vec<f32>, EngineError> {
        let vocab = self.config.vocab_size;
        let bad = || EngineError::BadOutput {
            function,
            got: out.describe(),
            tokens: rows,
            vocab,
        };
        let tensor = out.as_tensor().ok_or_else(bad)?;
        if tensor.shape() != [1, rows as i64, vocab as i64] {
            return Err(bad());
        }
        Ok(tensor.as_slice::<f32>().map_err(|_| bad())?.to_vec())
    }
}

/// A new KV cache from the model's `create_kv_cache`.
pub(super) fn new_cache(vm: &mut VirtualMachine) -> Result<Value, EngineError> {
    let cache = vm
        .call("create_kv_cache", &[])
        .map_err(|source| EngineError::vm("create_kv_cache", source))?;
    if cache.as_object::<SharedKvCache>().is_none() {
        return Err(EngineError::NotACache(cache.describe()));
    }
    Ok(cache)
}

/// The length of the longest common prefix of `a` and `b`.
pub(super) fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
