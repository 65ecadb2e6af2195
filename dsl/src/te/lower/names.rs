//! Readable unique names for loop variables and local buffers.

use std::collections::{BTreeMap, BTreeSet};

/// Hands out `prefix0`, `prefix1`, ... never repeating a name or using a reserved one.
#[derive(Debug, Default)]
pub(super) struct NameAllocator {
    used: BTreeSet<String>,
    next: BTreeMap<String, usize>,
}

impl NameAllocator {
    /// Marks `name` as taken.
    pub(super) fn reserve(&mut self, name: &str) {
        self.used.insert(name.to_string());
    }

    /// A fresh name `prefix<n>`.
    pub(super) fn fresh(&mut self, prefix: &str) -> String {
        let counter = self.next.entry(prefix.to_string()).or_insert(0);
        loop {
            let name = format!("{prefix}{counter}");
            *counter += 1;
            if self.used.insert(name.clone()) {
                return name;
            }
        }
    }

    /// `name` itself when free, else a fresh `name_<n>`; the result is taken.
    pub(super) fn unique(&mut self, name: &str) -> String {
        if self.used.insert(name.to_string()) {
            name.to_string()
        } else {
            self.fresh(&format!("{name}_"))
        }
    }
}
