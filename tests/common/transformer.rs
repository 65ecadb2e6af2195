//! A two-layer Llama-style decoder written with the DSL: RMSNorm, grouped-query attention
//! with RoPE over a KV cache (read with `kv_cache.view`, extended with `kv_cache.append`),
//! and a SwiGLU MLP. One exported `forward(x: [1, n, 64], cache)` serves prefill and
//! decode; `create_kv_cache()` makes the cache it runs on.

use super::{c, emit, input};
use oxrelax_dsl::ir::{Call, Callee, PrimValue};
use oxrelax_dsl::nn::{Linear, Module, ModuleList, NnError, Param, Prefix, RMSNorm};
use oxrelax_dsl::nn::{RotaryEmbedding, Spec};
use oxrelax_dsl::{op, te, Attrs, BlockBuilder, DType, Expr, IRModule, StructInfo};
use oxrelax_dsl::{SymExpr, SymVar, TensorShape, Var};

/// Decoder layers.
pub const LAYERS: usize = 2;
/// The hidden size.
pub const HIDDEN: i64 = 64;
/// Query heads.
pub const HEADS: i64 = 4;
/// Key/value heads (query head `j` reads kv head `j / (HEADS / KV_HEADS)`).
pub const KV_HEADS: i64 = 2;
/// Lanes per head.
pub const HEAD_DIM: i64 = 16;
/// The MLP's intermediate size.
pub const FFN: i64 = 176;
/// The epsilon of every RMSNorm.
pub const EPS: f64 = 1e-5;
/// The RoPE base.
pub const THETA: f64 = 10000.0;
/// Tokens per call at most (the bound of `n`).
pub const MAX_TOKENS: i64 = 32;
/// Positions in the KV cache (its capacity and the bound of `m`).
pub const MAX_CONTEXT: i64 = 64;

/// The tokens of this call: `n <= 32`.
pub fn tokens() -> SymVar {
    SymVar::bounded("n", MAX_TOKENS)
}

/// The tokens already in the cache before this call: `m <= 64`.
pub fn past() -> SymVar {
    SymVar::bounded("m", MAX_CONTEXT)
}

fn int(value: i64) -> Expr {
    Expr::Prim(PrimValue::Int(SymExpr::int(value), DType::I64))
}

/// A call of runtime builtin `name` whose result has struct info `sinfo`.
pub fn packed(name: &str, args: Vec<Expr>, sinfo: StructInfo) -> Expr {
    Expr::Call(Box::new(Call {
        callee: Callee::Packed(name.to_string()),
        args,
        attrs: Attrs::new(),
        sinfo,
    }))
}

fn rank3() -> StructInfo {
    StructInfo::Tensor(oxrelax_dsl::TensorInfo {
        shape: TensorShape::Rank(3),
        dtype: DType::F32,
    })
}

/// `[rows, KV_HEADS, HEAD_DIM]` f32: one layer's K or V.
fn kv_sinfo(rows: SymExpr) -> StructInfo {
    StructInfo::tensor(vec![rows, c(KV_HEADS), c(HEAD_DIM)], DType::F32)
}

/// `[4, n, m + n]`: 0 where query `i` (at position `m + i`) may see key `j` (`j <= m + i`),
/// `-inf` elsewhere.
fn causal_mask_with_past(bb: &mut BlockBuilder) -> Result<Expr, NnError> {
    let (n, m) = (tokens().expr(), past().expr());
    let var = bb.emit_te_with_dims("causal_mask", &[], &[tokens(), past()], |_| {
        te::compute("causal_mask", vec![n, m.clone() + tokens().expr()], |idx| {
            let visible = idx[1].le(te::Expr::from(&m) + &idx[0]);
            te::select(visible, te::Expr::f32(0.0), te::Expr::neg_inf(DType::F32))
        })
    })?;
    Ok(var.into())
}

/// Grouped-query self-attention over the KV cache, Hugging Face names
/// (`self_attn.{q,k,v,o}_proj`), no biases.
pub struct SelfAttention {
    layer: i64,
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    rope: RotaryEmbedding,
}

impl SelfAttention {
    fn new(prefix: &Prefix, layer: i64) -> Self {
        let linear = |name: &str, inp: i64, out: i64| {
            Linear::new(&prefix.child(name), inp, out, false, DType::F32)
        };
        SelfAttention {
            layer,
            q: linear("q_proj", HIDDEN, HEADS * HEAD_DIM),
            k: linear("k_proj", HIDDEN, KV_HEADS * HEAD_DIM),
            v: linear("v_proj", HIDDEN, KV_HEADS * HEAD_DIM),
            o: linear("o_proj", HEADS * HEAD_DIM, HIDDEN),
            rope: RotaryEmbedding::new(HEAD_DIM, THETA).expect("an even head dim"),
        }
    }

    /// `x` (`[1, n, HIDDEN]`) projected by `proj` into `[1, n, heads, HEAD_DIM]`, rotated
    /// to positions `m..m + n` when `rope`, and flattened to `[n, heads, HEAD_DIM]`.
    fn project(
        &self,
        bb: &mut BlockBuilder,
        proj: &Linear,
        x: &Expr,
        heads: i64,
        rope: bool,
    ) -> Result<Expr, NnError> {
        let n = tokens().expr();
        let y = proj.forward(bb, x)?;
        let mut y = emit(
            bb,
            op::reshape(&y, vec![c(1), n.clone(), c(heads), c(HEAD_DIM)]),
        )?;
        if rope {
            y = self.rope.forward(bb, &y, &past().expr())?;
        }
        emit(bb, op::reshape(&y, vec![n, c(heads), c(HEAD_DIM)]))
    }

    /// The past K or V (`[m, KV_HEADS, HEAD_DIM]`) and the new one (`[n, ...]`) as
    /// `[HEADS, m + n, HEAD_DIM]`, each kv head repeated for its query heads.
    fn all_heads(&self, bb: &mut BlockBuilder, past: &Expr, new: &Expr) -> Result<Expr, NnError> {
        let total = past_and_new();
        let all = emit(bb, op::concat(&[past.clone(), new.clone()], 0))?;
        let all = emit(bb, op::permute_dims(&all, Some(vec![1, 0, 2])))?;
        let all = emit(bb, op::expand_dims(&all, vec![1]))?;
        let group = HEADS / KV_HEADS;
        let shape = vec![c(KV_HEADS), c(group), total.clone(), c(HEAD_DIM)];
        let all = emit(bb, op::broadcast_to(&all, shape))?;
        emit(bb, op::reshape(&all, vec![c(HEADS), total, c(HEAD_DIM)]))
    }

    /// Reads this layer's past K and V from `cache` (binding `m`), appends the new ones,
    /// and attends causally over both; returns `[1, n, HIDDEN]` (before the residual).
    fn forward(&self, bb: &mut BlockBuilder, x: &Expr, cache: &Expr) -> Result<Expr, NnError> {
        let view = packed(
            "kv_cache.view",
            vec![cache.clone(), int(self.layer)],
            StructInfo::Tuple(vec![rank3(), rank3()]),
        );
        let view = Expr::from(bb.emit(view)?);
        let [k_past, v_past] = [0, 1].map(|i| Expr::TupleGetItem(Box::new(view.clone()), i));
        let k_past = Expr::from(bb.emit_match_cast(k_past, kv_sinfo(past().expr()))?);
        let v_past = Expr::from(bb.emit_match_cast(v_past, kv_sinfo(past().expr()))?);
        let q = self.project(bb, &self.q, x, HEADS, true)?;
        let k = self.project(bb, &self.k, x, KV_HEADS, true)?;
        let v = self.project(bb, &self.v, x, KV_HEADS, false)?;
        let append = packed(
            "kv_cache.append",
            vec![cache.clone(), int(self.layer), k.clone(), v.clone()],
            StructInfo::Object,
        );
        bb.emit(append)?;
        let keys = self.all_heads(bb, &k_past, &k)?;
        let values = self.all_heads(bb, &v_past, &v)?;
        let q = emit(bb, op::permute_dims(&q, Some(vec![1, 0, 2])))?;
        let keys_t = emit(bb, op::permute_dims(&keys, Some(vec![0, 2, 1])))?;
        let scores = emit(bb, op::matmul(&q, &keys_t))?;
        let scale = 1.0 / (HEAD_DIM as f64).sqrt();
        let scale = emit(bb, op::full(vec![], scale, DType::F32))?;
        let scores = emit(bb, op::multiply(&scores, &scale))?;
        let mask = causal_mask_with_past(bb)?;
        let scores = emit(bb, op::add(&scores, &mask))?;
        let probs = emit(bb, op::softmax(&scores, -1))?;
        let out = emit(bb, op::matmul(&probs, &values))?;
        let out = emit(bb, op::permute_dims(&out, Some(vec![1, 0, 2])))?;
        let shape = vec![c(1), tokens().expr(), c(HEADS * HEAD_DIM)];
        let out = emit(bb, op::reshape(&out, shape))?;
        self.o.forward(bb, &out)
    }
}

/// `m + n`: the keys a query of this call attends over.
fn past_and_new() -> SymExpr {
    past().expr() + tokens().expr()
}

impl Module for SelfAttention {
    fn parameters(&self) -> Vec<Param> {
        [&self.q, &self.k, &self.v, &self.o]
            .iter()
            .flat_map(|l| l.parameters())
            .collect()
    }
}

/// `down(silu(gate(x)) * up(x))`, Hugging Face names (`mlp.{gate,up,down}_proj`).
pub struct SwiGlu {
    gate: Linear,
    up: Linear,
    down: Linear,
}

impl SwiGlu {
    fn new(prefix: &Prefix) -> Self {
        let linear = |name: &str, inp: i64, out: i64| {
            Linear::new(&prefix.child(name), inp, out, false, DType::F32)
        };
        SwiGlu {
            gate: linear("gate_proj", HIDDEN, FFN),
            up: linear("up_proj", HIDDEN, FFN),
            down: linear("down_proj", FFN, HIDDEN),
        }
    }

    fn forward(&self, bb: &mut BlockBuilder, x: &Expr) -> Result<Expr, NnError> {
        let gate = self.gate.forward(bb, x)?;
        let gate = emit(bb, op::silu(&gate))?;
        let up = self.up.forward(bb, x)?;
        let hidden = emit(bb, op::multiply(&gate, &up))?;
        self.down.forward(bb, &hidden)
    }
}

impl Module for SwiGlu {
    fn parameters(&self) -> Vec<Param> {
        [&self.gate, &self.up, &self.down]
            .iter()
            .flat_map(|l| l.parameters())
            .collect()
    }
}

/// One pre-norm decoder layer: `x + attn(norm(x))`, then `h + mlp(norm(h))`.
pub struct DecoderLayer {
    input_layernorm: RMSNorm,
    self_attn: SelfAttention,
    post_attention_layernorm: RMSNorm,
    mlp: SwiGlu,
}

impl DecoderLayer {
    fn new(prefix: &Prefix, layer: i64) -> Self {
        let norm = |name: &str| RMSNorm::new(&prefix.child(name), HIDDEN, EPS, DType::F32);
        DecoderLayer {
            input_layernorm: norm("input_layernorm"),
            self_attn: SelfAttention::new(&prefix.child("self_attn"), layer),
            post_attention_layernorm: norm("post_attention_layernorm"),
            mlp: SwiGlu::new(&prefix.child("mlp")),
        }
    }

    fn forward(&self, bb: &mut BlockBuilder, x: &Expr, cache: &Expr) -> Result<Expr, NnError> {
        let h = self.input_layernorm.forward(bb, x)?;
        let attn = self.self_attn.forward(bb, &h, cache)?;
        let x = emit(bb, op::add(x, &attn))?;
        let h = self.post_attention_layernorm.forward(bb, &x)?;
        let mlp = self.mlp.forward(bb, &h)?;
        emit(bb, op::add(&x, &mlp))
    }
}

impl Module for DecoderLayer {
    fn parameters(&self) -> Vec<Param> {
        [
            self.input_layernorm.parameters(),
            self.self_attn.parameters(),
            self.post_attention_layernorm.parameters(),
            self.mlp.parameters(),
        ]
        .concat()
    }
}

/// The decoder stack (`model.layers.*`) and the final norm (`model.norm`).
pub struct Transformer {
    layers: ModuleList<DecoderLayer>,
    norm: RMSNorm,
}

impl Transformer {
    fn new() -> Self {
        let model = Prefix::new("model");
        let mut layer = 0;
        Transformer {
            layers: ModuleList::new(&model.child("layers"), LAYERS, |prefix| {
                layer += 1;
                DecoderLayer::new(prefix, layer - 1)
            }),
            norm: RMSNorm::new(&model.child("norm"), HIDDEN, EPS, DType::F32),
        }
    }

    fn forward(&self, bb: &mut BlockBuilder, x: &Expr, cache: &Expr) -> Result<Expr, NnError> {
        let mut x = x.clone();
        for layer in &self.layers {
            x = layer.forward(bb, &x, cache)?;
        }
        self.norm.forward(bb, &x)
    }
}

impl Module for Transformer {
    fn parameters(&self) -> Vec<Param> {
        [self.layers.parameters(), self.norm.parameters()].concat()
    }
}

/// Adds `create_kv_cache()`: a cache of every layer holding `MAX_CONTEXT` positions.
fn add_create_kv_cache(bb: &mut BlockBuilder) -> Result<(), NnError> {
    bb.function("create_kv_cache", Vec::new(), true, |bb| {
        let sizes = [LAYERS as i64, KV_HEADS, HEAD_DIM, MAX_CONTEXT].map(int);
        let args = [&sizes[..], &[Expr::Str("f32".into())]].concat();
        let cache = bb.emit(packed("kv_cache.create", args, StructInfo::Object))?;
        Ok::<_, NnError>(Expr::from(cache))
    })?;
    Ok(())
}

/// The exported decoder: `forward(x: [1, n, 64], cache)` (then every weight, named as Hugging
/// Face does) returning the final-normed hidden states `[1, n, 64]`, and
/// `create_kv_cache()`.
pub fn transformer_module() -> IRModule {
    let spec = Spec::new().function(
        "forward",
        vec![
            input("x", vec![c(1), tokens().expr(), c(HIDDEN)]),
            Var::new("cache", StructInfo::Object),
        ],
        |m: &Transformer, bb, xs| m.forward(bb, &xs[0], &xs[1]),
    );
    let mut bb = BlockBuilder::new();
    spec.export_into(&Transformer::new(), &mut bb)
        .expect("the transformer exports");
    add_create_kv_cache(&mut bb).expect("create_kv_cache builds");
    bb.finish().expect("the module is complete")
}
