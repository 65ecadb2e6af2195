//! Calls of the runtime's `kv_cache.*` builtins from the graph. The cache stores K and V
//! as a [`KvDtype`] says (an export option); the models compute in f32, cast the new K and
//! V to the cache's dtype (or quantize them to int8 codes and scales, in compiled code)
//! before appending them, and attention reads the cache as stored (an f16 cache is widened,
//! an int8 one dequantized, as the attention kernel loads it).

use super::{emit, CacheAccess};
use oxrelax_dsl::ir::{Call, Callee, PrimValue};
use oxrelax_dsl::nn::NnError;
use oxrelax_dsl::op::{self, InferError};
use oxrelax_dsl::{Attrs, BlockBuilder, DType, Expr, StructInfo, SymExpr, TensorInfo, TensorShape};
use std::fmt;
use std::str::FromStr;

/// How a KV cache stores K and V.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum KvDtype {
    /// f32, as computed.
    #[default]
    F32,
    /// f16: half the memory and the bytes attention streams.
    F16,
    /// Symmetric int8 codes with one f32 scale per position and KV head
    /// (`max |x| / 127` over the head dim): a quarter of f32's bytes plus the scales.
    Q8,
}

/// A KV cache dtype name that is not one of [`KvDtype::ALL`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown KV cache dtype `{0}` (expected one of f32, f16, q8)")]
pub struct UnknownKvDtype(pub String);

impl KvDtype {
    /// Every KV cache dtype.
    pub const ALL: [KvDtype; 3] = [KvDtype::F32, KvDtype::F16, KvDtype::Q8];

    /// The name (`f32`, `f16`, `q8`): the option's value, the manifest's, and the
    /// runtime's `kv_cache.create` format.
    pub fn name(self) -> &'static str {
        match self {
            KvDtype::F32 => "f32",
            KvDtype::F16 => "f16",
            KvDtype::Q8 => "q8",
        }
    }

    /// The element type of the stored K and V (the codes, for `q8`).
    pub fn element(self) -> DType {
        match self {
            KvDtype::F32 => DType::F32,
            KvDtype::F16 => DType::F16,
            KvDtype::Q8 => DType::I8,
        }
    }
}

impl fmt::Display for KvDtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for KvDtype {
    type Err = UnknownKvDtype;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        KvDtype::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| UnknownKvDtype(s.to_string()))
    }
}

/// An integer argument of a builtin.
pub fn int(value: i64) -> Expr {
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

/// `kv_cache.create(layers, kv_heads, head_dim, capacity, "f32")` (or `"f16"`, `"q8"`:
/// the cache's `dtype`).
pub fn create(layers: i64, kv_heads: i64, head_dim: i64, capacity: i64, dtype: KvDtype) -> Expr {
    let sizes = [layers, kv_heads, head_dim, capacity].map(int);
    let dtype = Expr::Str(dtype.name().to_string());
    packed(
        "kv_cache.create",
        [&sizes[..], &[dtype]].concat(),
        StructInfo::Object,
    )
}

/// The shape of one layer's K or V in a cache: `kv_heads` heads of `head_dim` elements,
/// stored as `dtype`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvLayout {
    /// Key/value heads.
    pub kv_heads: i64,
    /// Elements per head.
    pub head_dim: i64,
    /// How the cache stores them.
    pub dtype: KvDtype,
}

impl KvLayout {
    /// The struct info of K and of V with `rows` positions, `[rows, kv_heads, head_dim]`
    /// of the cache's element type, and for `q8` of their scales, `[rows, kv_heads]` f32.
    fn view_sinfo(self, rows: &SymExpr) -> (StructInfo, Option<StructInfo>) {
        let (heads, dim) = (SymExpr::int(self.kv_heads), SymExpr::int(self.head_dim));
        let rows_shape = vec![rows.clone(), heads.clone(), dim];
        let kv = StructInfo::tensor(rows_shape, self.dtype.element());
        let scales = (self.dtype == KvDtype::Q8)
            .then(|| StructInfo::tensor(vec![rows.clone(), heads], DType::F32));
        (kv, scales)
    }
}

/// One layer's K and V as a view of the cache: as stored, with their scales for `q8`.
#[derive(Clone, Debug)]
pub struct KvView {
    /// K: `[rows, kv_heads, head_dim]`.
    pub k: Expr,
    /// V: `[rows, kv_heads, head_dim]`.
    pub v: Expr,
    /// The scales of int8 K and V: `[rows, kv_heads]` f32 each.
    pub scales: Option<(Expr, Expr)>,
}

impl KvView {
    /// `attention` of `q` over this view (`attention_q8kv` over an int8 one), scores
    /// scaled by `scale`, masked by `mask`.
    pub fn attention(&self, q: &Expr, scale: f64, mask: op::Mask) -> Result<Expr, InferError> {
        match &self.scales {
            Some((ks, vs)) => op::attention_q8kv(q, (&self.k, ks), (&self.v, vs), scale, mask),
            None => op::attention(q, &self.k, &self.v, scale, mask),
        }
    }
}

/// `sinfo` with only its rank and dtype: what a builtin's result declares before a
/// cast checks (and binds) its dims.
fn ranked(sinfo: &StructInfo) -> StructInfo {
    match sinfo {
        StructInfo::Tensor(t) => StructInfo::Tensor(TensorInfo {
            shape: t.ndim().map_or(TensorShape::Unknown, TensorShape::Rank),
            dtype: t.dtype,
        }),
        other => other.clone(),
    }
}

/// Emits `kv_cache.view(cache, layer)` and binds its tensors (see [`KvLayout`]) with
/// `rows` positions: views of the cache's storage, no copy. A `rows` that is a lone
/// unbound variable (`m` in the first view of a function) is bound by the cast; otherwise
/// the cast checks it.
pub fn view(
    bb: &mut BlockBuilder,
    cache: &Expr,
    layer: i64,
    layout: KvLayout,
    rows: SymExpr,
) -> Result<KvView, NnError> {
    let (kv, scales) = layout.view_sinfo(&rows);
    let fields = [&kv, &kv].into_iter().chain(scales.iter().chain(&scales));
    let view = packed(
        "kv_cache.view",
        vec![cache.clone(), int(layer)],
        StructInfo::Tuple(fields.map(ranked).collect()),
    );
    let view = Expr::from(bb.emit_named(view, "kv_view")?);
    let mut bind = |index: usize, sinfo: &StructInfo| -> Result<Expr, NnError> {
        let item = Expr::TupleGetItem(Box::new(view.clone()), index);
        Ok(bb.emit_match_cast(item, sinfo.clone())?.into())
    };
    let (k, v) = (bind(0, &kv)?, bind(1, &kv)?);
    let scales = match &scales {
        Some(s) => Some((bind(2, s)?, bind(3, s)?)),
        None => None,
    };
    Ok(KvView { k, v, scales })
}

/// Emits `kv_cache.append(cache, layer, k, v)` (k and v `[n, kv_heads, head_dim]` f32;
/// an f16 cache rounds them as it copies them in, so no cast kernel runs); for `q8`,
/// `kv_cache.append_q8(cache, layer, kq, vq, k_scales, v_scales)` with the codes and
/// scales computed by `activation_scales` and `quantize_kv`. Over a batch
/// (`kv_batch.append`, `kv_batch.append_q8`), row `i` goes to sequence `i`'s cache.
pub fn append(
    bb: &mut BlockBuilder,
    (cache, access): (&Expr, &CacheAccess),
    (layer, dtype): (i64, KvDtype),
    k: &Expr,
    v: &Expr,
) -> Result<(), NnError> {
    let family = family(access);
    let name = "kv_cache.append";
    let mut args = vec![cache.clone(), int(layer)];
    let builtin = match dtype {
        KvDtype::F32 | KvDtype::F16 => {
            args.extend([k.clone(), v.clone()]);
            "append"
        }
        KvDtype::Q8 => {
            let mut scales = Vec::with_capacity(2);
            for x in [k, v] {
                let s = emit(bb, name, op::activation_scales(x))?;
                args.push(emit(bb, name, op::quantize_kv(x, &s))?);
                scales.push(s);
            }
            args.extend(scales);
            "append_q8"
        }
    };
    let builtin = format!("{family}.{builtin}");
    bb.emit_named(packed(&builtin, args, StructInfo::Object), "kv_append")?;
    Ok(())
}

/// The builtins' prefix: `kv_cache` for one sequence's cache, `kv_batch` for a batch.
fn family(access: &CacheAccess) -> &'static str {
    match access {
        CacheAccess::Sequence { .. } => "kv_cache",
        CacheAccess::Batch { .. } => "kv_batch",
    }
}

/// Emits `kv_batch.attention(batch, layer, q, scale, window)`: row `i` of `q`
/// (`[b, heads, head_dim]` f32, one token per sequence) attends over the positions
/// sequence `i`'s cache holds in `layer` (its own included, appended before), scores
/// scaled by `scale`, the last `window` positions only for a sliding window (0: all of
/// them). Returns `[b, heads, head_dim]` f32.
pub fn batch_attention(
    bb: &mut BlockBuilder,
    (batch, layer): (&Expr, i64),
    q: &Expr,
    scale: f64,
    mask: op::Mask,
) -> Result<Expr, NnError> {
    let window = match mask {
        op::Mask::Window(window) => window,
        op::Mask::None | op::Mask::Causal => 0,
    };
    let sinfo = q.sinfo();
    let args = vec![
        batch.clone(),
        int(layer),
        q.clone(),
        Expr::Prim(PrimValue::Float(scale, DType::F32)),
        int(window),
    ];
    let out = packed("kv_batch.attention", args, ranked(&sinfo));
    let out = Expr::from(bb.emit_named(out, "batch_attention")?);
    Ok(bb.emit_match_cast(out, sinfo)?.into())
}
