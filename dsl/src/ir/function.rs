//! Graph functions: parameters, binding blocks and a result.

use super::expr::{Expr, Var};
use crate::attrs::Attrs;
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
    /// Attributes; `num_input` (an int) says how many leading parameters are inputs, the
    /// rest being weights (model parameters), as in Relax.
    #[serde(default)]
    pub attrs: Attrs,
}

/// The function attribute counting the leading parameters that are inputs (the rest are
/// weights).
pub const NUM_INPUT_ATTR: &str = "num_input";

impl Function {
    /// The struct info of the result.
    pub fn ret_sinfo(&self) -> StructInfo {
        self.ret.sinfo()
    }

    /// How many leading parameters are inputs, when the function says (the rest are
    /// weights).
    pub fn num_inputs(&self) -> Option<usize> {
        match self.attrs.get(NUM_INPUT_ATTR) {
            Some(crate::attrs::AttrValue::Int(n)) => usize::try_from(*n).ok(),
            _ => None,
        }
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

    /// The bound expression, mutably.
    pub fn expr_mut(&mut self) -> &mut Expr {
        match self {
            BindingValue::Expr(e) | BindingValue::MatchCast(e, _) => e,
        }
    }
}
