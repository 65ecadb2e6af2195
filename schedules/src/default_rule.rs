//! The default schedule: makes any legalized primitive function correct and not naive.
//!
//! 0. Accumulate reductions in registers ([`accumulate_in_registers`]), across vector
//!    lanes where they read contiguously ([`reduce_across_lanes`]).
//! 0. Read loop-invariant loads once before their loop ([`hoist_invariant_loads`]).
//! 1. Vectorize every innermost loop whose stores all write contiguously along it (last
//!    index is the loop variable, no other index uses it).
//! 2. Parallelize each top-level loop nest: the leading perfectly nested loops whose
//!    iterations write disjoint elements are fused into one loop, which runs on the
//!    thread pool when the nest's work (at the dims' upper bounds) is large enough.
//!
//! Other loop-invariant arithmetic is left to Cranelift's GVN and LICM.

use crate::{accumulate_in_registers, hoist_invariant_loads, reduce_across_lanes, Schedule};
use oxrelax_dsl::tir::{BinOp, ForKind, PrimExpr, PrimFunc, Stmt};

/// Knobs of the default schedule.
#[derive(Debug, Clone)]
pub struct ScheduleConfig {
    /// Parallelize a loop nest when it runs at least this many innermost iterations
    /// (at the dims' upper bounds).
    pub parallel_min_work: i64,
}

impl Default for ScheduleConfig {
    fn default() -> Self {
        ScheduleConfig {
            parallel_min_work: 1 << 14,
        }
    }
}

/// Applies the default rule to `func`.
pub fn default_schedule(func: &PrimFunc, config: &ScheduleConfig) -> PrimFunc {
    let func = hoist_invariant_loads(&reduce_across_lanes(&accumulate_in_registers(func)));
    let mut schedule = Schedule::new(func.clone());
    for var in innermost_contiguous_loops(&func.body) {
        schedule
            .vectorize(&var)
            .expect("the loop was found in this function");
    }
    for nest in top_level_nests(&schedule.func().body) {
        parallelize_nest(&mut schedule, &nest, &func, config);
    }
    schedule.into_func()
}

/// The outermost loops of the function body (not inside another loop).
fn top_level_nests(stmt: &Stmt) -> Vec<Stmt> {
    match stmt {
        Stmt::For { .. } => vec![stmt.clone()],
        Stmt::Seq(items) => items.iter().flat_map(top_level_nests).collect(),
        Stmt::Let { body, .. } | Stmt::Allocate { body, .. } => top_level_nests(body),
        _ => Vec::new(),
    }
}

fn parallelize_nest(
    schedule: &mut Schedule,
    nest: &Stmt,
    func: &PrimFunc,
    config: &ScheduleConfig,
) {
    let chain = parallel_chain(nest);
    let Some((innermost, outer)) = chain.split_last() else {
        return;
    };
    let work = max_work(nest, func);
    if work.is_none_or(|w| w < config.parallel_min_work) {
        return;
    }
    // Fuse from the inside out: a fused loop's body starts with the `let`s recovering
    // its variables, so it can be the inner loop of a fusion but not the outer one.
    let mut fused = innermost.clone();
    for next in outer.iter().rev() {
        fused = schedule
            .fuse(next, &fused)
            .expect("the chain is perfectly nested");
    }
    schedule.parallel(&fused).expect("the fused loop exists");
}

/// The leading perfectly nested serial loops of a nest whose iterations write disjoint
/// elements (every store below them indexes with their variable).
fn parallel_chain(nest: &Stmt) -> Vec<String> {
    let mut chain = Vec::new();
    let mut current = nest;
    while let Stmt::For {
        var,
        kind: ForKind::Serial,
        body,
        extent,
    } = current
    {
        let independent = extent_is_free_of(extent, &chain) && every_store_uses(body, &var.name);
        if !independent {
            break;
        }
        chain.push(var.name.clone());
        current = body;
    }
    chain
}

fn extent_is_free_of(extent: &PrimExpr, vars: &[String]) -> bool {
    vars.iter().all(|v| !extent.uses_var(v))
}

/// Whether every store to a buffer not allocated inside `stmt` indexes with `var`.
fn every_store_uses(stmt: &Stmt, var: &str) -> bool {
    stores_use(stmt, var, &mut Vec::new())
}

/// [`every_store_uses`], stores to the buffers of `local` (allocated around `stmt`) aside.
fn stores_use<'a>(stmt: &'a Stmt, var: &str, local: &mut Vec<&'a str>) -> bool {
    match stmt {
        Stmt::Store {
            buffer, indices, ..
        } => local.contains(&buffer.as_str()) || indices.iter().any(|i| i.uses_var(var)),
        Stmt::Seq(items) => items.iter().all(|s| stores_use(s, var, local)),
        Stmt::For { body, .. } | Stmt::Let { body, .. } => stores_use(body, var, local),
        Stmt::If {
            then, otherwise, ..
        } => {
            stores_use(then, var, local)
                && otherwise.as_ref().is_none_or(|o| stores_use(o, var, local))
        }
        Stmt::Allocate { buffer, body } => {
            local.push(&buffer.name);
            let uses = stores_use(body, var, local);
            local.pop();
            uses
        }
        Stmt::Evaluate(_) => true,
        Stmt::Microkernel(_) => false,
    }
}

/// The loops whose body has no loop and stores contiguously along the loop variable.
fn innermost_contiguous_loops(stmt: &Stmt) -> Vec<String> {
    let mut out = Vec::new();
    collect_innermost(stmt, &mut out);
    out
}

fn collect_innermost(stmt: &Stmt, out: &mut Vec<String>) {
    match stmt {
        Stmt::For { var, body, .. } if body.loop_vars().is_empty() => {
            if stores_contiguous(body, &var.name) {
                out.push(var.name.clone());
            }
        }
        Stmt::For { body, .. } | Stmt::Let { body, .. } | Stmt::Allocate { body, .. } => {
            collect_innermost(body, out)
        }
        Stmt::Seq(items) => items.iter().for_each(|s| collect_innermost(s, out)),
        Stmt::If {
            then, otherwise, ..
        } => {
            collect_innermost(then, out);
            if let Some(o) = otherwise {
                collect_innermost(o, out);
            }
        }
        Stmt::Store { .. } | Stmt::Evaluate(_) | Stmt::Microkernel(_) => {}
    }
}

/// Straight-line code whose every store's last index is exactly `var` and whose other
/// indices do not use it.
fn stores_contiguous(stmt: &Stmt, var: &str) -> bool {
    match stmt {
        Stmt::Store { indices, .. } => match indices.split_last() {
            Some((PrimExpr::Var(v), rest)) => {
                v.name == var && rest.iter().all(|i| !i.uses_var(var))
            }
            _ => false,
        },
        Stmt::Seq(items) => items.iter().all(|s| stores_contiguous(s, var)),
        Stmt::Let { body, .. } => stores_contiguous(body, var),
        Stmt::Evaluate(_) => true,
        _ => false,
    }
}

/// The number of innermost iterations of a loop nest at the dims' upper bounds.
fn max_work(stmt: &Stmt, func: &PrimFunc) -> Option<i64> {
    match stmt {
        Stmt::For { extent, body, .. } => {
            let inner = max_work(body, func)?;
            max_value(extent, func)?.checked_mul(inner.max(1))
        }
        Stmt::Seq(items) => items
            .iter()
            .try_fold(0i64, |acc, s| acc.checked_add(max_work(s, func)?)),
        Stmt::Let { body, .. } | Stmt::Allocate { body, .. } => max_work(body, func),
        Stmt::If {
            then, otherwise, ..
        } => {
            let other = otherwise.as_ref().map_or(Some(0), |o| max_work(o, func))?;
            Some(max_work(then, func)?.max(other))
        }
        Stmt::Store { .. } | Stmt::Evaluate(_) | Stmt::Microkernel(_) => Some(1),
    }
}

/// The largest value of an index expression over the dims' upper bounds.
fn max_value(expr: &PrimExpr, func: &PrimFunc) -> Option<i64> {
    match expr {
        PrimExpr::Int(v, _) => Some(*v),
        PrimExpr::Var(v) => func.dims.iter().find(|d| d.name() == v.name)?.upper(),
        PrimExpr::Binary(BinOp::Add, a, b) => max_value(a, func)?.checked_add(max_value(b, func)?),
        PrimExpr::Binary(BinOp::Mul, a, b) => max_value(a, func)?.checked_mul(max_value(b, func)?),
        PrimExpr::Binary(BinOp::Min, a, b) => Some(max_value(a, func)?.min(max_value(b, func)?)),
        PrimExpr::Binary(BinOp::FloorDiv, a, b) => match **b {
            PrimExpr::Int(d, _) if d > 0 => Some(max_value(a, func)? / d),
            _ => None,
        },
        _ => None,
    }
}
