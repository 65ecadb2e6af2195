//! Paged KV cache storage. A [`PagePool`] holds fixed-size pages (a page: `positions`
//! positions of every layer and stream) in one anonymous shared-memory file. A paged
//! cache ([`KvCache::paged`](super::KvCache::paged)) reserves an address range of its own
//! ([`PagedRegion`]) and maps pool pages into it in page-table order, so its positions read
//! as contiguous storage (views and attention kernels are those of an unpaged cache) while
//! several caches may map the same page: a prompt prefix is shared instead of copied, and
//! a page held by more than one cache is copied before either writes it.

use super::{KvCache, KvCacheError, KvFormat};
use crate::tensor::buffer::{os_page_size, Buffer};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// A page holds a multiple of this many positions.
const MIN_PAGE_POSITIONS: usize = 16;

/// A cache holds at most about this many pages (larger pages for longer contexts), so the
/// mappings a process holds stay far below the OS's limit on their number.
const MAX_PAGES_PER_CACHE: usize = 32;

/// A page's index in its pool.
type PageId = u32;

/// Fixed-size pages of KV cache positions for caches of one shape, and who holds them.
pub struct PagePool {
    file: File,
    pages: usize,
    /// Positions a page holds.
    positions: usize,
    layers: usize,
    /// Bytes of one position of each stream (K, V, and an int8 cache's scales).
    position_bytes: Vec<usize>,
    /// The shape of its caches: KV heads, head size, format and capacity.
    pub(super) kv_heads: usize,
    pub(super) head_dim: usize,
    pub(super) format: KvFormat,
    pub(super) capacity: usize,
    state: Mutex<PoolState>,
}

impl std::fmt::Debug for PagePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PagePool")
            .field("pages", &self.pages)
            .field("positions", &self.positions)
            .finish_non_exhaustive()
    }
}

/// The number of caches holding each page (0: free).
struct PoolState {
    holders: Vec<u32>,
}

impl PoolState {
    /// The page to give a cache whose previous page is `after` (`None`: its first): the
    /// next one when free, so a cache's pages tend to be consecutive in the file and the
    /// OS merges their mappings; else a page in the longest free run: its start when the
    /// run starts the pool, else its middle (leaving the first half for the cache holding
    /// the page before the run to grow into).
    fn choose(&self, after: Option<PageId>) -> Option<usize> {
        let free = |i: usize| self.holders.get(i) == Some(&0);
        if let Some(next) = after.map(|p| p as usize + 1).filter(|&n| free(n)) {
            return Some(next);
        }
        let (mut best, mut run) = (None, None::<(usize, usize)>);
        for (i, &h) in self.holders.iter().enumerate() {
            run = match (h, run) {
                (0, Some((start, len))) => Some((start, len + 1)),
                (0, None) => Some((i, 1)),
                _ => None,
            };
            if run.is_some_and(|(_, len)| best.is_none_or(|(_, b)| len > b)) {
                best = run;
            }
        }
        best.map(|(start, len)| if start == 0 { 0 } else { start + len / 2 })
    }
}

/// How a pool's pages are used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PageStats {
    /// Pages in the pool.
    pub pages: usize,
    /// Pages some cache holds.
    pub used: usize,
    /// Pages more than one cache holds (a shared prefix).
    pub shared: usize,
    /// Positions a page holds.
    pub page_positions: usize,
    /// Bytes of a page (every layer and stream).
    pub page_bytes: usize,
}

impl PageStats {
    /// Pages a sequence of `positions` positions takes.
    pub fn pages_for(&self, positions: usize) -> usize {
        positions.div_ceil(self.page_positions)
    }

    /// Bytes of the pool's pages.
    pub fn bytes(&self) -> u64 {
        (self.pages as u64).saturating_mul(self.page_bytes as u64)
    }
}

/// A failed OS call, as a cache error.
fn os_error(what: &'static str) -> KvCacheError {
    KvCacheError::Pages {
        what,
        error: std::io::Error::last_os_error().to_string(),
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn lcm(a: usize, b: usize) -> usize {
    a / gcd(a, b) * b
}

/// An anonymous file in memory, sized later.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn memory_file() -> Result<File, KvCacheError> {
    use std::os::fd::FromRawFd;
    // SAFETY: the name is a NUL-terminated string; the call returns a new descriptor or -1.
    let fd = unsafe { libc::memfd_create(c"oxrelax-kv-pages".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(os_error("memfd_create"));
    }
    // SAFETY: `fd` is a new descriptor owned by nothing else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// An anonymous file in memory, sized later: a POSIX shared-memory object unlinked at once.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn memory_file() -> Result<File, KvCacheError> {
    use std::os::fd::FromRawFd;
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = format!(
        "/oxrelax-kv-{}-{}\0",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let flags = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL;
    // SAFETY: the name is NUL-terminated; the call returns a new descriptor or -1.
    let fd = unsafe { libc::shm_open(name.as_ptr().cast(), flags, 0o600) };
    if fd < 0 {
        return Err(os_error("shm_open"));
    }
    // SAFETY: as above; the object stays alive through `fd` once its name is gone.
    unsafe { libc::shm_unlink(name.as_ptr().cast()) };
    // SAFETY: `fd` is a new descriptor owned by nothing else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// How many pages a pool holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolSize {
    /// Enough for this many caches at full capacity.
    Contexts(usize),
    /// This many pages.
    Pages(usize),
    /// As many pages as fit in this many bytes.
    Bytes(u64),
    /// Enough for `contexts` caches at full capacity, or as many pages as fit in `bytes`
    /// when fewer.
    ContextsWithin {
        /// Caches at full capacity at most.
        contexts: usize,
        /// Bytes the pages may take at most.
        bytes: u64,
    },
}

/// The most memory mappings a process may hold, where the OS says (Linux's
/// `vm.max_map_count`).
fn mapping_limit() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/sys/vm/max_map_count").ok()?;
    text.trim().parse().ok()
}

impl PagePool {
    /// A pool of `size` for caches shaped like `like` (layers, heads, format and
    /// capacity). A page holds a multiple of 16 positions whose every stream fills whole
    /// OS pages, large enough that a cache holds at most 32 pages, and (unless the size
    /// is in pages) larger still while the pool would need more memory mappings than
    /// half the OS allows (a mapped page and the gap after it, per layer and stream).
    pub fn new(like: &KvCache, size: PoolSize) -> Result<Arc<PagePool>, KvCacheError> {
        let position_bytes: Vec<usize> = (0..like.streams.len())
            .map(|s| like.position_bytes(s))
            .collect();
        let (positions, pages) = PagePool::layout(like, &position_bytes, size)?;
        let too_many = || KvCacheError::PoolTooLarge { pages };
        let file_bytes = (position_bytes.iter().sum::<usize>())
            .checked_mul(like.num_layers() * positions)
            .and_then(|page| page.checked_mul(pages))
            .ok_or_else(too_many)?;
        if pages > PageId::MAX as usize || isize::try_from(file_bytes).is_err() {
            return Err(too_many());
        }
        let file = memory_file()?;
        file.set_len(file_bytes as u64)
            .map_err(|e| KvCacheError::Pages {
                what: "sizing the page file",
                error: e.to_string(),
            })?;
        Ok(Arc::new(PagePool {
            file,
            pages,
            positions,
            layers: like.num_layers(),
            position_bytes,
            kv_heads: like.kv_heads,
            head_dim: like.head_dim,
            format: like.format,
            capacity: like.capacity,
            state: Mutex::new(PoolState {
                holders: vec![0; pages],
            }),
        }))
    }

    /// The positions a page holds and the pages of a pool of `size` for caches like
    /// `like` (whose streams take `position_bytes` per position), as [`PagePool::new`]
    /// chooses them.
    fn layout(
        like: &KvCache,
        position_bytes: &[usize],
        size: PoolSize,
    ) -> Result<(usize, usize), KvCacheError> {
        let os_page = os_page_size();
        let base = (position_bytes.iter())
            .filter(|&&b| b > 0)
            .fold(MIN_PAGE_POSITIONS, |p, &b| {
                lcm(p, os_page / gcd(os_page, b))
            });
        let wanted = like.capacity.div_ceil(MAX_PAGES_PER_CACHE).max(1);
        let per_position = (position_bytes.iter().sum::<usize>()).saturating_mul(like.num_layers());
        let contexts =
            |positions: usize, n: usize| like.capacity.div_ceil(positions).saturating_mul(n);
        let fitting = |positions: usize, bytes: u64| {
            let page = positions.saturating_mul(per_position).max(1) as u64;
            usize::try_from(bytes / page).unwrap_or(usize::MAX)
        };
        let pages_of = |positions: usize| match size {
            PoolSize::Contexts(n) => contexts(positions, n),
            PoolSize::Pages(n) => n,
            PoolSize::Bytes(b) => fitting(positions, b),
            PoolSize::ContextsWithin { contexts: n, bytes } => {
                contexts(positions, n).min(fitting(positions, bytes))
            }
        };
        let limit = mapping_limit().map_or(usize::MAX, |l| l / 2);
        let mappings =
            |pages: usize| pages.saturating_mul(position_bytes.len() * like.num_layers() * 2);
        let mut positions = base * wanted.div_ceil(base);
        let grows = !matches!(size, PoolSize::Pages(_));
        while grows && mappings(pages_of(positions)) > limit && positions < like.capacity {
            positions *= 2;
        }
        let pages = pages_of(positions);
        if mappings(pages) > limit {
            return Err(KvCacheError::TooManyMappings {
                pages,
                mappings: mappings(pages),
                limit,
            });
        }
        Ok((positions, pages))
    }

    /// The pages needed to hold `positions` positions.
    pub fn pages_for(&self, positions: usize) -> usize {
        positions.div_ceil(self.positions)
    }

    /// Positions a page holds.
    pub fn page_positions(&self) -> usize {
        self.positions
    }

    /// Bytes of a page: `page_positions` positions of every layer and stream.
    pub fn page_bytes(&self) -> usize {
        self.positions * self.position_bytes.iter().sum::<usize>() * self.layers
    }

    /// Pages in the pool.
    pub fn pages(&self) -> usize {
        self.pages
    }

    /// An empty cache whose pages come from this pool.
    pub fn new_cache(self: &Arc<Self>) -> Result<KvCache, KvCacheError> {
        KvCache::paged(self)
    }

    /// How the pages are used now.
    pub fn stats(&self) -> PageStats {
        let state = self.state();
        let held = |min: u32| state.holders.iter().filter(|&&h| h >= min).count();
        PageStats {
            pages: self.pages,
            used: held(1),
            shared: held(2),
            page_positions: self.positions,
            page_bytes: self.page_bytes(),
        }
    }

    fn state(&self) -> MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A free page for a cache whose previous page is `after` ([`PoolState::choose`]),
    /// now held once.
    fn allocate(&self, after: Option<PageId>) -> Result<PageId, KvCacheError> {
        let mut state = self.state();
        let id = (state.choose(after)).ok_or(KvCacheError::PoolFull { pages: self.pages })?;
        state.holders[id] = 1;
        Ok(id as PageId)
    }

    /// One more holder of `id`.
    fn retain(&self, id: PageId) {
        self.state().holders[id as usize] += 1;
    }

    /// One holder fewer of `id`; a page no one holds is free again.
    fn release(&self, id: PageId) {
        let mut state = self.state();
        let holders = &mut state.holders[id as usize];
        *holders = holders.saturating_sub(1);
    }

    /// Whether more than one cache holds `id`.
    fn is_shared(&self, id: PageId) -> bool {
        self.state().holders[id as usize] > 1
    }

    /// The streams of every layer in storage order: `(layer, stream)`.
    fn blocks(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        let streams = self.position_bytes.len();
        (0..self.layers).flat_map(move |l| (0..streams).map(move |s| (l, s)))
    }

    /// Bytes of one page of one stream of one layer.
    fn block_bytes(&self, stream: usize) -> usize {
        self.positions * self.position_bytes[stream]
    }

    /// Where page `id` of `(layer, stream)` starts in the file: each layer's streams in
    /// turn, each the pool's pages of that stream in order.
    fn file_offset(&self, (layer, stream): (usize, usize), id: PageId) -> usize {
        let per_layer: usize = (0..self.position_bytes.len())
            .map(|s| self.pages * self.block_bytes(s))
            .sum();
        let before: usize = (0..stream).map(|s| self.pages * self.block_bytes(s)).sum();
        layer * per_layer + before + id as usize * self.block_bytes(stream)
    }
}

/// A cache's address range: every layer's streams, each `capacity` positions long (whole
/// pages), with pool pages mapped in page-table order and the rest inaccessible.
pub(super) struct PagedRegion {
    pool: Arc<PagePool>,
    base: NonNull<u8>,
    bytes: usize,
    /// Where each `(layer, stream)` ([`PagePool::blocks`] order) starts in the range.
    offsets: Vec<usize>,
    /// Pages of the range: entry `i` holds positions `i * positions..(i + 1) * positions`.
    table: Mutex<Vec<Option<PageId>>>,
}

impl std::fmt::Debug for PagedRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PagedRegion")
            .field("pages", &self.held())
            .finish_non_exhaustive()
    }
}

// SAFETY: the region is plain memory mapped by this process; its table is behind a mutex,
// and its bytes are written only under the KV cache's write rules.
unsafe impl Send for PagedRegion {}
// SAFETY: as above.
unsafe impl Sync for PagedRegion {}

impl PagedRegion {
    /// An empty range for a cache over `pool` (no page mapped).
    pub(super) fn new(pool: &Arc<PagePool>) -> Result<Arc<PagedRegion>, KvCacheError> {
        let table_len = pool.pages_for(pool.capacity).max(1);
        let bytes = table_len * pool.page_bytes();
        // SAFETY: a new private mapping with no access: it only reserves addresses.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes.max(1),
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(os_error("reserving a cache's addresses"));
        }
        let base = NonNull::new(base.cast()).ok_or_else(|| os_error("mmap"))?;
        let offsets = (pool.blocks())
            .scan(0, |at, (_, stream)| {
                let start = *at;
                *at += table_len * pool.block_bytes(stream);
                Some(start)
            })
            .collect();
        Ok(Arc::new(PagedRegion {
            pool: pool.clone(),
            base,
            bytes: bytes.max(1),
            offsets,
            table: Mutex::new(vec![None; table_len]),
        }))
    }

    /// The pool the pages come from.
    pub(super) fn pool(&self) -> &Arc<PagePool> {
        &self.pool
    }

    fn table(&self) -> MutexGuard<'_, Vec<Option<PageId>>> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Where `(layer, stream)`'s positions start in the range.
    fn offset(&self, (layer, stream): (usize, usize)) -> usize {
        self.offsets[layer * self.pool.position_bytes.len() + stream]
    }

    /// One buffer per stream of each layer, over this range (`capacity` positions each,
    /// rounded up to whole pages).
    pub(super) fn buffers(self: &Arc<Self>) -> Result<Vec<Vec<Arc<Buffer>>>, KvCacheError> {
        let table_len = self.table().len();
        let streams = self.pool.position_bytes.len();
        (0..self.pool.layers)
            .map(|layer| {
                (0..streams)
                    .map(|stream| {
                        let offset = self.offset((layer, stream));
                        let len = table_len * self.pool.block_bytes(stream);
                        let owner: Arc<dyn std::any::Any + Send + Sync> = self.clone();
                        // SAFETY: `offset..offset + len` is inside the reserved range,
                        // which stays mapped while the region (the owner) lives; pages are
                        // mapped into it before positions there are written or viewed.
                        let buffer = unsafe {
                            Buffer::in_region(self.base.as_ptr().add(offset), len, owner)
                        };
                        buffer.map(Arc::new).ok_or_else(|| os_error("a null range"))
                    })
                    .collect()
            })
            .collect()
    }

    /// Maps pool page `id` (`None`: no page, inaccessible) at entry `index` of the range.
    fn map(&self, index: usize, id: Option<PageId>) -> Result<(), KvCacheError> {
        for block in self.pool.blocks() {
            let size = self.pool.block_bytes(block.1);
            let at = self.offset(block) + index * size;
            // SAFETY: `at..at + size` is inside the range this region reserved, which
            // nothing else maps; a fixed mapping replaces only those addresses. The file
            // offset is inside the pool's file (`id` < pages).
            let mapped = unsafe {
                let addr = self.base.as_ptr().add(at).cast();
                match id {
                    Some(id) => libc::mmap(
                        addr,
                        size,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_SHARED | libc::MAP_FIXED,
                        self.pool.file.as_raw_fd(),
                        self.pool.file_offset(block, id) as libc::off_t,
                    ),
                    None => libc::mmap(
                        addr,
                        size,
                        libc::PROT_NONE,
                        libc::MAP_PRIVATE
                            | libc::MAP_ANONYMOUS
                            | libc::MAP_FIXED
                            | libc::MAP_NORESERVE,
                        -1,
                        0,
                    ),
                }
            };
            if mapped == libc::MAP_FAILED {
                return Err(os_error(
                    "mapping a KV page (out of memory, or of mappings: see vm.max_map_count)",
                ));
            }
        }
        Ok(())
    }

    /// Makes positions `start..end` writable by this cache alone: entries with no page
    /// get a free one; a page other caches also hold is copied to a free one first.
    pub(super) fn prepare(&self, start: usize, end: usize) -> Result<(), KvCacheError> {
        if start >= end {
            return Ok(());
        }
        let positions = self.pool.positions;
        let mut table = self.table();
        for index in start / positions..end.div_ceil(positions) {
            let after = index.checked_sub(1).and_then(|i| table[i]);
            match table[index] {
                None => {
                    let id = self.pool.allocate(after)?;
                    self.remap(index, id, None)?;
                    table[index] = Some(id);
                }
                Some(old) if self.pool.is_shared(old) => {
                    let id = self.pool.allocate(after)?;
                    self.copy_page(index, id)
                        .inspect_err(|_| self.pool.release(id))?;
                    self.remap(index, id, Some(old))?;
                    table[index] = Some(id);
                    self.pool.release(old);
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// Maps page `id`, just allocated or retained for this range, at entry `index` in
    /// place of `was`. If that fails partway (some layers and streams remapped), `was` is
    /// mapped back and `id` given back, so the range never shows a page it does not hold.
    fn remap(&self, index: usize, id: PageId, was: Option<PageId>) -> Result<(), KvCacheError> {
        self.map(index, Some(id)).inspect_err(|_| {
            // If this fails too, the entry stays partly mapped to `id`, which stays held.
            if self.map(index, was).is_ok() {
                self.pool.release(id);
            }
        })
    }

    /// Writes what entry `index` shows (every layer and stream) into pool page `id`.
    fn copy_page(&self, index: usize, id: PageId) -> Result<(), KvCacheError> {
        for block in self.pool.blocks() {
            let size = self.pool.block_bytes(block.1);
            let at = self.offset(block) + index * size;
            // SAFETY: entry `index` is mapped to a page more than one cache holds, which
            // no cache writes (each copies it first), so these `size` bytes inside the
            // range are readable and unchanging during the copy.
            let page = unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(at), size) };
            let offset = self.pool.file_offset(block, id) as u64;
            (self.pool.file.write_all_at(page, offset)).map_err(|e| KvCacheError::Pages {
                what: "copying a shared KV page",
                error: e.to_string(),
            })?;
        }
        Ok(())
    }

    /// Maps the pages `source` holds for its first `positions` positions into this empty
    /// range (shared: each is copied when either cache writes it).
    pub(super) fn share(&self, source: &PagedRegion, positions: usize) -> Result<(), KvCacheError> {
        let pages = self.pool.pages_for(positions);
        let ids: Vec<Option<PageId>> = source.table().iter().take(pages).copied().collect();
        let mut table = self.table();
        for (index, id) in ids.into_iter().enumerate() {
            let Some(id) = id else { continue };
            self.pool.retain(id);
            self.remap(index, id, None)?;
            table[index] = Some(id);
        }
        Ok(())
    }

    /// A new range holding the same pages as this one (each now shared).
    pub(super) fn fork(&self) -> Result<Arc<PagedRegion>, KvCacheError> {
        let region = PagedRegion::new(&self.pool)?;
        let positions = self.table().len() * self.pool.positions;
        region.share(self, positions)?;
        Ok(region)
    }

    /// Pages mapped in the range.
    pub(super) fn held(&self) -> usize {
        self.table().iter().flatten().count()
    }

    /// Gives every page back to the pool, leaving the range inaccessible.
    pub(super) fn release(&self) {
        let mut table = self.table();
        for index in 0..table.len() {
            if let Some(id) = table[index] {
                // Unmapping cannot fail for a range this region reserved; if it did, the
                // page stays held (and mapped) rather than reaching another cache.
                if self.map(index, None).is_ok() {
                    table[index] = None;
                    self.pool.release(id);
                }
            }
        }
    }
}

impl Drop for PagedRegion {
    fn drop(&mut self) {
        // SAFETY: the range was mapped by `new` with these bounds, and no buffer over it
        // is alive (each holds the region).
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.bytes) };
        for id in self.table().iter().flatten() {
            self.pool.release(*id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::PoolState;

    fn state(holders: &[u32]) -> PoolState {
        PoolState {
            holders: holders.to_vec(),
        }
    }

    #[test]
    fn a_cache_gets_the_page_after_its_last_else_room_in_the_longest_free_run() {
        assert_eq!(state(&[1, 0, 0, 0, 0, 0, 0, 0]).choose(Some(0)), Some(1));
        // A new cache lands mid-run, leaving room for page 0's cache to grow.
        assert_eq!(state(&[1, 0, 0, 0, 0, 0, 0, 0]).choose(None), Some(4));
        assert_eq!(state(&[0, 0, 1, 0, 0, 0]).choose(None), Some(4));
        assert_eq!(state(&[0, 0, 0, 1, 0, 0]).choose(None), Some(0));
        // The next page held: the longest run instead.
        assert_eq!(state(&[1, 1, 0, 2, 0, 0]).choose(Some(0)), Some(5));
        assert_eq!(state(&[1, 1, 1]).choose(Some(0)), None);
    }
}
