//! `softmax`, `sum` / `max` / `mean`, `rms_norm`, `layer_norm`.

use super::*;

fn softmax_rows(x: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    (0..rows)
        .flat_map(|r| {
            let row = &x[r * cols..(r + 1) * cols];
            let max = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let total: f64 = row.iter().map(|v| (v - max).exp()).sum();
            row.iter()
                .map(move |v| (v - max).exp() / total)
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn softmax_rows_sum_to_one_and_match_a_direct_computation() {
    let x = tensor("x", vec![c(2), n()], DType::F32);
    let call = op("softmax", vec![x], vec![], out(vec![c(2), n()], DType::F32));
    assert_eq!(pattern(&call), "reduction");
    for n in SIZES {
        let input: Vec<f64> = pseudo_random(n as u64, 2 * n)
            .iter()
            .map(|v| v * 20.0)
            .collect();
        let got = run(&call, n, vec![input.clone()]).remove(0);
        assert_close(&got, &softmax_rows(&input, 2, n), 1e-6);
        for row in got.chunks(n) {
            assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-5);
        }
    }
}

#[test]
fn softmax_along_axis_zero_in_half_precision() {
    let x = tensor("x", vec![n(), c(3)], DType::F16);
    let call = op(
        "softmax",
        vec![x],
        vec![("axis", AttrValue::Int(0))],
        out(vec![n(), c(3)], DType::F16),
    );
    let func = legalize_call(&call).unwrap().func;
    let buffer_dtypes = |stmt: &crate::tir::Stmt| match stmt {
        crate::tir::Stmt::Allocate { buffer, .. } => Some(buffer.dtype),
        _ => None,
    };
    assert_eq!(buffer_dtypes(&func.body), Some(DType::F32));
    let n = 3;
    let input = vec![1.0, 0.0, -1.0, 2.0, 0.0, 0.5, 3.0, 0.0, 0.25];
    let got = run(&call, n, vec![input.clone()]).remove(0);
    let transposed: Vec<f64> = (0..3)
        .flat_map(|col| (0..n).map(move |r| (r, col)))
        .map(|(r, col)| input[r * 3 + col])
        .collect();
    let want_t = softmax_rows(&transposed, 3, n);
    let want: Vec<f64> = (0..n)
        .flat_map(|r| (0..3).map(move |col| (r, col)))
        .map(|(r, col)| want_t[col * n + r])
        .collect();
    assert_close(&got, &want, 1e-3);
}

#[test]
fn sum_max_mean_over_axes_with_and_without_keepdims() {
    let x = tensor("x", vec![c(2), n(), c(3)], DType::F32);
    for keepdims in [false, true] {
        let shape = if keepdims {
            vec![c(2), c(1), c(3)]
        } else {
            vec![c(2), c(3)]
        };
        let attrs = || {
            vec![
                ("axis", AttrValue::Ints(vec![-2])),
                ("keepdims", AttrValue::Bool(keepdims)),
            ]
        };
        let sum = op(
            "sum",
            vec![x.clone()],
            attrs(),
            out(shape.clone(), DType::F32),
        );
        let max = op(
            "max",
            vec![x.clone()],
            attrs(),
            out(shape.clone(), DType::F32),
        );
        let mean = op("mean", vec![x.clone()], attrs(), out(shape, DType::F32));
        for n in SIZES {
            let input = pseudo_random(n as u64, 6 * n);
            let column = |b: usize, col: usize| -> Vec<f64> {
                (0..n)
                    .map(|r| input[offset(&[2, n, 3], &[b, r, col])])
                    .collect()
            };
            let cells: Vec<(usize, usize)> =
                indices(&[2, 3]).iter().map(|i| (i[0], i[1])).collect();
            let want_sum: Vec<f64> = cells
                .iter()
                .map(|&(b, col)| column(b, col).iter().sum())
                .collect();
            let want_max: Vec<f64> = cells
                .iter()
                .map(|&(b, col)| column(b, col).into_iter().fold(f64::NEG_INFINITY, f64::max))
                .collect();
            let want_mean: Vec<f64> = want_sum.iter().map(|s| s / n as f64).collect();
            assert_close(&run(&sum, n, vec![input.clone()])[0], &want_sum, 1e-5);
            assert_eq!(run(&max, n, vec![input.clone()])[0], want_max);
            assert_close(&run(&mean, n, vec![input.clone()])[0], &want_mean, 1e-5);
        }
    }
}

#[test]
fn reductions_default_to_every_axis() {
    let x = tensor("x", vec![n(), c(2)], DType::F32);
    let call = op("sum", vec![x], vec![], out(vec![], DType::F32));
    let got = run(&call, 3, vec![vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]]);
    assert_eq!(got[0], vec![21.0]);
    let y = tensor("y", vec![n()], DType::I32);
    let call = op("mean", vec![y], vec![], out(vec![], DType::I32));
    assert_eq!(run(&call, 4, vec![vec![1.0, 2.0, 3.0, 5.0]])[0], vec![2.0]);
}

fn rms_norm(x: &[f64], w: &[f64], cols: usize, eps: f64) -> Vec<f64> {
    x.chunks(cols)
        .flat_map(|row| {
            let ms = row.iter().map(|v| v * v).sum::<f64>() / cols as f64;
            let scale = 1.0 / (ms + eps).sqrt();
            row.iter()
                .zip(w)
                .map(move |(v, w)| v * scale * w)
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn rms_norm_equals_the_formula() {
    let x = tensor("x", vec![n(), c(8)], DType::F32);
    let w = tensor("w", vec![c(8)], DType::F32);
    let call = op(
        "rms_norm",
        vec![x, w],
        vec![("epsilon", AttrValue::Float(1e-6))],
        out(vec![n(), c(8)], DType::F32),
    );
    let names = crate::test_util::param_names(&legalize_call(&call).unwrap().func);
    assert_eq!(names, ["x", "weight", "out"]);
    for n in SIZES {
        let (input, weight) = (pseudo_random(n as u64, 8 * n), pseudo_random(99, 8));
        let got = run(&call, n, vec![input.clone(), weight.clone()]);
        assert_close(&got[0], &rms_norm(&input, &weight, 8, 1e-6), 1e-5);
    }
}

/// `add_rms_norm(a, b, w)` is `rms_norm(a + b, w)`; summands of another shape are an
/// error.
#[test]
fn add_rms_norm_is_the_norm_of_the_sum() {
    let (a, b) = (
        tensor("a", vec![n(), c(8)], DType::F32),
        tensor("b", vec![n(), c(8)], DType::F32),
    );
    let w = tensor("w", vec![c(8)], DType::F32);
    let norm = |a: Expr, b: Expr| {
        op(
            "add_rms_norm",
            vec![a, b, w.clone()],
            vec![("epsilon", AttrValue::Float(1e-6))],
            out(vec![n(), c(8)], DType::F32),
        )
    };
    let call = norm(a.clone(), b);
    let names = crate::test_util::param_names(&legalize_call(&call).unwrap().func);
    assert_eq!(names, ["a", "b", "weight", "out"]);
    for n in SIZES {
        let (x, y) = (
            pseudo_random(n as u64, 8 * n),
            pseudo_random(7 + n as u64, 8 * n),
        );
        let weight = pseudo_random(99, 8);
        let got = run(&call, n, vec![x.clone(), y.clone(), weight.clone()]);
        let sum: Vec<f64> = x.iter().zip(&y).map(|(p, q)| p + q).collect();
        assert_close(&got[0], &rms_norm(&sum, &weight, 8, 1e-6), 1e-5);
    }
    let other = tensor("b", vec![n(), c(4)], DType::F32);
    assert!(matches!(
        legalize_call(&norm(a, other)),
        Err(LegalizeError::Shape { .. })
    ));
}

#[test]
fn rms_norm_on_bf16_accumulates_in_f32() {
    let x = tensor("x", vec![n(), c(4)], DType::BF16);
    let w = tensor("w", vec![c(4)], DType::BF16);
    let call = op(
        "rms_norm",
        vec![x, w],
        vec![],
        out(vec![n(), c(4)], DType::BF16),
    );
    let input = vec![1.0, 2.0, 3.0, 4.0, 0.5, 0.5, 0.5, 0.5];
    let weight = vec![1.0, 0.5, 2.0, 1.0];
    let got = run(&call, 2, vec![input.clone(), weight.clone()]);
    assert_close(&got[0], &rms_norm(&input, &weight, 4, 1e-5), 1e-2);
    let bad_weight = tensor("w", vec![c(5)], DType::BF16);
    let x = tensor("x", vec![n(), c(4)], DType::BF16);
    let call = op(
        "rms_norm",
        vec![x, bad_weight],
        vec![],
        out(vec![n(), c(4)], DType::BF16),
    );
    assert!(matches!(
        legalize_call(&call),
        Err(LegalizeError::Shape { .. })
    ));
}

#[test]
fn layer_norm_equals_the_formula() {
    let x = tensor("x", vec![n(), c(6)], DType::F32);
    let gamma = tensor("g", vec![c(6)], DType::F32);
    let beta = tensor("b", vec![c(6)], DType::F32);
    let call = op(
        "layer_norm",
        vec![x, gamma, beta],
        vec![],
        out(vec![n(), c(6)], DType::F32),
    );
    for n in SIZES {
        let (input, g, b) = (
            pseudo_random(n as u64, 6 * n),
            pseudo_random(20, 6),
            pseudo_random(21, 6),
        );
        let want: Vec<f64> = input
            .chunks(6)
            .flat_map(|row| {
                let mean = row.iter().sum::<f64>() / 6.0;
                let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 6.0;
                let scale = 1.0 / (var + 1e-5).sqrt();
                (0..6)
                    .map(|i| (row[i] - mean) * scale * g[i] + b[i])
                    .collect::<Vec<_>>()
            })
            .collect();
        let got = run(&call, n, vec![input.clone(), g.clone(), b.clone()]);
        assert_close(&got[0], &want, 1e-5);
    }
}
