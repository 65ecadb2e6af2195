//! Constructors shared by the crate's unit tests (hand-built IR without the builder).

use crate::ir::{Binding, BindingValue, Call, Callee, Expr, Var};
use crate::{DataType, StructInfo, SymExpr};

/// An f32 tensor of static shape.
pub(crate) fn t(dims: &[i64]) -> StructInfo {
    StructInfo::tensor(
        dims.iter().map(|&d| SymExpr::int(d)).collect(),
        DataType::F32,
    )
}

/// A call with the given struct info (not inferred).
pub(crate) fn call(callee: Callee, args: Vec<Expr>, sinfo: StructInfo) -> Expr {
    Expr::Call(Box::new(Call {
        callee,
        args,
        attrs: Default::default(),
        sinfo,
    }))
}

/// An op call with the given struct info (not inferred).
pub(crate) fn op(name: &str, args: Vec<Expr>, sinfo: StructInfo) -> Expr {
    call(Callee::Op(name.to_string()), args, sinfo)
}

/// `exp(x)` with `x`'s struct info.
pub(crate) fn exp(x: &Var) -> Expr {
    op("exp", vec![x.into()], x.sinfo.clone())
}

/// A variable.
pub(crate) fn var(name: &str, sinfo: StructInfo, dataflow: bool) -> Var {
    Var {
        name: name.to_string(),
        sinfo,
        dataflow,
    }
}

/// `v = value`.
pub(crate) fn bind(v: &Var, value: Expr) -> Binding {
    Binding {
        var: v.clone(),
        value: BindingValue::Expr(value),
    }
}
