//! Activation functions (no parameters).

use super::NnError;
use crate::ir::Constant;
use crate::{op, BlockBuilder, Expr};

/// An elementwise activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// `x * sigmoid(x)` (SwiGLU's gate in Llama/Qwen).
    Silu,
    /// The exact (erf) GELU.
    Gelu,
    /// The tanh approximation of GELU (`gelu_pytorch_tanh`).
    GeluTanh,
    /// `max(x, 0)`.
    Relu,
}

impl Activation {
    /// The Hugging Face `hidden_act` name.
    pub fn name(self) -> &'static str {
        match self {
            Activation::Silu => "silu",
            Activation::Gelu => "gelu",
            Activation::GeluTanh => "gelu_pytorch_tanh",
            Activation::Relu => "relu",
        }
    }

    /// The activation with Hugging Face `hidden_act` name `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::Silu, Self::Gelu, Self::GeluTanh, Self::Relu]
            .into_iter()
            .find(|a| a.name() == name)
    }

    /// The activation's call on `x`, not yet emitted.
    pub fn call(self, x: &Expr) -> Result<Expr, NnError> {
        let err = NnError::op(self.name());
        match self {
            Activation::Silu => op::silu(x),
            Activation::Gelu => op::gelu(x, false),
            Activation::GeluTanh => op::gelu(x, true),
            Activation::Relu => op::maximum(x, &zero_like(self, x)?),
        }
        .map_err(err)
    }

    /// Emits the activation of `x`.
    pub fn forward(self, bb: &mut BlockBuilder, x: &Expr) -> Result<Expr, NnError> {
        let y = self.call(x)?;
        let hint = match self {
            Activation::GeluTanh => "gelu",
            other => other.name(),
        };
        Ok(bb.emit_named(y, hint)?.into())
    }
}

/// A scalar (rank-0) zero of `x`'s dtype.
fn zero_like(activation: Activation, x: &Expr) -> Result<Expr, NnError> {
    let sinfo = x.sinfo();
    let tensor = sinfo.as_tensor().ok_or_else(|| NnError::BadInput {
        module: activation.name().to_string(),
        expected: "a tensor".to_string(),
        got: Box::new(sinfo.clone()),
    })?;
    Ok(Expr::Constant(Constant {
        dtype: tensor.dtype,
        shape: vec![],
        values: vec![0.0],
    }))
}
