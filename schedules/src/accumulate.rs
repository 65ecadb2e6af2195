//! Reductions into registers: `X[idx] = init; for k { X[idx] = X[idx] + f(k) }` becomes
//! `alloc acc[1] { acc[0] = init; for k { acc[0] = acc[0] + f(k) }; X[idx] = acc[0] }`,
//! so the accumulator stays in a register (codegen promotes one-element locals) instead of
//! being read and written through memory on every iteration.

use oxrelax_dsl::tir::{Buffer, PrimExpr, PrimFunc, Stmt};
use oxrelax_dsl::{DType, SymExpr};

/// Applies the rewrite to every matching init/reduction pair in `func`.
pub fn accumulate_in_registers(func: &PrimFunc) -> PrimFunc {
    let mut counter = 0;
    let dtype_of = |name: &str| func.params.iter().find(|b| b.name == name).map(|b| b.dtype);
    PrimFunc {
        body: rewrite(&func.body, &dtype_of, &mut counter),
        ..func.clone()
    }
}

type DtypeOf<'a> = dyn Fn(&str) -> Option<DType> + 'a;

fn rewrite(stmt: &Stmt, dtype_of: &DtypeOf<'_>, counter: &mut usize) -> Stmt {
    match stmt {
        Stmt::Seq(items) => Stmt::Seq(rewrite_seq(items, dtype_of, counter)),
        other => other.map_children(&mut |c| rewrite(c, dtype_of, counter)),
    }
}

fn rewrite_seq(items: &[Stmt], dtype_of: &DtypeOf<'_>, counter: &mut usize) -> Vec<Stmt> {
    let mut out = Vec::with_capacity(items.len());
    let mut i = 0;
    while i < items.len() {
        let next = items.get(i + 1);
        if let Some(cached) = next.and_then(|n| cache(&items[i], n, dtype_of, counter)) {
            out.push(cached);
            i += 2;
        } else {
            out.push(rewrite(&items[i], dtype_of, counter));
            i += 1;
        }
    }
    out
}

/// The rewrite of an init store followed by a reduction loop over the same element.
fn cache(
    init: &Stmt,
    reduction: &Stmt,
    dtype_of: &DtypeOf<'_>,
    counter: &mut usize,
) -> Option<Stmt> {
    let Stmt::Store {
        buffer,
        indices,
        value: init_value,
    } = init
    else {
        return None;
    };
    if !matches!(reduction, Stmt::For { .. }) || !only_accesses_at(reduction, buffer, indices) {
        return None;
    }
    let dtype = dtype_of(buffer)?;
    let acc = format!("{buffer}_acc{counter}");
    *counter += 1;
    let zero = vec![PrimExpr::index(0)];
    let load_acc = PrimExpr::Load {
        buffer: acc.clone(),
        dtype,
        indices: zero.clone(),
    };
    Some(Stmt::Allocate {
        buffer: Buffer::new(&acc, dtype, vec![SymExpr::int(1)]),
        body: Box::new(Stmt::Seq(vec![
            Stmt::Store {
                buffer: acc.clone(),
                indices: zero.clone(),
                value: init_value.clone(),
            },
            redirect(reduction, buffer, &acc, &zero),
            Stmt::Store {
                buffer: buffer.clone(),
                indices: indices.clone(),
                value: load_acc,
            },
        ])),
    })
}

/// Whether `stmt` is loops and straight-line code that touches `buffer` only at
/// `indices`, without rebinding a variable those indices use.
fn only_accesses_at(stmt: &Stmt, buffer: &str, indices: &[PrimExpr]) -> bool {
    let rebinds = |name: &str| indices.iter().any(|i| i.uses_var(name));
    let bad_stmt = stmt.any_stmt(&mut |s| match s {
        Stmt::If { .. } | Stmt::Allocate { .. } | Stmt::Evaluate(_) | Stmt::Microkernel(_) => true,
        Stmt::Store {
            buffer: b,
            indices: idx,
            ..
        } => b == buffer && idx.as_slice() != indices,
        Stmt::For { var, .. } | Stmt::Let { var, .. } => rebinds(&var.name),
        Stmt::Seq(_) => false,
    });
    let bad_load = stmt.any_expr(&mut |e| {
        matches!(e, PrimExpr::Load { buffer: b, indices: idx, .. } if b == buffer && idx.as_slice() != indices)
    });
    !bad_stmt && !bad_load
}

/// `stmt` with every access of `buffer` redirected to `acc[0]`.
fn redirect(stmt: &Stmt, buffer: &str, acc: &str, zero: &[PrimExpr]) -> Stmt {
    let loads = stmt.rewrite_exprs(&mut |e| {
        e.rewrite(&mut |x| match x {
            PrimExpr::Load {
                buffer: b, dtype, ..
            } if b == buffer => PrimExpr::Load {
                buffer: acc.to_string(),
                dtype,
                indices: zero.to_vec(),
            },
            other => other,
        })
    });
    redirect_stores(&loads, buffer, acc, zero)
}

fn redirect_stores(stmt: &Stmt, buffer: &str, acc: &str, zero: &[PrimExpr]) -> Stmt {
    match stmt {
        Stmt::Store {
            buffer: b, value, ..
        } if b == buffer => Stmt::Store {
            buffer: acc.to_string(),
            indices: zero.to_vec(),
            value: value.clone(),
        },
        other => other.map_children(&mut |c| redirect_stores(c, buffer, acc, zero)),
    }
}
