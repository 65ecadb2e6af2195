//! [`ElementwiseNest`]: the loop nest of an element-wise function, the unit fusion
//! composes.

use crate::tir::{ForKind, PrimExpr, Stmt, TVar};

/// A perfect loop nest storing one element per iteration:
/// `for v0 .. { for vk .. { buffer[v0, ..., vk] = value } }`.
#[derive(Clone, Debug, PartialEq)]
pub struct ElementwiseNest {
    /// The loop variables, outermost first (one per dim of `buffer`).
    pub vars: Vec<TVar>,
    /// Their trip counts (the buffer's shape).
    pub extents: Vec<PrimExpr>,
    /// The buffer written.
    pub buffer: String,
    /// The value stored at element `[v0, ..., vk]`.
    pub value: PrimExpr,
}

impl ElementwiseNest {
    /// The nest `stmt` is (loops of any kind, possibly inside a one-statement `seq`), if it
    /// is one.
    pub fn parse(mut stmt: &Stmt) -> Option<Self> {
        let (mut vars, mut extents) = (Vec::new(), Vec::new());
        loop {
            match stmt {
                Stmt::Seq(items) if items.len() == 1 => stmt = &items[0],
                Stmt::For {
                    var, extent, body, ..
                } => {
                    vars.push(var.clone());
                    extents.push(extent.clone());
                    stmt = body;
                }
                Stmt::Store {
                    buffer,
                    indices,
                    value,
                } => {
                    let own = indices.len() == vars.len()
                        && indices
                            .iter()
                            .zip(&vars)
                            .all(|(i, v)| matches!(i, PrimExpr::Var(x) if x == v));
                    return own.then(|| ElementwiseNest {
                        vars,
                        extents,
                        buffer: buffer.clone(),
                        value: value.clone(),
                    });
                }
                _ => return None,
            }
        }
    }

    /// The nest as serial loops.
    pub fn to_stmt(&self) -> Stmt {
        let store = Stmt::Store {
            buffer: self.buffer.clone(),
            indices: self.vars.iter().cloned().map(PrimExpr::Var).collect(),
            value: self.value.clone(),
        };
        self.vars
            .iter()
            .zip(&self.extents)
            .rev()
            .fold(store, |body, (var, extent)| Stmt::For {
                var: var.clone(),
                extent: extent.clone(),
                kind: ForKind::Serial,
                body: Box::new(body),
            })
    }

    /// The value stored at element `indices` (the loop variables replaced by them).
    pub fn value_at(&self, indices: &[PrimExpr]) -> PrimExpr {
        self.vars
            .iter()
            .zip(indices)
            .fold(self.value.clone(), |value, (var, index)| {
                value.substitute(&var.name, index)
            })
    }

    /// Whether every read of `buffer` is at the element being written (a dim of extent 1
    /// may be read at index 0), so the buffer can be replaced by an element-wise value.
    pub fn reads_own_element(&self, buffer: &str) -> bool {
        !self.value.any(&mut |e| match e {
            PrimExpr::Load {
                buffer: b, indices, ..
            } if b == buffer => !self.is_own_element(indices),
            _ => false,
        })
    }

    fn is_own_element(&self, indices: &[PrimExpr]) -> bool {
        indices.len() == self.vars.len()
            && indices.iter().zip(self.vars.iter().zip(&self.extents)).all(
                |(index, (var, extent))| match index {
                    PrimExpr::Var(v) => v == var,
                    PrimExpr::Int(0, _) => matches!(extent, PrimExpr::Int(1, _)),
                    _ => false,
                },
            )
    }

    /// The value with each read of `buffer` replaced by `with(indices)`.
    pub fn replace_reads(&self, buffer: &str, with: &dyn Fn(&[PrimExpr]) -> PrimExpr) -> PrimExpr {
        self.value.rewrite(&mut |e| match e {
            PrimExpr::Load {
                buffer: b, indices, ..
            } if b == buffer => with(&indices),
            other => other,
        })
    }
}
