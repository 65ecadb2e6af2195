//! The gated MLP: `down(act(gate(x)) * up(x))` (SwiGLU with SiLU, GeGLU with Gemma's
//! tanh GELU), Hugging Face names (`mlp.{gate,up,down}_proj`, Phi-3's fused
//! `mlp.gate_up_proj`).

use super::emit;
use super::projections::Projections;
use crate::config::ModelConfig;
use oxrelax_dsl::nn::{Activation, Linear, Module, NnError, Param, Prefix};
use oxrelax_dsl::{op, BlockBuilder, DType, Expr};

/// A gated MLP whose gate goes through the config's `hidden_activation`.
#[derive(Clone, Debug, PartialEq)]
pub struct GatedMlp {
    prefix: Prefix,
    gate_up: Projections,
    activation: Activation,
    down_proj: Linear,
}

impl GatedMlp {
    /// The MLP at `prefix` (`model.layers.0.mlp`); `bias` on all three projections,
    /// their weights stored as `weights`, the gate and up projections fused into one
    /// (`gate_up_proj`, gate first) when `fused`.
    pub fn new(
        prefix: &Prefix,
        config: &ModelConfig,
        (bias, weights, fused): (bool, DType, bool),
    ) -> Self {
        let (hidden, inner) = (config.hidden_size, config.intermediate_size);
        let names = (
            &["gate_proj", "up_proj"][..],
            fused.then_some("gate_up_proj"),
        );
        let down_proj = Linear::new(&prefix.child("down_proj"), inner, hidden, bias, DType::F32)
            .stored_as(weights);
        GatedMlp {
            prefix: prefix.clone(),
            gate_up: Projections::new(prefix, names, (hidden, &[inner, inner]), (bias, weights)),
            activation: config.hidden_activation,
            down_proj,
        }
    }

    /// Emits the MLP of `x` (`[..., hidden]`).
    pub fn forward(&self, bb: &mut BlockBuilder, x: &Expr) -> Result<Expr, NnError> {
        let name = self.prefix.as_str();
        let gate_up = self.gate_up.start(bb, x)?;
        let gate = self.gate_up.part(bb, &gate_up, 0)?;
        let gate: Expr = bb.emit(self.activation.call(&gate)?)?.into();
        let up = self.gate_up.part(bb, &gate_up, 1)?;
        let hidden = emit(bb, name, op::multiply(&gate, &up))?;
        self.down_proj.forward(bb, &hidden)
    }
}

impl Module for GatedMlp {
    fn parameters(&self) -> Vec<Param> {
        [self.gate_up.parameters(), self.down_proj.parameters()].concat()
    }
}
