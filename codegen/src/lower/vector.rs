//! Vectorized loops: a main loop that runs 4 iterations at a time on 128-bit vectors,
//! then a scalar tail for the remaining `extent % 4` iterations (any trip count, symbolic
//! included). A body that cannot safely run lane-parallel (nested control flow, or a
//! store whose lanes would hit the same element, as in a reduction) runs serially.

use super::vector_expr::Lane;
use super::Lowerer;
use crate::CodegenError;
use cranelift_codegen::ir::{types, InstBuilder, Value};
use oxrelax_dsl::tir::{BinOp, PrimExpr, Stmt, TVar};
use std::collections::{HashMap, HashSet};

/// Lanes per vector: 128-bit vectors of f32.
pub(crate) const LANES: i64 = 4;

/// The state of a vectorized loop body being lowered.
pub(crate) struct LaneScope {
    /// The vectorized loop variable.
    pub(crate) var: String,
    /// Its value in lane 0.
    pub(crate) base: Value,
    /// `let` variables bound inside the body.
    pub(crate) lets: HashMap<String, Lane>,
}

impl Lowerer<'_, '_> {
    /// `for var in 0..extent vectorized { body }`.
    pub(crate) fn vector_loop(
        &mut self,
        var: &TVar,
        extent: &PrimExpr,
        body: &Stmt,
    ) -> Result<(), CodegenError> {
        let end = self.expr(extent)?;
        let zero = self.b.ins().iconst(types::I64, 0);
        if self.lanes.is_some() || !self.vectorizable(body, &var.name) {
            return self.serial_loop(var, zero, end, body);
        }
        let main_end = self.b.ins().band_imm_s(end, !(LANES - 1));
        self.counted_loop(zero, main_end, LANES, |l, base| {
            l.lanes = Some(LaneScope {
                var: var.name.clone(),
                base,
                lets: HashMap::new(),
            });
            let lowered = l.vector_stmt(body);
            l.lanes = None;
            lowered
        })?;
        self.serial_loop(var, main_end, end, body)
    }

    fn vector_stmt(&mut self, stmt: &Stmt) -> Result<(), CodegenError> {
        match stmt {
            Stmt::Seq(items) => items.iter().try_for_each(|s| self.vector_stmt(s)),
            Stmt::Store {
                buffer,
                indices,
                value,
            } => {
                let value = self.vector_expr(value)?;
                self.vector_store(buffer, indices, value)
            }
            Stmt::Let { var, value, body } => {
                let lane = self.vector_expr(value)?;
                if let Some(scope) = self.lanes.as_mut() {
                    scope.lets.insert(var.name.clone(), lane);
                }
                self.vector_stmt(body)
            }
            Stmt::Evaluate(expr) => self.vector_expr(expr).map(|_| ()),
            _ => Err(self.unsupported("control flow inside a vectorized loop")),
        }
    }

    /// Whether every statement of `body` is a store, let or evaluation, and every store
    /// writes a distinct element per lane.
    fn vectorizable(&self, body: &Stmt, var: &str) -> bool {
        let mut dependent = HashSet::new();
        self.vectorizable_stmt(body, var, &mut dependent)
    }

    fn vectorizable_stmt(&self, stmt: &Stmt, var: &str, dependent: &mut HashSet<String>) -> bool {
        match stmt {
            Stmt::Seq(items) => items
                .iter()
                .all(|s| self.vectorizable_stmt(s, var, dependent)),
            Stmt::Store {
                buffer, indices, ..
            } => self
                .store_stride(buffer, indices, var, dependent)
                .is_some_and(|s| s != 0),
            Stmt::Let {
                var: v,
                value,
                body,
            } => {
                if index_stride(value, var, dependent) != Some(0) {
                    dependent.insert(v.name.clone());
                }
                self.vectorizable_stmt(body, var, dependent)
            }
            Stmt::Evaluate(_) => true,
            _ => false,
        }
    }

    /// How far the flat element index of a store moves per iteration, when constant.
    fn store_stride(
        &self,
        buffer: &str,
        indices: &[PrimExpr],
        var: &str,
        dependent: &HashSet<String>,
    ) -> Option<i64> {
        let slot = self.buffers.get(buffer)?;
        indices
            .iter()
            .zip(&slot.const_strides)
            .try_fold(0i64, |acc, (index, stride)| {
                match index_stride(index, var, dependent)? {
                    0 => Some(acc),
                    s => Some(acc + s * (*stride)?),
                }
            })
    }
}

/// How much an integer index expression changes when `var` grows by one: `Some(k)` when it
/// is affine in `var` with a constant coefficient, `None` otherwise.
pub(crate) fn index_stride(expr: &PrimExpr, var: &str, dependent: &HashSet<String>) -> Option<i64> {
    let s = |e: &PrimExpr| index_stride(e, var, dependent);
    match expr {
        PrimExpr::Var(v) if v.name == var => Some(1),
        PrimExpr::Var(v) if dependent.contains(&v.name) => None,
        PrimExpr::Int(..) | PrimExpr::Float(..) | PrimExpr::Var(_) => Some(0),
        PrimExpr::Binary(BinOp::Add, a, b) => Some(s(a)? + s(b)?),
        PrimExpr::Binary(BinOp::Sub, a, b) => Some(s(a)? - s(b)?),
        PrimExpr::Binary(BinOp::Mul, a, b) => match (s(a)?, s(b)?, int_const(a), int_const(b)) {
            (0, 0, _, _) => Some(0),
            (sa, 0, _, Some(c)) => Some(sa * c),
            (0, sb, Some(c), _) => Some(sb * c),
            _ => None,
        },
        PrimExpr::Cast(dtype, inner) if !dtype.is_float() && !inner.dtype().is_float() => s(inner),
        PrimExpr::Load { indices, .. } => indices.iter().all(|i| s(i) == Some(0)).then_some(0),
        PrimExpr::Binary(_, a, b) | PrimExpr::Cmp(_, a, b) => {
            (s(a)? == 0 && s(b)? == 0).then_some(0)
        }
        PrimExpr::Not(a) | PrimExpr::Cast(_, a) => (s(a)? == 0).then_some(0),
        PrimExpr::Select(c, a, b) => (s(c)? == 0 && s(a)? == 0 && s(b)? == 0).then_some(0),
        PrimExpr::Call(_, args) => args.iter().all(|a| s(a) == Some(0)).then_some(0),
    }
}

/// Whether `expr` is a float immediate [`math::clamp_to`](crate::math::clamp_to) may bound
/// by (neither NaN nor zero), so a `min` / `max` with it on the right lowers to a compare
/// and a select.
pub(crate) fn is_clamp_bound(expr: &PrimExpr) -> bool {
    matches!(expr, PrimExpr::Float(v, _) if !v.is_nan() && *v != 0.0)
}

/// The value of an integer immediate.
pub(crate) fn int_const(expr: &PrimExpr) -> Option<i64> {
    match expr {
        PrimExpr::Int(c, _) => Some(*c),
        _ => None,
    }
}
