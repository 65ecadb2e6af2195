//! Calls of the runtime's `kv_cache.*` builtins from the graph. The cache stores K and V
//! as one of [`KV_DTYPES`] (an export option); the models compute in f32, cast the new K
//! and V to the cache's dtype before appending them, and attention reads the cache as
//! stored (an f16 cache is widened as the attention kernel loads it).

use super::emit;
use oxrelax_dsl::ir::{Call, Callee, PrimValue};
use oxrelax_dsl::nn::NnError;
use oxrelax_dsl::{
    op, Attrs, BlockBuilder, DataType, Expr, StructInfo, SymExpr, TensorInfo, TensorShape,
};

/// The element types a KV cache may store: f32, or f16 (half the memory and the bytes
/// attention streams).
pub const KV_DTYPES: [DataType; 2] = op::ATTENTION_KV_DTYPES;

/// An integer argument of a builtin.
pub fn int(value: i64) -> Expr {
    Expr::Prim(PrimValue::Int(SymExpr::int(value), DataType::I64))
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

/// `kv_cache.create(layers, kv_heads, head_dim, capacity, "f32")` (or `"f16"`: the
/// cache's `dtype`).
pub fn create(layers: i64, kv_heads: i64, head_dim: i64, capacity: i64, dtype: DataType) -> Expr {
    let sizes = [layers, kv_heads, head_dim, capacity].map(int);
    let dtype = Expr::Str(dtype.to_string());
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
    /// The element type the cache stores (one of [`KV_DTYPES`]).
    pub dtype: DataType,
}

impl KvLayout {
    /// One layer's K or V: `[rows, kv_heads, head_dim]` of the cache's dtype.
    fn sinfo(self, rows: SymExpr) -> StructInfo {
        let shape = vec![
            rows,
            SymExpr::int(self.kv_heads),
            SymExpr::int(self.head_dim),
        ];
        StructInfo::tensor(shape, self.dtype)
    }
}

/// Emits `kv_cache.view(cache, layer)` and binds its K and V as
/// `[rows, kv_heads, head_dim]` of the cache's dtype: views of the cache's storage, no
/// copy. A `rows` that is a lone unbound variable (`m` in the first view of a function) is
/// bound by the cast; otherwise the cast checks it.
pub fn view(
    bb: &mut BlockBuilder,
    cache: &Expr,
    layer: i64,
    layout: KvLayout,
    rows: SymExpr,
) -> Result<(Expr, Expr), NnError> {
    let rank3 = StructInfo::Tensor(TensorInfo {
        shape: TensorShape::Rank(3),
        dtype: layout.dtype,
    });
    let view = packed(
        "kv_cache.view",
        vec![cache.clone(), int(layer)],
        StructInfo::Tuple(vec![rank3.clone(), rank3]),
    );
    let view = Expr::from(bb.emit_named(view, "kv_view")?);
    let mut bind = |index: usize| -> Result<Expr, NnError> {
        let item = Expr::TupleGetItem(Box::new(view.clone()), index);
        Ok(bb.emit_match_cast(item, layout.sinfo(rows.clone()))?.into())
    };
    Ok((bind(0)?, bind(1)?))
}

/// Emits `kv_cache.append(cache, layer, k, v)` (k and v `[n, kv_heads, head_dim]` f32),
/// casting k and v to `dtype`, the cache's, first (nothing for an f32 cache).
pub fn append(
    bb: &mut BlockBuilder,
    cache: &Expr,
    (layer, dtype): (i64, DataType),
    k: &Expr,
    v: &Expr,
) -> Result<(), NnError> {
    let mut stored = |x: &Expr| match dtype {
        DataType::F32 => Ok(x.clone()),
        _ => emit(bb, "kv_cache.append", op::astype(x, dtype)),
    };
    let (k, v) = (stored(k)?, stored(v)?);
    let call = packed(
        "kv_cache.append",
        vec![cache.clone(), int(layer), k, v],
        StructInfo::Object,
    );
    bb.emit_named(call, "kv_append")?;
    Ok(())
}
