//! Lowering one compute stage: its loop nest, its body expression, and its reductions
//! (into the output element, or into a one-element local accumulator).

use super::names::NameAllocator;
use crate::te::error::TeError;
use crate::te::expr::{Axis, Expr, Node};
use crate::te::reduce::{ReduceAxis, ReduceKind};
use crate::te::tensor::{Tensor, TensorOp};
use crate::tir::{BinOp, Buffer, ForKind, Intrinsic, PrimExpr, Stmt, TVar};
use crate::{DType, SymExpr};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

/// Local buffers and statements that must run before a value is available.
#[derive(Default)]
struct Prelude {
    allocs: Vec<Buffer>,
    stmts: Vec<Stmt>,
}

impl Prelude {
    /// `last` after the prelude, inside its allocations.
    fn wrap(mut self, last: Stmt) -> Stmt {
        let body = if self.stmts.is_empty() {
            last
        } else {
            self.stmts.push(last);
            Stmt::Seq(self.stmts)
        };
        self.allocs
            .into_iter()
            .rev()
            .fold(body, |body, buffer| Stmt::Allocate {
                buffer,
                body: Box::new(body),
            })
    }
}

/// Lowers stages of one function.
pub(super) struct Lowerer<'a> {
    func: &'a str,
    buffers: &'a HashMap<usize, String>,
    dims: &'a BTreeSet<String>,
    names: NameAllocator,
    bound: HashMap<u64, TVar>,
    stage: String,
    /// The loop variables of the shared outer loops (see [`super::lower_nested`]).
    outer: Vec<TVar>,
    /// The intermediates holding only the current outer element (their keys).
    trimmed: HashSet<usize>,
}

impl<'a> Lowerer<'a> {
    pub(super) fn new(
        func: &'a str,
        buffers: &'a HashMap<usize, String>,
        dims: &'a BTreeSet<String>,
        names: NameAllocator,
    ) -> Self {
        Lowerer {
            func,
            buffers,
            dims,
            names,
            bound: HashMap::new(),
            stage: String::new(),
            outer: Vec::new(),
            trimmed: HashSet::new(),
        }
    }

    /// Makes the stages run inside loops over `dims` (the leading dims of every stage),
    /// with the `trimmed` intermediates holding one element's trailing dims; returns those
    /// loops, outermost first.
    pub(super) fn share_outer_loops(
        &mut self,
        dims: &[SymExpr],
        trimmed: HashSet<usize>,
    ) -> Result<Vec<(TVar, PrimExpr)>, TeError> {
        let loops = dims
            .iter()
            .map(|d| {
                let var = TVar::new(&self.names.fresh("i"), DType::I64);
                Ok((var, self.dim(d)?))
            })
            .collect::<Result<Vec<_>, TeError>>()?;
        self.outer = loops.iter().map(|(v, _)| v.clone()).collect();
        self.trimmed = trimmed;
        Ok(loops)
    }

    /// Checks that an intermediate's shape only uses the function's dims.
    pub(super) fn check_shape(&mut self, buffer: &Buffer) -> Result<(), TeError> {
        self.stage = buffer.name.clone();
        buffer.shape.iter().try_for_each(|d| self.dim(d).map(drop))
    }

    /// The loop nest computing a compute tensor.
    pub(super) fn stage(&mut self, tensor: &Tensor) -> Result<Stmt, TeError> {
        let name = self.buffers[&tensor.key()].clone();
        self.stage = name.clone();
        let TensorOp::Compute { axes, body } = &tensor.0.op else {
            return Ok(Stmt::Seq(Vec::new()));
        };
        let shared = self.outer.len();
        for (axis, var) in axes.iter().zip(&self.outer) {
            self.bound.insert(axis.id, var.clone());
        }
        let loops = self.bind(&axes[shared..])?;
        let own = loops
            .iter()
            .map(|(v, _)| PrimExpr::Var(v.clone()))
            .collect();
        let indices = if self.trimmed.contains(&tensor.key()) {
            one_element(own)
        } else {
            self.outer
                .iter()
                .cloned()
                .map(PrimExpr::Var)
                .chain(own)
                .collect()
        };
        let store = self.store(&name, tensor.dtype(), indices, body);
        self.unbind(axes);
        Ok(loop_nest(loops, store?))
    }

    fn store(
        &mut self,
        buffer: &str,
        dtype: DType,
        indices: Vec<PrimExpr>,
        value: &Expr,
    ) -> Result<Stmt, TeError> {
        if let Node::Reduce(kind, body, axes) = value.node() {
            if value.dtype() == dtype {
                let stmts = self.reduction_into(buffer, dtype, indices, *kind, body, axes)?;
                return Ok(Stmt::Seq(stmts));
            }
        }
        let mut prelude = Prelude::default();
        let value = self.expr(value, &mut prelude)?;
        Ok(prelude.wrap(Stmt::Store {
            buffer: buffer.to_string(),
            indices,
            value,
        }))
    }

    /// `target = identity; for axes { target = combine(target, body) }`.
    fn reduction_into(
        &mut self,
        target: &str,
        dtype: DType,
        indices: Vec<PrimExpr>,
        kind: ReduceKind,
        body: &Expr,
        axes: &[ReduceAxis],
    ) -> Result<Vec<Stmt>, TeError> {
        let init = Stmt::Store {
            buffer: target.to_string(),
            indices: indices.clone(),
            value: identity(kind, dtype),
        };
        let axes: Vec<Arc<Axis>> = axes.iter().map(|a| a.0.clone()).collect();
        let loops = self.bind(&axes)?;
        let mut prelude = Prelude::default();
        let value = self.expr(body, &mut prelude);
        self.unbind(&axes);
        let current = PrimExpr::Load {
            buffer: target.to_string(),
            dtype,
            indices: indices.clone(),
        };
        let update = Stmt::Store {
            buffer: target.to_string(),
            indices,
            value: combine(kind, current, value?),
        };
        Ok(vec![init, loop_nest(loops, prelude.wrap(update))])
    }

    fn expr(&mut self, expr: &Expr, prelude: &mut Prelude) -> Result<PrimExpr, TeError> {
        let dtype = expr.dtype();
        Ok(match expr.node() {
            Node::Int(v) => PrimExpr::Int(*v, dtype),
            Node::Float(v) => PrimExpr::Float(*v, dtype),
            Node::Axis(axis) => {
                PrimExpr::Var(self.bound.get(&axis.id).cloned().ok_or_else(|| {
                    TeError::UnboundAxis {
                        func: self.func.to_string(),
                        stage: self.stage.clone(),
                        axis: axis.name.clone(),
                    }
                })?)
            }
            Node::Dim(dim) => self.dim(dim)?,
            Node::Read(tensor, indices) => self.read(tensor, indices, prelude)?,
            Node::Binary(op, a, b) => {
                self.check_binary(*op, a.dtype(), b.dtype())?;
                self.expr(a, prelude)?.binary(*op, self.expr(b, prelude)?)
            }
            Node::Cmp(cmp, a, b) => {
                self.check_same(&format!("{cmp:?}"), a.dtype(), b.dtype())?;
                self.expr(a, prelude)?.compare(*cmp, self.expr(b, prelude)?)
            }
            Node::Not(a) => {
                self.check("not", a.dtype() == DType::Bool, "a bool", a.dtype())?;
                PrimExpr::Not(Box::new(self.expr(a, prelude)?))
            }
            Node::Cast(a) => PrimExpr::Cast(dtype, Box::new(self.expr(a, prelude)?)),
            Node::Select(c, a, b) => {
                self.check("select", c.dtype() == DType::Bool, "a bool", c.dtype())?;
                self.check_same("select", a.dtype(), b.dtype())?;
                let c = self.expr(c, prelude)?;
                PrimExpr::select(c, self.expr(a, prelude)?, self.expr(b, prelude)?)
            }
            Node::Call(intrinsic, args) => self.call(*intrinsic, args, prelude)?,
            Node::Reduce(kind, body, axes) => {
                let name = self.names.fresh("acc");
                let indices = vec![PrimExpr::index(0)];
                let stmts =
                    self.reduction_into(&name, dtype, indices.clone(), *kind, body, axes)?;
                prelude.stmts.extend(stmts);
                prelude
                    .allocs
                    .push(Buffer::new(&name, dtype, vec![SymExpr::int(1)]));
                PrimExpr::Load {
                    buffer: name,
                    dtype,
                    indices,
                }
            }
        })
    }

    fn read(
        &mut self,
        tensor: &Tensor,
        indices: &[Expr],
        prelude: &mut Prelude,
    ) -> Result<PrimExpr, TeError> {
        if indices.len() != tensor.ndim() {
            return Err(TeError::ReadRank {
                func: self.func.to_string(),
                stage: self.stage.clone(),
                tensor: tensor.name().to_string(),
                expected: tensor.ndim(),
                got: indices.len(),
            });
        }
        let what = format!("index of `{}`", tensor.name());
        let trimmed = self.trimmed.contains(&tensor.key());
        let indices = if trimmed {
            let (leading, rest) = indices.split_at(self.outer.len());
            if !leading
                .iter()
                .zip(&self.outer)
                .all(|(i, v)| self.is_var(i, v))
            {
                return Err(TeError::SharedRead {
                    func: self.func.to_string(),
                    stage: self.stage.clone(),
                    tensor: tensor.name().to_string(),
                });
            }
            rest
        } else {
            indices
        };
        let indices: Vec<PrimExpr> = indices
            .iter()
            .map(|i| {
                self.check(&what, i.dtype() == DType::I64, "i64", i.dtype())?;
                self.expr(i, prelude)
            })
            .collect::<Result<_, _>>()?;
        let indices = if trimmed {
            one_element(indices)
        } else {
            indices
        };
        Ok(PrimExpr::Load {
            buffer: self.buffers[&tensor.key()].clone(),
            dtype: tensor.dtype(),
            indices,
        })
    }

    fn call(
        &mut self,
        intrinsic: Intrinsic,
        args: &[Expr],
        prelude: &mut Prelude,
    ) -> Result<PrimExpr, TeError> {
        if args.len() != intrinsic.arity() {
            return Err(TeError::IntrinsicArity {
                func: self.func.to_string(),
                stage: self.stage.clone(),
                intrinsic: intrinsic.name().to_string(),
                expected: intrinsic.arity(),
                got: args.len(),
            });
        }
        let first = args[0].dtype();
        let numeric = first.is_float() || (intrinsic == Intrinsic::Abs && first.is_int());
        self.check(intrinsic.name(), numeric, "a float", first)?;
        args.iter()
            .try_for_each(|a| self.check_same(intrinsic.name(), first, a.dtype()))?;
        let args = args
            .iter()
            .map(|a| self.expr(a, prelude))
            .collect::<Result<_, _>>()?;
        Ok(PrimExpr::call(intrinsic, args))
    }

    fn dim(&self, dim: &SymExpr) -> Result<PrimExpr, TeError> {
        match dim
            .vars()
            .into_iter()
            .find(|v| !self.dims.contains(v.name()))
        {
            Some(v) => Err(TeError::UnboundDim {
                func: self.func.to_string(),
                stage: self.stage.clone(),
                dim: v.name().to_string(),
            }),
            None => Ok(PrimExpr::from(dim)),
        }
    }

    /// Whether index `index` is exactly the loop variable `var`.
    fn is_var(&self, index: &Expr, var: &TVar) -> bool {
        matches!(index.node(), Node::Axis(axis) if self.bound.get(&axis.id) == Some(var))
    }

    /// Names the loop variables of `axes` and makes them visible.
    fn bind(&mut self, axes: &[Arc<Axis>]) -> Result<Vec<(TVar, PrimExpr)>, TeError> {
        axes.iter()
            .map(|axis| {
                let extent = self.dim(&axis.extent)?;
                let prefix = if axis.name.is_empty() {
                    "k"
                } else {
                    &axis.name
                };
                let var = TVar::new(&self.names.fresh(prefix), DType::I64);
                self.bound.insert(axis.id, var.clone());
                Ok((var, extent))
            })
            .collect()
    }

    fn unbind(&mut self, axes: &[Arc<Axis>]) {
        axes.iter().for_each(|a| drop(self.bound.remove(&a.id)));
    }

    fn check_binary(&self, op: BinOp, a: DType, b: DType) -> Result<(), TeError> {
        self.check_same(op.name(), a, b)?;
        let ok = match op {
            BinOp::Div => a.is_float(),
            BinOp::FloorDiv | BinOp::FloorMod | BinOp::Shl | BinOp::Shr => a.is_int(),
            BinOp::And | BinOp::Or => !a.is_float(),
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Min | BinOp::Max => true,
        };
        let expected = match op {
            BinOp::Div => "a float",
            BinOp::And | BinOp::Or => "a bool or an integer",
            _ => "an integer",
        };
        self.check(op.name(), ok, expected, a)
    }

    fn check_same(&self, op: &str, lhs: DType, rhs: DType) -> Result<(), TeError> {
        if lhs == rhs {
            return Ok(());
        }
        Err(TeError::DtypeMismatch {
            func: self.func.to_string(),
            stage: self.stage.clone(),
            op: op.to_string(),
            lhs,
            rhs,
        })
    }

    fn check(&self, op: &str, ok: bool, expected: &str, got: DType) -> Result<(), TeError> {
        if ok {
            return Ok(());
        }
        Err(TeError::BadDtype {
            func: self.func.to_string(),
            stage: self.stage.clone(),
            op: op.to_string(),
            expected: expected.to_string(),
            got,
        })
    }
}

/// The indices of an intermediate under shared loops: its own trailing ones, or element
/// 0 when it has none (its buffer then holds one element).
fn one_element(mut indices: Vec<PrimExpr>) -> Vec<PrimExpr> {
    if indices.is_empty() {
        indices.push(PrimExpr::index(0));
    }
    indices
}

/// `body` inside serial loops, the first outermost.
pub(super) fn loop_nest(loops: Vec<(TVar, PrimExpr)>, body: Stmt) -> Stmt {
    loops
        .into_iter()
        .rev()
        .fold(body, |body, (var, extent)| Stmt::For {
            var,
            extent,
            kind: ForKind::Serial,
            body: Box::new(body),
        })
}

/// The identity of a reduction: 0, or the smallest / largest value of `dtype`.
fn identity(kind: ReduceKind, dtype: DType) -> PrimExpr {
    let (lowest, highest) = match dtype {
        d if d.is_float() => {
            return match kind {
                ReduceKind::Sum => PrimExpr::Float(0.0, d),
                ReduceKind::Max => PrimExpr::Float(f64::NEG_INFINITY, d),
                ReduceKind::Min => PrimExpr::Float(f64::INFINITY, d),
            }
        }
        DType::I32 => (i32::MIN.into(), i32::MAX.into()),
        DType::I8 => (i8::MIN.into(), i8::MAX.into()),
        DType::U8 => (0, u8::MAX.into()),
        DType::U4 => (0, 15),
        DType::Bool => (0, 1),
        _ => (i64::MIN, i64::MAX),
    };
    let value = match kind {
        ReduceKind::Sum => 0,
        ReduceKind::Max => lowest,
        ReduceKind::Min => highest,
    };
    PrimExpr::Int(value, dtype)
}

fn combine(kind: ReduceKind, acc: PrimExpr, value: PrimExpr) -> PrimExpr {
    let op = match kind {
        ReduceKind::Sum => BinOp::Add,
        ReduceKind::Max => BinOp::Max,
        ReduceKind::Min => BinOp::Min,
    };
    acc.binary(op, value)
}
