//! `matmul`: `out[..., m, n] = sum_k a[..., m, k] * b[..., k, n]` with numpy batch
//! broadcasting and rank-1 operands (a vector `a` drops `m`, a vector `b` drops `n`).
//! 16-bit floats accumulate in f32.

use super::call::OpCall;
use super::error::LegalizeError;
use super::kernel::{broadcast_indices, load, Kernel, OpPattern};
use crate::te;

/// The ops of this family.
pub(super) const OPS: &[&str] = &["matmul"];

/// The batched matrix product.
pub(super) fn legalize(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let (inputs, args) = call.inputs(&["a", "b"])?;
    let (a, b) = (&inputs[0], &inputs[1]);
    let (rank_a, rank_b) = (a.ndim(), b.ndim());
    if rank_a == 0 || rank_b == 0 {
        return Err(call.shape_error(format!("operands must not be scalars: {a:?}, {b:?}")));
    }
    let k_a = &a.shape()[rank_a - 1];
    let k_b = &b.shape()[rank_b.saturating_sub(2)];
    if !k_a.prove_equal(k_b) {
        return Err(call.shape_error(format!("reduction dims differ: {a:?} and {b:?}")));
    }
    let (matrix_a, matrix_b) = (rank_a >= 2, rank_b >= 2);
    let batch_rank = rank_a.max(rank_b).saturating_sub(2);
    let rank = batch_rank + usize::from(matrix_a) + usize::from(matrix_b);
    let (shape, dtype) = call.output_of_rank(rank)?;
    let k = te::reduce_axis("k", k_a.clone());
    let out = te::compute("out", shape, |i| {
        let (batch, rest) = i.split_at(batch_rank);
        let mut index_a = Vec::new();
        let mut index_b = Vec::new();
        if matrix_a {
            index_a = broadcast_indices(&a.shape()[..rank_a - 2], batch);
            index_a.push(rest[0].clone());
        }
        index_a.push(k.var());
        if matrix_b {
            index_b = broadcast_indices(&b.shape()[..rank_b - 2], batch);
        }
        index_b.push(k.var());
        if let (true, Some(n)) = (matrix_b, rest.last()) {
            index_b.push(n.clone());
        }
        te::sum(
            load(a, &index_a) * load(b, &index_b),
            std::slice::from_ref(&k),
        )
        .cast(dtype)
    });
    Ok(Kernel::new(inputs, args, out, OpPattern::OutEwiseFusible))
}
