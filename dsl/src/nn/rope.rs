//! Rotary position embedding (RoPE), Hugging Face convention.

use super::{Module, NnError, Param};
use crate::te::{self, Tensor};
use crate::{BlockBuilder, DataType, Expr, StructInfo, SymExpr};

/// Rotary position embedding over `[batch, seq, heads, head_dim]`, as Hugging Face
/// applies it: with `half = head_dim / 2`, `inv_freq[j] = theta^(-2j / head_dim)`, token
/// `s` at position `offset + s` has angle `pos * inv_freq[i mod half]` at lane `i`, and
/// `out = x * cos + rotate_half(x) * sin` where `rotate_half` swaps the halves and
/// negates the new first half. Cos and sin are computed inline from the position (no
/// tables); the offset (tokens already in the KV cache, e.g. `m`) may be symbolic.
#[derive(Clone, Debug, PartialEq)]
pub struct RotaryEmbedding {
    head_dim: i64,
    theta: f64,
}

impl RotaryEmbedding {
    /// RoPE over heads of `head_dim` (even, positive) lanes with base `theta`
    /// (`rope_theta`, e.g. 10000).
    pub fn new(head_dim: i64, theta: f64) -> Result<Self, NnError> {
        if head_dim <= 0 || head_dim % 2 != 0 || theta.is_nan() || theta <= 1.0 {
            return Err(NnError::Config {
                module: "rotary_embedding".to_string(),
                reason: format!(
                    "head_dim must be even and positive and theta above 1, got head_dim \
                     {head_dim} and theta {theta}"
                ),
            });
        }
        Ok(RotaryEmbedding { head_dim, theta })
    }

    /// The lanes per head.
    pub fn head_dim(&self) -> i64 {
        self.head_dim
    }

    /// Emits the rotation of `x` (`[batch, seq, heads, head_dim]`, float) whose token
    /// `s` is at position `offset + s`; every dim of `offset` must be bound in the
    /// function.
    pub fn forward(
        &self,
        bb: &mut BlockBuilder,
        x: &Expr,
        offset: &SymExpr,
    ) -> Result<Expr, NnError> {
        self.check_input(&x.sinfo())?;
        let extra_dims: Vec<_> = offset.vars().into_iter().collect();
        let var = bb.emit_te_with_dims("rotary", std::slice::from_ref(x), &extra_dims, |t| {
            self.compute(&t[0], offset)
        })?;
        Ok(var.into())
    }

    fn check_input(&self, sinfo: &StructInfo) -> Result<(), NnError> {
        let fits = sinfo.as_tensor().is_some_and(|t| {
            t.dtype.is_float()
                && t.dims()
                    .is_some_and(|d| d.len() == 4 && d[3].prove_equal(&SymExpr::int(self.head_dim)))
        });
        if fits {
            return Ok(());
        }
        Err(NnError::BadInput {
            module: "rotary_embedding".to_string(),
            expected: format!("a float tensor [batch, seq, heads, {}]", self.head_dim),
            got: Box::new(sinfo.clone()),
        })
    }

    /// The TE computation: `out[b, s, h, i] = x * cos(angle) + rotate_half(x) * sin(angle)`,
    /// in f32, converted back to `x`'s dtype.
    fn compute(&self, x: &Tensor, offset: &SymExpr) -> Tensor {
        let (d, half) = (self.head_dim, self.head_dim / 2);
        let freq_scale = -2.0 * self.theta.ln() / d as f64;
        let dtype = x.dtype();
        te::compute("rotary", x.shape().to_vec(), |idx| {
            let (b, s, h, i) = (&idx[0], &idx[1], &idx[2], &idx[3]);
            let position = (te::Expr::from(offset) + s).cast(DataType::F32);
            let inv_freq = (i.floormod(half).cast(DataType::F32) * freq_scale).exp();
            let angle = position * inv_freq;
            let partner = x.at(&[b.clone(), s.clone(), h.clone(), (i + half).floormod(d)]);
            let partner = partner.cast(DataType::F32);
            let rotated = te::select(i.lt(half), -&partner, partner);
            let value = x.at(idx).cast(DataType::F32);
            (value * angle.cos() + rotated * angle.sin()).cast(dtype)
        })
    }
}

impl Module for RotaryEmbedding {
    fn parameters(&self) -> Vec<Param> {
        Vec::new()
    }
}
