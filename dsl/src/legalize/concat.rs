//! `concat` (a select over the axis ranges, with clamped reads so every branch stays in
//! bounds) and `split` (one output per part; the function has several outputs).

use super::call::OpCall;
use super::error::LegalizeError;
use super::kernel::{Kernel, OpPattern};
use crate::ir::Expr as IrExpr;
use crate::te::{self, Expr, Tensor};
use crate::{StructInfo, SymExpr};

/// The ops of this family.
pub(super) const OPS: &[&str] = &["concat", "split"];

/// Concatenation or split along `axis`.
pub(super) fn legalize(call: &OpCall) -> Result<Kernel, LegalizeError> {
    match call.op {
        "concat" => concat(call),
        _ => split(call),
    }
}

/// The fields of a tuple argument, as expressions (projections of a tuple variable).
fn tuple_fields(call: &OpCall, index: usize) -> Result<Vec<IrExpr>, LegalizeError> {
    let arg = call.arg(index)?;
    match (arg, arg.sinfo()) {
        (IrExpr::Tuple(items), _) => Ok(items.clone()),
        (_, StructInfo::Tuple(fields)) => Ok((0..fields.len())
            .map(|i| IrExpr::TupleGetItem(Box::new(arg.clone()), i))
            .collect()),
        (_, other) => Err(LegalizeError::BadArg {
            op: call.op.to_string(),
            index,
            expected: "a tuple of tensors".to_string(),
            got: other.to_string(),
        }),
    }
}

fn concat(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let args = tuple_fields(call, 0)?;
    let inputs = args
        .iter()
        .enumerate()
        .map(|(i, field)| call.placeholder(field, 0, &format!("x{i}")))
        .collect::<Result<Vec<Tensor>, _>>()?;
    let (shape, _) = call.output()?;
    let axis = call.axis(call.int_attr("axis", 0)?, shape.len())?;
    if inputs.is_empty() || inputs.iter().any(|t| t.ndim() != shape.len()) {
        return Err(call.shape_error(format!("cannot concatenate {inputs:?}")));
    }
    let non_empty = |t: &&Tensor| t.shape()[axis].as_const() != Some(0);
    let parts: Vec<(Tensor, SymExpr)> = inputs
        .iter()
        .filter(|t| non_empty(t) || !inputs.iter().any(|t| non_empty(&t)))
        .scan(SymExpr::int(0), |offset, t| {
            let start = offset.clone();
            *offset = &*offset + &t.shape()[axis];
            Some((t.clone(), start))
        })
        .collect();
    let out = te::compute("out", shape, |i| {
        let read = |(t, start): &(Tensor, SymExpr)| {
            let mut index = i.to_vec();
            let local = (&i[axis] - Expr::from(start)).minimum(Expr::from(&t.shape()[axis] - 1));
            index[axis] = if start.as_const() == Some(0) {
                local
            } else {
                local.maximum(0)
            };
            t.at(&index)
        };
        let select = |tail: Option<Expr>, part: &(Tensor, SymExpr)| {
            Some(match tail {
                None => read(part),
                Some(tail) => {
                    let end = &part.1 + &part.0.shape()[axis];
                    te::select(i[axis].lt(Expr::from(end)), read(part), tail)
                }
            })
        };
        parts
            .iter()
            .rev()
            .fold(None, select)
            .unwrap_or_else(|| Expr::int(0))
    });
    Ok(Kernel::new(inputs, args, out, OpPattern::Injective))
}

fn split(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let (inputs, args) = call.inputs(&["x"])?;
    let x = &inputs[0];
    let fields = call.output_fields()?;
    let axis = call.axis(call.int_attr("axis", 0)?, x.ndim())?;
    if fields.iter().any(|(shape, _)| shape.len() != x.ndim()) {
        return Err(call.bad_output(&format!("a tuple of tensors of rank {}", x.ndim())));
    }
    let mut offset = SymExpr::int(0);
    let mut outputs = Vec::new();
    for (part, (shape, _)) in fields.into_iter().enumerate() {
        let start = Expr::from(&offset);
        offset = &offset + &shape[axis];
        outputs.push(te::compute(&format!("out{part}"), shape, |i| {
            let mut index = i.to_vec();
            index[axis] = &i[axis] + &start;
            x.at(&index)
        }));
    }
    Ok(Kernel {
        inputs,
        args,
        outputs,
        pattern: OpPattern::Injective,
    })
}
