//! `softmax` along an axis, max-subtracted: `exp(x - max) / sum(exp(x - max))`.

use super::call::OpCall;
use super::error::LegalizeError;
use super::kernel::{load, Kernel, OpPattern};
use super::reduce::Reduction;
use crate::te;

/// The ops of this family.
pub(super) const OPS: &[&str] = &["softmax"];

/// Three stages: the row maximum, the sum of exponentials, the normalized output.
pub(super) fn legalize(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let (inputs, args) = call.inputs(&["x"])?;
    let x = &inputs[0];
    call.require_dtype(0, x.dtype(), x.dtype().is_float(), "a float")?;
    let (shape, dtype) = call.output_of_rank(x.ndim())?;
    let axis = call.axis(call.int_attr("axis", -1)?, x.ndim())?;
    let row = Reduction::new(x.shape(), vec![axis]);
    let x_max = te::compute("x_max", row.kept_shape(), |i| {
        te::max(load(x, &row.index(i)), row.vars())
    });
    let exp_sum = te::compute("exp_sum", row.kept_shape(), |i| {
        te::sum((load(x, &row.index(i)) - x_max.at(i)).exp(), row.vars())
    });
    let out = te::compute("out", shape, |i| {
        let kept = row.kept(i);
        ((load(x, i) - x_max.at(&kept)).exp() / exp_sum.at(&kept)).cast(dtype)
    });
    Ok(Kernel::new(inputs, args, out, OpPattern::Reduction))
}
