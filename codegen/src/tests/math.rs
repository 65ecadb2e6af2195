//! Accuracy and special values of the inline math.

use super::*;

#[path = "../../tests/common/erf.rs"]
mod erf;
use erf::erf64;
use oxrelax_dsl::tir::{Intrinsic, PrimExpr};

/// Max abs or relative error of an intrinsic over `xs` against an f64 reference.
fn intrinsic_error(
    intrinsic: Intrinsic,
    xs: &[f32],
    reference: fn(f64) -> f64,
    relative: bool,
) -> f64 {
    let func = elementwise(F32, |x, _| PrimExpr::call(intrinsic, vec![x]));
    let out = run_f32(&func, xs, xs);
    xs.iter()
        .zip(out)
        .map(|(&x, got)| {
            let want = reference(f64::from(x));
            let err = (f64::from(got) - want).abs();
            if relative {
                err / want.abs().max(1e-30)
            } else {
                // Absolute error, but relative above magnitude 1 (f32 resolution).
                err / want.abs().max(1.0)
            }
        })
        .fold(0.0, f64::max)
}

fn grid(lo: f32, hi: f32, steps: usize) -> Vec<f32> {
    (0..=steps)
        .map(|i| lo + (hi - lo) * i as f32 / steps as f32)
        .collect()
}

#[test]
fn math_accuracy() {
    let wide = grid(-80.0, 80.0, 20_000);
    assert!(intrinsic_error(Intrinsic::Exp, &wide, f64::exp, true) < 1e-7);
    let positive: Vec<f32> = (0..20_000)
        .map(|i| 1e-30_f32 * 1.0045_f32.powi(i))
        .collect();
    assert!(intrinsic_error(Intrinsic::Log, &positive, f64::ln, false) < 1.5e-7);
    let log_near_one = grid(0.01, 100.0, 20_000);
    assert!(intrinsic_error(Intrinsic::Log, &log_near_one, f64::ln, false) < 1.5e-7);
    let moderate = grid(-12.0, 12.0, 20_000);
    assert!(intrinsic_error(Intrinsic::Tanh, &moderate, f64::tanh, false) < 2e-7);
    let sigmoid = |x: f64| 1.0 / (1.0 + (-x).exp());
    assert!(intrinsic_error(Intrinsic::Sigmoid, &moderate, sigmoid, false) < 2e-7);
    assert!(intrinsic_error(Intrinsic::Erf, &grid(-7.0, 7.0, 20_000), erf64, false) < 7e-7);
    let angles = grid(-4096.0, 4096.0, 40_000);
    assert!(intrinsic_error(Intrinsic::Sin, &angles, f64::sin, false) < 1.5e-7);
    assert!(intrinsic_error(Intrinsic::Cos, &angles, f64::cos, false) < 1.5e-7);
    assert!(intrinsic_error(Intrinsic::Sqrt, &log_near_one, f64::sqrt, true) < 1e-7);
}

#[test]
fn math_special_values() {
    let func = elementwise(F32, |x, _| PrimExpr::call(Intrinsic::Exp, vec![x]));
    let out = run_f32(&func, &[f32::NEG_INFINITY, -100.0, 0.0, 100.0], &[0.0; 4]);
    assert_eq!(out, [0.0, 0.0, 1.0, f32::INFINITY]);
    let func = elementwise(F32, |x, _| PrimExpr::call(Intrinsic::Log, vec![x]));
    let out = run_f32(&func, &[0.0, -1.0, f32::INFINITY, 1.0], &[0.0; 4]);
    assert_eq!(out[0], f32::NEG_INFINITY);
    assert!(out[1].is_nan());
    assert_eq!(out[2..], [f32::INFINITY, 0.0]);
    let func = elementwise(F32, |x, y| PrimExpr::call(Intrinsic::Pow, vec![x, y]));
    let out = run_f32(&func, &[2.0, 10.0, 0.0], &[10.0, -2.0, 3.0]);
    assert!((out[0] - 1024.0).abs() < 1e-3 && (out[1] - 0.01).abs() < 1e-8 && out[2] == 0.0);
}

/// `min` / `max` with a constant bound on the right (lowered as a compare and a select)
/// and `exp`'s clamp keep `f32::clamp`'s results bit for bit, NaN staying NaN, in a
/// serial loop and in a vectorized one (4 lanes and a scalar tail).
#[test]
fn constant_bounds_keep_min_max_semantics() {
    use oxrelax_dsl::tir::{BinOp, ForKind, Stmt};
    let xs = [
        f32::NAN,
        f32::NEG_INFINITY,
        f32::INFINITY,
        -0.0,
        0.0,
        -3.0,
        4.0,
        1.5,
        -2.5,
    ];
    let clamp = |x: PrimExpr, _| {
        x.binary(BinOp::Max, PrimExpr::f32(-2.5))
            .binary(BinOp::Min, PrimExpr::f32(3.0))
    };
    for kind in [ForKind::Serial, ForKind::Vectorized] {
        let mut func = elementwise(F32, clamp);
        if let Stmt::For { kind: k, .. } = &mut func.body {
            *k = kind;
        }
        let out = run_f32(&func, &xs, &xs);
        for (&x, got) in xs.iter().zip(out) {
            let want = x.clamp(-2.5, 3.0);
            let same = (want.is_nan() && got.is_nan()) || want.to_bits() == got.to_bits();
            assert!(same, "{kind:?}: clamp({x}) = {got}, want {want}");
        }
        let mut func = elementwise(F32, |x, _| PrimExpr::call(Intrinsic::Exp, vec![x]));
        if let Stmt::For { kind: k, .. } = &mut func.body {
            *k = kind;
        }
        let out = run_f32(&func, &xs, &xs);
        assert!(out[0].is_nan(), "{kind:?}: exp(NaN) = {}", out[0]);
        assert_eq!(out[1..3], [0.0, f32::INFINITY], "{kind:?}");
    }
}
