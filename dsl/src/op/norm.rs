//! Normalizations over trailing axes: `rms_norm` (x, weight), `layer_norm`
//! (x, gamma, beta) and `add_rms_norm` (a, b, weight: `rms_norm(a + b, weight)` in one
//! kernel, the sum not written; the rewrite phase's add+rms_norm family). Each parameter
//! has the shape of the normalized dims.

use super::attr::{self, AttrDefault, AttrKind, AttrSpec};
use super::ctx::{is_float, InferCtx};
use super::{attrs, call, InferError, OpDef};
use crate::{AttrValue, Expr, StructInfo, SymExpr};

const NORM_ATTRS: &[AttrSpec] = &[
    AttrSpec::new("axes", AttrKind::Ints, AttrDefault::Ints(&[-1])),
    AttrSpec::new("epsilon", AttrKind::Float, AttrDefault::Float(1e-5)),
];

/// The normalization ops.
pub(super) const OPS: &[OpDef] = &[
    OpDef {
        name: "rms_norm",
        args: &["x", "weight"],
        attrs: NORM_ATTRS,
        infer: infer_norm,
    },
    OpDef {
        name: "layer_norm",
        args: &["x", "gamma", "beta"],
        attrs: NORM_ATTRS,
        infer: infer_norm,
    },
    OpDef {
        name: "add_rms_norm",
        args: &["a", "b", "weight"],
        attrs: NORM_ATTRS,
        infer: infer_add_norm,
    },
];

/// `x`'s struct info, after checking every parameter (arguments after `x`) against the
/// normalized dims of `x` and its dtype.
fn infer_norm(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    normalized(ctx, 1)
}

/// The struct info of `a` (and `b`, which must match it): [`normalized`] over their sum.
fn infer_add_norm(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let (a, b) = (ctx.tensor(0)?, ctx.tensor(1)?);
    ctx.same_dtype(&a, &b)?;
    let same = a.rank() == b.rank() && a.dims.iter().zip(b.dims).all(|(x, y)| x.prove_equal(y));
    if !same {
        return Err(ctx.shape_mismatch("a and b must have the same shape", &a, &b));
    }
    normalized(ctx, 2)
}

/// The struct info of argument 0 (`x`), after checking every parameter (arguments from
/// `first_param` on) against its normalized dims and its dtype.
fn normalized(ctx: &InferCtx<'_>, first_param: usize) -> Result<StructInfo, InferError> {
    let x = ctx.tensor(0)?;
    ctx.check_dtype(x.arg.clone(), x.dtype, is_float, "a float dtype")?;
    let axes = ctx.axes("axes", x.rank())?.unwrap_or_default();
    let epsilon = ctx.require("epsilon", attr::float)?;
    if !(epsilon.is_finite() && epsilon >= 0.0) {
        let reason = format!("epsilon {epsilon} is not a finite non-negative number");
        return Err(ctx.invalid_attr("epsilon", reason));
    }
    let normalized: Vec<&SymExpr> = axes.iter().map(|&a| &x.dims[a]).collect();
    for index in first_param..ctx.num_args() {
        let param = ctx.tensor(index)?;
        ctx.same_dtype(&x, &param)?;
        let fits = param.rank() == normalized.len()
            && param
                .dims
                .iter()
                .zip(&normalized)
                .all(|(p, d)| p.prove_equal(d));
        if !fits {
            let what = format!("{} must have the dims of x on axes {axes:?}", param.arg);
            return Err(ctx.shape_mismatch(&what, &x, &param));
        }
    }
    Ok(StructInfo::tensor(x.dims.to_vec(), x.dtype))
}

fn norm_attrs(axes: Vec<i64>, epsilon: f64) -> crate::Attrs {
    attrs([
        ("axes", Some(AttrValue::Ints(axes))),
        ("epsilon", Some(AttrValue::Float(epsilon))),
    ])
}

/// RMS normalization of `x` over `axes`, scaled by `weight`.
pub fn rms_norm(x: &Expr, weight: &Expr, axes: Vec<i64>, epsilon: f64) -> Result<Expr, InferError> {
    call(
        "rms_norm",
        vec![x.clone(), weight.clone()],
        norm_attrs(axes, epsilon),
    )
}

/// RMS normalization of `a + b` over `axes`, scaled by `weight`, in one kernel (the sum
/// is not written).
pub fn add_rms_norm(
    (a, b): (&Expr, &Expr),
    weight: &Expr,
    axes: Vec<i64>,
    epsilon: f64,
) -> Result<Expr, InferError> {
    let args = [a, b, weight].map(Expr::clone).to_vec();
    call("add_rms_norm", args, norm_attrs(axes, epsilon))
}

/// Layer normalization of `x` over `axes`, scaled by `gamma` and shifted by `beta`.
pub fn layer_norm(
    x: &Expr,
    gamma: &Expr,
    beta: &Expr,
    axes: Vec<i64>,
    epsilon: f64,
) -> Result<Expr, InferError> {
    let args = vec![x.clone(), gamma.clone(), beta.clone()];
    call("layer_norm", args, norm_attrs(axes, epsilon))
}
