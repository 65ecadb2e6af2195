//! The quantization ops (see [`crate::op::quantize_scales`]): the group scales and the
//! rounded panels as plain loop nests (they run once, when weights are transformed), and
//! the quantized matmul and row gather, dequantizing as they read.

use super::call::OpCall;
use super::error::LegalizeError;
use super::kernel::{load, Kernel, OpPattern};
use super::packed::matmul_kernel;
use crate::op::{QuantLayout, QuantPanels};
use crate::te::{self, Expr, Tensor};
use crate::tir::QUANT_GROUP;
use crate::{DType, SymExpr};

/// The ops of this family.
pub(super) const OPS: &[&str] = &[
    "quantize_scales",
    "quantize_offsets",
    "pack_weight_quant",
    "packed_matmul_quant",
    "take_quant",
    "dequantize_weight",
];

/// Legalizes any op of the family.
pub(super) fn legalize(call: &OpCall) -> Result<Kernel, LegalizeError> {
    match call.op {
        "quantize_scales" => scales(call),
        "quantize_offsets" => offsets(call),
        "pack_weight_quant" => pack(call),
        "packed_matmul_quant" => matmul(call),
        "take_quant" => take(call),
        _ => dequantize(call),
    }
}

/// `weight[row, l]` for panel `p`, lane `j` (row `p*HP + j`), 0 outside the weight (the
/// clamped indices keep the unused read inside it).
pub(super) fn weight_at(weight: &Tensor, (p, j, l): (&Expr, &Expr, &Expr), block: &Expr) -> Expr {
    let rows = Expr::from(weight.shape()[0].clone());
    let depth = Expr::from(weight.shape()[1].clone());
    let row = p.clone() * block.clone() + j.clone();
    let inside = row.lt(rows.clone()).and(l.lt(depth.clone()));
    let value = load(
        weight,
        &[
            row.minimum(rows - Expr::int(1)),
            l.minimum(depth - Expr::int(1)),
        ],
    );
    te::select(inside, value, Expr::constant(0.0, DType::F32))
}

/// The 4-bit scale search's candidates: divisors `n` of the group's peak value `m`, each
/// giving the codes `clamp(round(-w * n / m), -8, 7)` (n = 8 maps the peak onto -8, as
/// llama.cpp's q4_0, so a group never does worse than there; the others trade clipping
/// the peak for a finer step). None is a half-integer, which would put the peak itself on
/// a rounding tie. Eight: two 4-lane vectors.
const Q4_DIVISORS: [f64; 8] = [7.0, 7.3, 7.6, 7.9, 8.0, 8.3, 8.6, 9.0];

/// 8 bits: `out[p, g, j] = max_{k < 32} |w(p*HP + j, g*32 + k)| / 127`. 4 bits:
/// [`least_squares_scales`]; asymmetric 4 bits: `(max_k w - min_k w) / 15`.
///
/// Every stage works on one group of one column, in one loop nest over them: the group's
/// values are copied out once (`group [P, G, HP, 32]`).
fn scales(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let (inputs, args) = call.inputs(&["weight"])?;
    let weight = &inputs[0];
    let (shape, dtype) = call.output_of_rank(3)?;
    let block = Expr::from(shape[2].clone());
    let group = te::compute("group", with_dim(&shape, QUANT_GROUP), |i| {
        let l = i[1].clone() * Expr::int(QUANT_GROUP) + i[3].clone();
        weight_at(weight, (&i[0], &i[2], &l), &block)
    });
    let out = if call.bool_attr("asymmetric", false)? {
        let span = |name: &str, extreme: fn(Expr, &[te::ReduceAxis]) -> Expr| {
            let k = te::reduce_axis("k", QUANT_GROUP.into());
            te::compute(name, shape.clone(), |i| {
                extreme(group_value(&group, i, k.var()), std::slice::from_ref(&k))
            })
        };
        let (low, high) = (span("low", te::min), span("high", te::max));
        te::compute("scales", shape.clone(), |i| {
            ((high.at(i) - low.at(i)) * Expr::f32(1.0 / 15.0)).cast(dtype)
        })
    } else if call.int_attr("bits", 8)? == 4 {
        least_squares_scales(&group, &shape, dtype)
    } else {
        let peak = peak_magnitude(&group, &shape);
        te::compute("scales", shape, |i| {
            (peak.at(i) * Expr::f32(1.0 / 127.0)).cast(dtype)
        })
    };
    let kernel = Kernel::new(inputs, args, out, OpPattern::Reduction);
    Ok(kernel.sharing_outer_loops(3))
}

/// `out[h, g] = min_{k < 32} w(h, g*32 + k) + 8 * scale(h, g)`, the scale widened from
/// its stored dtype (so `w - out` lies on the grid of the scale as stored).
fn offsets(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let (inputs, args) = call.inputs(&["weight", "scales"])?;
    let (weight, scales) = (&inputs[0], &inputs[1]);
    let (shape, dtype) = call.output_of_rank(2)?;
    let block = Expr::from(scales.shape()[2].clone());
    let k = te::reduce_axis("k", QUANT_GROUP.into());
    let low = te::compute("low", shape.clone(), |i| {
        let l = i[1].clone() * Expr::int(QUANT_GROUP) + k.var();
        te::min(load(weight, &[i[0].clone(), l]), std::slice::from_ref(&k))
    });
    let out = te::compute("offsets", shape, |i| {
        let (h, g) = (&i[0], &i[1]);
        let at = [
            h.floordiv(block.clone()),
            g.clone(),
            h.floormod(block.clone()),
        ];
        let scale = load(scales, &at).cast(DType::F32);
        (low.at(i) + Expr::f32(8.0) * scale).cast(dtype)
    });
    Ok(Kernel::new(inputs, args, out, OpPattern::Reduction))
}

/// `shape` with a trailing dim of `extent`.
fn with_dim(shape: &[SymExpr], extent: i64) -> Vec<SymExpr> {
    let mut dims = shape.to_vec();
    dims.push(extent.into());
    dims
}

/// Value `k` of the group at `i[..3]` of `group [P, G, HP, 32]`.
fn group_value(group: &Tensor, i: &[Expr], k: Expr) -> Expr {
    group.at(&[i[0].clone(), i[1].clone(), i[2].clone(), k])
}

/// `peak[p, g, j]`: the largest magnitude of the group.
fn peak_magnitude(group: &Tensor, shape: &[SymExpr]) -> Tensor {
    let k = te::reduce_axis("k", QUANT_GROUP.into());
    te::compute("peak", shape.to_vec(), |i| {
        te::max(
            group_value(group, i, k.var()).abs(),
            std::slice::from_ref(&k),
        )
    })
}

/// The 4-bit scales: per group, the least-squares scale of the best candidate codes. For
/// each of [`Q4_DIVISORS`], the codes `L` of the group and the scale
/// `sum(w L) / sum(L^2)` minimizing `sum((w - s L)^2)` for them; the candidate whose
/// error is least (largest `sum(w L)^2 / sum(L^2)`) wins. 0 for a group of zeros. The
/// candidates' sums are written out term by term, so the loop over candidates is the
/// innermost one and runs on vectors.
fn least_squares_scales(group: &Tensor, shape: &[SymExpr], dtype: DType) -> Tensor {
    let value = |i: &[Expr], k: Expr| group_value(group, i, k);
    let peak = peak_magnitude(group, shape);
    // The step of the n = 1 candidate: `-m` (the peak's value, sign flipped), 1 for zeros.
    let k = te::reduce_axis("k", QUANT_GROUP.into());
    let unit = te::compute("unit_step", shape.to_vec(), |i| {
        let w = value(i, k.var());
        let candidate = te::select(w.abs().ge(peak.at(i)), -w, Expr::neg_inf(DType::F32));
        let m = te::max(candidate, std::slice::from_ref(&k));
        te::select(peak.at(i).equal(Expr::f32(0.0)), Expr::f32(1.0), m)
    });
    let divisors = Q4_DIVISORS.len() as i64;
    let divisor = |c: &Expr| {
        Q4_DIVISORS[1..]
            .iter()
            .enumerate()
            .fold(Expr::f32(Q4_DIVISORS[0]), |acc, (n, &d)| {
                te::select(c.equal(Expr::int(n as i64 + 1)), Expr::f32(d), acc)
            })
    };
    let inverse_step = te::compute("inverse_step", with_dim(shape, divisors), |i| {
        divisor(&i[3]) / unit.at(&i[..3])
    });
    // `sum_k term(w_k, L_k)` for candidate `i[3]`, one term per value of the group.
    let fit = |name: &str, term: fn(Expr, Expr) -> Expr| {
        te::compute(name, with_dim(shape, divisors), |i| {
            let terms = (0..QUANT_GROUP).map(|k| {
                let w = value(i, Expr::int(k));
                let code = (w.clone() * inverse_step.at(i) + Expr::f32(0.5))
                    .floor()
                    .clamp(-8.0, 7.0);
                term(w, code)
            });
            terms.reduce(|a, b| a + b).expect("a group has values")
        })
    };
    let wl = fit("fit_wl", |w, code| w * code);
    let ll = fit("fit_ll", |_, code| code.clone() * code);
    // Candidate `c`'s (fit, least-squares scale); (0, 0) when all its codes are 0.
    let score = |i: &[Expr], c: &Expr| {
        let at = [i[0].clone(), i[1].clone(), i[2].clone(), c.clone()];
        let (wl, ll) = (wl.at(&at), ll.at(&at));
        let nonzero = ll.gt(Expr::f32(0.0));
        let safe = te::select(nonzero.clone(), ll.clone(), Expr::f32(1.0));
        (
            te::select(
                nonzero.clone(),
                wl.clone() * wl.clone() / safe.clone(),
                Expr::f32(0.0),
            ),
            te::select(nonzero, wl / safe, Expr::f32(0.0)),
        )
    };
    let c = te::reduce_axis("c", divisors.into());
    let best = te::compute("best_fit", shape.to_vec(), |i| {
        te::max(score(i, &c.var()).0, std::slice::from_ref(&c))
    });
    let c = te::reduce_axis("c", divisors.into());
    te::compute("scales", shape.to_vec(), |i| {
        let (fit, scale) = score(i, &c.var());
        let candidate = te::select(fit.ge(best.at(i)), scale, Expr::neg_inf(DType::F32));
        te::max(candidate, std::slice::from_ref(&c)).cast(dtype)
    })
}

/// `out[p, .., j, ..] = q(p, l, j)` at the element holding `l` ([`panel_depth`]), plus 8
/// for 4 bits; `q(p, l, j) = floor(w(p*HP + j, l) / scale + 0.5)` clamped to the
/// format's range (`-127..=127`, `-8..=7`), 0 where the scale is 0 (and past the weight).
///
/// One loop nest per panel: its scales are widened to f32 once (an infinite divisor for a
/// zero scale), then its values divided.
fn pack(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let (inputs, args) = call.inputs(&["weight", "scales"])?;
    let (weight, scales) = (&inputs[0], &inputs[1]);
    let (shape, dtype) = call.output()?;
    let quant = QuantPanels::of(dtype, &shape).ok_or_else(|| call.bad_output("panels"))?;
    let block = Expr::from(shape[2].clone());
    let four_bits = quant.bits == 4;
    let (lowest, highest) = if four_bits {
        (-8.0, 7.0)
    } else {
        (-127.0, 127.0)
    };
    let divisor = te::compute("divisor", scales.shape().to_vec(), |i| {
        let scale = load(scales, i);
        let zero = scale.equal(Expr::constant(0.0, DType::F32));
        te::select(zero, Expr::inf(DType::F32), scale)
    });
    let out = te::compute("packed", shape.clone(), |i| {
        let (p, j) = (&i[0], &i[2]);
        let l = panel_depth(quant.layout, quant.bits, i);
        let divisor = divisor.at(&[p.clone(), l.floordiv(Expr::int(QUANT_GROUP)), j.clone()]);
        let ratio = weight_at(weight, (p, j, &l), &block) / divisor;
        let q = (ratio + Expr::f32(0.5)).floor().clamp(lowest, highest);
        let stored = if four_bits { q + Expr::f32(8.0) } else { q };
        stored.cast(dtype)
    });
    let kernel = Kernel::new(inputs, args, out, OpPattern::Injective);
    Ok(kernel.sharing_outer_loops(1))
}

/// The reduction index `l` held by element `i` of panels of `layout` and `bits`.
fn panel_depth(layout: QuantLayout, bits: i64, i: &[Expr]) -> Expr {
    match (layout, bits) {
        (QuantLayout::Rows, 4) => i[1].clone() * Expr::int(2) + i[3].clone(),
        (QuantLayout::Rows, _) => i[1].clone(),
        (QuantLayout::Quads, 4) => {
            i[1].clone() * Expr::int(8) + i[4].clone() * Expr::int(4) + i[3].clone()
        }
        (QuantLayout::Quads, _) => i[1].clone() * Expr::int(4) + i[3].clone(),
    }
}

/// The index of the element of panels of `layout` and `bits` holding weight `(panel,
/// lane)`'s value `l` (the inverse of [`panel_depth`]).
fn panel_index(
    layout: QuantLayout,
    bits: i64,
    (panel, lane): (&Expr, &Expr),
    l: &Expr,
) -> Vec<Expr> {
    let (p, j) = (panel.clone(), lane.clone());
    let div = |n: i64| l.floordiv(Expr::int(n));
    let rem = |n: i64| l.floormod(Expr::int(n));
    match (layout, bits) {
        (QuantLayout::Rows, 4) => vec![p, div(2), j, rem(2)],
        (QuantLayout::Rows, _) => vec![p, l.clone(), j],
        (QuantLayout::Quads, 4) => vec![p, div(8), j, rem(4), div(4).floormod(Expr::int(2))],
        (QuantLayout::Quads, _) => vec![p, div(4), j, rem(4)],
    }
}

/// The integer value (minus 8 for u4) of weight `(panel, lane)` at `l` in quantized
/// panels, as f32.
pub(super) fn code(packed: &Tensor, (panel, lane): (&Expr, &Expr), l: &Expr) -> Expr {
    let quant = QuantPanels::of(packed.dtype(), packed.shape()).expect("quantized panels");
    let at = panel_index(quant.layout, quant.bits, (panel, lane), l);
    let value = load(packed, &at).cast(DType::F32);
    if quant.bits == 4 {
        value - Expr::f32(8.0)
    } else {
        value
    }
}

/// Weight `(h, l)` of quantized panels, dequantized: its [`code`] times its group scale.
fn dequantized(packed: &Tensor, scales: &Tensor, (h, l): (&Expr, &Expr)) -> Expr {
    let block = Expr::from(packed.shape()[2].clone());
    let (panel, lane) = (h.floordiv(block.clone()), h.floormod(block));
    let value = code(packed, (&panel, &lane), l);
    let group = l.floordiv(Expr::int(QUANT_GROUP));
    value * load(scales, &[panel, group, lane]).cast(DType::F32)
}

/// `out[..., h] = sum_l x[..., l] * w(h, l)`, `w` [`dequantized`].
fn matmul(call: &OpCall) -> Result<Kernel, LegalizeError> {
    matmul_kernel(call, &["x", "packed", "scales"], |inputs, at| {
        dequantized(&inputs[1], &inputs[2], at)
    })
}

/// `out[i..., l] = w(id, l)` ([`dequantized`]) with `id = ids[i...]` clamped into the
/// table's `rows` (as `take` clamps).
fn take(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let (inputs, args) = call.inputs(&["packed", "scales", "ids"])?;
    let (packed, scales, ids) = (&inputs[0], &inputs[1], &inputs[2]);
    let (shape, dtype) = call.output_of_rank(ids.ndim() + 1)?;
    let last = Expr::int(call.int_attr("rows", 1)? - 1);
    let out = te::compute("rows", shape, |i| {
        let (l, at) = i.split_last().expect("the output has the width dim");
        let row = ids.at(at).cast(DType::I64).clamp(0, last.clone());
        dequantized(packed, scales, (&row, l)).cast(dtype)
    });
    Ok(Kernel::new(inputs, args, out, OpPattern::Injective))
}

/// `out[h, l] = w(h, l)` ([`dequantized`]); `out[l, h]` with `transpose`.
fn dequantize(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let (inputs, args) = call.inputs(&["packed", "scales"])?;
    let (shape, dtype) = call.output_of_rank(2)?;
    let transpose = call.bool_attr("transpose", false)?;
    let out = te::compute("weight", shape, |i| {
        let (h, l) = if transpose {
            (&i[1], &i[0])
        } else {
            (&i[0], &i[1])
        };
        dequantized(&inputs[0], &inputs[1], (h, l)).cast(dtype)
    });
    Ok(Kernel::new(inputs, args, out, OpPattern::Injective))
}
