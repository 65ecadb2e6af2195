//! Tensors made from nothing but constants (`full`, `zeros`, `ones`; the fill value is
//! baked into the kernel) and `triu` (zero below the `k`-th diagonal).

use super::call::OpCall;
use super::error::LegalizeError;
use super::kernel::{Kernel, OpPattern};
use crate::ir::{Expr as IrExpr, PrimValue};
use crate::te::{self, Expr};

/// The ops of this family.
pub(super) const OPS: &[&str] = &["full", "zeros", "ones", "triu"];

/// A constant fill, or the upper triangle.
pub(super) fn legalize(call: &OpCall) -> Result<Kernel, LegalizeError> {
    if call.op == "triu" {
        return triu(call);
    }
    let dtype = call.dtype_attr("dtype")?;
    let (shape, out_dtype) = call.output()?;
    let target = call.shape_arg(0)?;
    let same =
        target.len() == shape.len() && target.iter().zip(&shape).all(|(a, b)| a.prove_equal(b));
    if !same || out_dtype != dtype {
        let expected = format!("a tensor of the shape argument's shape and dtype {dtype}");
        return Err(call.bad_output(&expected));
    }
    let value = match call.op {
        "zeros" => 0.0,
        "ones" => 1.0,
        _ => fill_value(call)?,
    };
    let out = te::compute("out", shape, |_| Expr::constant(value, dtype));
    Ok(Kernel::new(
        Vec::new(),
        Vec::new(),
        out,
        OpPattern::Elemwise,
    ))
}

/// The constant of `full`'s fill argument.
fn fill_value(call: &OpCall) -> Result<f64, LegalizeError> {
    let arg = call.arg(1)?;
    let constant = match arg {
        IrExpr::Prim(PrimValue::Float(v, _)) => Some(*v),
        IrExpr::Prim(PrimValue::Int(v, _)) => v.as_const().map(|v| v as f64),
        IrExpr::Constant(c) if c.values.len() == 1 => c.values.first().copied(),
        _ => None,
    };
    constant.ok_or_else(|| LegalizeError::NonConstantFill {
        op: call.op.to_string(),
        value: format!("{arg:?}"),
    })
}

/// `out[..., r, c] = c - r >= k ? x[..., r, c] : 0`.
fn triu(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let (inputs, args) = call.inputs(&["x"])?;
    let x = &inputs[0];
    if x.ndim() < 2 {
        return Err(call.shape_error(format!("needs a tensor of rank >= 2, got {x:?}")));
    }
    let (shape, _) = call.output_of_rank(x.ndim())?;
    let k = call.int_attr("k", 0)?;
    let out = te::compute("out", shape, |i| {
        let (row, col) = (&i[i.len() - 2], &i[i.len() - 1]);
        let keep = (col - row).ge(k);
        te::select(keep, x.at(i), Expr::constant(0.0, x.dtype()))
    });
    Ok(Kernel::new(inputs, args, out, OpPattern::Elemwise))
}
