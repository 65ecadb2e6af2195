//! `pack_weight` and `packed_matmul` (see [`crate::op::pack_weight`]): the weight packed
//! into zero-padded column panels, and the matmul reading them. Legalization keeps the
//! plain loop nest; the matmul schedule rules tensorize `packed_matmul` onto a
//! microkernel.

use super::call::OpCall;
use super::error::LegalizeError;
use super::kernel::{load, Kernel, OpPattern};
use crate::te::{self, Expr, Tensor};

/// The ops of this family.
pub(super) const OPS: &[&str] = &["pack_weight", "packed_matmul"];

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

/// `out[..., h] = sum_l x[..., l] * packed[h / HP, l, h % HP]`.
fn packed_matmul(call: &OpCall) -> Result<Kernel, LegalizeError> {
    matmul_kernel(call, &["x", "packed"], |inputs, (h, l)| {
        let block = Expr::from(inputs[1].shape()[2].clone());
        let (panel, lane) = (h.floordiv(block.clone()), h.floormod(block));
        load(&inputs[1], &[panel, l.clone(), lane])
    })
}

/// `out[..., h] = sum_l x[..., l] * weight(inputs, (h, l))` for a matmul op whose inputs
/// are `names`, `x` first.
pub(super) fn matmul_kernel(
    call: &OpCall,
    names: &[&str],
    weight: impl Fn(&[Tensor], (&Expr, &Expr)) -> Expr,
) -> Result<Kernel, LegalizeError> {
    let (inputs, args) = call.inputs(names)?;
    let x = &inputs[0];
    let (shape, dtype) = call.output_of_rank(x.ndim())?;
    let depth = x.shape()[x.ndim() - 1].clone();
    let l = te::reduce_axis("l", depth);
    let out = te::compute("out", shape, |i| {
        let (h, batch) = i.split_last().expect("the output has the features dim");
        let mut x_index = batch.to_vec();
        x_index.push(l.var());
        let product = load(x, &x_index) * weight(&inputs, (h, &l.var())).cast(dtype);
        te::sum(product, std::slice::from_ref(&l)).cast(dtype)
    });
    Ok(Kernel::new(inputs, args, out, OpPattern::OutEwiseFusible))
}
