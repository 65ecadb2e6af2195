//! Graph functions: parameters, binding blocks and a result.

use super::expr::{Expr, Var};
use crate::struct_info::StructInfo;
use serde::{Deserialize, Serialize};

/// The right side of a binding.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum BindingValue {
    /// `var = expr`.
    Expr(Expr),
    /// `var = match_cast(expr, sinfo)`: checks at run time that the value matches
    /// `sinfo`, binding any symbolic dims that appear in it for the first time.
    MatchCast(Expr, StructInfo),
}

/// One binding of a block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Binding {
    /// The bound variable.
    pub var: Var,
    /// What it is bound to.
    pub value: BindingValue,
}

/// A sequence of bindings. A dataflow block is pure (no side effects, no control flow);
/// its dataflow variables are invisible outside it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BindingBlock {
    /// Whether this is a dataflow block.
    pub dataflow: bool,
    /// The bindings, in order.
    pub bindings: Vec<Binding>,
}

/// A graph function.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Function {
    /// Parameters, in call order; their struct info binds the symbolic dims.
    pub params: Vec<Var>,
    /// The body.
    pub blocks: Vec<BindingBlock>,
    /// The result (a leaf expression).
    pub ret: Expr,
    /// Whether the function is exported (kept by dead code elimination, callable by
    /// the runtime under its name).
    pub exported: bool,
}

impl Function {
    /// The struct info of the result.
    pub fn ret_sinfo(&self) -> StructInfo {
        self.ret.sinfo()
    }

    /// Every binding of the body, in order.
    pub fn bindings(&self) -> impl Iterator<Item = &Binding> {
        self.blocks.iter().flat_map(|b| &b.bindings)
    }
}

impl BindingValue {
    /// The bound expression.
    pub fn expr(&self) -> &Expr {
        match self {
            BindingValue::Expr(e) | BindingValue::MatchCast(e, _) => e,
        }
    }
}
