//! The SwiGLU MLP: `down(silu(gate(x)) * up(x))`, Hugging Face names
//! (`mlp.{gate,up,down}_proj`).

use super::emit;
use crate::config::ModelConfig;
use oxrelax_dsl::nn::{Linear, Module, NnError, Param, Prefix};
use oxrelax_dsl::{op, BlockBuilder, DataType, Expr};

/// A gated MLP with a SiLU gate.
#[derive(Clone, Debug, PartialEq)]
pub struct SwiGluMlp {
    prefix: Prefix,
    gate_proj: Linear,
    up_proj: Linear,
    down_proj: Linear,
}

impl SwiGluMlp {
    /// The MLP at `prefix` (`model.layers.0.mlp`); `bias` on all three projections,
    /// their weights stored as `weights`.
    pub fn new(prefix: &Prefix, config: &ModelConfig, (bias, weights): (bool, DataType)) -> Self {
        let (hidden, inner) = (config.hidden_size, config.intermediate_size);
        let linear = |name: &str, inp: i64, out: i64| {
            Linear::new(&prefix.child(name), inp, out, bias, DataType::F32).stored_as(weights)
        };
        SwiGluMlp {
            prefix: prefix.clone(),
            gate_proj: linear("gate_proj", hidden, inner),
            up_proj: linear("up_proj", hidden, inner),
            down_proj: linear("down_proj", inner, hidden),
        }
    }

    /// Emits the MLP of `x` (`[..., hidden]`).
    pub fn forward(&self, bb: &mut BlockBuilder, x: &Expr) -> Result<Expr, NnError> {
        let name = self.prefix.as_str();
        let gate = self.gate_proj.forward(bb, x)?;
        let gate = emit(bb, name, op::silu(&gate))?;
        let up = self.up_proj.forward(bb, x)?;
        let hidden = emit(bb, name, op::multiply(&gate, &up))?;
        self.down_proj.forward(bb, &hidden)
    }
}

impl Module for SwiGluMlp {
    fn parameters(&self) -> Vec<Param> {
        [&self.gate_proj, &self.up_proj, &self.down_proj]
            .into_iter()
            .flat_map(Module::parameters)
            .collect()
    }
}
