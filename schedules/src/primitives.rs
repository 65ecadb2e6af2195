//! Loop primitives on a primitive function, addressing loops by their variable name.

use oxrelax_dsl::tir::{BinOp, ForKind, PrimCmp, PrimExpr, PrimFunc, Stmt, TVar};
use oxrelax_dsl::DType;

/// Why a primitive could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// No loop has this variable.
    #[error("no loop over `{0}`")]
    NoSuchLoop(String),
    /// `fuse` needs the inner loop to be the whole body of the outer one.
    #[error("loop `{inner}` is not the only statement in the body of loop `{outer}`")]
    NotPerfectlyNested {
        /// The outer loop.
        outer: String,
        /// The inner loop.
        inner: String,
    },
    /// `fuse` needs the inner extent not to depend on the outer variable.
    #[error("the extent of loop `{inner}` depends on `{outer}`")]
    DependentExtent {
        /// The outer loop.
        outer: String,
        /// The inner loop.
        inner: String,
    },
    /// Split factors are positive.
    #[error("split factor must be positive, got {0}")]
    BadFactor(i64),
}

/// A primitive function under scheduling.
#[derive(Debug, Clone)]
pub struct Schedule {
    func: PrimFunc,
}

/// `expr` simplified by the symbolic simplifier when it is a pure index expression.
pub(crate) fn simplified(expr: PrimExpr, dims: &[oxrelax_dsl::SymVar]) -> PrimExpr {
    expr.to_sym(dims).map_or(expr, |s| PrimExpr::from(&s))
}

fn index_var(name: &str) -> PrimExpr {
    PrimExpr::Var(TVar::new(name, DType::I64))
}

impl Schedule {
    /// Starts scheduling `func`.
    pub fn new(func: PrimFunc) -> Self {
        Schedule { func }
    }

    /// The function as scheduled so far.
    pub fn func(&self) -> &PrimFunc {
        &self.func
    }

    /// The scheduled function.
    pub fn into_func(self) -> PrimFunc {
        self.func
    }

    /// Every loop variable, outermost first.
    pub fn loop_vars(&self) -> Vec<String> {
        self.func.body.loop_vars()
    }

    /// Marks loop `var` to run as `kind`.
    pub fn set_kind(&mut self, var: &str, kind: ForKind) -> Result<(), ScheduleError> {
        self.rewrite_loop(var, |v, extent, _, body| {
            Ok(Stmt::For {
                var: v.clone(),
                extent: extent.clone(),
                kind,
                body: Box::new(body.clone()),
            })
        })
    }

    /// Maps loop `var` onto vector lanes.
    pub fn vectorize(&mut self, var: &str) -> Result<(), ScheduleError> {
        self.set_kind(var, ForKind::Vectorized)
    }

    /// Runs loop `var`'s iterations on the thread pool.
    pub fn parallel(&mut self, var: &str) -> Result<(), ScheduleError> {
        self.set_kind(var, ForKind::Parallel)
    }

    /// Unrolls loop `var`.
    pub fn unroll(&mut self, var: &str) -> Result<(), ScheduleError> {
        self.set_kind(var, ForKind::Unrolled)
    }

    /// Splits loop `var` into an outer loop over `ceil(extent / factor)` and an inner loop
    /// over `factor`, guarding the body when `factor` does not divide a constant extent.
    /// Returns the names of the outer and inner loop variables.
    pub fn split(&mut self, var: &str, factor: i64) -> Result<(String, String), ScheduleError> {
        if factor <= 0 {
            return Err(ScheduleError::BadFactor(factor));
        }
        let (outer, inner) = (
            self.fresh(&format!("{var}_o")),
            self.fresh(&format!("{var}_i")),
        );
        let (o, i) = (outer.clone(), inner.clone());
        self.rewrite_loop(var, move |v, extent, kind, body| {
            let f = PrimExpr::index(factor);
            let original = index_var(&o) * f.clone() + index_var(&i);
            let divides = matches!(extent, PrimExpr::Int(e, _) if e % factor == 0);
            let mut inner_body = Stmt::Let {
                var: v.clone(),
                value: original.clone(),
                body: Box::new(body.clone()),
            };
            if !divides {
                inner_body = Stmt::If {
                    cond: original.compare(PrimCmp::Lt, extent.clone()),
                    then: Box::new(inner_body),
                    otherwise: None,
                };
            }
            let outer_extent = match extent {
                PrimExpr::Int(e, _) => PrimExpr::index((e + factor - 1) / factor),
                _ => (extent.clone() + PrimExpr::index(factor - 1))
                    .binary(BinOp::FloorDiv, f.clone()),
            };
            Ok(Stmt::For {
                var: TVar::new(&o, DType::I64),
                extent: outer_extent,
                kind,
                body: Box::new(Stmt::For {
                    var: TVar::new(&i, DType::I64),
                    extent: f,
                    kind: ForKind::Serial,
                    body: Box::new(inner_body),
                }),
            })
        })?;
        Ok((outer, inner))
    }

    /// Fuses loop `outer` with loop `inner` (which must be its whole body) into one loop
    /// over `extent(outer) * extent(inner)`; both variables are recovered with `let`s.
    /// Returns the fused variable's name.
    pub fn fuse(&mut self, outer: &str, inner: &str) -> Result<String, ScheduleError> {
        let fused = self.fresh(&format!("{outer}_{inner}"));
        let name = fused.clone();
        let dims = self.func.dims.clone();
        let (outer_name, inner_name) = (outer.to_string(), inner.to_string());
        self.rewrite_loop(outer, move |ov, oext, kind, body| {
            let Stmt::For {
                var: iv,
                extent: iext,
                body: ibody,
                ..
            } = body
            else {
                return Err(ScheduleError::NotPerfectlyNested {
                    outer: outer_name.clone(),
                    inner: inner_name.clone(),
                });
            };
            if iv.name != inner_name {
                return Err(ScheduleError::NotPerfectlyNested {
                    outer: outer_name.clone(),
                    inner: inner_name.clone(),
                });
            }
            if iext.uses_var(&ov.name) {
                return Err(ScheduleError::DependentExtent {
                    outer: outer_name.clone(),
                    inner: inner_name.clone(),
                });
            }
            let f = index_var(&name);
            Ok(Stmt::For {
                var: TVar::new(&name, DType::I64),
                extent: simplified(oext.clone() * iext.clone(), &dims),
                kind,
                body: Box::new(Stmt::Let {
                    var: ov.clone(),
                    value: f.clone().binary(BinOp::FloorDiv, iext.clone()),
                    body: Box::new(Stmt::Let {
                        var: iv.clone(),
                        value: f.binary(BinOp::FloorMod, iext.clone()),
                        body: ibody.clone(),
                    }),
                }),
            })
        })?;
        Ok(fused)
    }

    /// A loop variable name not used yet, based on `hint`.
    fn fresh(&self, hint: &str) -> String {
        let taken = self.loop_vars();
        oxrelax_dsl::names::fresh_name(hint, |n| taken.iter().any(|t| t == n))
    }

    /// Replaces the loop over `var` by `rewrite(var, extent, kind, body)`.
    fn rewrite_loop(
        &mut self,
        var: &str,
        rewrite: impl Fn(&TVar, &PrimExpr, ForKind, &Stmt) -> Result<Stmt, ScheduleError>,
    ) -> Result<(), ScheduleError> {
        let mut found = false;
        let body = rewrite_in(&self.func.body, var, &rewrite, &mut found)?;
        if !found {
            return Err(ScheduleError::NoSuchLoop(var.to_string()));
        }
        self.func.body = body;
        Ok(())
    }
}

type Rewrite<'a> = dyn Fn(&TVar, &PrimExpr, ForKind, &Stmt) -> Result<Stmt, ScheduleError> + 'a;

fn rewrite_in(
    stmt: &Stmt,
    var: &str,
    rewrite: &Rewrite<'_>,
    found: &mut bool,
) -> Result<Stmt, ScheduleError> {
    if let Stmt::For {
        var: v,
        extent,
        kind,
        body,
    } = stmt
    {
        if v.name == var {
            *found = true;
            return rewrite(v, extent, *kind, body);
        }
    }
    let mut error = None;
    let rebuilt = stmt.map_children(&mut |child| {
        rewrite_in(child, var, rewrite, found).unwrap_or_else(|e| {
            error.get_or_insert(e);
            child.clone()
        })
    });
    error.map_or(Ok(rebuilt), Err)
}
