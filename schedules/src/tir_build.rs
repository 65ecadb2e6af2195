//! Small constructors of TIR the schedule rules build loop nests from.

use oxrelax_dsl::tir::{BinOp, ForKind, PrimExpr, Stmt, TVar};
use oxrelax_dsl::DType;

/// The `i64` loop or let variable `name`.
pub(crate) fn index(name: &str) -> PrimExpr {
    PrimExpr::Var(TVar::new(name, DType::I64))
}

/// `min(a, b)`.
pub(crate) fn min(a: PrimExpr, b: PrimExpr) -> PrimExpr {
    a.binary(BinOp::Min, b)
}

/// `ceil(a / b)` for a positive constant `b`.
pub(crate) fn ceil_div(a: PrimExpr, b: i64) -> PrimExpr {
    (a + PrimExpr::index(b - 1)).binary(BinOp::FloorDiv, PrimExpr::index(b))
}

/// `ceil(a / b)` of two positive constants.
pub(crate) fn ceil_div_const(a: i64, b: i64) -> i64 {
    (a + b - 1) / b
}

/// `for var in 0..extent { body }` of `kind`.
pub(crate) fn for_loop(var: &str, extent: PrimExpr, kind: ForKind, body: Stmt) -> Stmt {
    Stmt::For {
        var: TVar::new(var, DType::I64),
        extent,
        kind,
        body: Box::new(body),
    }
}

/// `let var = value in body`.
pub(crate) fn let_in(var: &str, value: PrimExpr, body: Stmt) -> Stmt {
    Stmt::Let {
        var: TVar::new(var, DType::I64),
        value,
        body: Box::new(body),
    }
}
