//! Attributes of op calls and functions: a small typed map printed as `key=value`.

use crate::{DType, SymExpr};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One attribute value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum AttrValue {
    /// An integer (an axis, a count).
    Int(i64),
    /// A list of integers (axes, a permutation, split indices).
    Ints(Vec<i64>),
    /// A float (an epsilon, a fill value).
    Float(#[serde(with = "crate::text::finite_f64")] f64),
    /// A boolean flag (`keepdims`).
    Bool(bool),
    /// A string (an approximation mode).
    Str(String),
    /// A data type (`astype`'s target).
    DType(DType),
    /// A symbolic shape (`full`'s shape).
    Shape(Vec<SymExpr>),
}

/// Attributes by name, in sorted order (so printing is deterministic).
pub type Attrs = BTreeMap<String, AttrValue>;
