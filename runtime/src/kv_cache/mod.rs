//! The KV cache: per layer, K and V stored as `[capacity, kv_heads, head_dim]`; an int8
//! cache ([`KvFormat::Q8`]) also stores their scales, `[capacity, kv_heads]` f32 each.
//! Every tensor a position holds (a [`Stream`]) is appended, viewed, popped and counted
//! alike.
//!
//! Lengths are tracked per layer. `append(layer, ..)` writes at that layer's length and
//! advances it, so a forward step's attention in layer `l` sees the tokens it just appended
//! while later layers have not appended yet. [`KvCache::len`] is the committed length: the
//! number of positions every layer holds (the minimum over layers), equal in all layers once
//! a step has appended to each. `pop(n)` and `clear()` set every layer to `len() - n` and 0,
//! dropping the appends of an unfinished step.
//!
//! `view(layer)` returns tensors over the cache's storage (no copy), one per stream. Appending never changes
//! what a live view shows: if a write would land on positions a live view covers (after a
//! `pop`), the layer's storage is copied first and old views keep the old storage.
//!
//! A cache's storage is its own ([`KvCache::new`]) or pages of a [`PagePool`] shared with
//! other caches ([`PagePool::new_cache`]); both read alike.

mod batch;
mod builtins;
mod format;
#[cfg(test)]
mod paged_tests;
mod pages;
#[cfg(test)]
mod tests;
mod window;

pub use batch::{register_batch_builtins, KvBatch, KvBatchError};
pub use builtins::{register_builtins, SharedKvCache};
pub use format::{KvFormat, Stream};
pub use pages::{PagePool, PageStats, PoolSize};
pub use window::{ChunkSchedule, ChunkWindow};

use crate::dtype::DType;
use crate::tensor::buffer::{Buffer, Pages, StorageKind};
use crate::tensor::{Tensor, TensorError};
use half::slice::HalfFloatSliceExt;
use pages::PagedRegion;
use std::borrow::Cow;
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
    /// An append of another number of tensors than a position holds.
    #[error("a {format} KV cache appends {expected} tensors ({names}), got {got}")]
    Count {
        /// The cache's format.
        format: KvFormat,
        /// The number of tensors a position holds.
        expected: usize,
        /// The tensors a position holds.
        names: String,
        /// The number given.
        got: usize,
    },
    /// A K or V tensor (or scales) of the wrong dtype.
    #[error("{which} has dtype {got}, the cache stores {expected}")]
    Dtype {
        /// `"k"` or `"v"`.
        which: &'static str,
        /// The cache's dtype.
        expected: DType,
        /// The tensor's dtype.
        got: DType,
    },
    /// A K or V tensor (or scales) of the wrong shape.
    #[error("{which} has shape {got:?}, expected {expected}{same_n}")]
    Shape {
        /// `"k"`, `"v"`, `"k_scales"` or `"v_scales"`.
        which: &'static str,
        /// The tensor's shape.
        got: Vec<i64>,
        /// The shape expected, `[n, kv_heads, head_dim]` (or `[n, kv_heads]`) with the
        /// cache's sizes.
        expected: String,
        /// A note when a later tensor's `n` differs from K's.
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
    /// A chunk window over a value that is not a KV cache.
    #[error("a chunk window's cache is not a KV cache object")]
    NotACache,
    /// A chunk appended another number of positions than its window covers.
    #[error("the chunk window of positions {start}..{end} appends {got} positions")]
    WindowRows {
        /// The window's first position.
        start: usize,
        /// Its end.
        end: usize,
        /// Positions given.
        got: i64,
    },
    /// Another chunk of the same pipelined prefill failed.
    #[error("another chunk of this prefill failed")]
    Aborted,
    /// A chunk found its layer longer than its start: chunks appended out of order.
    #[error("layer {layer} holds {len} positions when the chunk starting at {start} appends")]
    OutOfTurn {
        /// The layer.
        layer: usize,
        /// Positions it held.
        len: usize,
        /// The chunk's first position.
        start: usize,
    },
    /// A view longer than the layer.
    #[error("a view of {positions} positions of layer {layer}, which holds {len}")]
    ViewPastEnd {
        /// The layer.
        layer: usize,
        /// Positions asked for.
        positions: usize,
        /// Positions it holds.
        len: usize,
    },
    /// Every page of the pool is held.
    #[error("the KV page pool is full: all {pages} pages are held")]
    PoolFull {
        /// Pages in the pool.
        pages: usize,
    },
    /// A pool whose size does not fit the address space.
    #[error("a KV page pool of {pages} pages does not fit in memory")]
    PoolTooLarge {
        /// Pages asked for.
        pages: usize,
    },
    /// A pool whose pages would need more memory mappings than the OS allows.
    #[error("a KV page pool of {pages} pages may need {mappings} memory mappings; half the OS's limit (vm.max_map_count) is {limit}: use fewer pages")]
    TooManyMappings {
        /// Pages asked for.
        pages: usize,
        /// Mappings they may need (a mapped page and the gap after it, per layer and
        /// stream).
        mappings: usize,
        /// Half the OS's limit.
        limit: usize,
    },
    /// The OS refused to map or copy pages.
    #[error("KV cache pages: {what} failed: {error}")]
    Pages {
        /// What was being done.
        what: &'static str,
        /// The OS's error.
        error: String,
    },
    /// A prefix copied between caches of different shapes or formats.
    #[error("a prefix can only be copied between KV caches of the same layers, heads, format and capacity")]
    Mismatch,
    /// A tensor-level failure (e.g. a strided K, or a cache too large to allocate).
    #[error(transparent)]
    Tensor(#[from] TensorError),
}

/// One layer's storage (one buffer per stream) and length.
#[derive(Debug)]
struct Layer {
    streams: Vec<Arc<Buffer>>,
    len: usize,
    /// Positions `[0, exposed)` may be covered by views handed out from the streams.
    exposed: usize,
}

/// K and V (and their scales) of every layer for one sequence.
#[derive(Debug)]
pub struct KvCache {
    kv_heads: usize,
    head_dim: usize,
    capacity: usize,
    format: KvFormat,
    streams: Vec<Stream>,
    layers: Vec<Layer>,
    /// The pages behind every layer's storage, for a paged cache.
    paged: Option<Arc<PagedRegion>>,
}

impl KvCache {
    /// A cache of `layers` layers holding up to `capacity` positions of
    /// `[kv_heads, head_dim]` elements for K and for V, stored as `format` says (a dtype:
    /// as its elements).
    pub fn new(
        layers: usize,
        kv_heads: usize,
        head_dim: usize,
        capacity: usize,
        format: impl Into<KvFormat>,
    ) -> Result<KvCache, KvCacheError> {
        let format = format.into();
        if let KvFormat::Plain(dtype) = format {
            if dtype.is_sub_byte() {
                return Err(KvCacheError::UnsupportedDtype { dtype });
            }
        }
        let mut cache = KvCache {
            kv_heads,
            head_dim,
            capacity,
            format,
            streams: format.streams(),
            layers: Vec::with_capacity(layers),
            paged: None,
        };
        for _ in 0..layers {
            let streams = (0..cache.streams.len())
                .map(|s| cache.alloc_positions(s))
                .collect::<Result<_, _>>()?;
            cache.layers.push(Layer {
                streams,
                len: 0,
                exposed: 0,
            });
        }
        Ok(cache)
    }

    /// An empty cache shaped as `pool`'s, over its pages.
    fn paged(pool: &Arc<PagePool>) -> Result<KvCache, KvCacheError> {
        let mut cache = KvCache {
            kv_heads: pool.kv_heads,
            head_dim: pool.head_dim,
            capacity: pool.capacity,
            format: pool.format,
            streams: pool.format.streams(),
            layers: Vec::new(),
            paged: None,
        };
        cache.map_region(PagedRegion::new(pool)?)?;
        Ok(cache)
    }

    /// Makes `region` the storage of every layer (lengths kept, no view exposed).
    fn map_region(&mut self, region: Arc<PagedRegion>) -> Result<(), KvCacheError> {
        let buffers = region.buffers()?;
        if self.layers.is_empty() {
            self.layers = (buffers.iter())
                .map(|_| Layer {
                    streams: Vec::new(),
                    len: 0,
                    exposed: 0,
                })
                .collect();
        }
        for (layer, streams) in self.layers.iter_mut().zip(buffers) {
            (layer.streams, layer.exposed) = (streams, 0);
        }
        self.paged = Some(region);
        Ok(())
    }

    /// Zeroed storage of stream `stream` for `capacity` positions.
    fn alloc_positions(&self, stream: usize) -> Result<Arc<Buffer>, KvCacheError> {
        let too_large = || TensorError::TooLarge {
            shape: self.layout(stream, self.capacity),
            dtype: self.streams[stream].dtype,
        };
        let bytes = self
            .capacity
            .checked_mul(self.position_bytes(stream))
            .ok_or_else(too_large)?;
        // Base pages: positions are written one step at a time, and only those written
        // become resident.
        let buffer =
            Buffer::zeroed_in(bytes, StorageKind::Owned, Pages::Base).ok_or_else(too_large)?;
        Ok(Arc::new(buffer))
    }

    /// Bytes of one position of stream `stream`.
    fn position_bytes(&self, stream: usize) -> usize {
        let Stream {
            per_element, dtype, ..
        } = self.streams[stream];
        let elements = if per_element { self.head_dim } else { 1 };
        self.kv_heads * elements * (dtype.bits() as usize / 8)
    }

    /// The shape of `positions` positions of stream `stream`: `[positions, kv_heads,
    /// head_dim]`, or `[positions, kv_heads]` for scales.
    fn layout(&self, stream: usize, positions: usize) -> Vec<i64> {
        let mut shape = vec![positions as i64, self.kv_heads as i64];
        if self.streams[stream].per_element {
            shape.push(self.head_dim as i64);
        }
        shape
    }

    /// The number of layers.
    pub fn num_layers(&self) -> usize {
        self.layers.len()
    }

    /// Positions each layer holds at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes the cache allocates: every stream (K and V, and their scales) of every layer
    /// at its capacity.
    pub fn bytes(&self) -> usize {
        let size = |n: usize| n as u64;
        let bytes = crate::memory::kv_cache_bytes(
            size(self.layers.len()),
            size(self.kv_heads),
            size(self.head_dim),
            size(self.capacity),
            self.format,
        );
        usize::try_from(bytes).unwrap_or(usize::MAX)
    }

    /// How K and V are stored.
    pub fn format(&self) -> KvFormat {
        self.format
    }

    /// The committed length: positions every layer holds.
    pub fn len(&self) -> usize {
        self.layers.iter().map(|l| l.len).min().unwrap_or(0)
    }

    /// Pages of a pool this cache holds (0 for an unpaged cache).
    pub fn pages_held(&self) -> usize {
        self.paged.as_ref().map_or(0, |region| region.held())
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

    /// Checks `t` against stream `stream` (`[n, kv_heads, head_dim]` or `[n, kv_heads]`
    /// of its dtype, with `n` when given) and returns its `n`.
    fn check_stream(
        &self,
        stream: usize,
        t: &Tensor,
        n: Option<i64>,
    ) -> Result<usize, KvCacheError> {
        let Stream { name, dtype, .. } = self.streams[stream];
        if !stores_as(t.dtype(), dtype) {
            return Err(KvCacheError::Dtype {
                which: name,
                expected: dtype,
                got: t.dtype(),
            });
        }
        let rows = t.shape().first().copied();
        let layout = self.layout(stream, 0);
        let fits = t.ndim() == layout.len()
            && t.shape()[1..] == layout[1..]
            && n.is_none_or(|n| rows == Some(n));
        if !fits {
            let dims = layout[1..]
                .iter()
                .map(|d| format!(", {d}"))
                .collect::<String>();
            return Err(KvCacheError::Shape {
                which: name,
                got: t.shape().to_vec(),
                expected: format!("[n{dims}]"),
                same_n: n.map_or(String::new(), |n| format!(" with n = {n} as in k")),
            });
        }
        Ok(rows.unwrap_or(0) as usize)
    }

    /// Writes `tensors` (one per stream: `k` and `v`, `[n, kv_heads, head_dim]`, then for
    /// an int8 cache their scales `[n, kv_heads]`; contiguous) at positions `len..len + n`
    /// of `layer` and advances that layer's length.
    pub fn append(&mut self, layer: usize, tensors: &[&Tensor]) -> Result<(), KvCacheError> {
        self.layer(layer)?;
        if tensors.len() != self.streams.len() {
            let names: Vec<&str> = self.streams.iter().map(|s| s.name).collect();
            return Err(KvCacheError::Count {
                format: self.format,
                expected: names.len(),
                names: names.join(", "),
                got: tensors.len(),
            });
        }
        let mut n = None;
        for (stream, t) in tensors.iter().enumerate() {
            n = Some(self.check_stream(stream, t, n.map(|n| n as i64))?);
        }
        let n = n.unwrap_or(0);
        let bytes = tensors
            .iter()
            .zip(&self.streams)
            .map(|(t, stream)| stored_bytes(t, stream.dtype))
            .collect::<Result<Vec<_>, _>>()?;
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
        if let Some(region) = &self.paged {
            region.prepare(start, requested)?;
        }
        for (stream, bytes) in bytes.into_iter().enumerate() {
            let offset = start * self.position_bytes(stream);
            // SAFETY: positions start..start+n are within capacity (checked above) and no
            // live view covers them (`make_writable`); the cache is borrowed mutably, so
            // nothing else writes meanwhile, and stream storage is never borrowed memory.
            unsafe { self.layers[layer].streams[stream].write_at(offset, &bytes)? };
        }
        self.layers[layer].len = requested;
        Ok(())
    }

    /// Ensures no live view covers positions at or after `layer`'s length, copying the
    /// layer's first `len` positions into fresh storage if one might.
    fn make_writable(&mut self, layer: usize) -> Result<(), KvCacheError> {
        let entry = &self.layers[layer];
        let shared = entry.streams.iter().any(|b| Arc::strong_count(b) > 1);
        if !shared {
            self.layers[layer].exposed = 0;
            return Ok(());
        }
        if entry.exposed <= entry.len {
            return Ok(());
        }
        if let Some(region) = &self.paged {
            // A new range over the same pages: each is copied before it is written, and
            // the old views keep the old range.
            let fork = region.fork()?;
            return self.map_region(fork);
        }
        let len = entry.len;
        let mut fresh = Vec::with_capacity(self.streams.len());
        for (stream, old) in entry.streams.iter().enumerate() {
            let keep = len * self.position_bytes(stream);
            let new = self.alloc_positions(stream)?;
            // SAFETY: the new buffer is unshared; the old one is only read, over its first
            // `keep` bytes (in bounds), which no writer touches while the cache is borrowed.
            unsafe { new.write_at(0, std::slice::from_raw_parts(old.ptr_at(0), keep))? };
            fresh.push(new);
        }
        let entry = &mut self.layers[layer];
        (entry.streams, entry.exposed) = (fresh, 0);
        Ok(())
    }

    /// Every stream of `layer` over its first `layer_len` positions (K and V as
    /// `[len, kv_heads, head_dim]`, then an int8 cache's scales as `[len, kv_heads]`), as
    /// views of the cache's storage.
    pub fn view(&mut self, layer: usize) -> Result<Vec<Tensor>, KvCacheError> {
        let len = self.layer(layer)?.len;
        self.view_prefix(layer, len)
    }

    /// The first `positions` positions of `layer` (at most its length), as
    /// [`KvCache::view`] shows them.
    pub fn view_prefix(
        &mut self,
        layer: usize,
        positions: usize,
    ) -> Result<Vec<Tensor>, KvCacheError> {
        let entry = self.layer(layer)?;
        if positions > entry.len {
            let len = entry.len;
            return Err(KvCacheError::ViewPastEnd {
                layer,
                positions,
                len,
            });
        }
        let views = (entry.streams.iter().enumerate())
            .map(|(stream, buffer)| {
                let shape = self.layout(stream, positions);
                let dtype = self.streams[stream].dtype;
                Tensor::view_of(buffer.clone(), 0, dtype, &shape)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let entry = &mut self.layers[layer];
        entry.exposed = entry.exposed.max(positions);
        Ok(views)
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

    /// Replaces this cache's positions with the first `len` positions `source` holds (a
    /// shared prompt prefix, copied instead of computed again). The caches must have the
    /// same layers, heads, format and capacity.
    pub fn copy_prefix(&mut self, source: &KvCache, len: usize) -> Result<(), KvCacheError> {
        let same = (
            self.layers.len(),
            self.kv_heads,
            self.head_dim,
            self.capacity,
            self.format,
        ) == (
            source.layers.len(),
            source.kv_heads,
            source.head_dim,
            source.capacity,
            source.format,
        );
        if !same {
            return Err(KvCacheError::Mismatch);
        }
        let held = source.len();
        if len > held {
            return Err(KvCacheError::PopTooMany { n: len, len: held });
        }
        self.clear();
        if let (Some(mine), Some(theirs)) = (&self.paged, &source.paged) {
            if Arc::ptr_eq(mine.pool(), theirs.pool()) {
                // `clear` gave the pages back unless a live view shows them: then a new
                // range, the old one staying with the view.
                if self.is_viewed() {
                    self.map_region(PagedRegion::new(theirs.pool())?)?;
                }
                if let Some(region) = &self.paged {
                    region.share(theirs, len)?;
                }
                self.layers.iter_mut().for_each(|l| l.len = len);
                return Ok(());
            }
        }
        for layer in 0..self.layers.len() {
            self.make_writable(layer)?;
        }
        // After any fork above: the pages written are this cache's alone.
        if let Some(region) = &self.paged {
            region.prepare(0, len)?;
        }
        for layer in 0..self.layers.len() {
            for stream in 0..self.streams.len() {
                let bytes = len * self.position_bytes(stream);
                let from = &source.layers[layer].streams[stream];
                // SAFETY: the first `bytes` bytes of the source's stream hold its first
                // `len <= held` positions (in bounds); the source is borrowed, so nothing
                // writes them meanwhile, and this cache's storage (written below, not
                // covered by a live view after `make_writable`) is another buffer.
                let src = unsafe { std::slice::from_raw_parts(from.ptr_at(0), bytes) };
                // SAFETY: as `append`'s write: in bounds, unshared, not borrowed memory.
                unsafe { self.layers[layer].streams[stream].write_at(0, src)? };
            }
            self.layers[layer].len = len;
        }
        Ok(())
    }

    /// Drops every position (a paged cache gives its pages back, unless a live view
    /// covers them).
    pub fn clear(&mut self) {
        self.layers.iter_mut().for_each(|l| l.len = 0);
        if let Some(region) = &self.paged {
            if !self.is_viewed() {
                region.release();
            }
        }
    }

    /// Whether a view of some layer is alive.
    fn is_viewed(&self) -> bool {
        (self.layers.iter())
            .flat_map(|l| &l.streams)
            .any(|b| Arc::strong_count(b) > 1)
    }
}

/// Whether a stream of `stored` takes tensors of `given`: its own dtype, or f32 for an
/// f16 stream (rounded as it is appended, so no compiled cast runs before the append).
fn stores_as(given: DType, stored: DType) -> bool {
    given == stored || (given == DType::F32 && stored == DType::F16)
}

/// The bytes of contiguous `t` as a stream of `stored` holds them ([`stores_as`]).
fn stored_bytes(t: &Tensor, stored: DType) -> Result<Cow<'_, [u8]>, TensorError> {
    if t.dtype() == stored {
        return t.as_bytes().map(Cow::Borrowed);
    }
    let mut halves = vec![half::f16::ZERO; t.numel()];
    halves.convert_from_f32_slice(t.as_slice::<f32>()?);
    Ok(Cow::Owned(
        halves
            .iter()
            .flat_map(|h| h.to_bits().to_ne_bytes())
            .collect(),
    ))
}
