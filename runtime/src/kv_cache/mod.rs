//! The KV cache: per layer, K and V stored as `[capacity, kv_heads, head_dim]`.
//!
//! Lengths are tracked per layer. `append(layer, ..)` writes at that layer's length and
//! advances it, so a forward step's attention in layer `l` sees the tokens it just appended
//! while later layers have not appended yet. [`KvCache::len`] is the committed length: the
//! number of positions every layer holds (the minimum over layers), equal in all layers once
//! a step has appended to each. `pop(n)` and `clear()` set every layer to `len() - n` and 0,
//! dropping the appends of an unfinished step.
//!
//! `view(layer)` returns tensors over the cache's storage (no copy). Appending never changes
//! what a live view shows: if a write would land on positions a live view covers (after a
//! `pop`), the layer's storage is copied first and old views keep the old storage.

mod builtins;
#[cfg(test)]
mod tests;

pub use builtins::{register_builtins, SharedKvCache};

use crate::dtype::DType;
use crate::tensor::buffer::{Buffer, StorageKind};
use crate::tensor::{Tensor, TensorError};
use std::sync::Arc;

/// A KV cache operation that cannot be done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KvCacheError {
    /// An append past the capacity.
    #[error("KV cache overflow in layer {layer}: capacity is {capacity} positions, appending would need {requested}")]
    Overflow {
        /// The layer appended to.
        layer: usize,
        /// Positions the cache holds at most.
        capacity: usize,
        /// The length the append would reach.
        requested: usize,
    },
    /// A layer index past the number of layers.
    #[error("layer {layer} out of range (the cache has {layers} layers)")]
    LayerOutOfRange {
        /// The index given.
        layer: usize,
        /// The number of layers.
        layers: usize,
    },
    /// A K or V tensor of the wrong dtype.
    #[error("{which} has dtype {got}, the cache stores {expected}")]
    Dtype {
        /// `"k"` or `"v"`.
        which: &'static str,
        /// The cache's dtype.
        expected: DType,
        /// The tensor's dtype.
        got: DType,
    },
    /// A K or V tensor of the wrong shape.
    #[error("{which} has shape {got:?}, expected [n, {kv_heads}, {head_dim}]{same_n}")]
    Shape {
        /// `"k"` or `"v"`.
        which: &'static str,
        /// The tensor's shape.
        got: Vec<i64>,
        /// The cache's KV heads.
        kv_heads: usize,
        /// The cache's head dim.
        head_dim: usize,
        /// A note when V's `n` differs from K's.
        same_n: String,
    },
    /// A pop of more positions than the cache holds.
    #[error("cannot pop {n} positions from a KV cache of length {len}")]
    PopTooMany {
        /// Positions asked to pop.
        n: usize,
        /// The committed length.
        len: usize,
    },
    /// A dtype the cache cannot store (sub-byte).
    #[error("a KV cache cannot store {dtype} elements")]
    UnsupportedDtype {
        /// The dtype asked for.
        dtype: DType,
    },
    /// A tensor-level failure (e.g. a strided K, or a cache too large to allocate).
    #[error(transparent)]
    Tensor(#[from] TensorError),
}

/// One layer's storage and length.
#[derive(Debug)]
struct Layer {
    k: Arc<Buffer>,
    v: Arc<Buffer>,
    len: usize,
    /// Positions `[0, exposed)` may be covered by views handed out from `k`/`v`.
    exposed: usize,
}

/// K and V of every layer for one sequence.
#[derive(Debug)]
pub struct KvCache {
    kv_heads: usize,
    head_dim: usize,
    capacity: usize,
    dtype: DType,
    layers: Vec<Layer>,
}

impl KvCache {
    /// A cache of `layers` layers holding up to `capacity` positions of
    /// `[kv_heads, head_dim]` elements of `dtype` for K and for V.
    pub fn new(
        layers: usize,
        kv_heads: usize,
        head_dim: usize,
        capacity: usize,
        dtype: DType,
    ) -> Result<KvCache, KvCacheError> {
        if dtype.is_sub_byte() {
            return Err(KvCacheError::UnsupportedDtype { dtype });
        }
        let mut cache = KvCache {
            kv_heads,
            head_dim,
            capacity,
            dtype,
            layers: Vec::with_capacity(layers),
        };
        for _ in 0..layers {
            let layer = Layer {
                k: cache.alloc_positions()?,
                v: cache.alloc_positions()?,
                len: 0,
                exposed: 0,
            };
            cache.layers.push(layer);
        }
        Ok(cache)
    }

    /// Zeroed storage for `capacity` positions.
    fn alloc_positions(&self) -> Result<Arc<Buffer>, KvCacheError> {
        let too_large = || TensorError::TooLarge {
            shape: self.layout(self.capacity),
            dtype: self.dtype,
        };
        let bytes = self
            .capacity
            .checked_mul(self.position_bytes())
            .ok_or_else(too_large)?;
        let buffer = Buffer::zeroed(bytes, StorageKind::Owned).ok_or_else(too_large)?;
        Ok(Arc::new(buffer))
    }

    /// Bytes of one position of K (or V).
    fn position_bytes(&self) -> usize {
        self.kv_heads * self.head_dim * (self.dtype.bits() as usize / 8)
    }

    /// The shape `[positions, kv_heads, head_dim]`.
    fn layout(&self, positions: usize) -> Vec<i64> {
        vec![positions as i64, self.kv_heads as i64, self.head_dim as i64]
    }

    /// The number of layers.
    pub fn num_layers(&self) -> usize {
        self.layers.len()
    }

    /// Positions each layer holds at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes the cache allocates: K and V of every layer at its capacity.
    pub fn bytes(&self) -> usize {
        self.layers.len() * 2 * self.capacity * self.position_bytes()
    }

    /// The element type of K and V.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The committed length: positions every layer holds.
    pub fn len(&self) -> usize {
        self.layers.iter().map(|l| l.len).min().unwrap_or(0)
    }

    /// Whether no position is committed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Positions `layer` holds (may exceed `len()` during a step).
    pub fn layer_len(&self, layer: usize) -> Result<usize, KvCacheError> {
        Ok(self.layer(layer)?.len)
    }

    fn layer(&self, layer: usize) -> Result<&Layer, KvCacheError> {
        let layers = self.layers.len();
        self.layers
            .get(layer)
            .ok_or(KvCacheError::LayerOutOfRange { layer, layers })
    }

    /// Checks a K or V tensor against `[n, kv_heads, head_dim]` of the cache's dtype and
    /// returns `n`.
    fn check_kv(
        &self,
        which: &'static str,
        t: &Tensor,
        n: Option<i64>,
    ) -> Result<usize, KvCacheError> {
        if t.dtype() != self.dtype {
            return Err(KvCacheError::Dtype {
                which,
                expected: self.dtype,
                got: t.dtype(),
            });
        }
        let rows = t.shape().first().copied();
        let fits = t.ndim() == 3
            && t.shape()[1..] == self.layout(0)[1..]
            && n.is_none_or(|n| rows == Some(n));
        if !fits {
            return Err(KvCacheError::Shape {
                which,
                got: t.shape().to_vec(),
                kv_heads: self.kv_heads,
                head_dim: self.head_dim,
                same_n: n.map_or(String::new(), |n| format!(" with n = {n} as in k")),
            });
        }
        Ok(rows.unwrap_or(0) as usize)
    }

    /// Writes `k` and `v` (`[n, kv_heads, head_dim]`, contiguous) at positions
    /// `len..len + n` of `layer` and advances that layer's length.
    pub fn append(&mut self, layer: usize, k: &Tensor, v: &Tensor) -> Result<(), KvCacheError> {
        self.layer(layer)?;
        let n = self.check_kv("k", k, None)?;
        self.check_kv("v", v, Some(n as i64))?;
        let (k_bytes, v_bytes) = (k.as_bytes()?, v.as_bytes()?);
        let start = self.layers[layer].len;
        let requested = start + n;
        if requested > self.capacity {
            return Err(KvCacheError::Overflow {
                layer,
                capacity: self.capacity,
                requested,
            });
        }
        self.make_writable(layer)?;
        let offset = start * self.position_bytes();
        let entry = &mut self.layers[layer];
        // SAFETY: positions start..start+n are within capacity (checked above) and no live
        // view covers them (`make_writable`); the cache is borrowed mutably, so nothing else
        // writes meanwhile, and K/V storage is never borrowed memory.
        unsafe {
            entry.k.write_at(offset, k_bytes);
            entry.v.write_at(offset, v_bytes);
        }
        entry.len = requested;
        Ok(())
    }

    /// Ensures no live view covers positions at or after `layer`'s length, copying the
    /// layer's first `len` positions into fresh storage if one might.
    fn make_writable(&mut self, layer: usize) -> Result<(), KvCacheError> {
        let entry = &self.layers[layer];
        let shared = Arc::strong_count(&entry.k) > 1 || Arc::strong_count(&entry.v) > 1;
        if !shared {
            self.layers[layer].exposed = 0;
            return Ok(());
        }
        if entry.exposed <= entry.len {
            return Ok(());
        }
        let keep = entry.len * self.position_bytes();
        let (k, v) = (self.alloc_positions()?, self.alloc_positions()?);
        let entry = &mut self.layers[layer];
        // SAFETY: the new buffers are unshared; the old ones are only read, over their first
        // `keep` bytes (in bounds), which no writer touches while the cache is borrowed.
        unsafe {
            k.write_at(0, std::slice::from_raw_parts(entry.k.ptr_at(0), keep));
            v.write_at(0, std::slice::from_raw_parts(entry.v.ptr_at(0), keep));
        }
        (entry.k, entry.v, entry.exposed) = (k, v, 0);
        Ok(())
    }

    /// K and V of `layer` over its first `layer_len` positions, as
    /// `[len, kv_heads, head_dim]` views of the cache's storage.
    pub fn view(&mut self, layer: usize) -> Result<(Tensor, Tensor), KvCacheError> {
        let entry = self.layer(layer)?;
        let shape = self.layout(entry.len);
        let k = Tensor::view_of(entry.k.clone(), 0, self.dtype, &shape)?;
        let v = Tensor::view_of(entry.v.clone(), 0, self.dtype, &shape)?;
        let entry = &mut self.layers[layer];
        entry.exposed = entry.exposed.max(entry.len);
        Ok((k, v))
    }

    /// Drops the last `n` committed positions (and any appends of an unfinished step).
    pub fn pop(&mut self, n: usize) -> Result<(), KvCacheError> {
        let len = self.len();
        let kept = len
            .checked_sub(n)
            .ok_or(KvCacheError::PopTooMany { n, len })?;
        self.layers.iter_mut().for_each(|l| l.len = kept);
        Ok(())
    }

    /// Drops every position.
    pub fn clear(&mut self) {
        self.layers.iter_mut().for_each(|l| l.len = 0);
    }
}
