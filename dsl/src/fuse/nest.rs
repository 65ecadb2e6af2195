//! [`ElementwiseNest`]: the loop nest of an element-wise function, the unit fusion
//! composes.

use crate::tir::{BinOp, Buffer, ForKind, PrimExpr, Stmt, TVar};

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
    pub fn parse(stmt: &Stmt) -> Option<Self> {
        let (vars, extents, inner) = peel_loops(stmt);
        let Stmt::Store {
            buffer,
            indices,
            value,
        } = inner
        else {
            return None;
        };
        let own = indices.len() == vars.len()
            && indices
                .iter()
                .zip(&vars)
                .all(|(i, v)| matches!(i, PrimExpr::Var(x) if x == v));
        own.then(|| ElementwiseNest {
            vars,
            extents,
            buffer: buffer.clone(),
            value: value.clone(),
        })
    }

    /// The nest as serial loops.
    pub fn to_stmt(&self) -> Stmt {
        let store = Stmt::Store {
            buffer: self.buffer.clone(),
            indices: self.vars.iter().cloned().map(PrimExpr::Var).collect(),
            value: self.value.clone(),
        };
        (self.vars.iter().zip(&self.extents))
            .rev()
            .fold(store, |body, (var, extent)| nest_loop(var, extent, body))
    }

    /// The nest staged through `stage` (a local buffer as long as the last dim): for each
    /// position of the outer dims, the whole row is computed into `stage` before any of
    /// it is stored, so the value may read other elements of the row of `buffer` (a
    /// windowed epilogue rewriting its output in place).
    pub fn to_staged_stmt(&self, stage: &Buffer) -> Stmt {
        let (last, outer) = self.vars.split_last().expect("a nest has a loop");
        let extent = self.extents.last().expect("a nest has a loop").clone();
        let lane = || vec![PrimExpr::Var(last.clone())];
        let row = |buffer: &str, value: PrimExpr| ElementwiseNest {
            vars: vec![last.clone()],
            extents: vec![extent.clone()],
            buffer: buffer.to_string(),
            value,
        };
        let compute = row(&stage.name, self.value.clone()).to_stmt();
        let mut indices: Vec<PrimExpr> = outer.iter().cloned().map(PrimExpr::Var).collect();
        indices.push(PrimExpr::Var(last.clone()));
        let copy = nest_loop(
            last,
            &extent,
            Stmt::Store {
                buffer: self.buffer.clone(),
                indices,
                value: PrimExpr::Load {
                    buffer: stage.name.clone(),
                    dtype: stage.dtype,
                    indices: lane(),
                },
            },
        );
        let staged = Stmt::Allocate {
            buffer: stage.clone(),
            body: Box::new(Stmt::Seq(vec![compute, copy])),
        };
        (outer.iter().zip(&self.extents))
            .rev()
            .fold(staged, |body, (var, extent)| nest_loop(var, extent, body))
    }

    /// The nest a [`to_staged_stmt`](Self::to_staged_stmt) statement stages, if `stmt` is
    /// one.
    pub fn parse_staged(stmt: &Stmt) -> Option<Self> {
        let (mut vars, mut extents, inner) = peel_loops(stmt);
        let Stmt::Allocate { buffer, body } = inner else {
            return None;
        };
        let Stmt::Seq(items) = body.as_ref() else {
            return None;
        };
        let [compute, copy] = items.as_slice() else {
            return None;
        };
        let row = ElementwiseNest::parse(compute)?;
        let Stmt::For {
            body: copy_body, ..
        } = copy
        else {
            return None;
        };
        let Stmt::Store {
            buffer: target,
            value: PrimExpr::Load { buffer: read, .. },
            ..
        } = copy_body.as_ref()
        else {
            return None;
        };
        if row.buffer != buffer.name || *read != buffer.name || row.vars.len() != 1 {
            return None;
        }
        vars.extend(row.vars);
        extents.extend(row.extents);
        Some(ElementwiseNest {
            vars,
            extents,
            buffer: target.clone(),
            value: row.value,
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

    /// Whether every read of `buffer` is at the element being written except in the last
    /// dim, where it stays inside the aligned `window` of the element (its own index, or
    /// any index modulo `window`: the buffer's last dim is split into windows).
    pub fn reads_within_window(&self, buffer: &str, window: i64) -> bool {
        let last = self.vars.len().saturating_sub(1);
        let in_window = |index: &PrimExpr| match index {
            PrimExpr::Var(v) => *v == self.vars[last],
            PrimExpr::Binary(BinOp::FloorMod, _, m) => **m == PrimExpr::index(window),
            _ => false,
        };
        !self.value.any(&mut |e| match e {
            PrimExpr::Load {
                buffer: b, indices, ..
            } if b == buffer => {
                indices.len() != self.vars.len()
                    || !self.is_own_prefix(&indices[..last])
                    || !in_window(&indices[last])
            }
            _ => false,
        })
    }

    fn is_own_element(&self, indices: &[PrimExpr]) -> bool {
        indices.len() == self.vars.len() && self.is_own_prefix(indices)
    }

    /// Whether `indices` are the leading loop variables (or 0 on a dim of extent 1).
    fn is_own_prefix(&self, indices: &[PrimExpr]) -> bool {
        indices
            .iter()
            .zip(self.vars.iter().zip(&self.extents))
            .all(|(index, (var, extent))| match index {
                PrimExpr::Var(v) => v == var,
                PrimExpr::Int(0, _) => matches!(extent, PrimExpr::Int(1, _)),
                _ => false,
            })
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

/// `for var in serial(extent) { body }`.
fn nest_loop(var: &TVar, extent: &PrimExpr, body: Stmt) -> Stmt {
    Stmt::For {
        var: var.clone(),
        extent: extent.clone(),
        kind: ForKind::Serial,
        body: Box::new(body),
    }
}

/// The loops (of any kind, through one-statement `seq`s) around `stmt`'s innermost
/// statement: their variables and extents, outermost first, and that statement.
fn peel_loops(mut stmt: &Stmt) -> (Vec<TVar>, Vec<PrimExpr>, &Stmt) {
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
            inner => return (vars, extents, inner),
        }
    }
}
