//! The causal attention mask.

use super::NnError;
use crate::{op, BlockBuilder, DType, Expr, SymExpr};

/// Emits a `[len, len]` additive causal mask: `0` on and below the diagonal, `-inf` above
/// it (`triu(full(-inf), k=1)`), to be added to attention scores before the softmax.
pub fn causal_mask(bb: &mut BlockBuilder, len: &SymExpr, dtype: DType) -> Result<Expr, NnError> {
    let err = NnError::op("causal_mask");
    let full = op::full(vec![len.clone(), len.clone()], f64::NEG_INFINITY, dtype).map_err(err)?;
    let mask = op::triu(&full, 1).map_err(err)?;
    Ok(bb.emit_named(mask, "causal_mask")?.into())
}
