//! Element-wise unary ops: `negative`, the math functions, `silu`, `gelu` (erf and tanh
//! forms) and `astype`. 16-bit floats are computed in f32.

use super::call::OpCall;
use super::error::LegalizeError;
use super::kernel::{load, Kernel, OpPattern};
use crate::te::{self, Expr};
use std::f64::consts::{FRAC_1_SQRT_2, FRAC_2_SQRT_PI};

/// The ops of this family.
pub(super) const OPS: &[&str] = &[
    "negative", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "silu", "gelu",
    "astype",
];

/// `out[i] = f(x[i])`.
pub(super) fn legalize(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let (inputs, args) = call.inputs(&["x"])?;
    let x = &inputs[0];
    let (shape, dtype) = call.output_of_rank(x.ndim())?;
    let f = formula(call)?;
    let floats_only = !matches!(call.op, "negative" | "astype");
    call.require_dtype(
        0,
        x.dtype(),
        !floats_only || x.dtype().is_float(),
        "a float",
    )?;
    if call.op == "astype" && call.dtype_attr("dtype")? != dtype {
        return Err(call.bad_output("a tensor of the `dtype` attribute's dtype"));
    }
    let out = te::compute("out", shape, |i| f(&load(x, i)).cast(dtype));
    Ok(Kernel::new(inputs, args, out, OpPattern::Elemwise))
}

fn formula(call: &OpCall) -> Result<fn(&Expr) -> Expr, LegalizeError> {
    Ok(match call.op {
        "negative" => |x| -x,
        "exp" => Expr::exp,
        "log" => Expr::log,
        "sqrt" => Expr::sqrt,
        "rsqrt" => Expr::rsqrt,
        "sin" => Expr::sin,
        "cos" => Expr::cos,
        "tanh" => Expr::tanh,
        "sigmoid" => Expr::sigmoid,
        "silu" => |x| x * x.sigmoid(),
        "gelu" => match call.str_attr("approximate", "none")?.as_str() {
            "none" => gelu_erf,
            "tanh" => gelu_tanh,
            other => {
                let expected = "\"none\" or \"tanh\"";
                return Err(call.bad_attr("approximate", expected, format!("{other:?}")));
            }
        },
        _ => Expr::clone,
    })
}

/// `x * Phi(x) = 0.5 * x * (1 + erf(x / sqrt(2)))`.
fn gelu_erf(x: &Expr) -> Expr {
    x * 0.5 * ((x * FRAC_1_SQRT_2).erf() + 1.0)
}

/// `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`.
fn gelu_tanh(x: &Expr) -> Expr {
    let sqrt_2_over_pi = FRAC_2_SQRT_PI * FRAC_1_SQRT_2;
    let inner = (x + x * x * x * 0.044715) * sqrt_2_over_pi;
    x * 0.5 * (inner.tanh() + 1.0)
}
