//! Grouped-query self-attention over the KV cache, full or over a sliding window, Hugging
//! Face names (`self_attn.{q,k,v,o}_proj`, Phi-3's fused `self_attn.qkv_proj`, Qwen3's and
//! Gemma 3's `self_attn.{q,k}_norm`).

use super::kv_cache::{self, KvLayout};
use super::projections::Projections;
use super::{emit, CacheAccess, Dims, LayerOptions};
use crate::config::ModelConfig;
use oxrelax_dsl::nn::{Linear, Module, NnError, Param, Prefix, RMSNorm, RotaryEmbedding};
use oxrelax_dsl::op::Mask;
use oxrelax_dsl::{op, BlockBuilder, DType, Expr, SymExpr};

/// Self-attention of decoder layer `layer`: project, (Qwen3, Gemma 3: RMSNorm each q/k
/// head,) rotate q and k to their positions, append k/v to the cache, attend causally over
/// past and new positions (or the last `window` of them; one fused `attention` op reading
/// the cache in place), project back.
#[derive(Clone, Debug, PartialEq)]
pub struct Attention {
    prefix: Prefix,
    layer: i64,
    heads: i64,
    kv_heads: i64,
    head_dim: i64,
    qkv: Projections,
    o_proj: Linear,
    q_norm: Option<RMSNorm>,
    k_norm: Option<RMSNorm>,
    rope: RotaryEmbedding,
    /// The factor of the scores.
    scale: f64,
    /// Which past positions a query sees.
    mask: Mask,
}

fn c(value: i64) -> SymExpr {
    SymExpr::int(value)
}

impl Attention {
    /// The attention of layer `layer` at `prefix` (`model.layers.0.self_attn`), its
    /// projection weights stored as `weights`, rotating q and k with `rope`.
    pub fn new(
        prefix: &Prefix,
        layer: i64,
        config: &ModelConfig,
        (options, weights): (LayerOptions, DType),
        rope: RotaryEmbedding,
    ) -> Self {
        let (hidden, heads, kv_heads, head_dim) = (
            config.hidden_size,
            config.num_attention_heads,
            config.num_key_value_heads,
            config.head_dim,
        );
        let names = (
            &["q_proj", "k_proj", "v_proj"][..],
            options.fused_projections.then_some("qkv_proj"),
        );
        let widths = [heads * head_dim, kv_heads * head_dim, kv_heads * head_dim];
        let qkv = Projections::new(
            prefix,
            names,
            (hidden, &widths),
            (options.qkv_bias, weights),
        );
        let o_proj = Linear::new(
            &prefix.child("o_proj"),
            heads * head_dim,
            hidden,
            options.o_bias,
            DType::F32,
        )
        .stored_as(weights);
        let head_norm = |name: &str| {
            options.qk_norm.then(|| {
                RMSNorm::new(
                    &prefix.child(name),
                    head_dim,
                    config.rms_norm_eps,
                    DType::F32,
                )
                .with_unit_offset(options.unit_offset_norms)
            })
        };
        let mask = match config.layer_window(layer as usize) {
            Some(window) => Mask::Window(window),
            None => Mask::Causal,
        };
        Attention {
            prefix: prefix.clone(),
            layer,
            heads,
            kv_heads,
            head_dim,
            qkv,
            o_proj,
            q_norm: head_norm("q_norm"),
            k_norm: head_norm("k_norm"),
            rope,
            scale: config.attention_scale,
            mask,
        }
    }

    /// A projection `y` (`[1, n, heads * head_dim]`) split into `heads` heads, normed by
    /// `norm` and rotated to their positions by `rope_table` when given; returns
    /// `[n, heads, head_dim]`.
    fn heads(
        &self,
        bb: &mut BlockBuilder,
        (y, norm, heads): (&Expr, Option<&RMSNorm>, i64),
        rope_table: Option<&Expr>,
        dims: &Dims,
    ) -> Result<Expr, NnError> {
        let name = self.prefix.as_str();
        let n = dims.tokens.clone();
        let shape = vec![c(1), n.clone(), c(heads), c(self.head_dim)];
        let mut y = emit(bb, name, op::reshape(y, shape))?;
        if let Some(norm) = norm {
            y = norm.forward(bb, &y)?;
        }
        if let Some(table) = rope_table {
            y = self.rope.apply(bb, &y, table)?;
        }
        emit(
            bb,
            name,
            op::reshape(&y, vec![n, c(heads), c(self.head_dim)]),
        )
    }

    /// Attends `x` (`[1, n, hidden]`, already normed) over this layer's cached positions
    /// and itself, appending its K and V to `cache` (cast to the cache's dtype); q and k
    /// are rotated by `rope_table`. Returns `[1, n, hidden]`. Over one sequence's cache,
    /// `m` (its `past`) must be bound; over a batch, token `i` attends over sequence `i`'s
    /// positions.
    pub fn forward(
        &self,
        bb: &mut BlockBuilder,
        x: &Expr,
        cache: &Expr,
        dims: &Dims,
        rope_table: &Expr,
    ) -> Result<Expr, NnError> {
        let name = self.prefix.as_str();
        let layout = KvLayout {
            kv_heads: self.kv_heads,
            head_dim: self.head_dim,
            dtype: dims.kv_dtype,
        };
        let qkv = self.qkv.start(bb, x)?;
        let q = self.qkv.part(bb, &qkv, 0)?;
        let q = self.heads(
            bb,
            (&q, self.q_norm.as_ref(), self.heads),
            Some(rope_table),
            dims,
        )?;
        let k = self.qkv.part(bb, &qkv, 1)?;
        let k_spec = (&k, self.k_norm.as_ref(), self.kv_heads);
        let k = self.heads(bb, k_spec, Some(rope_table), dims)?;
        let v = self.qkv.part(bb, &qkv, 2)?;
        let v = self.heads(bb, (&v, None, self.kv_heads), None, dims)?;
        kv_cache::append(
            bb,
            (cache, &dims.cache),
            (self.layer, dims.kv_dtype),
            &k,
            &v,
        )?;
        let out = match &dims.cache {
            CacheAccess::Sequence { past } => {
                // The view after the append covers past and new positions in place.
                let total = past.expr() + dims.tokens.clone();
                let view = kv_cache::view(bb, cache, self.layer, layout, total)?;
                emit(bb, name, view.attention(&q, self.scale, self.mask))?
            }
            CacheAccess::Batch { .. } => {
                let attend = (cache, self.layer);
                kv_cache::batch_attention(bb, attend, &q, self.scale, self.mask)?
            }
        };
        let shape = vec![c(1), dims.tokens.clone(), c(self.heads * self.head_dim)];
        let out = emit(bb, name, op::reshape(&out, shape))?;
        self.o_proj.forward(bb, &out)
    }
}

impl Module for Attention {
    fn parameters(&self) -> Vec<Param> {
        self.qkv
            .parameters()
            .into_iter()
            .chain(self.o_proj.parameters())
            .chain(
                self.q_norm
                    .iter()
                    .chain(&self.k_norm)
                    .flat_map(Module::parameters),
            )
            .collect()
    }
}
