//! Fresh, readable, collision-free names (`lv`, `lv1`, `lv2`, ...).

use std::collections::{HashMap, HashSet};

/// Hands out names that are unique among every name it has seen.
///
/// A hint is used as is when free; otherwise a counter is appended (`x`, `x1`, `x2`, ...).
/// Characters that cannot appear in an identifier are replaced by `_`.
#[derive(Clone, Debug, Default)]
pub struct NameSupply {
    used: HashSet<String>,
    next_suffix: HashMap<String, usize>,
}

impl NameSupply {
    /// A supply with no name in use.
    pub fn new() -> Self {
        NameSupply::default()
    }

    /// A supply that avoids every name in `names`.
    pub fn avoiding<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let mut supply = NameSupply::new();
        for name in names {
            supply.reserve(name);
        }
        supply
    }

    /// Marks `name` as used; returns whether it was free.
    pub fn reserve(&mut self, name: &str) -> bool {
        self.used.insert(name.to_string())
    }

    /// Whether `name` is in use.
    pub fn contains(&self, name: &str) -> bool {
        self.used.contains(name)
    }

    /// A fresh name derived from `hint`, now marked as used.
    pub fn fresh(&mut self, hint: &str) -> String {
        let base = sanitize(hint);
        if self.reserve(&base) {
            return base;
        }
        let counter = self.next_suffix.entry(base.clone()).or_insert(1);
        loop {
            let candidate = format!("{base}{counter}");
            *counter += 1;
            if self.used.insert(candidate.clone()) {
                return candidate;
            }
        }
    }
}

/// `hint` as an identifier: `[A-Za-z_][A-Za-z0-9_]*` (`v` when empty).
fn sanitize(hint: &str) -> String {
    let mut out: String = hint
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    match out.chars().next() {
        None => out.push('v'),
        Some(c) if c.is_ascii_digit() => out.insert(0, '_'),
        Some(_) => {}
    }
    out
}
