//! The module: named graph functions and primitive (TIR) functions.

use super::function::Function;
use crate::tir::PrimFunc;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A compilation unit: graph functions and the primitive functions they call.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IRModule {
    /// Graph functions by name.
    pub functions: BTreeMap<String, Function>,
    /// Primitive functions by name (callees of `call_tir`).
    pub prim_funcs: BTreeMap<String, PrimFunc>,
}

impl IRModule {
    /// An empty module.
    pub fn new() -> Self {
        IRModule::default()
    }
}
