//! The dynamic int8 activation ops (see [`crate::op::activation_scales`]) as plain loop
//! nests: the matmul is the reference the int8 microkernels are scheduled onto. Also
//! `quantize_kv`, the codes of an int8 KV cache.

use super::call::OpCall;
use super::error::LegalizeError;
use super::kernel::{load, Kernel, OpPattern};
use super::quantize::code;
use crate::te::{self, Expr};
use crate::tir::QUANT_GROUP;
use crate::DataType;

/// The ops of this family.
pub(super) const OPS: &[&str] = &[
    "activation_scales",
    "quantize_activations",
    "quantize_kv",
    "weight_correction",
    "packed_matmul_int",
];

/// The offset that makes an int8 code (`-127..=127`) an unsigned byte.
const CODE_OFFSET: f64 = 128.0;

/// Legalizes any op of the family.
pub(super) fn legalize(call: &OpCall) -> Result<Kernel, LegalizeError> {
    match call.op {
        "activation_scales" => scales(call),
        "quantize_activations" => quantize(call),
        "quantize_kv" => quantize_kv(call),
        "weight_correction" => correction(call),
        _ => matmul(call),
    }
}

/// `out[r] = max_l |x[r, l]| / 127`.
fn scales(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let (inputs, args) = call.inputs(&["x"])?;
    let x = &inputs[0];
    let (shape, _) = call.output_of_rank(x.ndim() - 1)?;
    let depth = x.shape()[x.ndim() - 1].clone();
    let l = te::reduce_axis("l", depth);
    let out = te::compute("scales", shape, |i| {
        let mut at = i.to_vec();
        at.push(l.var());
        let peak = te::max(load(x, &at).abs(), std::slice::from_ref(&l));
        peak * Expr::f32(1.0 / 127.0)
    });
    Ok(Kernel::new(inputs, args, out, OpPattern::Reduction))
}

/// `out[r, l] = clamp(floor(x[r, l] / scale[r] + 0.5), -127, 127) + 128` for `l < L`
/// (an infinite divisor for a zero scale), 128 past it (only a row padded to whole
/// groups has a past: the kernel of an unpadded row reads and writes contiguously).
fn quantize(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let (inputs, args) = call.inputs(&["x", "scales"])?;
    let (x, scales) = (&inputs[0], &inputs[1]);
    let (shape, dtype) = call.output_of_rank(x.ndim())?;
    let x_depth = x.shape()[x.ndim() - 1].clone();
    let padded = shape.last() != Some(&x_depth);
    let depth = Expr::from(x_depth);
    let out = te::compute("codes", shape, |i| {
        let (l, row) = i.split_last().expect("rows of codes");
        let q = if padded {
            let mut at = row.to_vec();
            at.push(l.minimum(depth.clone() - Expr::int(1)));
            let q = code_of(load(x, &at), load(scales, row));
            te::select(l.lt(depth.clone()), q, Expr::f32(0.0))
        } else {
            code_of(load(x, i), load(scales, row))
        };
        (q + Expr::f32(CODE_OFFSET)).cast(dtype)
    });
    Ok(Kernel::new(inputs, args, out, OpPattern::Injective))
}

/// `out[r, l] = clamp(floor(x[r, l] / scale[r] + 0.5), -127, 127)` as i8 (0 for a zero
/// scale).
fn quantize_kv(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let (inputs, args) = call.inputs(&["x", "scales"])?;
    let (x, scales) = (&inputs[0], &inputs[1]);
    let (shape, dtype) = call.output_of_rank(x.ndim())?;
    let out = te::compute("codes", shape, |i| {
        let row = &i[..i.len() - 1];
        code_of(load(x, i), load(scales, row)).cast(dtype)
    });
    Ok(Kernel::new(inputs, args, out, OpPattern::Injective))
}

/// The symmetric int8 code of `x` at `scale`, as an f32:
/// `clamp(floor(x / scale + 0.5), -127, 127)`, 0 for a zero scale (an infinite divisor).
fn code_of(x: Expr, scale: Expr) -> Expr {
    let zero = scale.equal(Expr::f32(0.0));
    let divisor = te::select(zero, Expr::inf(DataType::F32), scale);
    (x / divisor + Expr::f32(0.5)).floor().clamp(-127.0, 127.0)
}

/// `out[p, j] = 128 * sum_l scale(p, l, j) * w(p, j, l)` over the padded reduction.
fn correction(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let (inputs, args) = call.inputs(&["packed", "scales"])?;
    let (packed, scales) = (&inputs[0], &inputs[1]);
    let (shape, _) = call.output_of_rank(2)?;
    let groups = scales.shape()[1].clone();
    let depth = groups * crate::SymExpr::int(QUANT_GROUP);
    let l = te::reduce_axis("l", depth);
    let out = te::compute("correction", shape, |i| {
        let (p, j) = (&i[0], &i[1]);
        let group = l.var().floordiv(Expr::int(QUANT_GROUP));
        let scale = load(scales, &[p.clone(), group, j.clone()]);
        let term = scale * code(packed, (p, j), &l.var());
        te::sum(term, std::slice::from_ref(&l)) * Expr::f32(CODE_OFFSET)
    });
    Ok(Kernel::new(inputs, args, out, OpPattern::Reduction))
}

/// `out[r, h] = x_scales[r] * (sum_l scale(h, l) * xq[r, l] * w(h, l) - correction[h])`:
/// with the correction of the panels, the dequantized product
/// `x_scales * sum_l scale * (xq - 128) * w`.
fn matmul(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let names = ["xq", "x_scales", "packed", "scales", "correction"];
    let (inputs, args) = call.inputs(&names)?;
    let [xq, x_scales, packed, scales, correction] = [0, 1, 2, 3, 4].map(|i| &inputs[i]);
    let (shape, _) = call.output_of_rank(xq.ndim())?;
    let block = Expr::from(packed.shape()[2].clone());
    let l = te::reduce_axis("l", xq.shape()[xq.ndim() - 1].clone());
    let out = te::compute("out", shape, |i| {
        let (h, row) = i.split_last().expect("the output has the features dim");
        let (panel, lane) = (h.floordiv(block.clone()), h.floormod(block.clone()));
        let mut at = row.to_vec();
        at.push(l.var());
        let x = load(xq, &at).cast(DataType::F32);
        let group = l.var().floordiv(Expr::int(QUANT_GROUP));
        let scale = load(scales, &[panel.clone(), group, lane.clone()]);
        let w = code(packed, (&panel, &lane), &l.var());
        let dot = te::sum(scale * x * w, std::slice::from_ref(&l));
        (dot - load(correction, &[panel, lane])) * load(x_scales, row)
    });
    Ok(Kernel::new(inputs, args, out, OpPattern::OutEwiseFusible))
}
