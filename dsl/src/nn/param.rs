//! Model parameters and the hierarchical names they are found under.

use crate::ir::{Expr, Var};
use crate::{DType, StructInfo, SymExpr};
use std::fmt;

/// A dotted path naming a module in a model (`model.layers.0.self_attn`), as Hugging Face
/// names weights. The root is the empty path.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Prefix(String);

impl Prefix {
    /// The empty path (a model whose parameters are named without a prefix).
    pub fn root() -> Self {
        Prefix::default()
    }

    /// A path with one component.
    pub fn new(name: &str) -> Self {
        Prefix::root().child(name)
    }

    /// The path of child `name` (`model` -> `model.norm`).
    pub fn child(&self, name: &str) -> Prefix {
        if self.0.is_empty() {
            Prefix(name.to_string())
        } else {
            Prefix(format!("{}.{name}", self.0))
        }
    }

    /// The path of the `index`-th item of a list (`model.layers` -> `model.layers.0`).
    pub fn index(&self, index: usize) -> Prefix {
        self.child(&index.to_string())
    }

    /// The full name of parameter `leaf` of the module at this path (`...q_proj.weight`).
    pub fn param(&self, leaf: &str) -> String {
        self.child(leaf).0
    }

    /// The last component (`q_proj` for `model.layers.0.self_attn.q_proj`), used as a
    /// readable name hint; `x` for the root.
    pub fn last(&self) -> &str {
        self.0
            .rsplit('.')
            .next()
            .filter(|s| !s.is_empty())
            .unwrap_or("x")
    }

    /// The whole path.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A model parameter: its full name (the Hugging Face weight name) and struct info.
/// Exported functions take it as a parameter variable of that name.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    /// Full dotted name, e.g. `model.layers.0.self_attn.q_proj.weight`.
    pub name: String,
    /// Shape and dtype.
    pub sinfo: StructInfo,
}

impl Param {
    /// Parameter `leaf` of the module at `prefix`, a tensor of `shape` and `dtype`.
    pub fn new(prefix: &Prefix, leaf: &str, shape: &[i64], dtype: DType) -> Self {
        Param {
            name: prefix.param(leaf),
            sinfo: StructInfo::tensor(shape.iter().map(|&d| SymExpr::int(d)).collect(), dtype),
        }
    }

    /// The same parameter stored as `dtype`.
    pub fn with_dtype(mut self, dtype: DType) -> Self {
        if let StructInfo::Tensor(tensor) = &mut self.sinfo {
            tensor.dtype = dtype;
        }
        self
    }

    /// The element type, for a tensor parameter.
    pub fn dtype(&self) -> Option<DType> {
        self.sinfo.as_tensor().map(|t| t.dtype)
    }

    /// The function parameter that carries this weight.
    pub fn var(&self) -> Var {
        Var::new(&self.name, self.sinfo.clone())
    }

    /// A reference to the weight inside a function that takes it.
    pub fn expr(&self) -> Expr {
        Expr::Var(self.var())
    }
}
