//! Normalization layers over the last axis: `RMSNorm` and `LayerNorm`.

use super::{Module, NnError, Param, Prefix};
use crate::{op, BlockBuilder, DType, Expr};

/// Root-mean-square normalization with a learned scale. Parameter: `weight` `[dim]`.
#[derive(Clone, Debug, PartialEq)]
pub struct RMSNorm {
    prefix: Prefix,
    /// The scale, `[dim]` (with `unit_offset`, the scale's offset from 1).
    pub weight: Param,
    /// Added to the mean square before the square root.
    pub epsilon: f64,
    /// Whether the scale is `1 + weight` (Gemma's norms) rather than `weight`.
    pub unit_offset: bool,
}

impl RMSNorm {
    /// A norm at `prefix` over a last axis of `dim` values.
    pub fn new(prefix: &Prefix, dim: i64, epsilon: f64, dtype: DType) -> Self {
        RMSNorm {
            prefix: prefix.clone(),
            weight: Param::new(prefix, "weight", &[dim], dtype),
            epsilon,
            unit_offset: false,
        }
    }

    /// The norm scaling by `1 + weight` when `unit_offset` (Gemma's
    /// `x * rsqrt(mean(x^2) + eps) * (1 + w)`). The sum depends on the weight alone, so
    /// the compiler lifts it out of the model's functions into the weight transform.
    pub fn with_unit_offset(self, unit_offset: bool) -> Self {
        RMSNorm {
            unit_offset,
            ..self
        }
    }

    /// Emits `rms_norm(x, weight, axes=[-1])` (of `1 + weight` with a unit offset).
    pub fn forward(&self, bb: &mut BlockBuilder, x: &Expr) -> Result<Expr, NnError> {
        let error = NnError::op(self.prefix.as_str());
        let mut weight = self.weight.expr();
        if self.unit_offset {
            let dtype = self.weight.dtype().unwrap_or(DType::F32);
            let one = op::ones(vec![], dtype).map_err(error)?;
            let one: Expr = bb.emit_named(one, "one")?.into();
            let scale = op::add(&weight, &one).map_err(error)?;
            weight = bb.emit_named(scale, "scale")?.into();
        }
        let y = op::rms_norm(x, &weight, vec![-1], self.epsilon).map_err(error)?;
        Ok(bb.emit_named(y, self.prefix.last())?.into())
    }
}

impl Module for RMSNorm {
    fn parameters(&self) -> Vec<Param> {
        vec![self.weight.clone()]
    }
}

/// Layer normalization with a learned scale and shift. Parameters: `weight` and `bias`,
/// both `[dim]`.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerNorm {
    prefix: Prefix,
    /// The scale (gamma), `[dim]`.
    pub weight: Param,
    /// The shift (beta), `[dim]`.
    pub bias: Param,
    /// Added to the variance before the square root.
    pub epsilon: f64,
}

impl LayerNorm {
    /// A norm at `prefix` over a last axis of `dim` values.
    pub fn new(prefix: &Prefix, dim: i64, epsilon: f64, dtype: DType) -> Self {
        LayerNorm {
            prefix: prefix.clone(),
            weight: Param::new(prefix, "weight", &[dim], dtype),
            bias: Param::new(prefix, "bias", &[dim], dtype),
            epsilon,
        }
    }

    /// Emits `layer_norm(x, weight, bias, axes=[-1])`.
    pub fn forward(&self, bb: &mut BlockBuilder, x: &Expr) -> Result<Expr, NnError> {
        let y = op::layer_norm(
            x,
            &self.weight.expr(),
            &self.bias.expr(),
            vec![-1],
            self.epsilon,
        )
        .map_err(NnError::op(self.prefix.as_str()))?;
        Ok(bb.emit_named(y, self.prefix.last())?.into())
    }
}

impl Module for LayerNorm {
    fn parameters(&self) -> Vec<Param> {
        vec![self.weight.clone(), self.bias.clone()]
    }
}
