//! Graph-IR expressions.

use crate::attrs::Attrs;
use crate::struct_info::StructInfo;
use crate::{DType, SymExpr};
use serde::{Deserialize, Serialize};

/// A variable: a function parameter or the left side of a binding.
///
/// Variables are identified by name, which is unique within a function. A dataflow
/// variable lives only inside its dataflow block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Var {
    /// Unique name within the function.
    pub name: String,
    /// What the variable holds.
    pub sinfo: StructInfo,
    /// Whether the variable is local to a dataflow block.
    pub dataflow: bool,
}

impl Var {
    /// A (non-dataflow) variable.
    pub fn new(name: &str, sinfo: StructInfo) -> Self {
        Var {
            name: name.to_string(),
            sinfo,
            dataflow: false,
        }
    }
}

/// A constant tensor embedded in the IR (small constants; weights are parameters).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Constant {
    /// Element type.
    pub dtype: DType,
    /// Static shape.
    pub shape: Vec<i64>,
    /// Values, row-major, converted to f64 (exact for every supported dtype's range
    /// of interest: floats up to f32, integers up to 2^53).
    #[serde(with = "crate::text::finite_f64::vec")]
    pub values: Vec<f64>,
}

/// A scalar value (`R.prim_value`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum PrimValue {
    /// A symbolic integer of a given integer dtype.
    Int(SymExpr, DType),
    /// A float of a given float dtype.
    Float(#[serde(with = "crate::text::finite_f64")] f64, DType),
}

/// What a call calls.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Callee {
    /// A registered op, by name (see [`crate::op`]).
    Op(String),
    /// A primitive function of the module (`call_tir`), destination-passing: the
    /// result is allocated by the caller with the call's struct info.
    Tir(String),
    /// A runtime builtin (`call_packed`), e.g. `kv_cache.append`.
    Packed(String),
}

/// A call with its arguments, attributes and result struct info.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Call {
    /// What is called.
    pub callee: Callee,
    /// Arguments (leaf expressions after normalization).
    pub args: Vec<Expr>,
    /// Attributes (for ops).
    pub attrs: Attrs,
    /// The result's struct info: inferred for ops, declared for `call_tir`/`call_packed`.
    pub sinfo: StructInfo,
}

/// A graph-IR expression.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Expr {
    /// A variable reference.
    Var(Var),
    /// A constant tensor.
    Constant(Constant),
    /// A call.
    Call(Box<Call>),
    /// A tuple of values.
    Tuple(Vec<Expr>),
    /// Field `index` of a tuple value.
    TupleGetItem(Box<Expr>, usize),
    /// A shape value.
    Shape(Vec<SymExpr>),
    /// A scalar value.
    Prim(PrimValue),
    /// A string (an argument of a builtin).
    Str(String),
}

impl Expr {
    /// The struct info of this expression. Calls carry theirs; a projection out of a
    /// non-tuple is reported as an opaque object (the well-formedness checker rejects it).
    pub fn sinfo(&self) -> StructInfo {
        match self {
            Expr::Var(v) => v.sinfo.clone(),
            Expr::Constant(c) => {
                StructInfo::tensor(c.shape.iter().map(|&d| SymExpr::int(d)).collect(), c.dtype)
            }
            Expr::Call(call) => call.sinfo.clone(),
            Expr::Tuple(items) => StructInfo::Tuple(items.iter().map(Expr::sinfo).collect()),
            Expr::TupleGetItem(tuple, index) => match tuple.sinfo() {
                StructInfo::Tuple(mut items) if *index < items.len() => items.swap_remove(*index),
                _ => StructInfo::Object,
            },
            Expr::Shape(values) => StructInfo::Shape(Some(values.clone())),
            Expr::Prim(PrimValue::Int(_, dtype) | PrimValue::Float(_, dtype)) => {
                StructInfo::Scalar(*dtype)
            }
            Expr::Str(_) => StructInfo::Object,
        }
    }

    /// Whether this is a leaf (no nested call): what a call argument must be after
    /// normalization.
    pub fn is_leaf(&self) -> bool {
        match self {
            Expr::Call(_) => false,
            Expr::Tuple(items) => items.iter().all(Expr::is_leaf),
            Expr::TupleGetItem(tuple, _) => tuple.is_leaf(),
            _ => true,
        }
    }

    /// The variable, if this expression is one.
    pub fn as_var(&self) -> Option<&Var> {
        match self {
            Expr::Var(v) => Some(v),
            _ => None,
        }
    }
}

impl From<Var> for Expr {
    fn from(var: Var) -> Self {
        Expr::Var(var)
    }
}

impl From<&Var> for Expr {
    fn from(var: &Var) -> Self {
        Expr::Var(var.clone())
    }
}

impl Expr {
    /// Calls `f` on every variable this expression reads, in order of appearance.
    pub fn for_each_var<'a>(&'a self, f: &mut dyn FnMut(&'a Var)) {
        match self {
            Expr::Var(v) => f(v),
            Expr::Call(call) => call.args.iter().for_each(|a| a.for_each_var(f)),
            Expr::Tuple(items) => items.iter().for_each(|i| i.for_each_var(f)),
            Expr::TupleGetItem(tuple, _) => tuple.for_each_var(f),
            Expr::Constant(_) | Expr::Shape(_) | Expr::Prim(_) | Expr::Str(_) => {}
        }
    }

    /// Calls `f` on every variable this expression reads, mutably (to retarget them).
    pub fn for_each_var_mut(&mut self, f: &mut dyn FnMut(&mut Var)) {
        match self {
            Expr::Var(v) => f(v),
            Expr::Call(call) => call.args.iter_mut().for_each(|a| a.for_each_var_mut(f)),
            Expr::Tuple(items) => items.iter_mut().for_each(|i| i.for_each_var_mut(f)),
            Expr::TupleGetItem(tuple, _) => tuple.for_each_var_mut(f),
            Expr::Constant(_) | Expr::Shape(_) | Expr::Prim(_) | Expr::Str(_) => {}
        }
    }

    /// Calls `f` on every call in this expression, outermost first.
    pub fn for_each_call<'a>(&'a self, f: &mut dyn FnMut(&'a Call)) {
        match self {
            Expr::Call(call) => {
                f(call);
                call.args.iter().for_each(|a| a.for_each_call(f));
            }
            Expr::Tuple(items) => items.iter().for_each(|i| i.for_each_call(f)),
            Expr::TupleGetItem(tuple, _) => tuple.for_each_call(f),
            _ => {}
        }
    }
}
