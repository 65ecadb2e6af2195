//! Elementwise unary ops (`exp`, `silu`, ...), `gelu` and `astype`: the shape is kept.

use super::attr::{self, AttrDefault, AttrKind, AttrSpec};
use super::ctx::{is_float, is_numeric, InferCtx};
use super::{attrs, call, InferError, OpDef};
use crate::{AttrValue, Attrs, DType, Expr, StructInfo, TensorInfo};

macro_rules! unary_ops {
    ($($(#[$doc:meta])* $name:ident => $infer:ident;)*) => {
        /// The unary ops, `gelu` and `astype`.
        pub(super) const OPS: &[OpDef] = &[
            $(OpDef { name: stringify!($name), args: &["x"], attrs: &[], infer: $infer },)*
            OpDef { name: "gelu", args: &["x"], attrs: GELU_ATTRS, infer: infer_float },
            OpDef { name: "astype", args: &["x"], attrs: ASTYPE_ATTRS, infer: infer_astype },
        ];

        $(
            $(#[$doc])*
            pub fn $name(x: &Expr) -> Result<Expr, InferError> {
                call(stringify!($name), vec![x.clone()], Attrs::new())
            }
        )*
    };
}

unary_ops! {
    /// `-x`, elementwise.
    negative => infer_numeric;
    /// `e^x`, elementwise.
    exp => infer_float;
    /// The natural logarithm, elementwise.
    log => infer_float;
    /// The square root, elementwise.
    sqrt => infer_float;
    /// `1 / sqrt(x)`, elementwise.
    rsqrt => infer_float;
    /// The sine, elementwise.
    sin => infer_float;
    /// The cosine, elementwise.
    cos => infer_float;
    /// The hyperbolic tangent, elementwise.
    tanh => infer_float;
    /// `1 / (1 + e^-x)`, elementwise.
    sigmoid => infer_float;
    /// `x * sigmoid(x)`, elementwise.
    silu => infer_float;
}

const GELU_ATTRS: &[AttrSpec] = &[AttrSpec::new(
    "approximate",
    AttrKind::Str(&["none", "tanh"]),
    AttrDefault::Str("none"),
)];

const ASTYPE_ATTRS: &[AttrSpec] = &[AttrSpec::new(
    "dtype",
    AttrKind::DType,
    AttrDefault::Required,
)];

/// The argument's struct info, after checking its dtype with `accept`.
fn same_as_input(
    ctx: &InferCtx<'_>,
    accept: fn(DType) -> bool,
    expected: &'static str,
) -> Result<StructInfo, InferError> {
    let x = ctx.any_tensor(0)?;
    ctx.check_dtype(ctx.arg(0), x.dtype, accept, expected)?;
    Ok(StructInfo::Tensor(x.clone()))
}

fn infer_float(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    same_as_input(ctx, is_float, "a float dtype")
}

fn infer_numeric(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    same_as_input(ctx, is_numeric, "a numeric dtype")
}

fn infer_astype(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let x = ctx.any_tensor(0)?;
    Ok(StructInfo::Tensor(TensorInfo {
        shape: x.shape.clone(),
        dtype: ctx.require("dtype", attr::dtype)?,
    }))
}

/// The GELU activation: the erf form, or the tanh approximation when `approximate_tanh`.
pub fn gelu(x: &Expr, approximate_tanh: bool) -> Result<Expr, InferError> {
    let mode = if approximate_tanh { "tanh" } else { "none" };
    call(
        "gelu",
        vec![x.clone()],
        attrs([("approximate", Some(AttrValue::Str(mode.into())))]),
    )
}

/// `x` converted to `dtype`, elementwise.
pub fn astype(x: &Expr, dtype: DType) -> Result<Expr, InferError> {
    call(
        "astype",
        vec![x.clone()],
        attrs([("dtype", Some(AttrValue::DType(dtype)))]),
    )
}
