//! `Embedding`: a lookup of rows of a `[vocab, dim]` table.

use super::{Module, NnError, Param, Prefix};
use crate::{op, BlockBuilder, DataType, Expr};

/// A token embedding table. Parameter: `weight` `[num_embeddings, dim]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Embedding {
    prefix: Prefix,
    /// The table, `[num_embeddings, dim]`.
    pub weight: Param,
}

impl Embedding {
    /// A table at `prefix` of `num_embeddings` rows of `dim` values.
    pub fn new(prefix: &Prefix, num_embeddings: i64, dim: i64, dtype: DataType) -> Self {
        Embedding {
            prefix: prefix.clone(),
            weight: Param::new(prefix, "weight", &[num_embeddings, dim], dtype),
        }
    }

    /// Emits `take(weight, ids, axis=0)`: ids `[...]` (i32 or i64) give `[..., dim]`.
    pub fn forward(&self, bb: &mut BlockBuilder, ids: &Expr) -> Result<Expr, NnError> {
        let rows =
            op::take(&self.weight.expr(), ids, 0).map_err(NnError::op(self.prefix.as_str()))?;
        Ok(bb.emit_named(rows, self.prefix.last())?.into())
    }
}

impl Module for Embedding {
    fn parameters(&self) -> Vec<Param> {
        vec![self.weight.clone()]
    }
}
