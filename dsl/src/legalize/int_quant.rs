//! The dynamic int8 activation ops (see [`crate::op::activation_scales`]) as plain loop
//! nests: the matmul is the reference the int8 microkernels are scheduled onto. Also
//! `quantize_kv`, the codes of an int8 KV cache.

use super::call::OpCall;
use super::error::LegalizeError;
use super::kernel::{load, Kernel, OpPattern};
use super::quantize::code;
use crate::te::{self, Expr};
use crate::tir::QUANT_GROUP;
use crate::DType;

/// The ops of this family.
pub(super) const OPS: &[&str] = &[
    "activation_scales",
    "activation_group_scales",
    "quantize_activations",
    "quantize_kv",
    "packed_matmul_int",
];

/// The offset that makes an int8 code (`-127..=127`) an unsigned byte.
const CODE_OFFSET: f64 = 128.0;

/// Legalizes any op of the family.
pub(super) fn legalize(call: &OpCall) -> Result<Kernel, LegalizeError> {
    match call.op {
        "activation_scales" => scales(call),
        "activation_group_scales" => group_scales(call),
        "quantize_activations" => quantize(call),
        "quantize_kv" => quantize_kv(call),
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

/// `out[r, g] = max_{g*32 <= l < min((g+1)*32, L)} |x[r, l]| / 127`.
fn group_scales(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let (inputs, args) = call.inputs(&["x"])?;
    let x = &inputs[0];
    let (shape, _) = call.output_of_rank(x.ndim())?;
    let depth = Expr::from(x.shape()[x.ndim() - 1].clone());
    let k = te::reduce_axis("k", QUANT_GROUP.into());
    let out = te::compute("scales", shape, |i| {
        let (g, row) = i.split_last().expect("rows of groups");
        let l = g.clone() * Expr::int(QUANT_GROUP) + k.var();
        let mut at = row.to_vec();
        at.push(l.minimum(depth.clone() - Expr::int(1)));
        let value = te::select(l.lt(depth.clone()), load(x, &at).abs(), Expr::f32(0.0));
        te::max(value, std::slice::from_ref(&k)) * Expr::f32(1.0 / 127.0)
    });
    Ok(Kernel::new(inputs, args, out, OpPattern::Reduction))
}

/// `out[r, l] = clamp(floor(x[r, l] / scale[r, l / 32] + 0.5), -127, 127) + 128` for `l < L`
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
        let mut group = row.to_vec();
        group.push(l.floordiv(Expr::int(QUANT_GROUP)));
        let scale = load(scales, &group);
        let q = if padded {
            let mut at = row.to_vec();
            at.push(l.minimum(depth.clone() - Expr::int(1)));
            let q = code_of(load(x, &at), scale);
            te::select(l.lt(depth.clone()), q, Expr::f32(0.0))
        } else {
            code_of(load(x, i), scale)
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
    let divisor = te::select(zero, Expr::inf(DType::F32), scale);
    (x / divisor + Expr::f32(0.5)).floor().clamp(-127.0, 127.0)
}

/// `out[r, h] = sum_l x_scales[r, l / 32] * scale(h, l) * (xq[r, l] - 128) * w(h, l)`:
/// the dequantized product.
fn matmul(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let names = ["xq", "x_scales", "packed", "scales"];
    let (inputs, args) = call.inputs(&names)?;
    let [xq, x_scales, packed, scales] = [0, 1, 2, 3].map(|i| &inputs[i]);
    let (shape, _) = call.output_of_rank(xq.ndim())?;
    let block = Expr::from(packed.shape()[2].clone());
    let l = te::reduce_axis("l", xq.shape()[xq.ndim() - 1].clone());
    let out = te::compute("out", shape, |i| {
        let (h, row) = i.split_last().expect("the output has the features dim");
        let (panel, lane) = (h.floordiv(block.clone()), h.floormod(block.clone()));
        let mut at = row.to_vec();
        at.push(l.var());
        let x = load(xq, &at).cast(DType::F32) - Expr::f32(CODE_OFFSET);
        let group = l.var().floordiv(Expr::int(QUANT_GROUP));
        let scale = load(scales, &[panel.clone(), group.clone(), lane.clone()]);
        let mut x_group = row.to_vec();
        x_group.push(group);
        let w = code(packed, (&panel, &lane), &l.var());
        let term = load(x_scales, &x_group) * scale * x * w;
        te::sum(term, std::slice::from_ref(&l))
    });
    Ok(Kernel::new(inputs, args, out, OpPattern::OutEwiseFusible))
}
