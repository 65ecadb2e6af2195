//! Shape manipulation: `reshape` (with one inferred `-1` dim), `permute_dims`,
//! `expand_dims`, `squeeze` and `broadcast_to`.

use super::attr::{self, AttrDefault, AttrKind, AttrSpec};
use super::broadcast::{check_broadcast_to, is_one};
use super::ctx::{InferCtx, Tensor};
use super::error::Dims;
use super::{attrs, call, InferError, OpDef};
use crate::{AttrValue, Attrs, Expr, StructInfo, SymExpr};

/// The manipulation ops.
/// The ops that only re-index a row-major tensor without moving an element: after
/// legalization they stay op calls, and the VM lowers them to views of their input.
pub const VIEW_OPS: &[&str] = &["reshape", "expand_dims", "squeeze"];

pub(super) const OPS: &[OpDef] = &[
    OpDef {
        name: "reshape",
        args: &["x", "shape"],
        attrs: &[],
        infer: infer_reshape,
    },
    OpDef {
        name: "permute_dims",
        args: &["x"],
        attrs: &[AttrSpec::new("axes", AttrKind::Ints, AttrDefault::Optional)],
        infer: infer_permute_dims,
    },
    OpDef {
        name: "expand_dims",
        args: &["x"],
        attrs: &[AttrSpec::new("axis", AttrKind::Ints, AttrDefault::Required)],
        infer: infer_expand_dims,
    },
    OpDef {
        name: "squeeze",
        args: &["x"],
        attrs: &[AttrSpec::new("axis", AttrKind::Ints, AttrDefault::Optional)],
        infer: infer_squeeze,
    },
    OpDef {
        name: "broadcast_to",
        args: &["x", "shape"],
        attrs: &[],
        infer: infer_broadcast_to,
    },
];

fn infer_reshape(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let x = ctx.tensor(0)?;
    let target = ctx.shape_value(1)?;
    let minus_one = SymExpr::int(-1);
    let wildcards: Vec<usize> = (0..target.len())
        .filter(|&i| target[i] == minus_one)
        .collect();
    if wildcards.len() > 1 {
        return Err(ctx.invalid_arg(1, format!("{} has more than one -1", Dims::from(target))));
    }
    if let Some(bad) = target
        .iter()
        .find(|d| **d != minus_one && d.max_value().is_some_and(|hi| hi < 0))
    {
        return Err(ctx.invalid_arg(1, format!("dim {bad} is negative")));
    }
    let total = SymExpr::product(x.dims);
    let mut out = target.to_vec();
    match wildcards.first() {
        Some(&pos) => out[pos] = infer_wildcard(ctx, &x, target, pos)?,
        None => {
            let size = SymExpr::product(target);
            if !size.prove_equal(&total) {
                return Err(InferError::ReshapeSize {
                    op: ctx.op(),
                    from: x.shape(),
                    from_size: total,
                    to: Dims::from(target),
                    to_size: size,
                });
            }
        }
    }
    Ok(StructInfo::tensor(out, x.dtype))
}

/// The dims of `target` other than the one at `pos`.
fn others(target: &[SymExpr], pos: usize) -> impl Iterator<Item = &SymExpr> {
    target
        .iter()
        .enumerate()
        .filter(move |(i, _)| *i != pos)
        .map(|(_, d)| d)
}

/// The `-1` dim at `pos` of `target`: dims provably equal on both sides cancel, then the
/// rest of the input's size is divided by the rest of the target's, which must be exact.
fn infer_wildcard(
    ctx: &InferCtx<'_>,
    x: &Tensor,
    target: &[SymExpr],
    pos: usize,
) -> Result<SymExpr, InferError> {
    let mut rest: Vec<&SymExpr> = x.dims.iter().collect();
    let mut known = SymExpr::int(1);
    for dim in others(target, pos) {
        match rest.iter().position(|r| r.prove_equal(dim)) {
            Some(j) => {
                rest.swap_remove(j);
            }
            None => known = &known * dim,
        }
    }
    let total = SymExpr::product(rest);
    let missing = total.floordiv(&known);
    if (&missing * &known).prove_equal(&total) {
        return Ok(missing);
    }
    Err(InferError::ReshapeInfer {
        op: ctx.op(),
        from: x.shape(),
        from_size: SymExpr::product(x.dims),
        to: Dims::from(target),
        known: SymExpr::product(others(target, pos)),
    })
}

fn infer_permute_dims(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let x = ctx.tensor(0)?;
    let axes = ctx
        .axes("axes", x.rank())?
        .unwrap_or_else(|| (0..x.rank()).rev().collect());
    if axes.len() != x.rank() {
        let reason = format!("{} axes for {} {}", axes.len(), x.arg, x.shape());
        return Err(ctx.invalid_attr("axes", reason));
    }
    let dims = axes.iter().map(|&a| x.dims[a].clone()).collect();
    Ok(StructInfo::tensor(dims, x.dtype))
}

fn infer_expand_dims(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let x = ctx.tensor(0)?;
    let out_rank = x.rank() + ctx.require("axis", attr::ints)?.len();
    let mut new_axes = ctx.axes("axis", out_rank)?.unwrap_or_default();
    new_axes.sort_unstable();
    // In ascending order, each new axis is at most the current length: insert is in range.
    let mut dims = x.dims.to_vec();
    for axis in new_axes {
        dims.insert(axis, SymExpr::int(1));
    }
    Ok(StructInfo::tensor(dims, x.dtype))
}

fn infer_squeeze(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let x = ctx.tensor(0)?;
    let axes = match ctx.axes("axis", x.rank())? {
        Some(axes) => axes,
        None => (0..x.rank()).filter(|&a| is_one(&x.dims[a])).collect(),
    };
    if let Some(&axis) = axes.iter().find(|&&a| !is_one(&x.dims[a])) {
        return Err(InferError::SqueezeNotOne {
            op: ctx.op(),
            arg: x.arg.clone(),
            shape: x.shape(),
            axis,
            dim: x.dims[axis].clone(),
        });
    }
    let dims = (0..x.rank())
        .filter(|a| !axes.contains(a))
        .map(|a| x.dims[a].clone())
        .collect();
    Ok(StructInfo::tensor(dims, x.dtype))
}

fn infer_broadcast_to(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let x = ctx.tensor(0)?;
    let target = ctx.new_shape(1)?;
    check_broadcast_to(ctx.op(), &x, target, &ctx.arg(1))?;
    Ok(StructInfo::tensor(target.to_vec(), x.dtype))
}

/// `x` with the same elements in shape `shape`; at most one dim may be `-1` (inferred).
pub fn reshape(x: &Expr, shape: Vec<SymExpr>) -> Result<Expr, InferError> {
    call("reshape", vec![x.clone(), Expr::Shape(shape)], Attrs::new())
}

/// `x` with its dims permuted: output dim `i` is input dim `axes[i]` (default: reversed).
pub fn permute_dims(x: &Expr, axes: Option<Vec<i64>>) -> Result<Expr, InferError> {
    call(
        "permute_dims",
        vec![x.clone()],
        attrs([("axes", axes.map(AttrValue::Ints))]),
    )
}

/// `x` with new dims of size 1 at output positions `axis`.
pub fn expand_dims(x: &Expr, axis: Vec<i64>) -> Result<Expr, InferError> {
    call(
        "expand_dims",
        vec![x.clone()],
        attrs([("axis", Some(AttrValue::Ints(axis)))]),
    )
}

/// `x` without the dims `axis` (each provably 1; default: every dim provably 1).
pub fn squeeze(x: &Expr, axis: Option<Vec<i64>>) -> Result<Expr, InferError> {
    call(
        "squeeze",
        vec![x.clone()],
        attrs([("axis", axis.map(AttrValue::Ints))]),
    )
}

/// `x` broadcast (numpy rules) to `shape`.
pub fn broadcast_to(x: &Expr, shape: Vec<SymExpr>) -> Result<Expr, InferError> {
    call(
        "broadcast_to",
        vec![x.clone(), Expr::Shape(shape)],
        Attrs::new(),
    )
}
