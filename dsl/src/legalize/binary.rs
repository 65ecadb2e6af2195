//! Broadcasting binary arithmetic (`add`, `subtract`, `multiply`, `divide`, `maximum`,
//! `minimum`) and `where`. Integer `divide` is floor division.

use super::call::OpCall;
use super::error::LegalizeError;
use super::kernel::{broadcast_indices, compute_dtype, Kernel, OpPattern};
use crate::te::{self, Expr, Tensor};
use crate::DType;

/// The ops of this family.
pub(super) const OPS: &[&str] = &[
    "add", "subtract", "multiply", "divide", "maximum", "minimum", "where",
];

/// `out[i] = f(a[bcast(i)], b[bcast(i)])` (or `cond ? a : b`).
pub(super) fn legalize(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let is_where = call.op == "where";
    let names: &[&str] = if is_where {
        &["cond", "a", "b"]
    } else {
        &["a", "b"]
    };
    let (inputs, args) = call.inputs(names)?;
    let (shape, dtype) = call.output()?;
    for (index, input) in inputs.iter().enumerate() {
        if input.ndim() > shape.len() {
            return Err(call.shape_error(format!(
                "argument {index} `{input:?}` has a higher rank than the result {}",
                call.call.sinfo
            )));
        }
    }
    if is_where {
        let cond = inputs[0].dtype();
        call.require_dtype(0, cond, cond == DType::Bool, "bool")?;
    }
    let f = arithmetic(call.op);
    let same_shape = |t: &Tensor| {
        t.ndim() == shape.len() && t.shape().iter().zip(&shape).all(|(a, b)| a.prove_equal(b))
    };
    let pattern = if inputs.iter().all(same_shape) {
        OpPattern::Elemwise
    } else {
        OpPattern::Broadcast
    };
    let out = te::compute("out", shape, |i| {
        let read = |t: &Tensor| t.at(&broadcast_indices(t.shape(), i));
        match f {
            Some(f) => {
                let compute = compute_dtype(dtype);
                f(
                    read(&inputs[0]).cast(compute),
                    read(&inputs[1]).cast(compute),
                )
                .cast(dtype)
            }
            None => te::select(read(&inputs[0]), read(&inputs[1]), read(&inputs[2])),
        }
    });
    Ok(Kernel::new(inputs, args, out, pattern))
}

/// The arithmetic of an op (`None` for `where`).
fn arithmetic(op: &str) -> Option<fn(Expr, Expr) -> Expr> {
    Some(match op {
        "add" => |a, b| a + b,
        "subtract" => |a, b| a - b,
        "multiply" => |a, b| a * b,
        "divide" => |a, b| a / b,
        "maximum" => |a: Expr, b| a.maximum(b),
        "minimum" => |a: Expr, b| a.minimum(b),
        _ => return None,
    })
}
