//! `quantize_scales_q8` and `pack_weight_q8` (see [`crate::op::quantize_scales_q8`]): the
//! group absmax scales and the rounded int8 panels, as plain loop nests (they run once,
//! when weights are transformed).

use super::call::OpCall;
use super::error::LegalizeError;
use super::kernel::{load, Kernel, OpPattern};
use crate::te::{self, Expr, Tensor};
use crate::tir::Q8_GROUP;
use crate::DataType;

/// The ops of this family.
pub(super) const OPS: &[&str] = &["quantize_scales_q8", "pack_weight_q8", "take_q8"];

/// Legalizes either op.
pub(super) fn legalize(call: &OpCall) -> Result<Kernel, LegalizeError> {
    match call.op {
        "quantize_scales_q8" => scales(call),
        "take_q8" => take(call),
        _ => pack(call),
    }
}

/// `weight[row, l]` for panel `p`, lane `j` (row `p*HP + j`), 0 outside the weight (the
/// clamped indices keep the unused read inside it).
fn weight_at(weight: &Tensor, (p, j, l): (&Expr, &Expr, &Expr), block: &Expr) -> Expr {
    let rows = Expr::from(weight.shape()[0].clone());
    let depth = Expr::from(weight.shape()[1].clone());
    let row = p.clone() * block.clone() + j.clone();
    let inside = row.lt(rows.clone()).and(l.lt(depth.clone()));
    let value = load(
        weight,
        &[
            row.minimum(rows - Expr::int(1)),
            l.minimum(depth - Expr::int(1)),
        ],
    );
    te::select(inside, value, Expr::constant(0.0, DataType::F32))
}

/// `out[p, g, j] = max_{k < 32} |weight[p*HP + j, g*32 + k]| / 127`.
fn scales(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let (inputs, args) = call.inputs(&["weight"])?;
    let weight = &inputs[0];
    let (shape, _) = call.output_of_rank(3)?;
    let block = Expr::from(shape[2].clone());
    let k = te::reduce_axis("k", Q8_GROUP.into());
    let out = te::compute("scales", shape, |i| {
        let l = i[1].clone() * Expr::int(Q8_GROUP) + k.var();
        let magnitude = weight_at(weight, (&i[0], &i[2], &l), &block).abs();
        te::max(magnitude, std::slice::from_ref(&k)) * Expr::f32(1.0 / 127.0)
    });
    Ok(Kernel::new(inputs, args, out, OpPattern::Reduction))
}

/// `out[p, l, j] = floor(weight[p*HP + j, l] / scales[p, l/32, j] + 0.5)`, 0 where the
/// scale is 0.
fn pack(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let (inputs, args) = call.inputs(&["weight", "scales"])?;
    let (weight, scales) = (&inputs[0], &inputs[1]);
    let (shape, dtype) = call.output_of_rank(3)?;
    let block = Expr::from(shape[2].clone());
    let out = te::compute("packed", shape, |i| {
        let (p, l, j) = (&i[0], &i[1], &i[2]);
        let scale = load(
            scales,
            &[p.clone(), l.floordiv(Expr::int(Q8_GROUP)), j.clone()],
        );
        let zero = Expr::constant(0.0, DataType::F32);
        let safe = te::select(scale.gt(zero.clone()), scale.clone(), Expr::f32(1.0));
        let ratio = weight_at(weight, (p, j, l), &block) / safe;
        let rounded = (ratio + Expr::f32(0.5)).floor().clamp(-127.0, 127.0);
        te::select(scale.gt(zero.clone()), rounded, zero).cast(dtype)
    });
    Ok(Kernel::new(inputs, args, out, OpPattern::Injective))
}

/// `out[i..., h] = packed[id, h, 0] * scales[id, h / 32, 0]` with `id = ids[i...]`
/// clamped into the table (as `take` clamps).
fn take(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let (inputs, args) = call.inputs(&["packed", "scales", "ids"])?;
    let (packed, scales, ids) = (&inputs[0], &inputs[1], &inputs[2]);
    let (shape, dtype) = call.output_of_rank(ids.ndim() + 1)?;
    let last = Expr::from(&packed.shape()[0] - 1);
    let out = te::compute("rows", shape, |i| {
        let (h, at) = i.split_last().expect("the output has the width dim");
        let row = ids.at(at).cast(DataType::I64).clamp(0, last.clone());
        let zero = Expr::int(0);
        let value = load(packed, &[row.clone(), h.clone(), zero.clone()]).cast(dtype);
        let group = h.floordiv(Expr::int(Q8_GROUP));
        value * load(scales, &[row, group, zero])
    });
    Ok(Kernel::new(inputs, args, out, OpPattern::Injective))
}
