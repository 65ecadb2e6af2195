//! The decoder layer the architectures share: pre-norm grouped-query attention with
//! RoPE over the KV cache (full or sliding-window), then a pre-norm gated MLP, each added
//! to the residual stream (Gemma 3: each also normed before it is added). The
//! architectures differ only in [`LayerOptions`] and their configs.

mod attention;
pub mod kv_cache;
mod mlp;
pub mod projections;

pub use attention::Attention;
pub use mlp::GatedMlp;

use crate::config::ModelConfig;
use oxrelax_dsl::nn::{Module, NnError, Param, Prefix, RMSNorm, RotaryEmbedding};
use oxrelax_dsl::op::InferError;
use oxrelax_dsl::{op, BlockBuilder, DType, Expr, SymExpr, SymVar};

/// Where the architectures' decoder layers differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct LayerOptions {
    /// Bias on the q, k and v projections (Qwen2 always; Llama/Qwen3 with `attention_bias`).
    pub qkv_bias: bool,
    /// Bias on the output projection (Llama/Qwen3 with `attention_bias`).
    pub o_bias: bool,
    /// RMSNorm over each q and k head before RoPE (Qwen3's `q_norm`/`k_norm`).
    pub qk_norm: bool,
    /// Bias on the MLP's projections (Llama's `mlp_bias`).
    pub mlp_bias: bool,
    /// Fused projections: one `qkv_proj` and one `gate_up_proj` (Phi-3).
    pub fused_projections: bool,
    /// Every RMSNorm scales by `1 + weight` (Gemma).
    pub unit_offset_norms: bool,
    /// The attention's and the MLP's outputs are normed before they are added
    /// (`post_attention_layernorm`, `post_feedforward_layernorm`), the MLP's input by
    /// `pre_feedforward_layernorm` (Gemma).
    pub sandwich_norms: bool,
    /// The embeddings are multiplied by `sqrt(hidden_size)` (Gemma).
    pub scaled_embedding: bool,
}

/// The dynamic dims of one exported function: `tokens` in this call (`n`, 1 for decode,
/// `b` for a batch), how the call reaches the KV cache, and the element type of that
/// cache.
#[derive(Clone, Debug, PartialEq)]
pub struct Dims {
    /// Tokens in this call.
    pub tokens: SymExpr,
    /// One sequence's cache or a batch of them.
    pub cache: CacheAccess,
    /// How the KV cache stores K and V.
    pub kv_dtype: kv_cache::KvDtype,
}

/// How a forward pass reaches the KV cache.
#[derive(Clone, Debug, PartialEq)]
pub enum CacheAccess {
    /// One sequence's cache (`kv_cache.*`): the call's tokens follow the `past` positions
    /// it holds (`m`, bounded by the context window; bound by the first view).
    Sequence {
        /// Positions in the cache before this call.
        past: SymVar,
    },
    /// A batch of sequences' caches (`kv_batch.*`): token `i` is the next of sequence
    /// `i`, at position `positions[i]` (`[b]` i32: the positions its cache holds).
    Batch {
        /// The tokens' positions.
        positions: Expr,
    },
}

/// Emits an op call, naming module `module` in an inference error.
pub(crate) fn emit(
    bb: &mut BlockBuilder,
    module: &str,
    call: Result<Expr, InferError>,
) -> Result<Expr, NnError> {
    Ok(bb.emit(call.map_err(NnError::op(module))?)?.into())
}

/// One decoder layer: `h = x + attn(norm(x))`, `h + mlp(norm(h))`; with sandwich norms
/// `h = x + norm(attn(norm(x)))`, `h + norm(mlp(norm(h)))`.
#[derive(Clone, Debug, PartialEq)]
pub struct DecoderLayer {
    prefix: Prefix,
    input_layernorm: RMSNorm,
    self_attn: Attention,
    /// The MLP's input norm, or with sandwich norms the attention output's.
    post_attention_layernorm: RMSNorm,
    /// With sandwich norms, the MLP's input and output norms.
    feedforward_norms: Option<(RMSNorm, RMSNorm)>,
    mlp: GatedMlp,
}

impl DecoderLayer {
    /// Layer `layer` at `prefix` (`model.layers.0`), its projection weights stored as
    /// `weights`, rotating q and k with `rope` (the layer's: Gemma 3's sliding layers
    /// have a RoPE base of their own).
    pub fn new(
        prefix: &Prefix,
        layer: i64,
        config: &ModelConfig,
        (options, weights): (LayerOptions, DType),
        rope: &RotaryEmbedding,
    ) -> Self {
        let norm = |name: &str| {
            RMSNorm::new(
                &prefix.child(name),
                config.hidden_size,
                config.rms_norm_eps,
                DType::F32,
            )
            .with_unit_offset(options.unit_offset_norms)
        };
        let self_attn = prefix.child("self_attn");
        let feedforward_norms = options.sandwich_norms.then(|| {
            (
                norm("pre_feedforward_layernorm"),
                norm("post_feedforward_layernorm"),
            )
        });
        DecoderLayer {
            prefix: prefix.clone(),
            input_layernorm: norm("input_layernorm"),
            self_attn: Attention::new(&self_attn, layer, config, (options, weights), rope.clone()),
            post_attention_layernorm: norm("post_attention_layernorm"),
            feedforward_norms,
            mlp: GatedMlp::new(
                &prefix.child("mlp"),
                config,
                (options.mlp_bias, weights, options.fused_projections),
            ),
        }
    }

    /// Runs the layer over `x` (`[1, n, hidden]`), reading and extending `cache`; q and k
    /// are rotated with `rope_table` (the [`RotaryEmbedding::table`] of the positions).
    pub fn forward(
        &self,
        bb: &mut BlockBuilder,
        x: &Expr,
        cache: &Expr,
        dims: &Dims,
        rope_table: &Expr,
    ) -> Result<Expr, NnError> {
        let name = self.prefix.as_str();
        let h = self.input_layernorm.forward(bb, x)?;
        let mut attn = self.self_attn.forward(bb, &h, cache, dims, rope_table)?;
        let (mlp_norm, post_mlp) = match &self.feedforward_norms {
            Some((pre, post)) => {
                attn = self.post_attention_layernorm.forward(bb, &attn)?;
                (pre, Some(post))
            }
            None => (&self.post_attention_layernorm, None),
        };
        let x = emit(bb, name, op::add(x, &attn))?;
        let h = mlp_norm.forward(bb, &x)?;
        let mut mlp = self.mlp.forward(bb, &h)?;
        if let Some(post) = post_mlp {
            mlp = post.forward(bb, &mlp)?;
        }
        emit(bb, name, op::add(&x, &mlp))
    }
}

impl Module for DecoderLayer {
    fn parameters(&self) -> Vec<Param> {
        [
            self.input_layernorm.parameters(),
            self.self_attn.parameters(),
            self.post_attention_layernorm.parameters(),
            self.feedforward_norms
                .iter()
                .flat_map(|(pre, post)| [pre.parameters(), post.parameters()].concat())
                .collect(),
            self.mlp.parameters(),
        ]
        .concat()
    }
}
