//! `CausalLM`: the decoder-only language model every architecture is — token embedding
//! (Gemma: scaled), a stack of [`DecoderLayer`]s, a final RMSNorm and the output projection
//! (`lm_head`, or the embedding itself when tied).

use crate::config::{LayerType, ModelConfig};
use crate::decoder::kv_cache::{self, KvLayout};
use crate::decoder::{emit, CacheAccess, DecoderLayer, Dims, LayerOptions};
use oxrelax_dsl::nn::RotaryEmbedding;
use oxrelax_dsl::nn::{Embedding, Linear, Module, ModuleList, NnError, Param, Prefix, RMSNorm};
use oxrelax_dsl::{op, BlockBuilder, DType, Expr, SymExpr};

/// Which positions' logits a forward pass returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Positions {
    /// Only the last token's: `[1, 1, vocab]`.
    Last,
    /// Every token's: `[1, n, vocab]`.
    All,
}

/// A decoder-only causal language model with Hugging Face parameter names
/// (`model.embed_tokens.weight`, `model.layers.0....`, `model.norm.weight`,
/// `lm_head.weight` unless the embeddings are tied).
#[derive(Clone, Debug, PartialEq)]
pub struct CausalLM {
    config: ModelConfig,
    embed_tokens: Embedding,
    layers: ModuleList<DecoderLayer>,
    norm: RMSNorm,
    /// With tied embeddings, a projection whose weight is `model.embed_tokens.weight`.
    lm_head: Linear,
    /// The rotation every layer applies to q and k (one cos/sin table per forward pass).
    rope: RotaryEmbedding,
    /// Gemma 3's sliding layers' rotation, of a base of its own.
    local_rope: Option<RotaryEmbedding>,
    /// The embeddings' factor (Gemma: `sqrt(hidden_size)`).
    embed_scale: Option<f64>,
}

impl CausalLM {
    /// The model of `config` whose layers differ from the common block by `options`, its
    /// projection weights and embedding table stored as `weights` (norms, biases and
    /// activations stay f32).
    pub fn new(
        config: &ModelConfig,
        options: LayerOptions,
        weights: DType,
    ) -> Result<Self, NnError> {
        let model = Prefix::new("model");
        let (hidden, vocab) = (config.hidden_size, config.vocab_size);
        let mut rope = RotaryEmbedding::new(config.head_dim, config.rope_theta)?;
        if let Some(scaling) = config.rope_scaling {
            rope = rope.with_scaling(scaling)?;
        }
        let local_rope = config
            .rope_local_theta
            .map(|theta| RotaryEmbedding::new(config.head_dim, theta))
            .transpose()?;
        let mut next_layer = 0;
        let layers = ModuleList::new(
            &model.child("layers"),
            config.num_hidden_layers as usize,
            |prefix| {
                next_layer += 1;
                let layer = next_layer - 1;
                let rope = match (&local_rope, config.layer_types.get(layer as usize)) {
                    (Some(local), Some(LayerType::Sliding)) => local,
                    _ => &rope,
                };
                DecoderLayer::new(prefix, layer, config, (options, weights), rope)
            },
        );
        let embed_prefix = model.child("embed_tokens");
        let head_prefix = if config.tie_word_embeddings {
            embed_prefix.clone()
        } else {
            Prefix::new("lm_head")
        };
        Ok(CausalLM {
            config: config.clone(),
            embed_tokens: Embedding::new(&embed_prefix, vocab, hidden, DType::F32)
                .stored_as(weights),
            layers,
            norm: RMSNorm::new(
                &model.child("norm"),
                hidden,
                config.rms_norm_eps,
                DType::F32,
            )
            .with_unit_offset(options.unit_offset_norms),
            lm_head: Linear::new(&head_prefix, hidden, vocab, false, DType::F32).stored_as(weights),
            rope,
            local_rope,
            embed_scale: options.scaled_embedding.then(|| (hidden as f64).sqrt()),
        })
    }

    /// The config the model was built from.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// Every weight the model takes, with its shape, in parameter order.
    pub fn weight_shapes(&self) -> Vec<(String, Vec<i64>)> {
        self.parameters()
            .into_iter()
            .map(|p| {
                let dims = p
                    .sinfo
                    .as_tensor()
                    .and_then(|t| t.dims())
                    .unwrap_or_default();
                let shape = dims.iter().filter_map(SymExpr::as_const).collect();
                (p.name, shape)
            })
            .collect()
    }

    /// Emits the embedding of `ids` (`[1, n]` i32), scaled for Gemma: `[1, n, hidden]`.
    pub fn embed(&self, bb: &mut BlockBuilder, ids: &Expr) -> Result<Expr, NnError> {
        let x = self.embed_tokens.forward(bb, ids)?;
        let Some(scale) = self.embed_scale else {
            return Ok(x);
        };
        let scale = emit(bb, "embed_scale", op::full(vec![], scale, DType::F32))?;
        emit(bb, "embed_scale", op::multiply(&x, &scale))
    }

    /// Emits a forward pass over `ids` (`[1, n]` i32) that reads and extends `cache` (one
    /// sequence's, or a batch's with one token per sequence), and returns the logits of
    /// `positions`.
    pub fn forward(
        &self,
        bb: &mut BlockBuilder,
        ids: &Expr,
        cache: &Expr,
        dims: &Dims,
        positions: Positions,
    ) -> Result<Expr, NnError> {
        let mut x = self.embed(bb, ids)?;
        let (rope_table, local_table) = self.rope_tables(bb, cache, dims)?;
        for (layer, kind) in self.layers.iter().zip(&self.config.layer_types) {
            let table = match (&local_table, kind) {
                (Some(local), LayerType::Sliding) => local,
                _ => &rope_table,
            };
            x = layer.forward(bb, &x, cache, dims, table)?;
        }
        if positions == Positions::Last {
            x = self.last_position(bb, &x, dims)?;
        }
        let x = self.norm.forward(bb, &x)?;
        self.lm_head.forward(bb, &x)
    }

    /// The cos/sin tables of the call's positions: the model's, and Gemma 3's sliding
    /// layers'. Over one sequence's cache, the view of layer 0's past positions binds
    /// `m`, the positions' offset; over a batch, the positions are an input.
    fn rope_tables(
        &self,
        bb: &mut BlockBuilder,
        cache: &Expr,
        dims: &Dims,
    ) -> Result<(Expr, Option<Expr>), NnError> {
        let table = |bb: &mut BlockBuilder, rope: &RotaryEmbedding| match &dims.cache {
            CacheAccess::Sequence { past } => rope.table(bb, &dims.tokens, &past.expr()),
            CacheAccess::Batch { positions } => rope.table_at(bb, positions),
        };
        if let CacheAccess::Sequence { past } = &dims.cache {
            let layout = KvLayout {
                kv_heads: self.config.num_key_value_heads,
                head_dim: self.config.head_dim,
                dtype: dims.kv_dtype,
            };
            kv_cache::view(bb, cache, 0, layout, past.expr())?;
        }
        let global = table(bb, &self.rope)?;
        let local = match &self.local_rope {
            Some(rope) => Some(table(bb, rope)?),
            None => None,
        };
        Ok((global, local))
    }

    /// `x[:, n - 1:n, :]`.
    fn last_position(&self, bb: &mut BlockBuilder, x: &Expr, dims: &Dims) -> Result<Expr, NnError> {
        let n = dims.tokens.clone();
        let last = n.clone() - SymExpr::int(1);
        emit(
            bb,
            "last_position",
            op::strided_slice(x, vec![1], vec![last], vec![n], None),
        )
    }
}

impl Module for CausalLM {
    fn parameters(&self) -> Vec<Param> {
        let head = (!self.config.tie_word_embeddings).then(|| self.lm_head.parameters());
        [
            self.embed_tokens.parameters(),
            self.layers.parameters(),
            self.norm.parameters(),
            head.unwrap_or_default(),
        ]
        .concat()
    }
}
