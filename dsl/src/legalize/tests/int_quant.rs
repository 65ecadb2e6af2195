//! The dynamic int8 ops against direct computations: activation rows quantized to
//! unsigned codes per group of 32 (padding rows to whole groups), weights packed in the
//! quads layout, and the int8 matmul against the product of the dequantized activations
//! and weights.

use super::*;
use crate::op::{packed_quant_layout, QuantLayout};
use crate::tir::QUANT_GROUP;

const GROUP: usize = QUANT_GROUP as usize;

/// Flat element of weight `(row, k)` in 16-wide quads panels of a reduction padded to
/// `lp`.
fn quads_index(bits: i64, lp: usize, (row, k): (usize, usize)) -> usize {
    let (p, j) = (row / 16, row % 16);
    if bits == 4 {
        p * lp * 16 + (k / 8) * 128 + j * 8 + (k % 4) * 2 + (k / 4) % 2
    } else {
        p * lp * 16 + (k / 4) * 64 + j * 4 + k % 4
    }
}

#[test]
fn activation_groups_become_codes_around_128_with_their_scale() {
    let (rows, l) = (3usize, 40usize);
    let lp = l.div_ceil(GROUP) * GROUP;
    let groups = lp / GROUP;
    let mut x = pseudo_random(21, rows * l);
    x[l..2 * l].fill(0.0); // a row of zeros: scale 0, every code 128
    x[2 * l + 3] = 40.0; // an outlier: coarsens only its own group
    let xe = tensor("x", vec![n(), c(l as i64)], DType::F32);
    let scales_call = op(
        "activation_group_scales",
        vec![xe.clone()],
        vec![],
        out(vec![n(), c(groups as i64)], DType::F32),
    );
    let scales = run(&scales_call, rows, vec![x.clone()]).remove(0);
    let s = tensor("s", vec![n(), c(groups as i64)], DType::F32);
    let codes_call = op(
        "quantize_activations",
        vec![xe, s],
        vec![],
        out(vec![n(), c(lp as i64)], DType::U8),
    );
    let codes = run(&codes_call, rows, vec![x.clone(), scales.clone()]).remove(0);
    let (outlier, next) = (scales[2 * groups], scales[2 * groups + 1]);
    assert!(
        next < outlier / 10.0,
        "the outlier's row: {outlier}, next group {next}"
    );
    for r in 0..rows {
        for g in 0..groups {
            let peak = x[r * l + g * GROUP..r * l + ((g + 1) * GROUP).min(l)]
                .iter()
                .map(|v| v.abs())
                .fold(0.0, f64::max);
            let scale = scales[r * groups + g];
            assert!(
                (scale - peak / 127.0).abs() <= 1e-6 * peak,
                "row {r} group {g}"
            );
        }
        for k in 0..lp {
            let scale = scales[r * groups + k / GROUP];
            let want = match k < l && scale != 0.0 {
                true => (x[r * l + k] / scale + 0.5).floor().clamp(-127.0, 127.0) + 128.0,
                false => 128.0,
            };
            assert_eq!(codes[r * lp + k], want, "row {r} k {k}");
        }
    }
}

#[test]
fn kv_rows_become_signed_codes_that_times_their_scale_give_the_rows_back() {
    // [n, kv_heads, head_dim]: per position and kv head one scale.
    let (rows, heads, dim) = (3usize, 2usize, 5usize);
    let mut x = pseudo_random(23, rows * heads * dim);
    x[dim..2 * dim].fill(0.0); // an all-zero head row: scale 0, codes 0
    let shape = vec![n(), c(heads as i64), c(dim as i64)];
    let xe = tensor("x", shape.clone(), DType::F32);
    let scales_call = op(
        "activation_scales",
        vec![xe.clone()],
        vec![],
        out(vec![n(), c(heads as i64)], DType::F32),
    );
    let scales = run(&scales_call, rows, vec![x.clone()]).remove(0);
    let s = tensor("s", vec![n(), c(heads as i64)], DType::F32);
    let codes_call = op("quantize_kv", vec![xe, s], vec![], out(shape, DType::I8));
    let codes = run(&codes_call, rows, vec![x.clone(), scales.clone()]).remove(0);
    assert_eq!(scales[1], 0.0);
    for (r, row) in x.chunks(dim).enumerate() {
        let peak = row.iter().map(|v| v.abs()).fold(0.0, f64::max);
        assert!((scales[r] - peak / 127.0).abs() <= 1e-6 * peak, "row {r}");
        for (k, &value) in row.iter().enumerate() {
            let code = codes[r * dim + k];
            let want = match scales[r] {
                0.0 => 0.0,
                s => (value / s).round_ties_even().clamp(-127.0, 127.0),
            };
            // floor(v + 0.5) rounds ties up, `round_ties_even` to even: equal off ties.
            assert!(
                (code - want).abs() <= 1.0,
                "row {r} k {k}: {code} vs {want}"
            );
            assert!((code * scales[r] - value).abs() <= scales[r] / 2.0 + 1e-9);
        }
    }
}

#[test]
fn attention_over_int8_kv_is_attention_over_the_dequantized_rows() {
    let (t, kv_heads, heads, dim) = (5usize, 2usize, 4usize, 3usize);
    let codes: Vec<f64> = pseudo_random(31, 2 * t * kv_heads * dim)
        .iter()
        .map(|v| (v * 63.0).round())
        .collect();
    let (k_codes, v_codes) = codes.split_at(t * kv_heads * dim);
    let scales: Vec<f64> = pseudo_random(37, 2 * t * kv_heads)
        .iter()
        .map(|v| v.abs() / 50.0)
        .collect();
    let (k_scales, v_scales) = scales.split_at(t * kv_heads);
    let dequantized = |codes: &[f64], scales: &[f64]| -> Vec<f64> {
        let widened = codes.iter().enumerate();
        widened.map(|(i, &code)| code * scales[i / dim]).collect()
    };
    let q = pseudo_random(41, 2 * heads * dim);
    let kv_shape = vec![n() + c(3), c(kv_heads as i64), c(dim as i64)];
    let scales_shape = vec![n() + c(3), c(kv_heads as i64)];
    let q_shape = vec![n(), c(heads as i64), c(dim as i64)];
    let attrs = || {
        vec![
            ("scale", AttrValue::Float(0.5)),
            ("causal", AttrValue::Bool(true)),
        ]
    };
    let qe = tensor("q", q_shape.clone(), DType::F32);
    let kv = |name, dtype| tensor(name, kv_shape.clone(), dtype);
    let float_call = op(
        "attention",
        vec![qe.clone(), kv("k", DType::F32), kv("v", DType::F32)],
        attrs(),
        out(q_shape.clone(), DType::F32),
    );
    let (ks, vs) = (
        tensor("ks", scales_shape.clone(), DType::F32),
        tensor("vs", scales_shape, DType::F32),
    );
    let q8_call = op(
        "attention_q8kv",
        vec![qe, kv("k", DType::I8), kv("v", DType::I8), ks, vs],
        attrs(),
        out(q_shape, DType::F32),
    );
    let float_inputs = vec![
        q.clone(),
        dequantized(k_codes, k_scales),
        dequantized(v_codes, v_scales),
    ];
    let want = run(&float_call, 2, float_inputs).remove(0);
    let q8_inputs = vec![
        q,
        k_codes.to_vec(),
        v_codes.to_vec(),
        k_scales.to_vec(),
        v_scales.to_vec(),
    ];
    let got = run(&q8_call, 2, q8_inputs).remove(0);
    assert_close(&got, &want, 1e-6);
}

/// `(packed, scales)` of weight `w` (`[h, l]`) packed by the legalized ops in the quads
/// layout.
fn packed_quads(w: &[f64], (h, l): (usize, usize), bits: i64) -> [Vec<f64>; 2] {
    let (panels, groups) = (h.div_ceil(16) as i64, l.div_ceil(GROUP) as i64);
    let weight = tensor("w", vec![c(h as i64), c(l as i64)], DType::F32);
    let scales_shape = vec![c(panels), c(groups), c(16)];
    let attrs = vec![
        ("block", AttrValue::Int(16)),
        ("bits", AttrValue::Int(bits)),
        ("dtype", AttrValue::DType(DType::F16)),
    ];
    let scales_call = op(
        "quantize_scales",
        vec![weight.clone()],
        attrs,
        out(scales_shape.clone(), DType::F16),
    );
    let scales = run(&scales_call, 1, vec![w.to_vec()]).remove(0);
    let s = tensor("s", scales_shape, DType::F16);
    let (shape, dtype) = packed_quant_layout(h as i64, l as i64, 16, (bits, QuantLayout::Quads));
    let packed_shape: Vec<SymExpr> = shape.into_iter().map(c).collect();
    let attrs = vec![
        ("bits", AttrValue::Int(bits)),
        ("layout", AttrValue::Str("quads".into())),
    ];
    let pack_call = op(
        "pack_weight_quant",
        vec![weight, s.clone()],
        attrs,
        out(packed_shape.clone(), dtype),
    );
    let packed = run(&pack_call, 1, vec![w.to_vec(), scales.clone()]).remove(0);
    [packed, scales]
}

#[test]
fn quads_panels_hold_the_codes_of_the_rows_layout() {
    for bits in [8, 4] {
        let (h, l) = (37usize, 70usize);
        let lp = l.div_ceil(GROUP) * GROUP;
        let w = pseudo_random(22, h * l);
        let [packed, scales] = packed_quads(&w, (h, l), bits);
        let groups = lp / GROUP;
        let offset = if bits == 4 { 8.0 } else { 0.0 };
        for row in 0..h.div_ceil(16) * 16 {
            for k in 0..lp {
                let scale = scales[((row / 16) * groups + k / GROUP) * 16 + row % 16];
                let code = packed[quads_index(bits, lp, (row, k))] - offset;
                if row >= h || k >= l {
                    assert_eq!(code, 0.0, "padding ({row}, {k})");
                } else {
                    let steps = if bits == 4 { 1.5 } else { 0.5 };
                    let err = (code * scale - w[row * l + k]).abs();
                    assert!(
                        err <= steps * scale.abs() + 1e-9,
                        "bits {bits} ({row}, {k})"
                    );
                }
            }
        }
    }
}

#[test]
fn the_int8_matmul_is_the_product_of_the_dequantized_operands() {
    for bits in [8, 4] {
        let (rows, h, l) = (3usize, 20usize, 45usize);
        let lp = l.div_ceil(GROUP) * GROUP;
        let w = pseudo_random(23, h * l);
        let [packed, scales] = packed_quads(&w, (h, l), bits);
        let codes: Vec<f64> = pseudo_random(24, rows * lp)
            .iter()
            .map(|v| (v * 127.0).round() + 128.0)
            .collect();
        let groups = l.div_ceil(GROUP);
        let x_scales: Vec<f64> = (0..rows * groups)
            .map(|i| [0.01, 0.5, 2.0, 0.125][i % 4])
            .collect();
        let (shape, dtype) =
            packed_quant_layout(h as i64, l as i64, 16, (bits, QuantLayout::Quads));
        let panels = h.div_ceil(16) as i64;
        let args = vec![
            tensor("xq", vec![n(), c(lp as i64)], DType::U8),
            tensor("xs", vec![n(), c(groups as i64)], DType::F32),
            tensor("q", shape.into_iter().map(c).collect(), dtype),
            tensor("s", vec![c(panels), c(groups as i64), c(16)], DType::F16),
        ];
        let attrs = vec![("out_features", AttrValue::Int(h as i64))];
        let call = op(
            "packed_matmul_int",
            args,
            attrs,
            out(vec![n(), c(h as i64)], DType::F32),
        );
        let inputs = vec![
            codes.clone(),
            x_scales.clone(),
            packed.clone(),
            scales.clone(),
        ];
        let got = run(&call, rows, inputs).remove(0);
        let offset = if bits == 4 { 8.0 } else { 0.0 };
        let mut want = vec![0.0; rows * h];
        for r in 0..rows {
            for row in 0..h {
                want[r * h + row] = (0..lp)
                    .map(|k| {
                        let scale = scales[((row / 16) * lp / GROUP + k / GROUP) * 16 + row % 16];
                        let weight = (packed[quads_index(bits, lp, (row, k))] - offset) * scale;
                        (codes[r * lp + k] - 128.0) * x_scales[r * groups + k / GROUP] * weight
                    })
                    .sum();
            }
        }
        assert_close(&got, &want, 1e-3);
    }
}
