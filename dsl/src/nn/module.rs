//! The [`Module`] trait and [`ModuleList`].

use super::param::{Param, Prefix};

/// A model component that owns parameters. Its forward function (an inherent method,
/// since inputs differ per module) takes the [`BlockBuilder`](crate::BlockBuilder) and
/// input expressions and emits ops.
pub trait Module {
    /// Every parameter of this module and its children, with full names, in a fixed
    /// order (the order exported functions take them in).
    fn parameters(&self) -> Vec<Param>;
}

/// A list of modules named by index (`model.layers.0`, `model.layers.1`, ...).
#[derive(Clone, Debug, PartialEq)]
pub struct ModuleList<M> {
    items: Vec<M>,
}

impl<M> ModuleList<M> {
    /// `len` modules made by `make` from their paths `prefix.0`, `prefix.1`, ...
    pub fn new(prefix: &Prefix, len: usize, make: impl FnMut(&Prefix) -> M) -> Self {
        let paths: Vec<Prefix> = (0..len).map(|i| prefix.index(i)).collect();
        ModuleList {
            items: paths.iter().map(make).collect(),
        }
    }

    /// The modules, in order.
    pub fn iter(&self) -> std::slice::Iter<'_, M> {
        self.items.iter()
    }

    /// The module at `index`, if there is one.
    pub fn get(&self, index: usize) -> Option<&M> {
        self.items.get(index)
    }

    /// How many modules there are.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

impl<M> std::ops::Index<usize> for ModuleList<M> {
    type Output = M;

    fn index(&self, index: usize) -> &M {
        &self.items[index]
    }
}

impl<'a, M> IntoIterator for &'a ModuleList<M> {
    type Item = &'a M;
    type IntoIter = std::slice::Iter<'a, M>;

    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

impl<M: Module> Module for ModuleList<M> {
    fn parameters(&self) -> Vec<Param> {
        self.items.iter().flat_map(Module::parameters).collect()
    }
}
