//! The table of open models. A C handle is an id in this table, never a pointer to
//! memory: ids are not reused, so a closed or made-up handle is looked up, not found and
//! refused (`OXRELAX_ERROR_INVALID_HANDLE`) instead of being dereferenced. A call holds
//! its model's lock for its whole length; a second call on the same handle meanwhile
//! (from another thread or from a token callback) is refused rather than waited for.

use super::error::Failure;
use super::oxrelax_model;
use crate::artifact::LoadedEngine;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};

/// Every open model of the process.
pub(super) static MODELS: Handles<LoadedEngine> = Handles::new();

/// A thread-safe table of open values of type `T`, by handle.
pub(super) struct Handles<T> {
    table: Mutex<Table<T>>,
}

/// Open values by id, and the id the next one gets.
struct Table<T> {
    next: usize,
    open: BTreeMap<usize, Arc<Mutex<T>>>,
}

impl<T> Handles<T> {
    /// An empty table; its first handle is 1.
    pub(super) const fn new() -> Self {
        let table = Table {
            next: 1,
            open: BTreeMap::new(),
        };
        Handles {
            table: Mutex::new(table),
        }
    }

    /// The table, also after a panic elsewhere while it was locked (no call leaves it
    /// half-updated: each change is one insert or remove).
    fn table(&self) -> MutexGuard<'_, Table<T>> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds `value` to the table; returns its new handle.
    pub(super) fn open(&self, value: T) -> *mut oxrelax_model {
        let mut table = self.table();
        let id = table.next;
        table.next += 1;
        table.open.insert(id, Arc::new(Mutex::new(value)));
        std::ptr::without_provenance_mut(id)
    }

    /// Removes `handle` from the table; a call still running on it keeps its value until
    /// it returns. Null is refused (`oxrelax_close` ignores it before calling this).
    pub(super) fn close(&self, handle: *const oxrelax_model) -> Result<(), Failure> {
        let id = id(handle)?;
        let removed = self.table().open.remove(&id);
        removed.map(drop).ok_or_else(|| Failure::closed(id))
    }

    /// Runs `call` on the value of `handle`, refused when the handle is null, not open,
    /// in use by another call, or left in an unknown state by a call that panicked.
    pub(super) fn with<R>(
        &self,
        handle: *const oxrelax_model,
        call: impl FnOnce(&mut T) -> Result<R, Failure>,
    ) -> Result<R, Failure> {
        let id = id(handle)?;
        let value = self.table().open.get(&id).cloned();
        let value = value.ok_or_else(|| Failure::closed(id))?;
        let mut value = match value.try_lock() {
            Ok(value) => value,
            Err(TryLockError::Poisoned(_)) => return Err(Failure::poisoned(id)),
            Err(TryLockError::WouldBlock) => return Err(Failure::busy(id)),
        };
        call(&mut value)
    }
}

/// The id `handle` stands for; null is refused.
fn id(handle: *const oxrelax_model) -> Result<usize, Failure> {
    match handle.addr() {
        0 => Err(Failure::null("model")),
        id => Ok(id),
    }
}
