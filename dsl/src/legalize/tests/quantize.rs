//! `quantize_scales_q8` and `pack_weight_q8` against a direct computation, on weights
//! whose height is not a multiple of the panel and whose length is not a multiple of
//! the group (a tail group), including an all-zero group; and the int8 values of
//! their output against each weight within half a quantization step.

use super::*;
use crate::tir::Q8_GROUP;

/// The scales and int8 panels of `w` (`[h, l]`, row-major) for 16-wide panels, computed
/// directly.
fn quantize(w: &[f64], (h, l): (usize, usize)) -> (Vec<f64>, Vec<f64>) {
    let group = Q8_GROUP as usize;
    let (panels, groups) = (h.div_ceil(16), l.div_ceil(group));
    let mut scales = vec![0.0; panels * groups * 16];
    let mut packed = vec![0.0; panels * l * 16];
    for row in 0..h {
        let (p, j) = (row / 16, row % 16);
        for g in 0..groups {
            let span = g * group..((g + 1) * group).min(l);
            let max = span
                .clone()
                .map(|k| w[row * l + k].abs())
                .fold(0.0, f64::max);
            let scale = max / 127.0;
            scales[(p * groups + g) * 16 + j] = scale;
            for k in span {
                let q = if scale > 0.0 {
                    (w[row * l + k] / scale + 0.5).floor().clamp(-127.0, 127.0)
                } else {
                    0.0
                };
                packed[(p * l + k) * 16 + j] = q;
            }
        }
    }
    (scales, packed)
}

#[test]
fn int8_quantization_matches_a_direct_computation() {
    for (h, l) in [(37usize, 70usize), (16, 32), (5, 17)] {
        let (panels, groups) = (h.div_ceil(16), l.div_ceil(Q8_GROUP as usize));
        let mut w = pseudo_random(3, h * l);
        // Row 0's first group is all zeros.
        w[..l.min(Q8_GROUP as usize)].fill(0.0);
        let weight = tensor("w", vec![c(h as i64), c(l as i64)], DataType::F32);
        let scales_shape = vec![c(panels as i64), c(groups as i64), c(16)];
        let scales_call = op(
            "quantize_scales_q8",
            vec![weight.clone()],
            vec![("block", AttrValue::Int(16))],
            out(scales_shape.clone(), DataType::F32),
        );
        let scales = run(&scales_call, 1, vec![w.clone()]).remove(0);
        let (want_scales, want_packed) = quantize(&w, (h, l));
        assert_close(&scales, &want_scales, 1e-6);
        let s = tensor("s", scales_shape, DataType::F32);
        let pack_call = op(
            "pack_weight_q8",
            vec![weight, s],
            vec![],
            out(vec![c(panels as i64), c(l as i64), c(16)], DataType::I8),
        );
        let packed = run(&pack_call, 1, vec![w.clone(), scales.clone()]).remove(0);
        assert_eq!(packed, want_packed, "h {h} l {l}");
        assert!(packed.iter().all(|q| q.abs() <= 127.0));
        // Every weight is within half a step of its quantized value.
        for row in 0..h {
            for k in 0..l {
                let (p, j, g) = (row / 16, row % 16, k / Q8_GROUP as usize);
                let scale = scales[(p * groups + g) * 16 + j];
                let q = packed[(p * l + k) * 16 + j];
                assert!((q * scale - w[row * l + k]).abs() <= 0.5 * scale + 1e-9);
            }
        }
    }
}

#[test]
fn take_q8_gathers_dequantized_rows() {
    let (rows, width) = (5usize, 40usize);
    let groups = width.div_ceil(Q8_GROUP as usize);
    let packed: Vec<f64> = pseudo_random(5, rows * width)
        .iter()
        .map(|v| (v * 127.0).round())
        .collect();
    let scales: Vec<f64> = pseudo_random(6, rows * groups)
        .iter()
        .map(|v| v.abs())
        .collect();
    let ids = [3.0, 0.0, 4.0, 9.0]; // 9 is past the table: clamped to the last row
    let table = tensor(
        "q",
        vec![c(rows as i64), c(width as i64), c(1)],
        DataType::I8,
    );
    let s = tensor(
        "s",
        vec![c(rows as i64), c(groups as i64), c(1)],
        DataType::F32,
    );
    let i = tensor("ids", vec![c(1), c(4)], DataType::I32);
    let call = op(
        "take_q8",
        vec![table, s, i],
        vec![],
        out(vec![c(1), c(4), c(width as i64)], DataType::F32),
    );
    let got = run(&call, 1, vec![packed.clone(), scales.clone(), ids.to_vec()]).remove(0);
    let mut want = Vec::new();
    for id in ids {
        let row = (id as usize).min(rows - 1);
        for h in 0..width {
            let scale = scales[row * groups + h / Q8_GROUP as usize];
            want.push(packed[row * width + h] * scale);
        }
    }
    assert_close(&got, &want, 1e-6);
}
