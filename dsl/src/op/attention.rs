//! Fused grouped-query attention over a run of key/value positions:
//! `attention(q [n, heads, d], k [t, kv_heads, d], v [t, kv_heads, d], scale, causal)
//! -> [n, heads, d]`.
//!
//! Query head `h` reads kv head `h / (heads / kv_heads)` (heads grouped, not broadcast).
//! With `causal`, query `i` sits at position `t - n + i` (the last `n` of the `t`
//! positions) and sees keys `j <= t - n + i`; with a `window` `w` as well (sliding-window
//! attention), only the last `w` of those: `t - n + i - w < j`. The mask is computed from
//! the indices, never materialized. `out[i, h] = softmax_j(scale * q[i, h] . k[j, g(h)]) @ v[., g(h)]`.
//!
//! `q` and `out` are f32; `k` and `v` share one dtype of [`ATTENTION_KV_DTYPES`] (an f16 KV cache is
//! widened to f32 as it is read).
//!
//! `attention_q8kv(q, k, v, k_scales, v_scales, scale, causal)` is the same over an int8 KV
//! cache: `k` and `v` are i8 codes `[t, kv_heads, d]` and `k_scales`, `v_scales` their f32
//! scales `[t, kv_heads]` (one per position and kv head), dequantized as they are read:
//! `k[j, g, e] = k_codes[j, g, e] * k_scales[j, g]` (see [`quantize_kv`](super::quantize_kv)).

use super::ctx::InferCtx;
use super::{attr, call, InferError, OpDef};
use super::{AttrDefault, AttrKind, AttrSpec};
use crate::{AttrValue, Attrs, DType, Expr, StructInfo};

/// The attributes of both attention ops.
const ATTRS: &[AttrSpec] = &[
    AttrSpec::new("scale", AttrKind::Float, AttrDefault::Required),
    AttrSpec::new("causal", AttrKind::Bool, AttrDefault::Bool(true)),
    AttrSpec::new("window", AttrKind::Int, AttrDefault::Optional),
];

/// Which keys each query sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mask {
    /// Every key.
    None,
    /// Keys at or before the query's position.
    Causal,
    /// The last `window` keys at or before the query's position (sliding-window
    /// attention: query `p` sees keys `p - window < j <= p`).
    Window(i64),
}

impl From<bool> for Mask {
    /// `Causal` when `causal`, else `None`.
    fn from(causal: bool) -> Mask {
        if causal {
            Mask::Causal
        } else {
            Mask::None
        }
    }
}

impl Mask {
    /// The mask of an attention call's attributes (`causal`, `window`).
    pub fn of(attrs: &Attrs) -> Mask {
        match (attr::boolean(attrs, "causal"), attr::int(attrs, "window")) {
            (Some(false), _) => Mask::None,
            (_, Some(window)) => Mask::Window(window),
            _ => Mask::Causal,
        }
    }

    /// The window, if any.
    pub fn window(self) -> Option<i64> {
        match self {
            Mask::Window(window) => Some(window),
            _ => None,
        }
    }
}

/// The attention ops: over float K and V, and over int8 K and V with their scales.
pub(super) const OPS: &[OpDef] = &[
    OpDef {
        name: "attention",
        args: &["q", "k", "v"],
        attrs: ATTRS,
        infer: infer_attention,
    },
    OpDef {
        name: "attention_q8kv",
        args: &["q", "k", "v", "k_scales", "v_scales"],
        attrs: ATTRS,
        infer: infer_attention_q8kv,
    },
];

/// The dtypes `k` and `v` may have (`q` and the result are f32).
pub const ATTENTION_KV_DTYPES: [DType; 2] = [DType::F32, DType::F16];

fn infer_attention(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let (k, v) = (ctx.tensor(1)?, ctx.tensor(2)?);
    let kv_dtype = ctx.same_dtype(&k, &v)?;
    let kv_ok = |d| ATTENTION_KV_DTYPES.contains(&d);
    ctx.check_dtype(k.arg.clone(), kv_dtype, kv_ok, "f32 or f16")?;
    infer_grouped(ctx)
}

fn infer_attention_q8kv(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let (k, v) = (ctx.tensor(1)?, ctx.tensor(2)?);
    let kv_dtype = ctx.same_dtype(&k, &v)?;
    ctx.check_dtype(k.arg.clone(), kv_dtype, |d| d == DType::I8, "i8")?;
    for (index, codes) in [(3, &k), (4, &v)] {
        let scales = ctx.tensor(index)?;
        let rows = codes.dims.split_last().map(|(_, rows)| rows);
        let fits = rows.is_some_and(|rows| {
            scales.dims.len() == rows.len()
                && scales.dims.iter().zip(rows).all(|(a, b)| a.prove_equal(b))
        });
        if scales.dtype != DType::F32 || !fits {
            let reason = format!(
                "must be the f32 scales [t, kv_heads] of {}, got {} {}",
                codes.shape(),
                scales.dtype,
                scales.shape()
            );
            return Err(ctx.invalid_arg(index, reason));
        }
    }
    infer_grouped(ctx)
}

/// The checks both ops share (q f32 `[n, heads, d]`, k and v `[t, kv_heads, d]` with kv
/// heads grouping the heads, a `scale`) and their result, `[n, heads, d]` f32.
fn infer_grouped(ctx: &InferCtx<'_>) -> Result<StructInfo, InferError> {
    let (q, k, v) = (ctx.tensor(0)?, ctx.tensor(1)?, ctx.tensor(2)?);
    let dtype = q.dtype;
    ctx.check_dtype(q.arg.clone(), dtype, |d| d == DType::F32, "f32")?;
    ctx.require("scale", attr::float)?;
    if let Some(window) = ctx.attr("window", attr::int) {
        if window <= 0 || ctx.attr("causal", attr::boolean) == Some(false) {
            let reason = format!("must be positive and causal, got {window}");
            return Err(ctx.invalid_attr("window", reason));
        }
    }
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
/// (`[t, kv_heads, head_dim]`), scores scaled by `scale`; with a causal `mask`, query `i`
/// sees the first `t - n + i + 1` positions (with a window, the last `window` of them).
pub fn attention(
    q: &Expr,
    k: &Expr,
    v: &Expr,
    scale: f64,
    mask: impl Into<Mask>,
) -> Result<Expr, InferError> {
    call(
        "attention",
        vec![q.clone(), k.clone(), v.clone()],
        attrs(scale, mask.into()),
    )
}

/// [`attention`] over an int8 KV cache: `k` and `v` (`[t, kv_heads, head_dim]` i8 codes)
/// dequantized with their scales `k_scales` and `v_scales` (`[t, kv_heads]` f32) as they
/// are read.
pub fn attention_q8kv(
    q: &Expr,
    (k, k_scales): (&Expr, &Expr),
    (v, v_scales): (&Expr, &Expr),
    scale: f64,
    mask: impl Into<Mask>,
) -> Result<Expr, InferError> {
    let args = [q, k, v, k_scales, v_scales].map(Expr::clone).to_vec();
    call("attention_q8kv", args, attrs(scale, mask.into()))
}

/// The attributes of an attention call.
fn attrs(scale: f64, mask: Mask) -> Attrs {
    let mut attrs = Attrs::from([
        ("scale".to_string(), AttrValue::Float(scale)),
        ("causal".to_string(), AttrValue::Bool(mask != Mask::None)),
    ]);
    if let Some(window) = mask.window() {
        attrs.insert("window".to_string(), AttrValue::Int(window));
    }
    attrs
}
