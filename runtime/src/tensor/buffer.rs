//! Raw byte regions behind tensors: owned (64-byte aligned), arena, or borrowed.

use super::error::TensorError;
use std::alloc::{self, Layout};
use std::any::Any;
use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

/// Alignment of every owned or arena allocation, in bytes (a cache line; enough for any
/// vector load the kernels emit).
pub const BUFFER_ALIGN: usize = 64;

/// Where a tensor's bytes live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorageKind {
    /// A zero-initialized allocation owned by the tensor (shared only with its views).
    Owned,
    /// A region of a function's arena, reused by the VM on every call of that function.
    Arena,
    /// Memory the runtime did not allocate (e.g. an mmapped weight file), read-only.
    Borrowed,
}

/// Allocations of at least this many bytes are mapped from the OS directly (anonymous,
/// page-aligned) and unmapped when dropped. The heap allocator would keep freed large
/// blocks for reuse, so loading a model whose converted weights are freed as they are
/// packed would end with both copies' worth of resident memory.
const MAPPED_MIN_BYTES: usize = 1 << 20;

/// The size of a base page (4 KiB on the targets; a larger one only maps more).
const BASE_PAGE_BYTES: usize = 4 << 10;

/// The OS's page size (mapping offsets and lengths are multiples of it).
pub(crate) fn os_page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size)
        .ok()
        .filter(|&s| s > 0)
        .unwrap_or(4096)
}

/// The size of a huge page (a PMD on x86-64 and on aarch64 with 4 KiB pages): only a
/// buffer at least this large asks for them.
pub(crate) const HUGE_PAGE_BYTES: usize = 2 << 20;

/// Which pages a large (mapped) buffer asks the OS for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pages {
    /// Huge pages, where the OS has transparent ones (Linux, Android): for buffers read
    /// whole on every step (weights, arenas). A decode step streams every weight once,
    /// and in 4 KiB pages each 4 KiB of that stream is another TLB miss and page walk.
    Huge,
    /// Base pages: for a buffer filled a little at a time (the KV cache), so only what is
    /// written becomes resident.
    Base,
}

/// The environment variable that turns huge pages off when set to `0`, `off` or `false`
/// (read once, at the first large allocation): large buffers then keep base pages, and
/// [`crate::artifact::Artifact::open`] leaves an artifact's weights in their file mapping
/// instead of copying them: a faster start (no copy) and a slower decode (base pages).
pub const HUGE_PAGES_ENV: &str = "OXRELAX_HUGE_PAGES";

/// The file whose contents say which transparent huge page mode the OS runs.
pub(crate) const THP_MODE_FILE: &str = "/sys/kernel/mm/transparent_hugepage/enabled";

/// Whether large buffers ask for huge pages: [`huge_pages_wanted`] for this process's
/// [`HUGE_PAGES_ENV`] and OS; decided once.
pub(crate) fn huge_pages_available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        let setting = std::env::var(HUGE_PAGES_ENV).ok();
        let mode = std::fs::read_to_string(THP_MODE_FILE).ok();
        huge_pages_wanted(setting.as_deref(), mode.as_deref())
    })
}

/// Whether [`HUGE_PAGES_ENV`] turns huge pages off for this process (which also keeps
/// an artifact's weights in their file mapping); decided once.
pub(crate) fn huge_pages_turned_off() -> bool {
    static OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OFF.get_or_init(|| turns_off(std::env::var(HUGE_PAGES_ENV).ok().as_deref()))
}

/// Whether the value of [`HUGE_PAGES_ENV`] (if set) turns huge pages off.
fn turns_off(setting: Option<&str>) -> bool {
    setting.is_some_and(|value| {
        ["0", "off", "false"].contains(&value.trim().to_ascii_lowercase().as_str())
    })
}

/// Whether to ask for huge pages given the value of [`HUGE_PAGES_ENV`] (if set) and the
/// contents of [`THP_MODE_FILE`] (if readable): unless turned off, where the OS gives
/// transparent huge pages to a mapping that asks (Linux and Android in mode `always` or
/// `madvise`).
pub(crate) fn huge_pages_wanted(setting: Option<&str>, thp_mode: Option<&str>) -> bool {
    let given =
        thp_mode.is_some_and(|mode| mode.contains("[always]") || mode.contains("[madvise]"));
    !turns_off(setting) && given && cfg!(any(target_os = "linux", target_os = "android"))
}

/// Asks the OS to back `map` with transparent huge pages (`madvise(MADV_HUGEPAGE)`, before
/// anything touches it). A hint: where the OS has none, or refuses, the mapping keeps base
/// pages and works the same.
fn advise_huge_pages(map: &mut memmap2::MmapMut) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    // SAFETY: the range is exactly this live, page-aligned mapping; the advice changes only
    // which pages back it, never what it holds.
    unsafe {
        libc::madvise(map.as_mut_ptr().cast(), map.len(), libc::MADV_HUGEPAGE);
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = map;
}

/// What keeps a buffer's memory alive.
enum Backing {
    /// Allocated here with this layout; freed on drop.
    Allocated(Layout),
    /// Mapped here (anonymous, zero-filled); unmapped when the mapping drops.
    Mapped { _mapping: memmap2::MmapMut },
    /// Owned by someone else; the handle keeps it alive until the buffer drops.
    Borrowed { owner: Arc<dyn Any + Send + Sync> },
    /// Part of a writable region owned by the handle (a paged KV cache's address range).
    Region { _owner: Arc<dyn Any + Send + Sync> },
}

/// A contiguous byte region. Tensors hold it through an `Arc` together with a byte offset.
///
/// Writes go through raw pointers only: by kernels (under the kernel ABI's contract), by a
/// tensor that holds the only reference (`Tensor::as_mut_slice`), or by the KV cache into
/// positions that no live view covers.
pub(crate) struct Buffer {
    ptr: NonNull<u8>,
    len: usize,
    kind: StorageKind,
    backing: Backing,
}

// SAFETY: a Buffer is a plain byte region with no thread affinity; the owner handle of a
// borrowed region is itself Send + Sync. Concurrent mutation is excluded by the write rules
// in the type's documentation.
unsafe impl Send for Buffer {}
// SAFETY: shared access only reads through `ptr` except under the write rules above.
unsafe impl Sync for Buffer {}

impl Buffer {
    /// A zeroed, 64-byte aligned allocation of `len` bytes, in huge pages where it is large
    /// and the OS has them ([`Pages::Huge`]); `None` if `len` is too large for any
    /// allocation. Running out of memory aborts, as for `Vec`.
    pub(crate) fn zeroed(len: usize, kind: StorageKind) -> Option<Buffer> {
        Buffer::zeroed_in(len, kind, Pages::Huge)
    }

    /// [`Buffer::zeroed`] in the given pages. A buffer of base pages is mapped from one
    /// page up (whatever its size, only the pages written become resident); others from
    /// [`MAPPED_MIN_BYTES`].
    pub(crate) fn zeroed_in(len: usize, kind: StorageKind, pages: Pages) -> Option<Buffer> {
        let mapped_from = match pages {
            Pages::Base => BASE_PAGE_BYTES,
            Pages::Huge => MAPPED_MIN_BYTES,
        };
        if len >= mapped_from {
            return Buffer::mapped(len, kind, pages);
        }
        let layout = Layout::from_size_align(len.max(1), BUFFER_ALIGN).ok()?;
        // SAFETY: the layout has a nonzero size (at least 1 byte).
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        Some(Buffer {
            ptr,
            len,
            kind,
            backing: Backing::Allocated(layout),
        })
    }

    /// A zeroed anonymous mapping of `len` bytes (page-aligned); `None` if the OS refuses.
    fn mapped(len: usize, kind: StorageKind, pages: Pages) -> Option<Buffer> {
        let mut map = memmap2::MmapMut::map_anon(len).ok()?;
        if pages == Pages::Huge && len >= HUGE_PAGE_BYTES && huge_pages_available() {
            advise_huge_pages(&mut map);
        }
        let ptr = NonNull::new(map.as_mut_ptr())?;
        Some(Buffer {
            ptr,
            len,
            kind,
            backing: Backing::Mapped { _mapping: map },
        })
    }

    /// Wraps memory owned by `owner`.
    ///
    /// # Safety
    /// `ptr` must be non-null and valid for reads of `len` bytes for as long as `owner` is
    /// alive, and nobody may write to it meanwhile.
    pub(crate) unsafe fn borrowed(
        ptr: *const u8,
        len: usize,
        owner: Arc<dyn Any + Send + Sync>,
    ) -> Option<Buffer> {
        Some(Buffer {
            ptr: NonNull::new(ptr.cast_mut())?,
            len,
            kind: StorageKind::Borrowed,
            backing: Backing::Borrowed { owner },
        })
    }

    /// `len` writable bytes at `ptr`, part of a region `owner` keeps mapped: an owned
    /// buffer (written under the same rules) that does not free its memory.
    ///
    /// # Safety
    /// `ptr` must be non-null and valid for reads and writes of `len` bytes for as long as
    /// `owner` is alive, and written only under the buffer's write rules.
    pub(crate) unsafe fn in_region(
        ptr: *mut u8,
        len: usize,
        owner: Arc<dyn Any + Send + Sync>,
    ) -> Option<Buffer> {
        Some(Buffer {
            ptr: NonNull::new(ptr)?,
            len,
            kind: StorageKind::Owned,
            backing: Backing::Region { _owner: owner },
        })
    }

    /// Whether the memory is an anonymous mapping of its own.
    #[cfg(test)]
    pub(crate) fn is_mapped(&self) -> bool {
        matches!(self.backing, Backing::Mapped { .. })
    }

    /// Size in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// What keeps borrowed memory alive; `None` for memory allocated here.
    pub(crate) fn owner(&self) -> Option<&(dyn Any + Send + Sync)> {
        match &self.backing {
            Backing::Borrowed { owner } => Some(owner.as_ref()),
            Backing::Allocated(_) | Backing::Mapped { .. } | Backing::Region { .. } => None,
        }
    }

    /// Where the bytes live.
    pub(crate) fn kind(&self) -> StorageKind {
        self.kind
    }

    /// Pointer to byte `offset` (which must be `<= len`).
    pub(crate) fn ptr_at(&self, offset: usize) -> *mut u8 {
        debug_assert!(offset <= self.len);
        // SAFETY: offset <= len keeps the pointer inside (or one past) the allocation.
        unsafe { self.ptr.as_ptr().add(offset) }
    }

    /// Copies `src` to byte `offset`; a range past the end, or a borrowed buffer, is an
    /// error and writes nothing.
    ///
    /// # Safety
    /// No reference or other thread reads or writes these bytes during the copy.
    pub(crate) unsafe fn write_at(&self, offset: usize, src: &[u8]) -> Result<(), TensorError> {
        let fits = offset
            .checked_add(src.len())
            .is_some_and(|end| end <= self.len);
        let borrowed = self.kind == StorageKind::Borrowed;
        if !fits || borrowed {
            return Err(TensorError::WriteOutOfBounds {
                offset,
                len: src.len(),
                capacity: self.len,
                kind: if borrowed { "borrowed" } else { "owned" },
            });
        }
        // SAFETY: the range is in bounds (checked above) and unaliased (caller's
        // contract); `src` is a separate allocation or a disjoint region, which `copy`
        // tolerates either way.
        unsafe { std::ptr::copy(src.as_ptr(), self.ptr_at(offset), src.len()) };
        Ok(())
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if let Backing::Allocated(layout) = self.backing {
            // SAFETY: `ptr` came from `alloc_zeroed` with exactly this layout.
            unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) }
        }
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buffer")
            .field("len", &self.len)
            .field("kind", &self.kind)
            .finish()
    }
}
