//! Reductions over axes (`sum`, `max`, `mean`) and `softmax` along one axis.

use super::attr::{self, AttrDefault, AttrKind, AttrSpec};
use super::ctx::{is_float, is_numeric, InferCtx};
use super::{attrs, call, InferError, OpDef};
use crate::{AttrValue, DType, Expr, StructInfo, SymExpr};

const REDUCE_ATTRS: &[AttrSpec] = &[
    AttrSpec::new("axis", AttrKind::Ints, AttrDefault::Optional),
    AttrSpec::new("keepdims", AttrKind::Bool, AttrDefault::Bool(false)),
];

const SOFTMAX_ATTRS: &[AttrSpec] = &[AttrSpec::new("axis", AttrKind::Int, AttrDefault::Int(-1))];

macro_rules! reduce_ops {
    ($($(#[$doc:meta])* $name:ident => $infer:ident;)*) => {
        /// The reductions and `softmax`.
        pub(super) const OPS: &[OpDef] = &[
            $(OpDef { name: stringify!($name), args: &["x"], attrs: REDUCE_ATTRS, infer: $infer },)*
            OpDef { name: "softmax", args: &["x"], attrs: SOFTMAX_ATTRS, infer: infer_softmax },
        ];

        $(
            $(#[$doc])*
            ///
            /// `axis` defaults to every axis; `keepdims` keeps reduced dims as 1.
            pub fn $name(x: &Expr, axis: Option<Vec<i64>>, keepdims: bool) -> Result<Expr, InferError> {
                let attrs = attrs([
                    ("axis", axis.map(AttrValue::Ints)),
                    ("keepdims", Some(AttrValue::Bool(keepdims))),
                ]);
                call(stringify!($name), vec![x.clone()], attrs)
            }
        )*
    };
}

reduce_ops! {
    /// The sum of `x` over `axis`.
    sum => infer_numeric_reduce;
    /// The maximum of `x` over `axis`.
    max => infer_numeric_reduce;
    /// The mean of `x` over `axis`.
    mean => infer_float_reduce;
}

/// Drops (or, with `keepdims`, sets to 1) the reduced dims of `x`.
fn infer_reduce(
    ctx: &InferCtx<'_>,
    accept: fn(DType) -> bool,
    expected: &'static str,
) -> Result<StructInfo, InferError> {
    let x = ctx.tensor(0)?;
    ctx.check_dtype(x.arg.clone(), x.dtype, accept, expected)?;
    let axes = ctx
        .axes("axis", x.rank())?
        .unwrap_or_else(|| (0..x.rank()).collect());
    let keepdims = ctx.require("keepdims", attr::boolean)?;
    let dims = x
        .dims
        .iter()
        .enumerate()
        .filter_map(|(a, dim)| match axes.contains(&a) {
            true => keepdims.then(|| SymExpr::int(1)),
            false => Some(dim.clone()),
        })
        .collect();
    Ok(StructInfo::tensor(dims, x.dtype))
}

fn infer_numeric_reduce(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    infer_reduce(ctx, is_numeric, "a numeric dtype")
}

fn infer_float_reduce(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    infer_reduce(ctx, is_float, "a float dtype")
}

fn infer_softmax(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let x = ctx.tensor(0)?;
    ctx.check_dtype(x.arg.clone(), x.dtype, is_float, "a float dtype")?;
    ctx.axis("axis", x.rank())?;
    Ok(StructInfo::tensor(x.dims.to_vec(), x.dtype))
}

/// The softmax of `x` along `axis`.
pub fn softmax(x: &Expr, axis: i64) -> Result<Expr, InferError> {
    call(
        "softmax",
        vec![x.clone()],
        attrs([("axis", Some(AttrValue::Int(axis)))]),
    )
}
