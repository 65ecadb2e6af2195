//! `attention` (see [`crate::op::attention`]) as four stages: the masked, scaled scores
//! `[n, heads, t]`, their row maximum, the sum of exponentials, and the weighted sum of the
//! values. K and V of f16 (an f16 KV cache) are widened to f32 as each element is read;
//! `attention_q8kv`'s int8 codes are dequantized (code times its position's and kv head's
//! scale) as each element is read. A sliding window masks the keys before it as the
//! causal mask masks those after the query.
//! This is the reference (and the fallback schedule); the attention schedule rule
//! replaces it with one microkernel call per query row and kv head (over the query heads
//! sharing it), which reads K and V in place and keeps no score matrix.

use super::call::OpCall;
use super::error::LegalizeError;
use super::kernel::{load, Kernel, OpPattern};
use crate::op::Mask;
use crate::te::{self, Expr};
use crate::{AttrValue, DType};

/// The ops of this family.
pub(super) const OPS: &[&str] = &["attention", "attention_q8kv"];

/// The f32 value of K or V at `[j, g, e]`: the element widened, or for int8 codes (with
/// their scales `[t, kv_heads]`) the code times its scale.
fn kv_value(codes: &te::Tensor, scales: Option<&te::Tensor>, at: [Expr; 3]) -> Expr {
    let value = load(codes, &at).cast(DType::F32);
    match scales {
        Some(scales) => value * load(scales, &at[..2]),
        None => value,
    }
}

/// Legalizes `attention` and `attention_q8kv`.
pub(super) fn legalize(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let names: &[&str] = match call.op {
        "attention_q8kv" => &["q", "k", "v", "k_scales", "v_scales"],
        _ => &["q", "k", "v"],
    };
    let (inputs, args) = call.inputs(names)?;
    let (q, k, v) = (&inputs[0], &inputs[1], &inputs[2]);
    let (k_scales, v_scales) = (inputs.get(3), inputs.get(4));
    let (shape, dtype) = call.output_of_rank(3)?;
    let scale = call.float_attr("scale", 1.0)?;
    call.bool_attr("causal", true)?;
    let mask = Mask::of(&call.call.attrs);
    let (n, heads, dim) = (&q.shape()[0], &q.shape()[1], &q.shape()[2]);
    let (t, kv_heads) = (&k.shape()[0], &k.shape()[1]);
    let group = match (heads.as_const(), kv_heads.as_const()) {
        (Some(h), Some(g)) if g > 0 && h % g == 0 => h / g,
        _ => {
            return Err(call.shape_error(format!("{kv_heads} kv heads do not group {heads} heads")))
        }
    };
    let past = Expr::from(t.clone()) - Expr::from(n.clone());
    let kv_head = |h: &Expr| h.floordiv(Expr::int(group));
    let d = te::reduce_axis("d", dim.clone());
    let scores = te::compute("scores", vec![n.clone(), heads.clone(), t.clone()], |i| {
        let (row, h, j) = (&i[0], &i[1], &i[2]);
        let dot = te::sum(
            load(q, &[row.clone(), h.clone(), d.var()])
                * kv_value(k, k_scales, [j.clone(), kv_head(h), d.var()]),
            std::slice::from_ref(&d),
        );
        let scaled = dot * Expr::f32(scale);
        let position = past.clone() + row.clone();
        let visible = match mask {
            Mask::None => return scaled,
            Mask::Causal => j.le(position),
            Mask::Window(w) => j.le(position.clone()).and(j.gt(position - Expr::int(w))),
        };
        te::select(visible, scaled, Expr::neg_inf(DType::F32))
    });
    let row_shape = vec![n.clone(), heads.clone()];
    let j = te::reduce_axis("j", t.clone());
    let score_max = te::compute("score_max", row_shape.clone(), |i| {
        te::max(
            scores.at(&[i[0].clone(), i[1].clone(), j.var()]),
            std::slice::from_ref(&j),
        )
    });
    let weight = |i: &Expr, h: &Expr, j: Expr| {
        (scores.at(&[i.clone(), h.clone(), j]) - score_max.at(&[i.clone(), h.clone()])).exp()
    };
    let weight_sum = te::compute("weight_sum", row_shape, |i| {
        te::sum(weight(&i[0], &i[1], j.var()), std::slice::from_ref(&j))
    });
    let out = te::compute("out", shape, |i| {
        let (row, h, e) = (&i[0], &i[1], &i[2]);
        let value = kv_value(v, v_scales, [j.var(), kv_head(h), e.clone()]);
        let sum = te::sum(weight(row, h, j.var()) * value, std::slice::from_ref(&j));
        (sum / weight_sum.at(&[row.clone(), h.clone()])).cast(dtype)
    });
    let mut attrs = vec![
        ("scale", AttrValue::Float(scale)),
        ("causal", AttrValue::Bool(mask != Mask::None)),
    ];
    attrs.extend(mask.window().map(|w| ("window", AttrValue::Int(w))));
    Ok(Kernel::new(inputs, args, out, OpPattern::Opaque).with_attrs(&attrs))
}
