//! Calls of the runtime's `kv_cache.*` builtins from the graph, and the causal mask over
//! past and new positions.

use super::Dims;
use oxrelax_dsl::ir::{Call, Callee, PrimValue};
use oxrelax_dsl::nn::NnError;
use oxrelax_dsl::{
    te, Attrs, BlockBuilder, DataType, Expr, StructInfo, SymExpr, TensorInfo, TensorShape,
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

/// Emits `kv_cache.view(cache, layer)` and binds its K and V as `[m, kv_heads, head_dim]`
/// (the first view of a function binds `m`, later ones are checked against it).
pub fn view_past(
    bb: &mut BlockBuilder,
    cache: &Expr,
    layer: i64,
    (kv_heads, head_dim): (i64, i64),
    dims: &Dims,
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
        let sinfo = kv_sinfo(dims.past.expr(), kv_heads, head_dim);
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

/// `[n, m + n]`: 0 where query `i` (at position `m + i`) may see key `j` (`j <= m + i`),
/// `-inf` elsewhere.
pub fn causal_mask_with_past(bb: &mut BlockBuilder, dims: &Dims) -> Result<Expr, NnError> {
    let (n, m) = (dims.tokens.clone(), dims.past.expr());
    let extra: Vec<_> = n.vars().into_iter().chain([dims.past.clone()]).collect();
    let var = bb.emit_te_with_dims("causal_mask", &[], &extra, |_| {
        te::compute(
            "causal_mask",
            vec![n.clone(), m.clone() + n.clone()],
            |idx| {
                let visible = idx[1].le(te::Expr::from(&m) + &idx[0]);
                te::select(
                    visible,
                    te::Expr::f32(0.0),
                    te::Expr::neg_inf(DataType::F32),
                )
            },
        )
    })?;
    Ok(var.into())
}
