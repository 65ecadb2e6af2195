//! `Linear`: `y = x W^T + b` with the weight stored `[out, in]` as Hugging Face does.

use super::{Module, NnError, Param, Prefix};
use crate::{op, BlockBuilder, DType, Expr};

/// A fully connected layer. Parameters: `weight` `[out_features, in_features]` and,
/// optionally, `bias` `[out_features]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Linear {
    prefix: Prefix,
    /// The weight, `[out_features, in_features]`.
    pub weight: Param,
    /// The bias, `[out_features]`, if the layer has one.
    pub bias: Option<Param>,
}

impl Linear {
    /// A layer at `prefix` mapping `in_features` to `out_features`, its parameters and
    /// output of `dtype`.
    pub fn new(
        prefix: &Prefix,
        in_features: i64,
        out_features: i64,
        bias: bool,
        dtype: DType,
    ) -> Self {
        Linear {
            prefix: prefix.clone(),
            weight: Param::new(prefix, "weight", &[out_features, in_features], dtype),
            bias: bias.then(|| Param::new(prefix, "bias", &[out_features], dtype)),
        }
    }

    /// The layer with its weight stored as `weights` (e.g. f16 weights for f32
    /// activations: the matmul widens them as it reads them, its output and the bias keep
    /// the layer's dtype).
    pub fn stored_as(mut self, weights: DType) -> Self {
        self.weight = self.weight.with_dtype(weights);
        self
    }

    /// Emits `matmul(x, permute_dims(weight))` (plus the bias); `x` is `[..., in]`.
    pub fn forward(&self, bb: &mut BlockBuilder, x: &Expr) -> Result<Expr, NnError> {
        let err = NnError::op(self.prefix.as_str());
        let weight_t = op::permute_dims(&self.weight.expr(), None).map_err(err)?;
        let mut y = op::matmul(x, &weight_t).map_err(err)?;
        if let Some(bias) = &self.bias {
            y = op::add(&y, &bias.expr()).map_err(err)?;
        }
        Ok(bb.emit_named(y, self.prefix.last())?.into())
    }
}

impl Module for Linear {
    fn parameters(&self) -> Vec<Param> {
        std::iter::once(self.weight.clone())
            .chain(self.bias.clone())
            .collect()
    }
}
