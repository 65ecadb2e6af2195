//! Rotary position embedding (RoPE), Hugging Face convention.

use super::{Module, NnError, Param};
use crate::legalize::OpPattern;
use crate::te::{self, Tensor};
use crate::{BlockBuilder, DType, Expr, StructInfo, SymExpr};

/// Rotary position embedding over `[batch, seq, heads, head_dim]`, as Hugging Face
/// applies it: with `half = head_dim / 2`, `inv_freq[j] = theta^(-2j / head_dim)`, token
/// `s` at position `offset + s` has angle `pos * inv_freq[i mod half]` at lane `i`, and
/// `out = x * cos + rotate_half(x) * sin` where `rotate_half` swaps the halves and
/// negates the new first half. Cos and sin come from a table of the call's positions
/// ([`RotaryEmbedding::table`], computed from the position inside the compiled code, once
/// per forward pass); the offset (tokens already in the KV cache, e.g. `m`) may be
/// symbolic.
/// Optionally the frequencies are rescaled ([`RopeScaling`]).
#[derive(Clone, Debug, PartialEq)]
pub struct RotaryEmbedding {
    head_dim: i64,
    theta: f64,
    scaling: Option<RopeScaling>,
}

/// A rescaling of RoPE's frequencies (Hugging Face's `rope_scaling`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RopeScaling {
    /// `linear`: every frequency divided by `factor` (positions interpolated).
    Linear {
        /// The divisor (e.g. 8).
        factor: f64,
    },
    /// `llama3`: Llama 3.1's per-band rescaling.
    Llama3(Llama3RopeScaling),
}

/// Llama 3.1's frequency rescaling (`rope_scaling` of type `llama3`), as Hugging Face
/// computes it: with `wavelen = 2 pi / inv_freq`, frequencies whose wavelength is below
/// `original_max_position_embeddings / high_freq_factor` are kept, those above
/// `original_max_position_embeddings / low_freq_factor` are divided by `factor`, and
/// those between are interpolated with
/// `smooth = (original_max_position_embeddings / wavelen - low_freq_factor) /
/// (high_freq_factor - low_freq_factor)`: `(1 - smooth) * inv_freq / factor + smooth * inv_freq`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Llama3RopeScaling {
    /// How much longer the extended context is (`factor`, e.g. 8).
    pub factor: f64,
    /// `low_freq_factor` (e.g. 1).
    pub low_freq_factor: f64,
    /// `high_freq_factor` (e.g. 4).
    pub high_freq_factor: f64,
    /// The context the model was pre-trained with (e.g. 8192).
    pub original_max_position_embeddings: f64,
}

impl Llama3RopeScaling {
    /// `inv_freq` (f32) rescaled; `lane` is the frequency index `j < head_dim / 2` and the
    /// regime boundaries are computed here in f64 from `inv_freq_of(j)`.
    fn rescale(
        &self,
        inv_freq: te::Expr,
        lane: &te::Expr,
        inv_freq_of: impl Fn(i64) -> f64,
        half: i64,
    ) -> te::Expr {
        let wavelen = |j: i64| 2.0 * std::f64::consts::PI / inv_freq_of(j);
        let high_wavelen = self.original_max_position_embeddings / self.high_freq_factor;
        let low_wavelen = self.original_max_position_embeddings / self.low_freq_factor;
        // The wavelength grows with the lane, so each regime is a range of lanes.
        let first_smoothed = (0..half)
            .find(|&j| wavelen(j) >= high_wavelen)
            .unwrap_or(half);
        let first_scaled = (0..half)
            .find(|&j| wavelen(j) > low_wavelen)
            .unwrap_or(half);
        let inv_factor = 1.0 / self.factor;
        let per_radian = self.original_max_position_embeddings / (2.0 * std::f64::consts::PI);
        let band = self.high_freq_factor - self.low_freq_factor;
        let smooth = (&inv_freq * per_radian - self.low_freq_factor) / band;
        let smoothed = &inv_freq * (smooth * (1.0 - inv_factor) + inv_factor);
        let scaled = &inv_freq * inv_factor;
        te::select(
            lane.lt(first_smoothed),
            inv_freq,
            te::select(lane.lt(first_scaled), smoothed, scaled),
        )
    }
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
        Ok(RotaryEmbedding {
            head_dim,
            theta,
            scaling: None,
        })
    }

    /// The same rotation with its frequencies rescaled by `scaling`; the factors must be
    /// positive (for `llama3`, with `high_freq_factor > low_freq_factor`).
    pub fn with_scaling(self, scaling: RopeScaling) -> Result<Self, NnError> {
        let (factors, ordered) = match scaling {
            RopeScaling::Linear { factor } => (vec![factor], true),
            RopeScaling::Llama3(s) => (
                vec![
                    s.factor,
                    s.low_freq_factor,
                    s.high_freq_factor,
                    s.original_max_position_embeddings,
                ],
                s.high_freq_factor > s.low_freq_factor,
            ),
        };
        let positive = factors.iter().all(|v| v.is_finite() && *v > 0.0);
        if !positive || !ordered {
            return Err(NnError::Config {
                module: "rotary_embedding".to_string(),
                reason: format!(
                    "rope scaling needs positive factors (llama3: high_freq_factor > \
                     low_freq_factor), got {scaling:?}"
                ),
            });
        }
        Ok(RotaryEmbedding {
            scaling: Some(scaling),
            ..self
        })
    }

    /// The lanes per head.
    pub fn head_dim(&self) -> i64 {
        self.head_dim
    }

    /// Emits the rotation of `x` (`[batch, seq, heads, head_dim]`, float) whose token
    /// `s` is at position `offset + s`; every dim of `offset` must be bound in the
    /// function. The same as [`RotaryEmbedding::apply`] on a fresh
    /// [`RotaryEmbedding::table`]; a model with several rotations shares one table.
    pub fn forward(
        &self,
        bb: &mut BlockBuilder,
        x: &Expr,
        offset: &SymExpr,
    ) -> Result<Expr, NnError> {
        let seq = self.check_input(&x.sinfo())?;
        let table = self.table(bb, &seq, offset)?;
        self.apply(bb, x, &table)
    }

    /// Emits the cos/sin table of `tokens` tokens at positions `offset..offset + tokens`:
    /// `[tokens, head_dim]` f32, lane `j < head_dim / 2` holding `cos(angle_j)` and lane
    /// `head_dim / 2 + j` holding `sin(angle_j)`. Computed once, it serves every
    /// [`RotaryEmbedding::apply`] of a forward pass (each layer's q and k), so the
    /// trigonometry is not redone per layer and head.
    pub fn table(
        &self,
        bb: &mut BlockBuilder,
        tokens: &SymExpr,
        offset: &SymExpr,
    ) -> Result<Expr, NnError> {
        let mut dims: Vec<_> = tokens.vars().into_iter().collect();
        for var in offset.vars() {
            if !dims.contains(&var) {
                dims.push(var);
            }
        }
        let shape = vec![tokens.clone(), SymExpr::int(self.head_dim)];
        let var = bb.emit_te_with_dims("rotary_table", &[], &dims, |_| {
            self.compute_table(shape, |s| (te::Expr::from(offset) + s).cast(DType::F32))
        })?;
        Ok(var.into())
    }

    /// Emits the cos/sin table of tokens at the positions `positions` (`[tokens]` i32)
    /// holds, one per token (a batch of sequences, each at its own position): laid out as
    /// [`RotaryEmbedding::table`]'s.
    pub fn table_at(&self, bb: &mut BlockBuilder, positions: &Expr) -> Result<Expr, NnError> {
        let sinfo = positions.sinfo();
        let tokens = sinfo
            .as_tensor()
            .filter(|t| t.dtype == DType::I32)
            .and_then(|t| match t.dims()? {
                [tokens] => Some(tokens.clone()),
                _ => None,
            })
            .ok_or_else(|| NnError::BadInput {
                module: "rotary_embedding".to_string(),
                expected: "positions [tokens] i32".to_string(),
                got: Box::new(sinfo.clone()),
            })?;
        let shape = vec![tokens, SymExpr::int(self.head_dim)];
        let var = bb.emit_te("rotary_table_at", std::slice::from_ref(positions), |t| {
            self.compute_table(shape, |s| t[0].at(std::slice::from_ref(s)).cast(DType::F32))
        })?;
        Ok(var.into())
    }

    /// Emits the rotation of `x` (`[batch, seq, heads, head_dim]`, float) by the
    /// [`RotaryEmbedding::table`] of its `seq` tokens.
    pub fn apply(&self, bb: &mut BlockBuilder, x: &Expr, table: &Expr) -> Result<Expr, NnError> {
        let seq = self.check_input(&x.sinfo())?;
        self.check_table(&table.sinfo(), &seq)?;
        let inputs = [x.clone(), table.clone()];
        let op = ("rotary", OpPattern::Injective);
        let var = bb.emit_te_op(op, &inputs, |t| self.compute(&t[0], &t[1]))?;
        Ok(var.into())
    }

    /// The `seq` dim of a fitting input.
    fn check_input(&self, sinfo: &StructInfo) -> Result<SymExpr, NnError> {
        let seq = sinfo.as_tensor().and_then(|t| {
            let dims = t.dims()?;
            let fits = t.dtype.is_float()
                && dims.len() == 4
                && dims[3].prove_equal(&SymExpr::int(self.head_dim));
            fits.then(|| dims[1].clone())
        });
        seq.ok_or_else(|| NnError::BadInput {
            module: "rotary_embedding".to_string(),
            expected: format!("a float tensor [batch, seq, heads, {}]", self.head_dim),
            got: Box::new(sinfo.clone()),
        })
    }

    fn check_table(&self, sinfo: &StructInfo, seq: &SymExpr) -> Result<(), NnError> {
        let expected =
            StructInfo::tensor(vec![seq.clone(), SymExpr::int(self.head_dim)], DType::F32);
        let fits = sinfo.as_tensor().is_some_and(|t| {
            t.dtype == DType::F32
                && t.dims().is_some_and(|d| {
                    d.len() == 2
                        && d[0].prove_equal(seq)
                        && d[1].prove_equal(&SymExpr::int(self.head_dim))
                })
        });
        if fits {
            return Ok(());
        }
        Err(NnError::BadInput {
            module: "rotary_embedding".to_string(),
            expected: format!("its table {expected}"),
            got: Box::new(sinfo.clone()),
        })
    }

    /// The TE computation of the table (see [`RotaryEmbedding::table`]) of the tokens
    /// whose f32 position `position(s)` gives.
    fn compute_table(
        &self,
        shape: Vec<SymExpr>,
        position: impl Fn(&te::Expr) -> te::Expr,
    ) -> Tensor {
        let (d, half) = (self.head_dim, self.head_dim / 2);
        let freq_scale = -2.0 * self.theta.ln() / d as f64;
        te::compute("rotary_table", shape, |idx| {
            let (s, i) = (&idx[0], &idx[1]);
            let position = position(s);
            let lane = i.floormod(half);
            let mut inv_freq = (lane.cast(DType::F32) * freq_scale).exp();
            match &self.scaling {
                Some(RopeScaling::Linear { factor }) => inv_freq = inv_freq * (1.0 / factor),
                Some(RopeScaling::Llama3(scaling)) => {
                    let of = |j: i64| (j as f64 * freq_scale).exp();
                    inv_freq = scaling.rescale(inv_freq, &lane, of, half);
                }
                None => {}
            }
            let angle = position * inv_freq;
            te::select(i.lt(half), angle.cos(), angle.sin())
        })
    }

    /// The TE computation: `out[b, s, h, i] = x * cos(angle) + rotate_half(x) * sin(angle)`
    /// with cos and sin read from `table`, in f32, converted back to `x`'s dtype.
    fn compute(&self, x: &Tensor, table: &Tensor) -> Tensor {
        let (d, half) = (self.head_dim, self.head_dim / 2);
        let dtype = x.dtype();
        te::compute("rotary", x.shape().to_vec(), |idx| {
            let (b, s, h, i) = (&idx[0], &idx[1], &idx[2], &idx[3]);
            let lane = i.floormod(half);
            let cos = table.at(&[s.clone(), lane.clone()]);
            let sin = table.at(&[s.clone(), lane + half]);
            let partner = x.at(&[b.clone(), s.clone(), h.clone(), (i + half).floormod(d)]);
            let partner = partner.cast(DType::F32);
            let rotated = te::select(i.lt(half), -&partner, partner);
            let value = x.at(idx).cast(DType::F32);
            (value * cos + rotated * sin).cast(dtype)
        })
    }
}

impl Module for RotaryEmbedding {
    fn parameters(&self) -> Vec<Param> {
        Vec::new()
    }
}
