//! Loop-invariant loads: a load inside a loop whose indices use neither the loop variable
//! nor anything bound inside the loop, from a buffer the loop does not write, is read
//! once before the loop into a `let` (e.g. softmax's row maximum in its output loop).
//! Buffers are distinct by name: kernels write only their own outputs and locals.

use oxrelax_dsl::tir::{PrimExpr, PrimFunc, Stmt, TVar};

/// Hoists loop-invariant loads out of every loop of `func`.
pub fn hoist_invariant_loads(func: &PrimFunc) -> PrimFunc {
    let mut counter = 0;
    PrimFunc {
        body: hoist(&func.body, &mut counter),
        ..func.clone()
    }
}

fn hoist(stmt: &Stmt, counter: &mut usize) -> Stmt {
    let stmt = stmt.map_children(&mut |c| hoist(c, counter));
    if !matches!(stmt, Stmt::For { .. }) {
        return stmt;
    }
    let bound = bound_inside(&stmt);
    let written = written_buffers(&stmt);
    let mut invariant: Vec<PrimExpr> = Vec::new();
    stmt.any_expr(&mut |e| {
        if let PrimExpr::Load {
            buffer, indices, ..
        } = e
        {
            let uses_bound = indices.iter().any(|i| bound.iter().any(|b| i.uses_var(b)));
            if !uses_bound && !written.contains(buffer) && !invariant.contains(e) {
                invariant.push(e.clone());
            }
        }
        false
    });
    let mut result = stmt;
    let mut lets = Vec::new();
    for load in invariant {
        let name = format!("inv{counter}");
        *counter += 1;
        let replacement = PrimExpr::Var(TVar::new(&name, load.dtype()));
        result = result.rewrite_exprs(&mut |e| {
            e.rewrite(&mut |x| if x == load { replacement.clone() } else { x })
        });
        lets.push((TVar::new(&name, load.dtype()), load));
    }
    lets.into_iter()
        .rev()
        .fold(result, |body, (var, value)| Stmt::Let {
            var,
            value,
            body: Box::new(body),
        })
}

/// The loop variable and every variable bound inside the loop.
fn bound_inside(stmt: &Stmt) -> Vec<String> {
    let mut names = Vec::new();
    stmt.any_stmt(&mut |s| {
        if let Stmt::For { var, .. } | Stmt::Let { var, .. } = s {
            names.push(var.name.clone());
        }
        false
    });
    names
}

/// Buffers stored to, or allocated, inside the statement.
fn written_buffers(stmt: &Stmt) -> Vec<String> {
    let mut names = Vec::new();
    stmt.any_stmt(&mut |s| {
        match s {
            Stmt::Store { buffer, .. } => names.push(buffer.clone()),
            Stmt::Allocate { buffer, .. } => names.push(buffer.name.clone()),
            Stmt::Microkernel(call) => names.extend(call.operands.iter().map(|o| o.buffer.clone())),
            _ => {}
        }
        false
    });
    names
}
