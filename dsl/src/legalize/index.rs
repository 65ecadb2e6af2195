//! Indexed reads: `strided_slice` (begin clamped to the dim, positive strides) and
//! `take` (a gather by an integer index tensor; indices are clamped to the axis).

use super::call::OpCall;
use super::error::LegalizeError;
use super::kernel::{Kernel, OpPattern};
use crate::te::{self, Expr};
use crate::{DType, SymExpr};

/// The ops of this family.
pub(super) const OPS: &[&str] = &["strided_slice", "take"];

/// A slice or a gather.
pub(super) fn legalize(call: &OpCall) -> Result<Kernel, LegalizeError> {
    match call.op {
        "strided_slice" => strided_slice(call),
        _ => take(call),
    }
}

fn strided_slice(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let (inputs, args) = call.inputs(&["x"])?;
    let x = &inputs[0];
    let (shape, _) = call.output_of_rank(x.ndim())?;
    let axes = call.required_ints("axes")?;
    let axes = call.axes("axes", &axes, x.ndim())?;
    let begin = call.shape_attr("begin")?;
    let end = call.shape_attr("end")?;
    let strides = call
        .ints_attr("strides")?
        .unwrap_or_else(|| vec![1; axes.len()]);
    if [begin.len(), end.len(), strides.len()] != [axes.len(); 3] {
        let got = format!(
            "{} begins, {} ends, {} strides",
            begin.len(),
            end.len(),
            strides.len()
        );
        return Err(call.bad_attr("begin", "one begin, end and stride per axis", got));
    }
    if let Some(stride) = strides.iter().find(|&&s| s <= 0) {
        return Err(call.bad_attr("strides", "positive strides", stride.to_string()));
    }
    let mut starts = vec![(SymExpr::int(0), 1); x.ndim()];
    for ((&axis, begin), &stride) in axes.iter().zip(&begin).zip(&strides) {
        starts[axis] = (clamp_begin(begin, &x.shape()[axis]), stride);
    }
    let out = te::compute("out", shape, |i| {
        let index: Vec<Expr> = i
            .iter()
            .zip(&starts)
            .map(|(i, (start, stride))| Expr::from(start) + i * *stride)
            .collect();
        x.at(&index)
    });
    Ok(Kernel::new(inputs, args, out, OpPattern::Injective))
}

/// A begin index in `0..=dim`: a negative constant counts from the end.
fn clamp_begin(begin: &SymExpr, dim: &SymExpr) -> SymExpr {
    let from_end = matches!(begin.as_const(), Some(b) if b < 0);
    let begin = if from_end { dim + begin } else { begin.clone() };
    begin.maximum(&SymExpr::int(0)).minimum(dim)
}

fn take(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let (inputs, args) = call.inputs(&["x", "indices"])?;
    let (x, indices) = (&inputs[0], &inputs[1]);
    let index_dtype = indices.dtype();
    let is_index = matches!(index_dtype, DType::I32 | DType::I64);
    call.require_dtype(1, index_dtype, is_index, "i32 or i64")?;
    let axis = call.axis(call.int_attr("axis", 0)?, x.ndim())?;
    let gathered = indices.ndim();
    let (shape, _) = call.output_of_rank(x.ndim() + gathered - 1)?;
    let last = Expr::from(&x.shape()[axis] - 1);
    let out = te::compute("out", shape, |i| {
        let position = indices.at(&i[axis..axis + gathered]).cast(DType::I64);
        let mut index = i[..axis].to_vec();
        index.push(position.clamp(0, last.clone()));
        index.extend_from_slice(&i[axis + gathered..]);
        x.at(&index)
    });
    Ok(Kernel::new(inputs, args, out, OpPattern::Injective))
}
