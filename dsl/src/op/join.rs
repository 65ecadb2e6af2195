//! Joining and slicing: `concat`, `split`, `strided_slice` and `take`.

use super::attr::{self, AttrDefault, AttrKind, AttrSpec};
use super::ctx::{InferCtx, Tensor};
use super::error::ArgRef;
use super::{attrs, call, InferError, OpDef};
use crate::{AttrValue, DType, Expr, StructInfo, SymExpr};

const AXIS_0: AttrSpec = AttrSpec::new("axis", AttrKind::Int, AttrDefault::Int(0));

/// The join and slice ops.
pub(super) const OPS: &[OpDef] = &[
    OpDef {
        name: "concat",
        args: &["tensors"],
        attrs: &[AXIS_0],
        infer: infer_concat,
    },
    OpDef {
        name: "split",
        args: &["x"],
        attrs: &[
            AXIS_0,
            AttrSpec::new("sections", AttrKind::Int, AttrDefault::Optional),
            AttrSpec::new("indices", AttrKind::Ints, AttrDefault::Optional),
        ],
        infer: infer_split,
    },
    OpDef {
        name: "strided_slice",
        args: &["x"],
        attrs: &[
            AttrSpec::new("axes", AttrKind::Ints, AttrDefault::Required),
            AttrSpec::new("begin", AttrKind::Shape, AttrDefault::Required),
            AttrSpec::new("end", AttrKind::Shape, AttrDefault::Required),
            AttrSpec::new("strides", AttrKind::Ints, AttrDefault::Optional),
        ],
        infer: infer_strided_slice,
    },
    OpDef {
        name: "take",
        args: &["x", "indices"],
        attrs: &[AXIS_0],
        infer: infer_take,
    },
];

/// `x`'s shape with dim `axis` replaced by `dim`.
fn with_dim(x: &Tensor, axis: usize, dim: SymExpr) -> Vec<SymExpr> {
    let mut dims = x.dims.to_vec();
    dims[axis] = dim;
    dims
}

fn infer_concat(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let tensors = ctx
        .tuple(0)?
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let role = format!("{}[{i}]", ctx.arg(0).role);
            ctx.known_tensor(
                item,
                ArgRef {
                    index: 0,
                    role: role.into(),
                },
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let (first, rest) = tensors
        .split_first()
        .ok_or_else(|| ctx.invalid_arg(0, "the tuple is empty".to_string()))?;
    let axis = ctx.axis("axis", first.rank())?;
    let mut total = first.dims[axis].clone();
    for t in rest {
        ctx.same_dtype(first, t)?;
        if t.rank() != first.rank() {
            return Err(ctx.shape_mismatch("ranks differ", first, t));
        }
        let off_axis = (0..t.rank()).filter(|&a| a != axis);
        if off_axis
            .into_iter()
            .any(|a| !t.dims[a].prove_equal(&first.dims[a]))
        {
            let what = format!("dims off axis {axis} differ");
            return Err(ctx.shape_mismatch(&what, first, t));
        }
        total = &total + &t.dims[axis];
    }
    Ok(StructInfo::tensor(
        with_dim(first, axis, total),
        first.dtype,
    ))
}

fn infer_split(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let x = ctx.tensor(0)?;
    let axis = ctx.axis("axis", x.rank())?;
    let sizes = match (
        ctx.attr("sections", attr::int),
        ctx.attr("indices", attr::ints),
    ) {
        (Some(sections), None) => section_sizes(ctx, &x, axis, sections)?,
        (None, Some(indices)) => index_sizes(ctx, &x.dims[axis], indices)?,
        _ => {
            let reason = "give exactly one of `sections` and `indices`".to_string();
            return Err(ctx.invalid_attr("sections", reason));
        }
    };
    let parts = sizes
        .into_iter()
        .map(|size| StructInfo::tensor(with_dim(&x, axis, size), x.dtype))
        .collect();
    Ok(StructInfo::Tuple(parts))
}

/// `sections` equal parts of `x`'s dim `axis`, which they must provably divide.
fn section_sizes(
    ctx: &InferCtx<'_>,
    x: &Tensor,
    axis: usize,
    sections: i64,
) -> Result<Vec<SymExpr>, InferError> {
    let dim = &x.dims[axis];
    let most = dim.max_value().unwrap_or(i64::MAX).max(1);
    let count = usize::try_from(sections)
        .ok()
        .filter(|_| (1..=most).contains(&sections))
        .ok_or_else(|| {
            let reason = format!("{sections} sections for dim {dim} (at most {most})");
            ctx.invalid_attr("sections", reason)
        })?;
    let part = dim.floordiv(&SymExpr::int(sections));
    if !(&part * sections).prove_equal(dim) {
        return Err(InferError::SplitNotDivisible {
            op: ctx.op(),
            arg: x.arg.clone(),
            shape: x.shape(),
            axis,
            dim: dim.clone(),
            sections,
        });
    }
    Ok(vec![part; count])
}

/// The sizes of the parts between split points `indices` (clamped to `dim`).
fn index_sizes(
    ctx: &InferCtx<'_>,
    dim: &SymExpr,
    indices: &[i64],
) -> Result<Vec<SymExpr>, InferError> {
    if indices.first().is_some_and(|&i| i < 0) || indices.windows(2).any(|w| w[0] > w[1]) {
        let reason = format!("split points {indices:?} must be non-negative and sorted");
        return Err(ctx.invalid_attr("indices", reason));
    }
    let points: Vec<SymExpr> = std::iter::once(SymExpr::int(0))
        .chain(indices.iter().map(|&i| SymExpr::int(i).minimum(dim)))
        .chain(std::iter::once(dim.clone()))
        .collect();
    Ok(points.windows(2).map(|w| &w[1] - &w[0]).collect())
}

fn infer_strided_slice(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let x = ctx.tensor(0)?;
    let axes = ctx.axes("axes", x.rank())?.unwrap_or_default();
    let begin = ctx.require("begin", attr::shape)?;
    let end = ctx.require("end", attr::shape)?;
    let strides = ctx
        .attr("strides", attr::ints)
        .map_or_else(|| vec![1; axes.len()], <[i64]>::to_vec);
    for (name, len) in [
        ("begin", begin.len()),
        ("end", end.len()),
        ("strides", strides.len()),
    ] {
        if len != axes.len() {
            let reason = format!("{len} entries for {} axes", axes.len());
            return Err(ctx.invalid_attr(name, reason));
        }
    }
    if let Some(bad) = strides.iter().find(|&&s| s <= 0) {
        return Err(ctx.invalid_attr("strides", format!("stride {bad} is not positive")));
    }
    let mut dims = x.dims.to_vec();
    for (i, &axis) in axes.iter().enumerate() {
        dims[axis] = slice_len(&x.dims[axis], &begin[i], &end[i], strides[i]);
    }
    Ok(StructInfo::tensor(dims, x.dtype))
}

/// A slice bound clamped to `[0, dim]`; a negative constant counts from the end.
fn clamp_bound(bound: &SymExpr, dim: &SymExpr) -> SymExpr {
    match bound.as_const() {
        Some(c) if c < 0 => (dim + c).maximum(&SymExpr::int(0)),
        _ => bound.minimum(dim),
    }
}

/// The length of `begin:end:stride` over a dim of size `dim`.
fn slice_len(dim: &SymExpr, begin: &SymExpr, end: &SymExpr, stride: i64) -> SymExpr {
    let span = (clamp_bound(end, dim) - clamp_bound(begin, dim)).maximum(&SymExpr::int(0));
    (span + (stride - 1)).floordiv(&SymExpr::int(stride))
}

fn infer_take(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let (x, indices) = (ctx.tensor(0)?, ctx.tensor(1)?);
    let is_index = |d| matches!(d, DType::I32 | DType::I64);
    ctx.check_dtype(indices.arg.clone(), indices.dtype, is_index, "i32 or i64")?;
    let axis = ctx.axis("axis", x.rank())?;
    let dims = x.dims[..axis]
        .iter()
        .chain(indices.dims)
        .chain(&x.dims[axis + 1..])
        .cloned()
        .collect();
    Ok(StructInfo::tensor(dims, x.dtype))
}

/// The tensors `items` joined along `axis`.
pub fn concat(items: &[Expr], axis: i64) -> Result<Expr, InferError> {
    call(
        "concat",
        vec![Expr::Tuple(items.to_vec())],
        attrs([("axis", Some(AttrValue::Int(axis)))]),
    )
}

/// `x` split along `axis` into `sections` equal parts (a tuple).
pub fn split_sections(x: &Expr, sections: i64, axis: i64) -> Result<Expr, InferError> {
    let attrs = attrs([
        ("axis", Some(AttrValue::Int(axis))),
        ("sections", Some(AttrValue::Int(sections))),
    ]);
    call("split", vec![x.clone()], attrs)
}

/// `x` split along `axis` at the points `indices` (a tuple of `indices.len() + 1` parts).
pub fn split_indices(x: &Expr, indices: Vec<i64>, axis: i64) -> Result<Expr, InferError> {
    let attrs = attrs([
        ("axis", Some(AttrValue::Int(axis))),
        ("indices", Some(AttrValue::Ints(indices))),
    ]);
    call("split", vec![x.clone()], attrs)
}

/// `x[begin:end:strides]` on `axes` (bounds clamped to the dims; strides default to 1).
pub fn strided_slice(
    x: &Expr,
    axes: Vec<i64>,
    begin: Vec<SymExpr>,
    end: Vec<SymExpr>,
    strides: Option<Vec<i64>>,
) -> Result<Expr, InferError> {
    let attrs = attrs([
        ("axes", Some(AttrValue::Ints(axes))),
        ("begin", Some(AttrValue::Shape(begin))),
        ("end", Some(AttrValue::Shape(end))),
        ("strides", strides.map(AttrValue::Ints)),
    ]);
    call("strided_slice", vec![x.clone()], attrs)
}

/// The slices of `x` along `axis` picked by `indices` (an i32 or i64 tensor).
pub fn take(x: &Expr, indices: &Expr, axis: i64) -> Result<Expr, InferError> {
    call(
        "take",
        vec![x.clone(), indices.clone()],
        attrs([("axis", Some(AttrValue::Int(axis)))]),
    )
}
