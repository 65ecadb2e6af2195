//! The table of open models. A C handle is an id in this table, never a pointer to
//! memory: ids are not reused, so a closed or made-up handle is looked up, not found and
//! refused (`OXRELAX_ERROR_INVALID_HANDLE`) instead of being dereferenced. A call holds
//! its model's lock for its whole length; a second call on the same handle meanwhile
//! (from another thread or from a token callback) is refused rather than waited for.

use super::error::Failure;
use super::oxrelax_model;
use crate::artifact::LoadedEngine;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError, TryLockError};

/// Open models by id, and the id the next one gets.
struct Table {
    next: usize,
    open: BTreeMap<usize, Arc<Mutex<LoadedEngine>>>,
}

/// Every open model of the process.
static TABLE: Mutex<Table> = Mutex::new(Table {
    next: 1,
    open: BTreeMap::new(),
});

/// The table, also after a panic elsewhere while it was locked (no call leaves it
/// half-updated: each change is one insert or remove).
fn table() -> std::sync::MutexGuard<'static, Table> {
    TABLE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Adds `loaded` to the table; returns its new handle.
pub(super) fn open(loaded: LoadedEngine) -> *mut oxrelax_model {
    let mut table = table();
    let id = table.next;
    table.next += 1;
    table.open.insert(id, Arc::new(Mutex::new(loaded)));
    std::ptr::without_provenance_mut(id)
}

/// Removes `handle` from the table; a call still running on it keeps its model until it
/// returns. Null is refused (`oxrelax_close` ignores it before calling this).
pub(super) fn close(handle: *const oxrelax_model) -> Result<(), Failure> {
    let id = id(handle)?;
    table()
        .open
        .remove(&id)
        .map(drop)
        .ok_or_else(|| Failure::closed(id))
}

/// Runs `call` on the model of `handle`, refused when the handle is null, not open, in
/// use by another call, or left in an unknown state by a call that panicked.
pub(super) fn with<R>(
    handle: *const oxrelax_model,
    call: impl FnOnce(&mut LoadedEngine) -> Result<R, Failure>,
) -> Result<R, Failure> {
    let id = id(handle)?;
    let model = table().open.get(&id).cloned();
    let model = model.ok_or_else(|| Failure::closed(id))?;
    let mut loaded = match model.try_lock() {
        Ok(loaded) => loaded,
        Err(TryLockError::Poisoned(_)) => return Err(Failure::poisoned(id)),
        Err(TryLockError::WouldBlock) => return Err(Failure::busy(id)),
    };
    call(&mut loaded)
}

/// The id `handle` stands for; null is refused.
fn id(handle: *const oxrelax_model) -> Result<usize, Failure> {
    match handle.addr() {
        0 => Err(Failure::null("model")),
        id => Ok(id),
    }
}
