//! Traversals of TIR: variable uses, substitution, loop enumeration.

use super::{PrimExpr, Stmt};

/// Whether `expr` reads the variable `name`.
impl PrimExpr {
    /// Whether this expression reads the variable `name`.
    pub fn uses_var(&self, name: &str) -> bool {
        let expr = self;
        match expr {
            PrimExpr::Var(v) => v.name == name,
            PrimExpr::Int(..) | PrimExpr::Float(..) => false,
            PrimExpr::Load { indices, .. } => indices.iter().any(|i| i.uses_var(name)),
            PrimExpr::Binary(_, a, b) | PrimExpr::Cmp(_, a, b) => {
                a.uses_var(name) || b.uses_var(name)
            }
            PrimExpr::Not(a) | PrimExpr::Cast(_, a) => a.uses_var(name),
            PrimExpr::Select(c, a, b) => [c, a, b].iter().any(|e| e.uses_var(name)),
            PrimExpr::Call(_, args) => args.iter().any(|a| a.uses_var(name)),
        }
    }

    /// This expression with every read of variable `name` replaced by `with`.
    pub fn substitute(&self, name: &str, with: &PrimExpr) -> PrimExpr {
        substitute(self, name, with)
    }
}

fn substitute(expr: &PrimExpr, name: &str, with: &PrimExpr) -> PrimExpr {
    let s = |e: &PrimExpr| Box::new(substitute(e, name, with));
    match expr {
        PrimExpr::Var(v) if v.name == name => with.clone(),
        PrimExpr::Int(..) | PrimExpr::Float(..) | PrimExpr::Var(_) => expr.clone(),
        PrimExpr::Load {
            buffer,
            dtype,
            indices,
        } => PrimExpr::Load {
            buffer: buffer.clone(),
            dtype: *dtype,
            indices: indices.iter().map(|i| substitute(i, name, with)).collect(),
        },
        PrimExpr::Binary(op, a, b) => PrimExpr::Binary(*op, s(a), s(b)),
        PrimExpr::Cmp(op, a, b) => PrimExpr::Cmp(*op, s(a), s(b)),
        PrimExpr::Not(a) => PrimExpr::Not(s(a)),
        PrimExpr::Cast(d, a) => PrimExpr::Cast(*d, s(a)),
        PrimExpr::Select(c, a, b) => PrimExpr::Select(s(c), s(a), s(b)),
        PrimExpr::Call(i, args) => {
            PrimExpr::Call(*i, args.iter().map(|a| substitute(a, name, with)).collect())
        }
    }
}

impl Stmt {
    /// This statement with every read of variable `name` replaced by `with`.
    pub fn substitute(&self, name: &str, with: &PrimExpr) -> Stmt {
        substitute_stmt(self, name, with)
    }

    /// Every loop variable name, outermost first (pre-order).
    pub fn loop_vars(&self) -> Vec<String> {
        let mut out = Vec::new();
        loop_vars(self, &mut out);
        out
    }
}

fn substitute_stmt(stmt: &Stmt, name: &str, with: &PrimExpr) -> Stmt {
    let e = |x: &PrimExpr| substitute(x, name, with);
    let s = |x: &Stmt| Box::new(substitute_stmt(x, name, with));
    match stmt {
        Stmt::Seq(items) => Stmt::Seq(
            items
                .iter()
                .map(|i| substitute_stmt(i, name, with))
                .collect(),
        ),
        Stmt::For {
            var,
            extent,
            kind,
            body,
        } => Stmt::For {
            var: var.clone(),
            extent: e(extent),
            kind: *kind,
            body: s(body),
        },
        Stmt::Store {
            buffer,
            indices,
            value,
        } => Stmt::Store {
            buffer: buffer.clone(),
            indices: indices.iter().map(e).collect(),
            value: e(value),
        },
        Stmt::Let { var, value, body } => Stmt::Let {
            var: var.clone(),
            value: e(value),
            body: s(body),
        },
        Stmt::If {
            cond,
            then,
            otherwise,
        } => Stmt::If {
            cond: e(cond),
            then: s(then),
            otherwise: otherwise.as_ref().map(|o| s(o)),
        },
        Stmt::Allocate { buffer, body } => Stmt::Allocate {
            buffer: buffer.clone(),
            body: s(body),
        },
        Stmt::Evaluate(x) => Stmt::Evaluate(e(x)),
    }
}

fn loop_vars(stmt: &Stmt, out: &mut Vec<String>) {
    match stmt {
        Stmt::Seq(items) => items.iter().for_each(|i| loop_vars(i, out)),
        Stmt::For { var, body, .. } => {
            out.push(var.name.clone());
            loop_vars(body, out);
        }
        Stmt::Let { body, .. } | Stmt::Allocate { body, .. } => loop_vars(body, out),
        Stmt::If {
            then, otherwise, ..
        } => {
            loop_vars(then, out);
            if let Some(o) = otherwise {
                loop_vars(o, out);
            }
        }
        Stmt::Store { .. } | Stmt::Evaluate(_) => {}
    }
}
