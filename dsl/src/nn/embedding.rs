//! `Embedding`: a lookup of rows of a `[vocab, dim]` table.

use super::{Module, NnError, Param, Prefix};
use crate::{op, BlockBuilder, DType, Expr};

/// A token embedding table. Parameter: `weight` `[num_embeddings, dim]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Embedding {
    prefix: Prefix,
    /// The dtype of the rows it emits.
    dtype: DType,
    /// The table, `[num_embeddings, dim]`.
    pub weight: Param,
}

impl Embedding {
    /// A table at `prefix` of `num_embeddings` rows of `dim` values of `dtype`.
    pub fn new(prefix: &Prefix, num_embeddings: i64, dim: i64, dtype: DType) -> Self {
        Embedding {
            prefix: prefix.clone(),
            dtype,
            weight: Param::new(prefix, "weight", &[num_embeddings, dim], dtype),
        }
    }

    /// The table stored as `table` (e.g. f16 for f32 rows: the looked-up rows are
    /// widened to the embedding's dtype).
    pub fn stored_as(mut self, table: DType) -> Self {
        self.weight = self.weight.with_dtype(table);
        self
    }

    /// Emits `take(weight, ids, axis=0)` (then `astype` to the embedding's dtype when the
    /// table is stored in another): ids `[...]` (i32 or i64) give `[..., dim]`.
    pub fn forward(&self, bb: &mut BlockBuilder, ids: &Expr) -> Result<Expr, NnError> {
        let err = NnError::op(self.prefix.as_str());
        let mut rows = op::take(&self.weight.expr(), ids, 0).map_err(err)?;
        if self.weight.dtype() != Some(self.dtype) {
            let taken = bb.emit_named(rows, self.prefix.last())?.into();
            rows = op::astype(&taken, self.dtype).map_err(err)?;
        }
        Ok(bb.emit_named(rows, self.prefix.last())?.into())
    }
}

impl Module for Embedding {
    fn parameters(&self) -> Vec<Param> {
        vec![self.weight.clone()]
    }
}
