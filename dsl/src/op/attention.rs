//! Fused grouped-query attention over a run of key/value positions:
//! `attention(q [n, heads, d], k [t, kv_heads, d], v [t, kv_heads, d], scale, causal)
//! -> [n, heads, d]`.
//!
//! Query head `h` reads kv head `h / (heads / kv_heads)` (heads grouped, not broadcast).
//! With `causal`, query `i` sits at position `t - n + i` (the last `n` of the `t`
//! positions) and sees keys `j <= t - n + i`; the mask is computed from the indices, never
//! materialized. `out[i, h] = softmax_j(scale * q[i, h] . k[j, g(h)]) @ v[., g(h)]`.
//!
//! `q` and `out` are f32; `k` and `v` share one dtype of [`ATTENTION_KV_DTYPES`] (an f16 KV cache is
//! widened to f32 as it is read).

use super::ctx::InferCtx;
use super::{attr, call, InferError, OpDef};
use super::{AttrDefault, AttrKind, AttrSpec};
use crate::{AttrValue, Attrs, DataType, Expr, StructInfo};

/// The attention op.
pub(super) const OPS: &[OpDef] = &[OpDef {
    name: "attention",
    args: &["q", "k", "v"],
    attrs: &[
        AttrSpec::new("scale", AttrKind::Float, AttrDefault::Required),
        AttrSpec::new("causal", AttrKind::Bool, AttrDefault::Bool(true)),
    ],
    infer: infer_attention,
}];

/// The dtypes `k` and `v` may have (`q` and the result are f32).
pub const ATTENTION_KV_DTYPES: [DataType; 2] = [DataType::F32, DataType::F16];

fn infer_attention(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let (q, k, v) = (ctx.tensor(0)?, ctx.tensor(1)?, ctx.tensor(2)?);
    let dtype = q.dtype;
    ctx.check_dtype(q.arg.clone(), dtype, |d| d == DataType::F32, "f32")?;
    let kv_dtype = ctx.same_dtype(&k, &v)?;
    let kv_ok = |d| ATTENTION_KV_DTYPES.contains(&d);
    ctx.check_dtype(k.arg.clone(), kv_dtype, kv_ok, "f32 or f16")?;
    ctx.require("scale", attr::float)?;
    let [_, heads, dim] = q.dims else {
        return Err(ctx.invalid_arg(
            0,
            format!("must be [n, heads, head_dim], got {}", q.shape()),
        ));
    };
    for (index, kv) in [(1, &k), (2, &v)] {
        let [_, kv_heads, kv_dim] = kv.dims else {
            let reason = format!("must be [t, kv_heads, head_dim], got {}", kv.shape());
            return Err(ctx.invalid_arg(index, reason));
        };
        let grouped = match (heads.as_const(), kv_heads.as_const()) {
            (Some(h), Some(g)) => g > 0 && h % g == 0,
            _ => false,
        };
        if !grouped || !kv_dim.prove_equal(dim) || !kv.dims[0].prove_equal(&k.dims[0]) {
            let reason = format!(
                "{} does not fit q {} and k {} (kv heads must divide the static query heads, \
                 head dims and positions must agree)",
                kv.shape(),
                q.shape(),
                k.shape()
            );
            return Err(ctx.invalid_arg(index, reason));
        }
    }
    Ok(StructInfo::tensor(q.dims.to_vec(), dtype))
}

/// Grouped-query attention of `q` (`[n, heads, head_dim]`) over `k` and `v`
/// (`[t, kv_heads, head_dim]`), scores scaled by `scale`; with `causal`, query `i` sees the
/// first `t - n + i + 1` positions.
pub fn attention(
    q: &Expr,
    k: &Expr,
    v: &Expr,
    scale: f64,
    causal: bool,
) -> Result<Expr, InferError> {
    let attrs = Attrs::from([
        ("scale".to_string(), AttrValue::Float(scale)),
        ("causal".to_string(), AttrValue::Bool(causal)),
    ]);
    call("attention", vec![q.clone(), k.clone(), v.clone()], attrs)
}
