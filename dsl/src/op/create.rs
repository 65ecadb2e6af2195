//! Tensor creation (`full`, `zeros`, `ones`) and `triu`.

use super::attr::{self, AttrDefault, AttrKind, AttrSpec};
use super::ctx::InferCtx;
use super::error::ArgRef;
use super::{attrs, call, InferError, OpDef};
use crate::ir::PrimValue;
use crate::{AttrValue, DType, Expr, StructInfo, SymExpr};

const DTYPE: &[AttrSpec] = &[AttrSpec::new(
    "dtype",
    AttrKind::DType,
    AttrDefault::Required,
)];

/// The creation ops and `triu`.
pub(super) const OPS: &[OpDef] = &[
    OpDef {
        name: "full",
        args: &["shape", "fill"],
        attrs: DTYPE,
        infer: infer_full,
    },
    OpDef {
        name: "zeros",
        args: &["shape"],
        attrs: DTYPE,
        infer: infer_filled,
    },
    OpDef {
        name: "ones",
        args: &["shape"],
        attrs: DTYPE,
        infer: infer_filled,
    },
    OpDef {
        name: "triu",
        args: &["x"],
        attrs: &[AttrSpec::new("k", AttrKind::Int, AttrDefault::Int(0))],
        infer: infer_triu,
    },
];

/// A tensor of the shape argument and the `dtype` attribute.
fn infer_filled(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let shape = ctx.new_shape(0)?;
    Ok(StructInfo::tensor(
        shape.to_vec(),
        ctx.require("dtype", attr::dtype)?,
    ))
}

fn infer_full(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    ctx.scalar(1)?;
    infer_filled(ctx)
}

fn infer_triu(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let x = ctx.tensor(0)?;
    if x.rank() < 2 {
        return Err(InferError::RankTooLow {
            op: ctx.op(),
            arg: x.arg.clone(),
            shape: x.shape(),
            min: 2,
        });
    }
    Ok(StructInfo::tensor(x.dims.to_vec(), x.dtype))
}

fn dtype_attrs(dtype: DType) -> crate::Attrs {
    attrs([("dtype", Some(AttrValue::DType(dtype)))])
}

/// `fill` as a scalar of `dtype`: a float for float dtypes, else an exact integer.
fn fill_value(fill: f64, dtype: DType) -> Result<PrimValue, InferError> {
    if dtype.is_float() {
        return Ok(PrimValue::Float(fill, dtype));
    }
    // [-2^63, 2^63): exactly the floats that convert to i64 without saturating.
    let in_range = (i64::MIN as f64..-(i64::MIN as f64)).contains(&fill);
    if fill.fract() == 0.0 && in_range {
        return Ok(PrimValue::Int(SymExpr::int(fill as i64), dtype));
    }
    Err(InferError::InvalidArg {
        op: "full",
        arg: ArgRef {
            index: 1,
            role: "fill".into(),
        },
        reason: format!("{fill} is not a value of {dtype}"),
    })
}

/// A tensor of `shape` and `dtype` with every element `fill`.
pub fn full(shape: Vec<SymExpr>, fill: f64, dtype: DType) -> Result<Expr, InferError> {
    let args = vec![Expr::Shape(shape), Expr::Prim(fill_value(fill, dtype)?)];
    call("full", args, dtype_attrs(dtype))
}

/// A tensor of `shape` and `dtype` filled with zeros.
pub fn zeros(shape: Vec<SymExpr>, dtype: DType) -> Result<Expr, InferError> {
    call("zeros", vec![Expr::Shape(shape)], dtype_attrs(dtype))
}

/// A tensor of `shape` and `dtype` filled with ones.
pub fn ones(shape: Vec<SymExpr>, dtype: DType) -> Result<Expr, InferError> {
    call("ones", vec![Expr::Shape(shape)], dtype_attrs(dtype))
}

/// `x` with the elements below diagonal `k` zeroed (kept where `col - row >= k`).
pub fn triu(x: &Expr, k: i64) -> Result<Expr, InferError> {
    call(
        "triu",
        vec![x.clone()],
        attrs([("k", Some(AttrValue::Int(k)))]),
    )
}
