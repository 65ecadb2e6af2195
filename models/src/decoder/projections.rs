//! Linear projections of one input into several parts: one Hugging Face `Linear` per
//! part (Llama's `q_proj`, `k_proj`, `v_proj`), or one over all of them whose output is
//! sliced into the parts (Phi-3's `qkv_proj`, `gate_up_proj`). The compiler's
//! `rewrite-split` phase turns the fused form into the separate one, with the weight
//! slices cut at compile time.

use oxrelax_dsl::nn::{Linear, Module, NnError, Param, Prefix};
use oxrelax_dsl::{op, BlockBuilder, DType, Expr, SymExpr};

/// Projections of one input into parts.
#[derive(Clone, Debug, PartialEq)]
pub enum Projections {
    /// One linear layer per part.
    Separate(Vec<Linear>),
    /// One linear layer whose output holds the parts one after another.
    Fused {
        /// The fused layer.
        linear: Linear,
        /// Its module name (`model.layers.0.self_attn.qkv_proj`).
        name: String,
        /// The name and width of each part, in order.
        parts: Vec<(String, i64)>,
    },
}

impl Projections {
    /// Projections at `prefix` of `input` features into parts `names` of `widths`, one
    /// weight per part, or one named `fused` for all; stored as `weights`, with a bias
    /// when `bias`.
    pub fn new(
        prefix: &Prefix,
        (names, fused): (&[&str], Option<&str>),
        (input, widths): (i64, &[i64]),
        (bias, weights): (bool, DType),
    ) -> Self {
        let linear = |name: &str, out: i64| {
            Linear::new(&prefix.child(name), input, out, bias, DType::F32).stored_as(weights)
        };
        let parts = names.iter().zip(widths);
        match fused {
            None => Projections::Separate(parts.map(|(name, &w)| linear(name, w)).collect()),
            Some(fused) => Projections::Fused {
                linear: linear(fused, widths.iter().sum()),
                name: prefix.child(fused).as_str().to_string(),
                parts: parts.map(|(name, &w)| (name.to_string(), w)).collect(),
            },
        }
    }

    /// Starts projecting `x` (`[..., input]`): emits the fused projection (the separate
    /// ones are emitted part by part, by [`Projections::part`]).
    pub fn start(&self, bb: &mut BlockBuilder, x: &Expr) -> Result<Started, NnError> {
        Ok(Started(match self {
            Projections::Separate(_) => x.clone(),
            Projections::Fused { linear, .. } => linear.forward(bb, x)?,
        }))
    }

    /// Part `index` of the projection `started`: its own projection, or its slice of the
    /// fused output.
    pub fn part(
        &self,
        bb: &mut BlockBuilder,
        started: &Started,
        index: usize,
    ) -> Result<Expr, NnError> {
        let (name, parts) = match self {
            Projections::Separate(parts) => return parts[index].forward(bb, &started.0),
            Projections::Fused { name, parts, .. } => (name, parts),
        };
        let begin: i64 = parts[..index].iter().map(|(_, width)| width).sum();
        let (part, width) = &parts[index];
        let (begin, end) = (SymExpr::int(begin), SymExpr::int(begin + width));
        let slice = op::strided_slice(&started.0, vec![-1], vec![begin], vec![end], None)
            .map_err(NnError::op(name))?;
        Ok(bb.emit_named(slice, part)?.into())
    }
}

/// A projection started: what its parts are computed from (the input of separate
/// projections, the output of a fused one).
#[derive(Clone, Debug)]
pub struct Started(Expr);

impl Module for Projections {
    fn parameters(&self) -> Vec<Param> {
        match self {
            Projections::Separate(parts) => parts.iter().flat_map(Module::parameters).collect(),
            Projections::Fused { linear, .. } => linear.parameters(),
        }
    }
}
