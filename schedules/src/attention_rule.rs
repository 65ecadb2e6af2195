//! The attention rule: a legalized `attention` (q `[n, heads, d]`, k and v
//! `[t, kv_heads, d]`, out `[n, heads, d]`) becomes one attention microkernel call per
//! query row and kv head, over the query heads sharing that kv head (grouped-query
//! attention: the kernel reads each key and value once for them all; a decode row's
//! groups are split when it would otherwise have fewer than 4 calls), parallel over the
//! calls: `attention_f32`, or `attention_f16kv` when k and v are f16 (an f16 KV cache,
//! widened as the kernel loads it), or `attention_q8kv` for a legalized `attention_q8kv`
//! (i8 codes with f32 scales `[t, kv_heads]`, dequantized as the kernel loads them). Each call reads its kv head's rows in place (stride
//! `kv_heads * d`, and `kv_heads` for the scales: heads are grouped by index, never
//! broadcast) up to the causal limit computed from the row index — from the start of
//! the row's sliding window when the attention has one (the run's base moves, the kernel
//! is the same) — and keeps no score matrix.

use crate::rule::ScheduleRule;
use crate::tir_build::{ceil_div_const, for_loop, index, let_in, min};
use oxrelax_dsl::legalize::OP_ATTR;
use oxrelax_dsl::op::Mask;
use oxrelax_dsl::tir::{
    BinOp, Buffer, BufferRegion, ForKind, MicrokernelCall, MicrokernelSpec, PrimExpr, PrimFunc,
    Stmt,
};
use oxrelax_dsl::{AttrValue, DType, SymExpr};

/// Parallelize when the calls do at least this many multiply-adds (at the dims' upper
/// bounds).
const PARALLEL_MIN_MACS: i64 = 1 << 15;

/// A single query row (a decode step) is split into at least this many calls where its
/// groups allow; each call reads its kv head's keys and values once for its query heads.
const MIN_ROW_CALLS: i64 = 4;

/// One attention microkernel call per query row and kv head (or part of its group).
pub struct AttentionRule;

/// The parts of a recognized `attention`.
struct Attention<'a> {
    q: &'a Buffer,
    k: &'a Buffer,
    v: &'a Buffer,
    /// The scales of quantized k and v.
    scales: Option<(&'a Buffer, &'a Buffer)>,
    out: &'a Buffer,
    /// The microkernel over k and v's element type.
    kernel: &'static str,
    heads: i64,
    kv_heads: i64,
    dim: &'a SymExpr,
    scale: f64,
    mask: Mask,
}

fn recognize(func: &PrimFunc) -> Option<Attention<'_>> {
    let attr = |name: &str| func.attrs.get(name);
    if !matches!(attr(OP_ATTR), Some(AttrValue::Str(s)) if s == "attention" || s == "attention_q8kv")
    {
        return None;
    }
    let (Some(AttrValue::Float(scale)), Some(AttrValue::Bool(_))) = (attr("scale"), attr("causal"))
    else {
        return None;
    };
    let (q, k, v, scales, out) = match func.params.as_slice() {
        [q, k, v, out] => (q, k, v, None, out),
        [q, k, v, k_scales, v_scales, out] => (q, k, v, Some((k_scales, v_scales)), out),
        _ => return None,
    };
    let plain = [q, k, v, out]
        .iter()
        .all(|b| b.strides.is_none() && b.shape.len() == 3);
    let f32_rows = q.dtype == DType::F32 && out.dtype == DType::F32;
    if !plain || !f32_rows || k.dtype != v.dtype || func.num_outputs != 1 {
        return None;
    }
    let scales_dtype = match scales {
        Some((ks, vs)) => {
            let rows = |b: &Buffer| b.strides.is_none() && b.shape.len() == 2;
            (rows(ks) && rows(vs) && ks.dtype == vs.dtype).then_some(Some(ks.dtype))?
        }
        None => None,
    };
    let kernel = MicrokernelSpec::attention_over((k.dtype, scales_dtype))?.name;
    let (heads, kv_heads, dim) = (q.shape[1].as_const()?, k.shape[1].as_const()?, &q.shape[2]);
    if kv_heads <= 0 || heads % kv_heads != 0 {
        return None;
    }
    Some(Attention {
        q,
        k,
        v,
        scales,
        out,
        kernel,
        heads,
        kv_heads,
        dim,
        scale: *scale,
        mask: Mask::of(&func.attrs),
    })
}

/// How one query row's heads are split into calls: `parts` calls per kv head, each over
/// `per_call` consecutive query heads of the kv head's group (the last call over the rest).
struct Split {
    parts: i64,
    per_call: i64,
}

impl Split {
    /// The whole group per call, except that a single query row (decode) is split into at
    /// least [`MIN_ROW_CALLS`] calls where the group allows, so that many cores share it.
    fn of(a: &Attention<'_>) -> Split {
        let group = a.heads / a.kv_heads;
        let single_row = a.q.shape[0].as_const() == Some(1);
        let wanted = if single_row {
            ceil_div_const(MIN_ROW_CALLS, a.kv_heads).clamp(1, group)
        } else {
            1
        };
        let per_call = ceil_div_const(group, wanted);
        Split {
            parts: ceil_div_const(group, per_call),
            per_call,
        }
    }

    /// Whether every call covers `per_call` query heads.
    fn uniform(&self, group: i64) -> bool {
        self.parts * self.per_call == group
    }
}

/// `a * b` for a constant `b` (`a` itself when `b` is 1).
fn times(a: PrimExpr, b: i64) -> PrimExpr {
    if b == 1 {
        a
    } else {
        a * PrimExpr::index(b)
    }
}

/// `a / b` for a positive constant `b` (`a` itself when `b` is 1).
fn div(a: PrimExpr, b: i64) -> PrimExpr {
    if b == 1 {
        a
    } else {
        a.binary(BinOp::FloorDiv, PrimExpr::index(b))
    }
}

/// `a % b` for a positive constant `b` (0 when `b` is 1).
fn rem(a: PrimExpr, b: i64) -> PrimExpr {
    if b == 1 {
        PrimExpr::index(0)
    } else {
        a.binary(BinOp::FloorMod, PrimExpr::index(b))
    }
}

/// The first key a query at `position` sees (`None`: key 0) and how many from there (`t`
/// keys in all): every key without a mask; up to the query's own position when causal
/// (none before position 0); the last `window` of those with a window.
fn key_run(mask: Mask, t: PrimExpr, position: PrimExpr) -> (Option<PrimExpr>, PrimExpr) {
    let limit = || {
        let limit = position.clone() + PrimExpr::index(1);
        min(t.clone(), limit.binary(BinOp::Max, PrimExpr::index(0)))
    };
    match mask {
        Mask::None => (None, t.clone()),
        Mask::Causal => (None, limit()),
        Mask::Window(window) => {
            let start = position.clone() - PrimExpr::index(window - 1);
            let first = min(start.binary(BinOp::Max, PrimExpr::index(0)), limit());
            (Some(first.clone()), limit() - first)
        }
    }
}

impl ScheduleRule for AttentionRule {
    fn name(&self) -> &'static str {
        "attention"
    }

    fn describe(&self) -> String {
        "attention: attention_f32/_f16kv/_q8kv per query row and kv head".to_string()
    }

    fn apply(&self, func: &PrimFunc) -> Option<PrimFunc> {
        let a = recognize(func)?;
        let (n, t) = (PrimExpr::from(&a.q.shape[0]), PrimExpr::from(&a.k.shape[0]));
        // Positions before the first query (`m` in a model: the cache before this call).
        let past = PrimExpr::from(&(a.k.shape[0].clone() - a.q.shape[0].clone()));
        let group = a.heads / a.kv_heads;
        let split = Split::of(&a);
        let calls = a.kv_heads * split.parts;
        let dim = PrimExpr::from(a.dim);
        // Task `r` is query row `r / calls`, kv head `(r % calls) / parts`, its query heads
        // from `kv_head * group + part * per_call` (`part = r % parts`); with every call
        // covering `per_call` heads, its q and out rows start at `r * per_call * dim`.
        let row = div(index("r"), calls);
        let kv_head = rem(div(index("r"), split.parts), a.kv_heads);
        let part = rem(index("r"), split.parts);
        let (queries, rows) = if split.uniform(group) {
            let queries = times(index("r"), split.per_call) * dim.clone();
            (queries, PrimExpr::index(split.per_call))
        } else {
            let first = kv_head.clone() * PrimExpr::index(group)
                + part.clone() * PrimExpr::index(split.per_call);
            let queries = (row.clone() * PrimExpr::index(a.heads) + first) * dim.clone();
            let rest = PrimExpr::index(group) - part * PrimExpr::index(split.per_call);
            (queries, min(PrimExpr::index(split.per_call), rest))
        };
        let (first, keys) = key_run(a.mask, t, past + row);
        let kv_width = PrimExpr::from(&(SymExpr::int(a.kv_heads) * a.dim.clone()));
        // Row `j`'s elements of kv head `g` start at `j * kv_width + g * dim`, its scale at
        // `j * kv_heads + g`.
        let kv_row = kv_head.clone() * dim.clone();
        let kv_row = match &first {
            Some(first) => first.clone() * kv_width.clone() + kv_row,
            None => kv_row,
        };
        let region = |buffer: &Buffer, offset: PrimExpr| BufferRegion {
            buffer: buffer.name.clone(),
            offset,
        };
        let mut operands = vec![
            region(a.q, queries.clone()),
            region(a.k, index("kv_row")),
            region(a.v, index("kv_row")),
        ];
        let mut scalars = vec![rows, keys, kv_width, dim.clone(), PrimExpr::f32(a.scale)];
        // Quantized rows' scales: row `j`'s at `j * kv_heads + kv_head`.
        if let Some((k_scales, v_scales)) = a.scales {
            let scale_row = match first {
                Some(first) => first * PrimExpr::index(a.kv_heads) + kv_head,
                None => kv_head,
            };
            operands.push(region(k_scales, scale_row.clone()));
            operands.push(region(v_scales, scale_row));
            scalars.push(PrimExpr::index(a.kv_heads));
        }
        operands.push(region(a.out, queries));
        let call = Stmt::Microkernel(MicrokernelCall {
            kernel: a.kernel.to_string(),
            operands,
            scalars,
        });
        let body = let_in("kv_row", kv_row, call);
        let bound = |e: &SymExpr| e.max_value().unwrap_or(i64::MAX);
        let macs = bound(&a.q.shape[0])
            .saturating_mul(bound(&a.k.shape[0]))
            .saturating_mul(bound(a.dim))
            .saturating_mul(a.heads * 2);
        let kind = if macs >= PARALLEL_MIN_MACS {
            ForKind::Parallel
        } else {
            ForKind::Serial
        };
        Some(PrimFunc {
            body: for_loop("r", n * PrimExpr::index(calls), kind, body),
            ..func.clone()
        })
    }
}
