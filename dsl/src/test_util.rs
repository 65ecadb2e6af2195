//! Constructors shared by the crate's unit tests (hand-built IR without the builder).

use crate::ir::{Binding, BindingValue, Call, Callee, Expr, Var};
use crate::tir::{PrimFunc, Stmt};
use crate::{DType, StructInfo, SymExpr};

/// An f32 tensor of static shape.
pub(crate) fn t(dims: &[i64]) -> StructInfo {
    StructInfo::tensor(dims.iter().map(|&d| SymExpr::int(d)).collect(), DType::F32)
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

/// The statement under the first `depth` nested loops of the first stage of `func`.
pub(crate) fn under_loops(func: &PrimFunc, depth: usize) -> &Stmt {
    let first = match &func.body {
        Stmt::Seq(stages) => &stages[0],
        other => other,
    };
    (0..depth).fold(first, |stmt, _| match stmt {
        Stmt::For { body, .. } => body,
        other => panic!("expected a loop, found {other:?}"),
    })
}

/// The names of `func`'s buffer parameters, in order.
pub(crate) fn param_names(func: &PrimFunc) -> Vec<String> {
    func.params.iter().map(|p| p.name.clone()).collect()
}
