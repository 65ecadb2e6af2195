//! `pack_weight` and `packed_matmul` scheduled by the target's rules (GEMV for one row,
//! the tensorized matmul otherwise) and run on the runtime's microkernels, for the host's
//! best microkernels and for forced scalar ones, against `x @ w^T` in f64.
//!
//! Shapes cover edges: output widths that are not a multiple of the 16-wide panel (nor of
//! the GEMV block's 4 panels), reductions longer than one 256-long block (so later blocks
//! accumulate), row counts that are not a multiple of the 6-row block, and a symbolic row
//! count. Weights are f32 or f16 (f16 panels run on the f16-weight microkernels, which
//! widen them as they load them).
//!
//! Tolerance: `|got - want| <= 1e-4 * max(1, |want|)` (f32 accumulation of up to 300
//! products of values in `[-1, 1)`).

mod common;

use common::*;
use ndarray::{ArrayD, Ix2, IxDyn};
use oxrelax_dsl::op;
use oxrelax_dsl::tir::QUANT_GROUP;
use oxrelax_dsl::{AttrValue, DType, SymExpr, Target};
use rand::rngs::StdRng;

const TOL: f64 = 1e-4;

/// `(L, H)`: reduction length and output features.
const SHAPES: [(i64, i64); 5] = [(64, 64), (300, 37), (17, 5), (257, 48), (33, 130)];

/// The targets to run: the host (its best microkernels) and scalar microkernels.
fn targets() -> Vec<Target> {
    let host = Target::host();
    let scalar = Target::new(&host.triple, &[]);
    vec![host, scalar]
}

fn rule(kernel: &Kernel) -> String {
    match kernel.func.attrs.get("schedule_rule") {
        Some(AttrValue::Str(rule)) => rule.clone(),
        other => panic!("no schedule rule recorded: {other:?}"),
    }
}

/// The weight dtypes the cases run with.
const WEIGHTS: [DType; 2] = [DType::F32, DType::F16];

/// The packed weight of `w` (`[H, L]` of `dtype`), made by the compiled `pack_weight`
/// kernel.
fn packed(w: &ArrayD<f32>, dtype: DType, target: &Target) -> ArrayD<f32> {
    let (h, l) = (w.shape()[0] as i64, w.shape()[1] as i64);
    let weight = var("w", vec![c(h), c(l)], dtype);
    let hp = target.matmul_tiles().hp;
    let kernel = compile_for(&op::pack_weight(&weight, hp).unwrap(), target);
    kernel.run1(1, &[w])
}

/// `x @ w^T` in f64 for `x` of shape `[1, rows, L]`.
fn reference(x: &ArrayD<f32>, w: &ArrayD<f32>) -> ArrayD<f64> {
    let rows = x.shape()[1];
    let x2 = f64s(x)
        .into_shape_with_order((rows, x.shape()[2]))
        .unwrap()
        .into_dimensionality::<Ix2>()
        .unwrap();
    let w2 = f64s(w).into_dimensionality::<Ix2>().unwrap();
    x2.dot(&w2.t())
        .into_shape_with_order(IxDyn(&[1, rows, w.shape()[0]]))
        .unwrap()
}

fn assert_matches(got: &ArrayD<f32>, want: &ArrayD<f64>, what: &str) {
    assert_close(got, want, DType::F32, TOL, what);
}

/// A random weight `[H, L]` of `weights`, its packed panels, and `packed_matmul` over
/// `[1, rows, L]` compiled for `target` (checked to call the microkernel for `weights`).
fn random_case(
    rng: &mut StdRng,
    target: &Target,
    (weights, (l, h)): (DType, (i64, i64)),
    rows: SymExpr,
) -> (ArrayD<f32>, ArrayD<f32>, Kernel) {
    let w = random(rng, &[h as usize, l as usize], weights, -1.0, 1.0);
    let panels = packed(&w, weights, target);
    let x = var("x", vec![c(1), rows, c(l)], DType::F32);
    let p = var("p", panels_shape(&panels), weights);
    let kernel = compile_for(&op::packed_matmul(&x, &p, h).unwrap(), target);
    let text = oxrelax_dsl::text::print_prim_func("k", &kernel.func);
    let f16_kernel = text.contains("_f16(");
    assert_eq!(f16_kernel, weights == DType::F16, "{text}");
    (w, panels, kernel)
}

/// Every (weight dtype, shape) case.
fn cases() -> impl Iterator<Item = (DType, (i64, i64))> {
    WEIGHTS
        .into_iter()
        .flat_map(|w| SHAPES.into_iter().map(move |shape| (w, shape)))
}

#[test]
fn prefill_rows_run_on_the_tensorized_matmul() {
    for target in targets() {
        let mut rng = rng(7);
        for (weights, (l, h)) in cases() {
            let (w, panels, kernel) = random_case(&mut rng, &target, (weights, (l, h)), n());
            assert_eq!(rule(&kernel), "matmul");
            for rows in [1, 5, 6, 13, 129] {
                let xs = random(&mut rng, &[1, rows, l as usize], DType::F32, -1.0, 1.0);
                let got = kernel.run1(rows as i64, &[&xs, &panels]);
                let what = format!("{:?} {weights} L={l} H={h} rows={rows}", target.features);
                assert_matches(&got, &reference(&xs, &w), &what);
            }
        }
    }
}

#[test]
fn one_row_runs_on_the_gemv() {
    for target in targets() {
        let mut rng = rng(8);
        for (weights, (l, h)) in cases() {
            let (w, panels, kernel) = random_case(&mut rng, &target, (weights, (l, h)), c(1));
            assert_eq!(rule(&kernel), "gemv");
            let xs = random(&mut rng, &[1, 1, l as usize], DType::F32, -1.0, 1.0);
            let got = kernel.run1(1, &[&xs, &panels]);
            let what = format!("{:?} {weights} L={l} H={h}", target.features);
            assert_matches(&got, &reference(&xs, &w), &what);
        }
    }
}

#[test]
fn packed_weights_are_zero_padded_panels() {
    let target = Target::host();
    let mut rng = rng(9);
    let w = random(&mut rng, &[37, 20], DType::F32, -1.0, 1.0);
    let panels = packed(&w, DType::F32, &target);
    assert_eq!(panels.shape(), [3, 20, 16]);
    for p in 0..3 {
        for l in 0..20 {
            for j in 0..16 {
                let row = p * 16 + j;
                let want = if row < 37 { w[[row, l]] } else { 0.0 };
                assert_eq!(panels[[p, l, j]], want, "panel {p}, l {l}, lane {j}");
            }
        }
    }
}

fn panels_shape(panels: &ArrayD<f32>) -> Vec<SymExpr> {
    panels.shape().iter().map(|&d| c(d as i64)).collect()
}

/// Quantized panels of `format` (`(weights, scales)` dtypes: i8 panels `[P, L, 16]`, or
/// u4 value pairs `[P, ceil(L/2), 16, 2]`) and group scales `[P, ceil(L / 32), 16]` of
/// an `[H, L]` weight, random, and the f32 weight they stand for.
fn random_quantized(
    rng: &mut StdRng,
    (l, h): (i64, i64),
    (weights, scale_dtype): (DType, DType),
) -> (ArrayD<f32>, ArrayD<f32>, ArrayD<f32>) {
    let (l, h) = (l as usize, h as usize);
    let panels = h.div_ceil(16);
    let groups = l.div_ceil(QUANT_GROUP as usize);
    let scales = random(rng, &[panels, groups, 16], scale_dtype, -0.02, 0.02);
    let four_bits = weights == DType::U4;
    let q = if four_bits {
        let shape = [panels, l.div_ceil(2), 16, 2];
        random(rng, &shape, DType::U4, 0.0, 16.0)
    } else {
        random(rng, &[panels, l, 16], DType::I8, -127.0, 128.0)
    };
    // The weight of depth `k` of column `lane` of panel `p`.
    let value = |p: usize, k: usize, lane: usize| {
        if four_bits {
            q[[p, k / 2, lane, k % 2]] - 8.0
        } else {
            q[[p, k, lane]]
        }
    };
    let w = ArrayD::from_shape_fn(IxDyn(&[h, l]), |i| {
        let (p, lane, k) = (i[0] / 16, i[0] % 16, i[1]);
        value(p, k, lane) * scales[[p, k / QUANT_GROUP as usize, lane]]
    });
    (q, scales, w)
}

#[test]
fn quantized_panels_with_group_scales_run_on_the_quantized_microkernels() {
    let formats = [
        (DType::I8, DType::F32, "_q8("),
        (DType::U4, DType::F32, "_q4("),
        (DType::U4, DType::F16, "_q4f16("),
    ];
    for target in targets() {
        let mut rng = rng(10);
        for (weights, scale_dtype, kernel_suffix) in formats {
            for (l, h) in SHAPES {
                let (q, scales, w) = random_quantized(&mut rng, (l, h), (weights, scale_dtype));
                let p = var("p", panels_shape(&q), weights);
                let s = var("s", panels_shape(&scales), scale_dtype);
                for rows in [c(1), n()] {
                    let x = var("x", vec![c(1), rows.clone(), c(l)], DType::F32);
                    let product = op::packed_matmul_quant(&x, &p, &s, h).unwrap();
                    let kernel = compile_for(&product, &target);
                    let text = oxrelax_dsl::text::print_prim_func("k", &kernel.func);
                    assert!(text.contains(kernel_suffix), "{text}");
                    for count in [1usize, 7, 13] {
                        if rows.as_const() == Some(1) && count > 1 {
                            continue;
                        }
                        let xs = random(&mut rng, &[1, count, l as usize], DType::F32, -1.0, 1.0);
                        let got = kernel.run1(count as i64, &[&xs, &q, &scales]);
                        let what = format!(
                            "{:?} {weights}/{scale_dtype} L={l} H={h} rows={count}",
                            target.features
                        );
                        assert_matches(&got, &reference(&xs, &w), &what);
                    }
                }
            }
        }
    }
}
