//! `pack_weight` and `packed_matmul` (see [`crate::op::pack_weight`]): the weight packed
//! into zero-padded column panels, and the matmul reading them. Legalization keeps the
//! plain loop nest; the matmul schedule rules tensorize `packed_matmul` onto a
//! microkernel.

use super::call::OpCall;
use super::error::LegalizeError;
use super::kernel::{load, Kernel, OpPattern};
use crate::te::{self, Expr};

/// The ops of this family.
pub(super) const OPS: &[&str] = &["pack_weight", "packed_matmul", "packed_matmul_q8"];

/// Legalizes either op.
pub(super) fn legalize(call: &OpCall) -> Result<Kernel, LegalizeError> {
    match call.op {
        "pack_weight" => pack_weight(call),
        _ => packed_matmul(call),
    }
}

/// `out[p, l, j] = weight[min(p*HP + j, H - 1), l]` where `p*HP + j < H`, else 0 (the
/// clamped index keeps the unused read inside the weight).
fn pack_weight(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let (inputs, args) = call.inputs(&["weight"])?;
    let weight = &inputs[0];
    let rows = Expr::from(weight.shape()[0].clone());
    let (shape, dtype) = call.output_of_rank(3)?;
    let block = Expr::from(shape[2].clone());
    let out = te::compute("packed", shape, |i| {
        let row = i[0].clone() * block.clone() + i[2].clone();
        let clamped = row.minimum(rows.clone() - Expr::int(1));
        let value = weight.at(&[clamped, i[1].clone()]);
        te::select(row.lt(rows.clone()), value, Expr::constant(0.0, dtype))
    });
    Ok(Kernel::new(inputs, args, out, OpPattern::Injective))
}

/// `out[..., h] = sum_l x[..., l] * w(l, h)` with `w(l, h) = packed[h / HP, l, h % HP]`,
/// for `packed_matmul_q8` times `scales[h / HP, l / 32, h % HP]`.
fn packed_matmul(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let names: &[&str] = match call.op {
        "packed_matmul_q8" => &["x", "packed", "scales"],
        _ => &["x", "packed"],
    };
    let (inputs, args) = call.inputs(names)?;
    let (x, packed, scales) = (&inputs[0], &inputs[1], inputs.get(2));
    let (shape, dtype) = call.output_of_rank(x.ndim())?;
    let depth = x.shape()[x.ndim() - 1].clone();
    let block = Expr::from(packed.shape()[2].clone());
    let l = te::reduce_axis("l", depth);
    let out = te::compute("out", shape, |i| {
        let (h, batch) = i.split_last().expect("the output has the features dim");
        let mut x_index = batch.to_vec();
        x_index.push(l.var());
        let (panel, lane) = (h.floordiv(block.clone()), h.floormod(block.clone()));
        let weight = load(packed, &[panel.clone(), l.var(), lane.clone()]);
        let product = match scales {
            Some(scales) => {
                let group = l.var().floordiv(Expr::int(crate::tir::Q8_GROUP));
                let scale = load(scales, &[panel, group, lane]);
                load(x, &x_index) * (weight.cast(dtype) * scale)
            }
            None => load(x, &x_index) * weight,
        };
        te::sum(product, std::slice::from_ref(&l)).cast(dtype)
    });
    Ok(Kernel::new(inputs, args, out, OpPattern::OutEwiseFusible))
}
