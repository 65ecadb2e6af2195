//! Generic traversals of TIR, and the common queries built on them (variable uses,
//! substitution, loop enumeration).

use super::{BufferRegion, MicrokernelCall, PrimExpr, Stmt};

impl PrimExpr {
    /// Rebuilds the expression bottom-up: children first, then `f` on the rebuilt node.
    pub fn rewrite(&self, f: &mut dyn FnMut(PrimExpr) -> PrimExpr) -> PrimExpr {
        let mut r = |e: &PrimExpr| Box::new(e.rewrite(f));
        let rebuilt = match self {
            PrimExpr::Int(..) | PrimExpr::Float(..) | PrimExpr::Var(_) => self.clone(),
            PrimExpr::Load {
                buffer,
                dtype,
                indices,
            } => PrimExpr::Load {
                buffer: buffer.clone(),
                dtype: *dtype,
                indices: indices.iter().map(|i| *r(i)).collect(),
            },
            PrimExpr::Binary(op, a, b) => PrimExpr::Binary(*op, r(a), r(b)),
            PrimExpr::Cmp(op, a, b) => PrimExpr::Cmp(*op, r(a), r(b)),
            PrimExpr::Not(a) => PrimExpr::Not(r(a)),
            PrimExpr::Cast(d, a) => PrimExpr::Cast(*d, r(a)),
            PrimExpr::Select(c, a, b) => PrimExpr::Select(r(c), r(a), r(b)),
            PrimExpr::Call(i, args) => PrimExpr::Call(*i, args.iter().map(|a| *r(a)).collect()),
        };
        f(rebuilt)
    }

    /// Whether `pred` holds for this expression or any sub-expression.
    pub fn any(&self, pred: &mut dyn FnMut(&PrimExpr) -> bool) -> bool {
        if pred(self) {
            return true;
        }
        match self {
            PrimExpr::Int(..) | PrimExpr::Float(..) | PrimExpr::Var(_) => false,
            PrimExpr::Load { indices, .. } => indices.iter().any(|i| i.any(pred)),
            PrimExpr::Binary(_, a, b) | PrimExpr::Cmp(_, a, b) => a.any(pred) || b.any(pred),
            PrimExpr::Not(a) | PrimExpr::Cast(_, a) => a.any(pred),
            PrimExpr::Select(c, a, b) => c.any(pred) || a.any(pred) || b.any(pred),
            PrimExpr::Call(_, args) => args.iter().any(|a| a.any(pred)),
        }
    }

    /// Whether this expression reads the variable `name`.
    pub fn uses_var(&self, name: &str) -> bool {
        self.any(&mut |e| matches!(e, PrimExpr::Var(v) if v.name == name))
    }

    /// This expression with every read of variable `name` replaced by `with`.
    pub fn substitute(&self, name: &str, with: &PrimExpr) -> PrimExpr {
        self.rewrite(&mut |e| match e {
            PrimExpr::Var(v) if v.name == name => with.clone(),
            other => other,
        })
    }
}

impl Stmt {
    /// Rebuilds the statement with `f` applied to each direct child statement.
    pub fn map_children(&self, f: &mut dyn FnMut(&Stmt) -> Stmt) -> Stmt {
        match self {
            Stmt::Seq(items) => Stmt::Seq(items.iter().map(&mut *f).collect()),
            Stmt::For {
                var,
                extent,
                kind,
                body,
            } => Stmt::For {
                var: var.clone(),
                extent: extent.clone(),
                kind: *kind,
                body: Box::new(f(body)),
            },
            Stmt::Let { var, value, body } => Stmt::Let {
                var: var.clone(),
                value: value.clone(),
                body: Box::new(f(body)),
            },
            Stmt::If {
                cond,
                then,
                otherwise,
            } => Stmt::If {
                cond: cond.clone(),
                then: Box::new(f(then)),
                otherwise: otherwise.as_ref().map(|o| Box::new(f(o))),
            },
            Stmt::Allocate { buffer, body } => Stmt::Allocate {
                buffer: buffer.clone(),
                body: Box::new(f(body)),
            },
            Stmt::Store { .. } | Stmt::Evaluate(_) | Stmt::Microkernel(_) => self.clone(),
        }
    }

    /// The direct child statements.
    pub fn children(&self) -> Vec<&Stmt> {
        match self {
            Stmt::Seq(items) => items.iter().collect(),
            Stmt::For { body, .. } | Stmt::Let { body, .. } | Stmt::Allocate { body, .. } => {
                vec![body]
            }
            Stmt::If {
                then, otherwise, ..
            } => std::iter::once(&**then)
                .chain(otherwise.as_deref())
                .collect(),
            Stmt::Store { .. } | Stmt::Evaluate(_) | Stmt::Microkernel(_) => Vec::new(),
        }
    }

    /// The expressions this statement itself holds (not those of child statements).
    pub fn exprs(&self) -> Vec<&PrimExpr> {
        match self {
            Stmt::For { extent, .. } => vec![extent],
            Stmt::Store { indices, value, .. } => indices.iter().chain([value]).collect(),
            Stmt::Let { value, .. } => vec![value],
            Stmt::If { cond, .. } => vec![cond],
            Stmt::Evaluate(e) => vec![e],
            Stmt::Microkernel(call) => call
                .operands
                .iter()
                .map(|o| &o.offset)
                .chain(&call.scalars)
                .collect(),
            Stmt::Seq(_) | Stmt::Allocate { .. } => Vec::new(),
        }
    }

    /// Rebuilds the statement (recursively) with `f` applied to every expression.
    pub fn rewrite_exprs(&self, f: &mut dyn FnMut(&PrimExpr) -> PrimExpr) -> Stmt {
        let this = match self {
            Stmt::For {
                var,
                extent,
                kind,
                body,
            } => Stmt::For {
                var: var.clone(),
                extent: f(extent),
                kind: *kind,
                body: body.clone(),
            },
            Stmt::Store {
                buffer,
                indices,
                value,
            } => Stmt::Store {
                buffer: buffer.clone(),
                indices: indices.iter().map(&mut *f).collect(),
                value: f(value),
            },
            Stmt::Let { var, value, body } => Stmt::Let {
                var: var.clone(),
                value: f(value),
                body: body.clone(),
            },
            Stmt::If {
                cond,
                then,
                otherwise,
            } => Stmt::If {
                cond: f(cond),
                then: then.clone(),
                otherwise: otherwise.clone(),
            },
            Stmt::Evaluate(e) => Stmt::Evaluate(f(e)),
            Stmt::Microkernel(call) => Stmt::Microkernel(MicrokernelCall {
                kernel: call.kernel.clone(),
                operands: call
                    .operands
                    .iter()
                    .map(|o| BufferRegion {
                        buffer: o.buffer.clone(),
                        offset: f(&o.offset),
                    })
                    .collect(),
                scalars: call.scalars.iter().map(&mut *f).collect(),
            }),
            Stmt::Seq(_) | Stmt::Allocate { .. } => self.clone(),
        };
        this.map_children(&mut |child| child.rewrite_exprs(f))
    }

    /// Whether `pred` holds for this statement or any statement inside it.
    pub fn any_stmt(&self, pred: &mut dyn FnMut(&Stmt) -> bool) -> bool {
        pred(self) || self.children().into_iter().any(|c| c.any_stmt(pred))
    }

    /// Whether `pred` holds for any expression anywhere in this statement.
    pub fn any_expr(&self, pred: &mut dyn FnMut(&PrimExpr) -> bool) -> bool {
        self.any_stmt(&mut |s| s.exprs().into_iter().any(|e| e.any(pred)))
    }

    /// This statement with every read of variable `name` replaced by `with`.
    pub fn substitute(&self, name: &str, with: &PrimExpr) -> Stmt {
        self.rewrite_exprs(&mut |e| e.substitute(name, with))
    }

    /// Every loop variable name, outermost first (pre-order).
    pub fn loop_vars(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.any_stmt(&mut |s| {
            if let Stmt::For { var, .. } = s {
                out.push(var.name.clone());
            }
            false
        });
        out
    }
}
