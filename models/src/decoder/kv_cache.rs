//! Calls of the runtime's `kv_cache.*` builtins from the graph.

use oxrelax_dsl::ir::{Call, Callee, PrimValue};
use oxrelax_dsl::nn::NnError;
use oxrelax_dsl::{
    Attrs, BlockBuilder, DataType, Expr, StructInfo, SymExpr, TensorInfo, TensorShape,
};

/// The element type the KV cache stores (the models compute in f32).
pub const KV_DTYPE: DataType = DataType::F32;

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

/// `kv_cache.create(layers, kv_heads, head_dim, capacity, "f32")`.
pub fn create(layers: i64, kv_heads: i64, head_dim: i64, capacity: i64) -> Expr {
    let sizes = [layers, kv_heads, head_dim, capacity].map(int);
    let dtype = Expr::Str(KV_DTYPE.to_string());
    packed(
        "kv_cache.create",
        [&sizes[..], &[dtype]].concat(),
        StructInfo::Object,
    )
}

/// One layer's K or V: `[rows, kv_heads, head_dim]`.
fn kv_sinfo(rows: SymExpr, kv_heads: i64, head_dim: i64) -> StructInfo {
    StructInfo::tensor(
        vec![rows, SymExpr::int(kv_heads), SymExpr::int(head_dim)],
        KV_DTYPE,
    )
}

/// Emits `kv_cache.view(cache, layer)` and binds its K and V as
/// `[rows, kv_heads, head_dim]`: views of the cache's storage, no copy. A `rows` that is a
/// lone unbound variable (`m` in the first view of a function) is bound by the cast;
/// otherwise the cast checks it.
pub fn view(
    bb: &mut BlockBuilder,
    cache: &Expr,
    layer: i64,
    (kv_heads, head_dim): (i64, i64),
    rows: SymExpr,
) -> Result<(Expr, Expr), NnError> {
    let rank3 = StructInfo::Tensor(TensorInfo {
        shape: TensorShape::Rank(3),
        dtype: KV_DTYPE,
    });
    let view = packed(
        "kv_cache.view",
        vec![cache.clone(), int(layer)],
        StructInfo::Tuple(vec![rank3.clone(), rank3]),
    );
    let view = Expr::from(bb.emit_named(view, "kv_view")?);
    let mut bind = |index: usize| -> Result<Expr, NnError> {
        let item = Expr::TupleGetItem(Box::new(view.clone()), index);
        let sinfo = kv_sinfo(rows.clone(), kv_heads, head_dim);
        Ok(bb.emit_match_cast(item, sinfo)?.into())
    };
    Ok((bind(0)?, bind(1)?))
}

/// Emits `kv_cache.append(cache, layer, k, v)` (k and v `[n, kv_heads, head_dim]`).
pub fn append(
    bb: &mut BlockBuilder,
    cache: &Expr,
    layer: i64,
    k: &Expr,
    v: &Expr,
) -> Result<(), NnError> {
    let call = packed(
        "kv_cache.append",
        vec![cache.clone(), int(layer), k.clone(), v.clone()],
        StructInfo::Object,
    );
    bb.emit_named(call, "kv_append")?;
    Ok(())
}
