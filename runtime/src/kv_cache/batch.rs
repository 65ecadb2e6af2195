//! A batch of sequences' KV caches for one `batch_decode` call ([`KvBatch`]) and the
//! `kv_batch.*` builtins over it: token `i` of the call is the next of sequence `i`, so
//! row `i` of each appended tensor goes to cache `i`, and query row `i` attends over the
//! positions cache `i` holds (read in place by the attention microkernels, each sequence
//! on a task of the pool).

use super::{KvCache, KvCacheError, KvFormat, SharedKvCache, Stream};
use crate::dtype::DType;
use crate::microkernel::{Microkernel, MicrokernelSet};
use crate::packed::{Args, BuiltinError, Registry};
use crate::pool::ThreadPool;
use crate::tensor::{Tensor, TensorError};
use crate::value::{Value, ValueKind};
use std::sync::{Arc, MutexGuard, PoisonError};

/// The sequences of one batched call, in the order of its tokens, with the kernels and
/// pool its attention runs on.
pub struct KvBatch {
    caches: Vec<Value>,
    kernels: MicrokernelSet,
    pool: Arc<ThreadPool>,
}

impl std::fmt::Debug for KvBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KvBatch")
            .field("sequences", &self.caches.len())
            .finish_non_exhaustive()
    }
}

/// Why a batch cannot be made or used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KvBatchError {
    /// Entry `index` is not a KV cache object.
    #[error("sequence {index} of the batch is {got}, not a KV cache")]
    NotACache {
        /// The entry.
        index: usize,
        /// What it is.
        got: String,
    },
    /// A batched tensor whose rows are not one per sequence.
    #[error("{which} has {rows} rows for a batch of {sequences} sequences")]
    Rows {
        /// The tensor's role.
        which: &'static str,
        /// Its first dim.
        rows: i64,
        /// Sequences in the batch.
        sequences: usize,
    },
    /// A query tensor whose heads or head size do not fit the caches.
    #[error("q has shape {got:?}; the caches hold {kv_heads} kv heads of {head_dim}, so q needs [b, a multiple of {kv_heads}, {head_dim}] f32")]
    Query {
        /// q's shape.
        got: Vec<i64>,
        /// The caches' KV heads.
        kv_heads: usize,
        /// The caches' head size.
        head_dim: usize,
    },
    /// A cache format the batched attention has no kernel for.
    #[error("no attention kernel reads a {0} KV cache")]
    Format(KvFormat),
    /// A cache operation failed.
    #[error("sequence {index}: {source}")]
    Cache {
        /// The sequence.
        index: usize,
        /// The failure.
        source: KvCacheError,
    },
    /// A task of the batched attention panicked.
    #[error("the batched attention panicked")]
    Panicked,
    /// A tensor-level failure.
    #[error(transparent)]
    Tensor(#[from] TensorError),
}

impl KvBatch {
    /// A batch of `caches` (KV cache objects, one per sequence, in token order) whose
    /// attention runs `kernels` on `pool`.
    pub fn new(
        caches: Vec<Value>,
        kernels: MicrokernelSet,
        pool: Arc<ThreadPool>,
    ) -> Result<KvBatch, KvBatchError> {
        if let Some((index, cache)) =
            (caches.iter().enumerate()).find(|(_, c)| c.as_object::<SharedKvCache>().is_none())
        {
            let got = cache.describe();
            return Err(KvBatchError::NotACache { index, got });
        }
        Ok(KvBatch {
            caches,
            kernels,
            pool,
        })
    }

    /// Sequence `index`'s cache, locked. (A poisoned lock is taken over: every cache
    /// method leaves the cache consistent before anything that could panic.)
    fn lock(&self, index: usize) -> MutexGuard<'_, KvCache> {
        let shared = self.caches[index].as_object::<SharedKvCache>();
        let shared = shared.unwrap_or_else(|| unreachable!("checked by KvBatch::new"));
        shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// An error unless `t`'s first dim is the batch's size.
    fn check_rows(&self, which: &'static str, t: &Tensor) -> Result<(), KvBatchError> {
        let rows = t.shape().first().copied().unwrap_or(0);
        if rows != self.caches.len() as i64 {
            return Err(KvBatchError::Rows {
                which,
                rows,
                sequences: self.caches.len(),
            });
        }
        Ok(())
    }

    /// Appends row `i` of every tensor (one per stream, as [`KvCache::append`] takes
    /// them) to sequence `i`'s `layer`.
    pub fn append(&self, layer: usize, tensors: &[&Tensor]) -> Result<(), KvBatchError> {
        for t in tensors {
            self.check_rows("an appended tensor", t)?;
        }
        for index in 0..self.caches.len() {
            let rows = tensors
                .iter()
                .map(|t| t.narrow(0, index as i64, 1))
                .collect::<Result<Vec<_>, _>>()?;
            let rows: Vec<&Tensor> = rows.iter().collect();
            let appended = self.lock(index).append(layer, &rows);
            appended.map_err(|source| KvBatchError::Cache { index, source })?;
        }
        Ok(())
    }

    /// Query row `i` of `q` (`[b, heads, head_dim]` f32) over the positions sequence `i`
    /// holds in `layer` (the last `window` of them when `window > 0`), scores scaled by
    /// `scale`: `[b, heads, head_dim]` f32.
    pub fn attention(
        &self,
        layer: usize,
        q: &Tensor,
        scale: f32,
        window: usize,
    ) -> Result<Tensor, KvBatchError> {
        self.check_rows("q", q)?;
        let mut out = Tensor::zeros(DType::F32, q.shape())?;
        if self.caches.is_empty() {
            return Ok(out);
        }
        let shape = self.lock(0).query_shape(q)?;
        let queries = q.as_slice::<f32>()?;
        let outputs = SharedOut(out.as_mut_slice::<f32>()?.as_mut_ptr());
        let row = shape.heads * shape.head_dim;
        let failure = std::sync::Mutex::new(None);
        let task = |index: i64| -> i32 {
            let index = index as usize;
            let query = &queries[index * row..(index + 1) * row];
            // SAFETY: task `index` alone writes row `index` of `out` (`row` floats from
            // `index * row`, inside the `b * row` floats of `out`), which outlives the
            // launch; no other reference to `out` is used meanwhile.
            let output = unsafe { std::slice::from_raw_parts_mut(outputs.at(index * row), row) };
            let cache = self.lock(index);
            let attended = cache.query_shape(q).and_then(|shape| {
                let attend = (scale, window, &self.kernels);
                cache.attend(layer, (query, shape), output, attend)
            });
            let Err(err) = attended else { return 0 };
            let err = match err {
                KvBatchError::Cache { source, .. } => KvBatchError::Cache { index, source },
                other => other,
            };
            *failure.lock().unwrap_or_else(PoisonError::into_inner) = Some(err);
            1
        };
        let code = self.pool.parallel_for(self.caches.len() as i64, &task);
        match failure.into_inner().unwrap_or_else(PoisonError::into_inner) {
            Some(err) => Err(err),
            None if code != 0 => Err(KvBatchError::Panicked),
            None => Ok(out),
        }
    }
}

/// The output rows' base pointer, shared by the attention's tasks (each writes its own
/// row).
struct SharedOut(*mut f32);
// SAFETY: the tasks write disjoint rows (see `KvBatch::attention`).
unsafe impl Sync for SharedOut {}

impl SharedOut {
    /// The pointer `offset` floats past the base.
    ///
    /// # Safety
    /// `offset` is inside the output.
    unsafe fn at(&self, offset: usize) -> *mut f32 {
        // SAFETY: the caller keeps `offset` inside the output.
        unsafe { self.0.add(offset) }
    }
}

/// The heads of one query row and their size.
#[derive(Clone, Copy, Debug)]
pub(super) struct QueryShape {
    heads: usize,
    head_dim: usize,
}

impl KvCache {
    /// The shape of `q`'s rows (`[b, heads, head_dim]` f32, `heads` a multiple of the
    /// cache's kv heads, contiguous).
    fn query_shape(&self, q: &Tensor) -> Result<QueryShape, KvBatchError> {
        let (kv_heads, head_dim) = (self.kv_heads, self.head_dim);
        let bad = || KvBatchError::Query {
            got: q.shape().to_vec(),
            kv_heads,
            head_dim,
        };
        match *q.shape() {
            [_, heads, dim]
                if q.dtype() == DType::F32
                    && q.is_contiguous()
                    && heads > 0
                    && kv_heads > 0
                    && (heads as usize).is_multiple_of(kv_heads)
                    && dim as usize == head_dim =>
            {
                Ok(QueryShape {
                    heads: heads as usize,
                    head_dim,
                })
            }
            _ => Err(bad()),
        }
    }

    /// One query row's attention (`query`, `heads * head_dim` floats; the heads sharing a
    /// kv head in one kernel call, as the compiled attention makes it) over the positions
    /// `layer` holds (the last `window` when `window > 0`), into `out`.
    fn attend(
        &self,
        layer: usize,
        (query, shape): (&[f32], QueryShape),
        out: &mut [f32],
        (scale, window, kernels): (f32, usize, &MicrokernelSet),
    ) -> Result<(), KvBatchError> {
        let cache_error = |source| KvBatchError::Cache { index: 0, source };
        let entry = self.layer(layer).map_err(cache_error)?;
        let start = match window {
            0 => 0,
            w => entry.len.saturating_sub(w),
        };
        let keys = (entry.len - start) as i64;
        let (dim, group) = (self.head_dim, shape.heads / self.kv_heads);
        let kv_stride = (self.kv_heads * dim) as i64;
        // Stream `stream`'s element of position `start` and kv head `head`.
        let at = |stream: usize, head: usize| {
            let Stream {
                per_element, dtype, ..
            } = self.streams[stream];
            let elements = if per_element { dim } else { 1 };
            let offset =
                start * self.position_bytes(stream) + head * elements * (dtype.bits() as usize / 8);
            entry.streams[stream].ptr_at(offset)
        };
        let (d, rows) = (dim as i64, group as i64);
        for head in 0..self.kv_heads {
            let q = query[head * group * dim..].as_ptr();
            let o = out[head * group * dim..].as_mut_ptr();
            let (k, v) = (at(0, head), at(1, head));
            // SAFETY: `q` and `o` hold the `group` rows of `head_dim` floats of this kv
            // head's query heads (inside the row of `heads * head_dim`); `k` and `v` point
            // at position `start` of this kv head in storage holding the layer's `len`
            // positions, so `keys` rows `kv_stride` apart are in bounds (the Q8 scales
            // likewise, `kv_heads` apart); the storage is not written while the cache is
            // locked, and `o` does not overlap the inputs.
            unsafe {
                match self.format {
                    KvFormat::Plain(DType::F32) => {
                        let f = kernels.get(Microkernel::AttentionF32).attention();
                        let f = f.ok_or(KvBatchError::Format(self.format))?;
                        f(q, k.cast(), v.cast(), o, rows, keys, kv_stride, d, scale);
                    }
                    KvFormat::Plain(DType::F16) => {
                        let f = kernels.get(Microkernel::AttentionF16Kv).attention_f16kv();
                        let f = f.ok_or(KvBatchError::Format(self.format))?;
                        f(q, k.cast(), v.cast(), o, rows, keys, kv_stride, d, scale);
                    }
                    KvFormat::Q8 => {
                        let f = kernels.get(Microkernel::AttentionQ8Kv).attention_q8kv();
                        let f = f.ok_or(KvBatchError::Format(self.format))?;
                        let (ks, vs) = (at(2, head).cast(), at(3, head).cast());
                        let scales = self.kv_heads as i64;
                        f(
                            q,
                            k.cast(),
                            v.cast(),
                            ks,
                            vs,
                            o,
                            rows,
                            keys,
                            kv_stride,
                            d,
                            scale,
                            scales,
                        );
                    }
                    KvFormat::Plain(_) => return Err(KvBatchError::Format(self.format)),
                }
            }
        }
        Ok(())
    }
}

/// The batch behind argument 0.
fn batch<'a>(args: &Args<'a>) -> Result<&'a KvBatch, BuiltinError> {
    args.object::<KvBatch>(0)
}

/// `append` and `append_q8`: the tensors after the layer, one per stream of the caches.
fn append(args: &Args<'_>) -> Result<Value, BuiltinError> {
    let layer = args.count(1)?;
    let tensors = (2..args.values().len())
        .map(|i| args.tensor(i))
        .collect::<Result<Vec<_>, _>>()?;
    batch(args)?
        .append(layer, &tensors)
        .map_err(|e| args.fail(e))?;
    Ok(args.values()[0].clone())
}

fn attention(args: &Args<'_>) -> Result<Value, BuiltinError> {
    let (layer, q, scale, window) = (
        args.count(1)?,
        args.tensor(2)?,
        args.float(3)?,
        args.count(4)?,
    );
    let out = batch(args)?
        .attention(layer, q, scale as f32, window)
        .map_err(|e| args.fail(e))?;
    Ok(Value::Tensor(out))
}

/// Registers `kv_batch.append(batch, layer, k, v)`, `kv_batch.append_q8(batch, layer, k,
/// v, k_scales, v_scales)` (row `i` of each to sequence `i`; returning the batch) and
/// `kv_batch.attention(batch, layer, q, scale: float, window: int) -> out` (see
/// [`KvBatch::attention`]).
pub fn register_batch_builtins(registry: &mut Registry) -> Result<(), BuiltinError> {
    use ValueKind::{Float, Int, Object as Obj, Tensor as T};
    let append_params = [("batch", Obj), ("layer", Int), ("k", T), ("v", T)];
    registry.register("kv_batch.append", &append_params, append)?;
    let scales = [("k_scales", T), ("v_scales", T)];
    let append_q8_params = [append_params.as_slice(), &scales].concat();
    registry.register("kv_batch.append_q8", &append_q8_params, append)?;
    let attention_params = [
        ("batch", Obj),
        ("layer", Int),
        ("q", T),
        ("scale", Float),
        ("window", Int),
    ];
    registry.register("kv_batch.attention", &attention_params, attention)
}
