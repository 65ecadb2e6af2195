//! `quantize_scales` and `pack_weight_quant` (8 and 4 bits) against a direct
//! computation, on weights whose height is not a multiple of the panel and whose length
//! is not a multiple of the group (a tail group) nor even, including an all-zero group;
//! every weight is within half a quantization step of its stored value (1.5 steps for 4
//! bits: the scale search may clip a group's extremes). `take_quant`,
//! `dequantize_weight` and `packed_matmul_quant` against the weights the panels stand for.

use super::*;
use crate::op::QuantLayout;
use crate::tir::QUANT_GROUP;

const GROUP: usize = QUANT_GROUP as usize;

/// Flat index of weight `(row, k)` in the packed panels of an `[_, l]` weight.
fn packed_index(bits: i64, l: usize, (row, k): (usize, usize)) -> usize {
    let (p, j) = (row / 16, row % 16);
    if bits == 4 {
        ((p * l.div_ceil(2) + k / 2) * 16 + j) * 2 + k % 2
    } else {
        (p * l + k) * 16 + j
    }
}

/// The weight `(row, k)` the panels stand for.
fn dequantized(bits: i64, (packed, scales): (&[f64], &[f64]), l: usize, at: (usize, usize)) -> f64 {
    let (row, k) = at;
    let stored = packed[packed_index(bits, l, at)];
    let value = if bits == 4 { stored - 8.0 } else { stored };
    let groups = l.div_ceil(GROUP);
    value * scales[((row / 16) * groups + k / GROUP) * 16 + row % 16]
}

/// The scales and panels of `w` (`[h, l]`, row-major) for 16-wide panels, computed
/// directly: 8 bits `max |w| / 127`, 4 bits [`q4_scale`].
fn quantize(w: &[f64], (h, l): (usize, usize), bits: i64) -> (Vec<f64>, Vec<f64>) {
    let (panels, groups) = (h.div_ceil(16), l.div_ceil(GROUP));
    let mut scales = vec![0.0; panels * groups * 16];
    let units = if bits == 4 { l.div_ceil(2) * 2 } else { l };
    // Padding (rows past `h`, the pair of an odd `l`) stores the value 0.
    let zero = if bits == 4 { 8.0 } else { 0.0 };
    let mut packed = vec![zero; panels * units * 16];
    let (lowest, highest) = if bits == 4 {
        (-8.0, 7.0)
    } else {
        (-127.0, 127.0)
    };
    for row in 0..h {
        for g in 0..groups {
            let span = g * GROUP..((g + 1) * GROUP).min(l);
            let values: Vec<f64> = span.clone().map(|k| w[row * l + k]).collect();
            let peak = values.iter().map(|v| v.abs()).fold(0.0, f64::max);
            let scale = if bits == 4 {
                q4_scale(&values, peak)
            } else {
                peak / 127.0
            };
            scales[((row / 16) * groups + g) * 16 + row % 16] = scale;
            for k in span {
                let q = if scale != 0.0 {
                    (w[row * l + k] / scale + 0.5)
                        .floor()
                        .clamp(lowest, highest)
                } else {
                    0.0
                };
                packed[packed_index(bits, l, (row, k))] = q + zero;
            }
        }
    }
    (scales, packed)
}

/// The 4-bit scale of a group (`peak` its largest magnitude): over the candidate
/// divisors `n` of its value of largest magnitude `m` (the negative one on a tie), the
/// codes `clamp(round(-w * n / m), -8, 7)` and their least-squares scale; the candidate
/// of least squared error wins (the first on a tie).
fn q4_scale(values: &[f64], peak: f64) -> f64 {
    if peak == 0.0 {
        return 0.0;
    }
    let m = if values.contains(&-peak) { -peak } else { peak };
    let fit = |n: f64| {
        let codes = values
            .iter()
            .map(|w| (w * (n / -m) + 0.5).floor().clamp(-8.0, 7.0));
        let (wl, ll) = codes
            .zip(values)
            .fold((0.0, 0.0), |(wl, ll), (l, w)| (wl + w * l, ll + l * l));
        (wl * wl / ll, wl / ll)
    };
    let fits: Vec<(f64, f64)> = [7.0, 7.3, 7.6, 7.9, 8.0, 8.3, 8.6, 9.0].map(fit).to_vec();
    let best = fits.iter().map(|f| f.0).fold(f64::NEG_INFINITY, f64::max);
    fits.iter()
        .filter(|f| f.0 >= best * (1.0 - 1e-9))
        .map(|f| f.1)
        .fold(f64::NEG_INFINITY, f64::max)
}

/// The squared error of quantizing `values` with `scale` to 4 bits.
fn q4_error(values: &[f64], scale: f64) -> f64 {
    let code = |w: f64| (w / scale + 0.5).floor().clamp(-8.0, 7.0);
    values.iter().map(|&w| (w - scale * code(w)).powi(2)).sum()
}

#[test]
fn the_4_bit_scale_search_never_loses_to_the_peak_scale() {
    let w = pseudo_random(11, 64 * GROUP);
    let (mut searched, mut peaked) = (0.0, 0.0);
    for values in w.chunks(GROUP) {
        let peak = values.iter().map(|v| v.abs()).fold(0.0, f64::max);
        let m = if values.contains(&-peak) { -peak } else { peak };
        let (search, plain) = (
            q4_error(values, q4_scale(values, peak)),
            q4_error(values, -m / 8.0),
        );
        assert!(search <= plain * (1.0 + 1e-9), "{search} > {plain}");
        (searched, peaked) = (searched + search, peaked + plain);
    }
    // On uniform values the search gains more than a tenth of the error.
    assert!(searched < 0.9 * peaked, "{searched} vs {peaked}");
}

#[test]
fn quantization_matches_a_direct_computation() {
    for bits in [8, 4] {
        for (h, l) in [(37usize, 70usize), (16, 32), (5, 17)] {
            quantization_matches_on(bits, (h, l));
        }
    }
}

fn quantization_matches_on(bits: i64, (h, l): (usize, usize)) {
    let (panels, groups) = (h.div_ceil(16), l.div_ceil(GROUP));
    let mut w = pseudo_random(3, h * l);
    // Row 0's first group is all zeros.
    w[..l.min(GROUP)].fill(0.0);
    let weight = tensor("w", vec![c(h as i64), c(l as i64)], DType::F32);
    let scales_shape = vec![c(panels as i64), c(groups as i64), c(16)];
    let scales_call = op(
        "quantize_scales",
        vec![weight.clone()],
        vec![
            ("block", AttrValue::Int(16)),
            ("bits", AttrValue::Int(bits)),
            ("dtype", AttrValue::DType(DType::F32)),
        ],
        out(scales_shape.clone(), DType::F32),
    );
    let scales = run(&scales_call, 1, vec![w.clone()]).remove(0);
    let (want_scales, want_packed) = quantize(&w, (h, l), bits);
    assert_close(&scales, &want_scales, 1e-6);
    let s = tensor("s", scales_shape, DType::F32);
    let (shape, dtype) =
        crate::op::packed_quant_layout(h as i64, l as i64, 16, (bits, QuantLayout::Rows));
    let pack_call = op(
        "pack_weight_quant",
        vec![weight, s],
        vec![("bits", AttrValue::Int(bits))],
        out(shape.into_iter().map(c).collect(), dtype),
    );
    let packed = run(&pack_call, 1, vec![w.clone(), scales.clone()]).remove(0);
    assert_eq!(packed, want_packed, "bits {bits} h {h} l {l}");
    let steps = if bits == 4 { 1.5 } else { 0.5 };
    for row in 0..h {
        for k in 0..l {
            let (scale, at) = (
                scales[((row / 16) * groups + k / GROUP) * 16 + row % 16],
                (row, k),
            );
            let got = dequantized(bits, (&packed, &scales), l, at);
            let what = format!("bits {bits} weight {at:?}");
            assert!(
                (got - w[row * l + k]).abs() <= steps * scale.abs() + 1e-9,
                "{what}"
            );
        }
    }
}

/// Random panels of `bits` for an `[h, l]` weight: `(packed, scales, their shapes)`.
fn random_panels(bits: i64, (h, l): (usize, usize)) -> (Vec<f64>, Vec<f64>, [Expr; 2]) {
    let (shape, dtype) =
        crate::op::packed_quant_layout(h as i64, l as i64, 16, (bits, QuantLayout::Rows));
    let len = shape.iter().product::<i64>() as usize;
    let packed: Vec<f64> = pseudo_random(5, len)
        .iter()
        .map(|v| {
            if bits == 4 {
                ((v + 1.0) * 7.99).floor()
            } else {
                (v * 127.0).round()
            }
        })
        .collect();
    let groups = l.div_ceil(GROUP);
    let scales = pseudo_random(6, h.div_ceil(16) * groups * 16);
    let scales_shape = vec![c(h.div_ceil(16) as i64), c(groups as i64), c(16)];
    let tensors = [
        tensor("q", shape.into_iter().map(c).collect(), dtype),
        tensor("s", scales_shape, DType::F32),
    ];
    (packed, scales, tensors)
}

#[test]
fn take_quant_gathers_dequantized_rows() {
    for bits in [8, 4] {
        let (rows, width) = (21usize, 41usize);
        let (packed, scales, [table, s]) = random_panels(bits, (rows, width));
        let ids = [3.0, 0.0, 20.0, 99.0]; // 99 is past the table: clamped to the last row
        let i = tensor("ids", vec![c(1), c(4)], DType::I32);
        let call = op(
            "take_quant",
            vec![table, s, i],
            vec![
                ("rows", AttrValue::Int(rows as i64)),
                ("width", AttrValue::Int(width as i64)),
            ],
            out(vec![c(1), c(4), c(width as i64)], DType::F32),
        );
        let got = run(&call, 1, vec![packed.clone(), scales.clone(), ids.to_vec()]).remove(0);
        let want: Vec<f64> = ids
            .iter()
            .flat_map(|&id| {
                let row = (id as usize).min(rows - 1);
                let (packed, scales) = (&packed, &scales);
                (0..width).map(move |k| dequantized(bits, (packed, scales), width, (row, k)))
            })
            .collect();
        assert_close(&got, &want, 1e-6);
    }
}

/// The whole weight, and with `transpose` its transpose.
#[test]
fn dequantize_weight_writes_the_weight_the_panels_stand_for() {
    for (bits, transpose) in [(8, false), (4, false), (8, true), (4, true)] {
        let (rows, width) = (21usize, 41usize);
        let (packed, scales, [table, s]) = random_panels(bits, (rows, width));
        let mut attrs = vec![
            ("rows", AttrValue::Int(rows as i64)),
            ("width", AttrValue::Int(width as i64)),
        ];
        let mut shape = vec![c(rows as i64), c(width as i64)];
        if transpose {
            attrs.push(("transpose", AttrValue::Bool(true)));
            shape.reverse();
        }
        let call = op(
            "dequantize_weight",
            vec![table, s],
            attrs,
            out(shape, DType::F32),
        );
        let got = run(&call, 1, vec![packed.clone(), scales.clone()]).remove(0);
        let weight = |row, k| dequantized(bits, (&packed, &scales), width, (row, k));
        let want: Vec<f64> = if transpose {
            (0..width)
                .flat_map(|k| (0..rows).map(move |row| (row, k)))
                .map(|(row, k)| weight(row, k))
                .collect()
        } else {
            (0..rows)
                .flat_map(|row| (0..width).map(move |k| (row, k)))
                .map(|(row, k)| weight(row, k))
                .collect()
        };
        assert_close(&got, &want, 1e-6);
    }
}

#[test]
fn packed_matmul_quant_multiplies_by_the_dequantized_weight() {
    for bits in [8, 4] {
        let (h, l) = (19usize, 37usize);
        let (packed, scales, [q, s]) = random_panels(bits, (h, l));
        let x = pseudo_random(7, 2 * l);
        let call = op(
            "packed_matmul_quant",
            vec![tensor("x", vec![c(2), c(l as i64)], DType::F32), q, s],
            vec![("out_features", AttrValue::Int(h as i64))],
            out(vec![c(2), c(h as i64)], DType::F32),
        );
        let got = run(&call, 1, vec![x.clone(), packed.clone(), scales.clone()]).remove(0);
        let want: Vec<f64> = (0..2)
            .flat_map(|i| (0..h).map(move |row| (i, row)))
            .map(|(i, row)| {
                (0..l)
                    .map(|k| x[i * l + k] * dequantized(bits, (&packed, &scales), l, (row, k)))
                    .sum()
            })
            .collect();
        assert_close(&got, &want, 1e-5);
    }
}

/// The asymmetric scales and offsets of `w` (`[h, l]`, `l` whole groups), computed
/// directly: per group `(max - min) / 15` and `min + 8 * scale`.
fn asymmetric(w: &[f64], (h, l): (usize, usize)) -> (Vec<f64>, Vec<f64>) {
    let groups = l / GROUP;
    let mut scales = vec![0.0; h.div_ceil(16) * groups * 16];
    let mut offsets = vec![0.0; h * groups];
    for row in 0..h {
        for (g, values) in w[row * l..(row + 1) * l].chunks(GROUP).enumerate() {
            let low = values.iter().copied().fold(f64::INFINITY, f64::min);
            let high = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let scale = (high - low) / 15.0;
            scales[((row / 16) * groups + g) * 16 + row % 16] = scale;
            offsets[row * groups + g] = low + 8.0 * scale;
        }
    }
    (scales, offsets)
}

/// `quantize_scales(asymmetric)` and `quantize_offsets` of `w`, and the panels of `w`
/// minus its offsets: `(scales, offsets, packed)`.
fn quantize_asymmetric(w: &[f64], (h, l): (usize, usize)) -> [Vec<f64>; 3] {
    let groups = l / GROUP;
    let weight = tensor("w", vec![c(h as i64), c(l as i64)], DType::F32);
    let scales_shape = vec![c(h.div_ceil(16) as i64), c(groups as i64), c(16)];
    let scales_call = op(
        "quantize_scales",
        vec![weight.clone()],
        vec![
            ("block", AttrValue::Int(16)),
            ("bits", AttrValue::Int(4)),
            ("dtype", AttrValue::DType(DType::F32)),
            ("asymmetric", AttrValue::Bool(true)),
        ],
        out(scales_shape.clone(), DType::F32),
    );
    let scales = run(&scales_call, 1, vec![w.to_vec()]).remove(0);
    let s = tensor("s", scales_shape, DType::F32);
    let offsets_call = op(
        "quantize_offsets",
        vec![weight.clone(), s.clone()],
        vec![("dtype", AttrValue::DType(DType::F32))],
        out(vec![c(h as i64), c(groups as i64)], DType::F32),
    );
    let offsets = run(&offsets_call, 1, vec![w.to_vec(), scales.clone()]).remove(0);
    let centered: Vec<f64> = (0..h * l)
        .map(|at| w[at] - offsets[(at / l) * groups + (at % l) / GROUP])
        .collect();
    let (shape, dtype) =
        crate::op::packed_quant_layout(h as i64, l as i64, 16, (4, QuantLayout::Rows));
    let pack_call = op(
        "pack_weight_quant",
        vec![weight, s],
        vec![("bits", AttrValue::Int(4))],
        out(shape.into_iter().map(c).collect(), dtype),
    );
    let packed = run(&pack_call, 1, vec![centered, scales.clone()]).remove(0);
    [scales, offsets, packed]
}

/// Asymmetric groups: the scale spans the group, every weight is within half a step of
/// its code times the scale plus the offset, and both ends of a group are codes 0 and 15.
#[test]
fn asymmetric_groups_span_each_group_within_half_a_step() {
    let (h, l) = (37usize, 64usize);
    let mut w: Vec<f64> = pseudo_random(13, h * l).iter().map(|v| v + 0.3).collect();
    w[..GROUP].fill(0.25); // a constant group: scale 0, the offset is the value
    let [scales, offsets, packed] = quantize_asymmetric(&w, (h, l));
    let (want_scales, want_offsets) = asymmetric(&w, (h, l));
    assert_close(&scales, &want_scales, 1e-6);
    assert_close(&offsets, &want_offsets, 1e-6);
    let groups = l / GROUP;
    for row in 0..h {
        for (g, values) in w[row * l..(row + 1) * l].chunks(GROUP).enumerate() {
            let scale = scales[((row / 16) * groups + g) * 16 + row % 16];
            let offset = offsets[row * groups + g];
            let codes: Vec<f64> = (0..GROUP)
                .map(|k| packed[packed_index(4, l, (row, g * GROUP + k))])
                .collect();
            for (code, w) in codes.iter().zip(values) {
                let got = (code - 8.0) * scale + offset;
                assert!((got - w).abs() <= 0.5 * scale + 1e-9, "row {row} group {g}");
            }
            if scale > 0.0 {
                let low = codes.iter().copied().fold(f64::INFINITY, f64::min);
                let high = codes.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                assert_eq!((low, high), (0.0, 15.0), "row {row} group {g}");
            }
        }
    }
}

/// Groups written as `q * d + m` with codes spanning 0..=15 (ggml's Q4_1 blocks) come back
/// as their own codes, step and minimum.
#[test]
fn asymmetric_groups_recover_q4_1_blocks() {
    let (h, l) = (5usize, 96usize);
    let steps = pseudo_random(17, h * l / GROUP);
    let mut codes: Vec<f64> = pseudo_random(19, h * l)
        .iter()
        .map(|v| ((v + 2.0) * 3.99).floor())
        .collect();
    for group in codes.chunks_mut(GROUP) {
        (group[0], group[1]) = (0.0, 15.0);
    }
    let d = |at: usize| 0.01 + steps[at / GROUP].abs() * 0.05;
    let m = |at: usize| -8.0 * d(at) + steps[at / GROUP] * 0.01;
    let w: Vec<f64> = (0..h * l).map(|at| codes[at] * d(at) + m(at)).collect();
    let [scales, offsets, packed] = quantize_asymmetric(&w, (h, l));
    let groups = l / GROUP;
    for row in 0..h {
        for k in 0..l {
            let at = row * l + k;
            let scale = scales[((row / 16) * groups + k / GROUP) * 16 + row % 16];
            assert!((scale - d(at)).abs() <= 1e-6 * d(at), "row {row} k {k}");
            let offset = offsets[row * groups + k / GROUP];
            assert!(
                (offset - (m(at) + 8.0 * d(at))).abs() <= 1e-6,
                "row {row} k {k}"
            );
            assert_eq!(
                packed[packed_index(4, l, (row, k))],
                codes[at],
                "row {row} k {k}"
            );
        }
    }
}
