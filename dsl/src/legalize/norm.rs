//! `rms_norm` (`x * rsqrt(mean(x^2) + eps) * weight`), `add_rms_norm` (the same of
//! `x = a + b`, the sum computed as it is read) and `layer_norm`
//! (`(x - mean) * rsqrt(var + eps) * gamma + beta`), accumulated in f32. The scale and
//! shift tensors are indexed by the normalized dims.

use super::call::OpCall;
use super::error::LegalizeError;
use super::kernel::{Kernel, OpPattern};
use super::reduce::Reduction;
use crate::te::{self, Expr, Tensor};
use crate::DType;

/// The ops of this family.
pub(super) const OPS: &[&str] = &["rms_norm", "layer_norm", "add_rms_norm"];

/// `tensor[indices]` as f32.
fn load_f32(tensor: &Tensor, indices: &[Expr]) -> Expr {
    tensor.at(indices).cast(DType::F32)
}

/// A mean stage over the normalized dims: `name[kept] = sum_k f(x[kept, k]) / count`.
fn mean_stage(name: &str, norm: &Reduction, f: impl Fn(&[Expr]) -> Expr) -> Tensor {
    te::compute(name, norm.kept_shape(), |i| {
        te::sum(f(&norm.index(i)), norm.vars()) / norm.count(DType::F32)
    })
}

/// RMS or layer normalization over `axes`.
pub(super) fn legalize(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let layer = call.op == "layer_norm";
    let (names, summands): (&[&str], usize) = match call.op {
        "layer_norm" => (&["x", "gamma", "beta"], 1),
        "add_rms_norm" => (&["a", "b", "weight"], 2),
        _ => (&["x", "weight"], 1),
    };
    let (inputs, args) = call.inputs(names)?;
    let x = &inputs[0];
    call.require_dtype(0, x.dtype(), x.dtype().is_float(), "a float")?;
    let (shape, dtype) = call.output_of_rank(x.ndim())?;
    let axes = call.ints_attr("axes")?.unwrap_or_else(|| vec![-1]);
    let norm = Reduction::new(x.shape(), call.axes("axes", &axes, x.ndim())?);
    let normalized = norm.reduced(x.shape());
    let (terms, params) = inputs.split_at(summands);
    for term in &terms[1..] {
        let same = term.ndim() == x.ndim()
            && term
                .shape()
                .iter()
                .zip(x.shape())
                .all(|(a, b)| a.prove_equal(b));
        if !same {
            return Err(call.shape_error(format!("{term:?} must have the shape of {x:?}")));
        }
    }
    // `x` as read: the sum of the terms, in f32.
    let load_x = |i: &[Expr]| {
        terms[1..]
            .iter()
            .fold(load_f32(x, i), |sum, term| sum + load_f32(term, i))
    };
    for (index, scale) in params.iter().enumerate() {
        let index = index + summands;
        let fits = scale.ndim() == normalized.len()
            && scale
                .shape()
                .iter()
                .zip(&normalized)
                .all(|(a, b)| a.prove_equal(b));
        if !fits {
            let detail = format!("argument {index} {scale:?} must match the normalized dims");
            return Err(call.shape_error(detail));
        }
    }
    let eps = call.float_attr("epsilon", 1e-5)?;
    let mean = layer.then(|| mean_stage("x_mean", &norm, load_x));
    let centered = |i: &[Expr]| match &mean {
        Some(mean) => load_x(i) - mean.at(&norm.kept(i)),
        None => load_x(i),
    };
    let square_name = if layer { "x_var" } else { "x_sq_mean" };
    let square_mean = mean_stage(square_name, &norm, |i| {
        let v = centered(i);
        &v * &v
    });
    let out = te::compute("out", shape, |i| {
        let scaled = centered(i) * (square_mean.at(&norm.kept(i)) + eps).rsqrt();
        let at_norm = norm.reduced(i);
        let scaled = scaled * load_f32(&params[0], &at_norm);
        let shifted = if layer {
            scaled + load_f32(&params[1], &at_norm)
        } else {
            scaled
        };
        shifted.cast(dtype)
    });
    Ok(Kernel::new(inputs.clone(), args, out, OpPattern::Reduction))
}
