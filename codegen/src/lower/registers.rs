//! Register promotion: a local buffer with a small constant shape whose every access
//! uses constant indices (an accumulator such as `acc[0]`) lives in SSA variables instead
//! of memory.

use super::{compute_type, Lowerer};
use cranelift_frontend::Variable;
use oxrelax_dsl::tir::{Buffer, PrimExpr, Stmt};

/// Buffers up to this many elements may be promoted.
const MAX_REGISTER_ELEMENTS: i64 = 16;

/// A promoted buffer: one variable per element, row-major.
pub(crate) struct RegisterBuffer {
    vars: Vec<Variable>,
    strides: Vec<i64>,
}

impl Lowerer<'_, '_> {
    /// Promotes `buffer` (allocated around `body`) to registers when possible.
    pub(crate) fn try_promote(&mut self, buffer: &Buffer, body: &Stmt) -> bool {
        let Some(shape) = buffer
            .shape
            .iter()
            .map(|d| d.as_const())
            .collect::<Option<Vec<_>>>()
        else {
            return false;
        };
        let elements: i64 = shape.iter().product();
        let has_parallel_loop = body.any_stmt(&mut |s| {
            matches!(
                s,
                Stmt::For {
                    kind: oxrelax_dsl::tir::ForKind::Parallel,
                    ..
                }
            )
        });
        if elements > MAX_REGISTER_ELEMENTS
            || has_parallel_loop
            || !constant_accesses(body, &buffer.name)
        {
            return false;
        }
        let ty = compute_type(buffer.dtype);
        let vars = (0..elements).map(|_| self.b.declare_var(ty)).collect();
        let strides = buffer
            .effective_strides()
            .iter()
            .map(|s| s.as_const().unwrap_or(0))
            .collect();
        self.registers
            .insert(buffer.name.clone(), RegisterBuffer { vars, strides });
        true
    }

    /// The variable holding `buffer[indices]`, if `buffer` is promoted.
    pub(crate) fn register(&self, buffer: &str, indices: &[PrimExpr]) -> Option<Variable> {
        let reg = self.registers.get(buffer)?;
        let flat: i64 = indices
            .iter()
            .zip(&reg.strides)
            .map(|(i, s)| match i {
                PrimExpr::Int(v, _) => v * s,
                _ => unreachable!("promoted buffers only have constant indices"),
            })
            .sum();
        reg.vars.get(usize::try_from(flat).ok()?).copied()
    }
}

/// Whether every load and store of `name` in `stmt` uses integer-immediate indices (and
/// no microkernel takes its address).
fn constant_accesses(stmt: &Stmt, name: &str) -> bool {
    let constant = |indices: &[PrimExpr]| indices.iter().all(|i| matches!(i, PrimExpr::Int(..)));
    let bad_store = stmt.any_stmt(&mut |s| match s {
        Stmt::Store {
            buffer, indices, ..
        } => buffer == name && !constant(indices),
        Stmt::Microkernel(call) => call.operands.iter().any(|o| o.buffer == name),
        _ => false,
    });
    let bad_load = stmt.any_expr(&mut |e| {
        matches!(e, PrimExpr::Load { buffer, indices, .. } if buffer == name && !constant(indices))
    });
    !bad_store && !bad_load
}
