//! Normalization kernels (`rms_norm`, `layer_norm`) and the Hugging Face rotary embedding
//! built from ops (strided_slice halves, negative, concat, multiply, add), against
//! ndarray references in f64.
//!
//! Tolerances: `|got - want| <= 1e-5 * max(1, |want|)` (f32 accumulation over rows of up
//! to 129 elements, then rsqrt), plus one 16-bit ulp of the output for f16/bf16. Inputs
//! offset by 100 (std 0.29) get `1e-3`: the f32 rounding of the row mean (~3e-5) is
//! amplified by `1 / std` once centered; a one-pass `E[x^2] - E[x]^2` variance would be
//! off by ~1e-2 there, so the case still checks that the variance is taken centered.

mod common;

use common::*;
use ndarray::{ArrayD, IxDyn};
use oxrelax_dsl::ir::Expr;
use oxrelax_dsl::op;
use oxrelax_dsl::{DType, SymExpr};

const TOL: f64 = 1e-5;

/// Normalizes `x` over its trailing `count` axes: `(x - mean) / sqrt(mean((x - mean)^2)
/// + eps)` when `center` (layer norm), else `x / sqrt(mean(x^2) + eps)` (RMS norm).
fn normalize(x: &ArrayD<f64>, count: usize, center: bool, eps: f64) -> ArrayD<f64> {
    let lead: usize = x.shape()[..x.ndim() - count].iter().product();
    let mut rows = x
        .clone()
        .into_shape_with_order((lead, x.len() / lead.max(1)))
        .unwrap();
    for mut row in rows.outer_iter_mut() {
        let mean = if center { row.mean().unwrap() } else { 0.0 };
        row.mapv_inplace(|v| v - mean);
        let scale = 1.0 / (row.mapv(|v| v * v).mean().unwrap() + eps).sqrt();
        row.mapv_inplace(|v| v * scale);
    }
    rows.into_shape_with_order(IxDyn(x.shape())).unwrap()
}

/// A normalization over the trailing dims of `x` matched by the scale shape.
struct NormCase {
    x: Vec<SymExpr>,
    scale: Vec<SymExpr>,
    range: (f32, f32),
    tol: f64,
}

fn cases() -> Vec<NormCase> {
    let case = |x, scale| NormCase {
        x,
        scale,
        range: (-2.0, 2.0),
        tol: TOL,
    };
    vec![
        case(vec![n(), c(64)], vec![c(64)]),
        case(vec![c(3), n(), c(17)], vec![c(17)]),
        case(vec![n(), c(129)], vec![c(129)]),
        case(vec![c(1), c(1)], vec![c(1)]),
        case(vec![n(), c(3), c(17)], vec![c(3), c(17)]),
        NormCase {
            x: vec![n(), c(64)],
            scale: vec![c(64)],
            range: (100.0, 101.0),
            tol: 1e-3,
        },
    ]
}

/// Runs `rms_norm` (`layer = false`) or `layer_norm` over every case, float dtype and `n`.
fn check_norm(layer: bool, eps: f64) {
    let mut rng = rng(40);
    for case in cases() {
        let axes: Vec<i64> = (1..=case.scale.len() as i64).rev().map(|a| -a).collect();
        for dtype in FLOATS {
            let x = var("x", case.x.clone(), dtype);
            let gamma = var("gamma", case.scale.clone(), dtype);
            let beta = var("beta", case.scale.clone(), dtype);
            let call = if layer {
                op::layer_norm(&x, &gamma, &beta, axes.clone(), eps)
            } else {
                op::rms_norm(&x, &gamma, axes.clone(), eps)
            };
            let kernel = compile(&call.unwrap());
            for n in NS {
                let x = random(
                    &mut rng,
                    &dims(&case.x, n),
                    dtype,
                    case.range.0,
                    case.range.1,
                );
                let gamma = random(&mut rng, &dims(&case.scale, n), dtype, 0.5, 1.5);
                let beta = random(&mut rng, &dims(&case.scale, n), dtype, -1.0, 1.0);
                let count = case.scale.len();
                let mut want = normalize(&f64s(&x), count, layer, eps) * &f64s(&gamma);
                let mut inputs = vec![&x, &gamma];
                if layer {
                    want += &f64s(&beta);
                    inputs.push(&beta);
                }
                let what = format!("layer {layer} {dtype} {:?} eps {eps}", x.shape());
                assert_close(&kernel.run1(n, &inputs), &want, dtype, case.tol, &what);
            }
        }
    }
}

#[test]
fn rms_norm() {
    check_norm(false, 1e-5);
    check_norm(false, 1e-6);
}

#[test]
fn layer_norm() {
    check_norm(true, 1e-5);
}

#[test]
fn layer_norm_over_a_middle_axis() {
    let mut rng = rng(41);
    let shape = vec![n(), c(17), c(3)];
    for dtype in FLOATS {
        let (x, gamma, beta) = (
            var("x", shape.clone(), dtype),
            var("gamma", vec![c(17)], dtype),
            var("beta", vec![c(17)], dtype),
        );
        let kernel = compile(&op::layer_norm(&x, &gamma, &beta, vec![1], 1e-5).unwrap());
        for n in NS {
            let x = random(&mut rng, &dims(&shape, n), dtype, -2.0, 2.0);
            let gamma = random(&mut rng, &[17], dtype, 0.5, 1.5);
            let beta = random(&mut rng, &[17], dtype, -1.0, 1.0);
            // Move axis 1 last, normalize it, move it back; gamma/beta index that axis.
            let mut moved = f64s(&x);
            moved.swap_axes(1, 2);
            let mut want = normalize(&moved.as_standard_layout().into_owned(), 1, true, 1e-5);
            want = want * &f64s(&gamma) + &f64s(&beta);
            want.swap_axes(1, 2);
            let what = format!("layer_norm axis 1 {dtype} n={n}");
            assert_close(
                &kernel.run1(n, &[&x, &gamma, &beta]),
                &want,
                dtype,
                TOL,
                &what,
            );
        }
    }
}

/// The rotary embedding of `x: [heads, n, dim]` with `cos`/`sin: [n, dim]`, the Hugging
/// Face way: `x * cos + rotate_half(x) * sin`, `rotate_half(x) = cat(-x2, x1)`, as a
/// chain of separately compiled op kernels.
struct Rotary {
    halves: [Kernel; 2],
    negative: Kernel,
    concat: Kernel,
    times_cos: Kernel,
    times_sin: Kernel,
    add: Kernel,
}

impl Rotary {
    fn new(heads: i64, dim: i64, dtype: DType) -> Self {
        let x = var("x", vec![c(heads), n(), c(dim)], dtype);
        let cos = var("cos", vec![n(), c(dim)], dtype);
        let sin = var("sin", vec![n(), c(dim)], dtype);
        let half = |begin, end| op::strided_slice(&x, vec![-1], vec![c(begin)], vec![c(end)], None);
        let (x1, x2) = (half(0, dim / 2).unwrap(), half(dim / 2, dim).unwrap());
        let negative = op::negative(&x2).unwrap();
        let rotated = op::concat(&[negative.clone(), x1.clone()], -1).unwrap();
        let times_cos = op::multiply(&x, &cos).unwrap();
        let times_sin = op::multiply(&rotated, &sin).unwrap();
        let add = op::add(&times_cos, &times_sin).unwrap();
        let compile_all = |calls: &[&Expr]| calls.iter().map(|c| compile(c)).collect::<Vec<_>>();
        let mut kernels =
            compile_all(&[&x1, &x2, &negative, &rotated, &times_cos, &times_sin, &add]).into_iter();
        let mut next = || kernels.next().unwrap();
        Rotary {
            halves: [next(), next()],
            negative: next(),
            concat: next(),
            times_cos: next(),
            times_sin: next(),
            add: next(),
        }
    }

    fn run(&self, n: i64, x: &ArrayD<f32>, cos: &ArrayD<f32>, sin: &ArrayD<f32>) -> ArrayD<f32> {
        let x1 = self.halves[0].run1(n, &[x]);
        let x2 = self.halves[1].run1(n, &[x]);
        let negative = self.negative.run1(n, &[&x2]);
        let rotated = self.concat.run1(n, &[&negative, &x1]);
        let times_cos = self.times_cos.run1(n, &[x, cos]);
        let times_sin = self.times_sin.run1(n, &[&rotated, sin]);
        self.add.run1(n, &[&times_cos, &times_sin])
    }
}

/// `cos`/`sin` tables `[n, dim]` of the positions `0..n` with base 10000, rounded to
/// `dtype`, as Hugging Face's `LlamaRotaryEmbedding` builds them.
fn rotary_tables(n: usize, dim: usize, dtype: DType) -> (ArrayD<f32>, ArrayD<f32>) {
    let angle = |i: &IxDyn| {
        let frequency = 10000f64.powf(-2.0 * (i[1] % (dim / 2)) as f64 / dim as f64);
        i[0] as f64 * frequency
    };
    let table = |f: fn(f64) -> f64| {
        ArrayD::from_shape_fn(IxDyn(&[n, dim]), |i| round_to(dtype, f(angle(&i)) as f32))
    };
    (table(f64::cos), table(f64::sin))
}

#[test]
fn rotary_embedding_hugging_face_style() {
    let mut rng = rng(42);
    let (heads, dim) = (3usize, 64usize);
    for dtype in FLOATS {
        let rotary = Rotary::new(heads as i64, dim as i64, dtype);
        for n in NS {
            let x = random(&mut rng, &[heads, n as usize, dim], dtype, -2.0, 2.0);
            let (cos, sin) = rotary_tables(n as usize, dim, dtype);
            let (xf, cosf, sinf) = (f64s(&x), f64s(&cos), f64s(&sin));
            let half = dim / 2;
            let rotated = ArrayD::from_shape_fn(xf.raw_dim(), |i| {
                let (h, s, d) = (i[0], i[1], i[2]);
                if d < half {
                    -xf[[h, s, d + half]]
                } else {
                    xf[[h, s, d - half]]
                }
            });
            // Each op's result is stored in `dtype` before the next op reads it.
            let times_cos = rounded(dtype, &(&xf * &cosf));
            let times_sin = rounded(dtype, &(&rotated * &sinf));
            let want = &times_cos + &times_sin;
            let what = format!("rotary {dtype} n={n}");
            assert_close(&rotary.run(n, &x, &cos, &sin), &want, dtype, 1e-6, &what);
        }
    }
}

/// The scaling stage of both norms stores contiguously and is vectorized.
#[test]
fn norm_output_stage_is_vectorized() {
    let dtype = DType::F32;
    let x = var("x", vec![n(), c(64)], dtype);
    let (gamma, beta) = (
        var("gamma", vec![c(64)], dtype),
        var("beta", vec![c(64)], dtype),
    );
    for call in [
        op::rms_norm(&x, &gamma, vec![-1], 1e-5).unwrap(),
        op::layer_norm(&x, &gamma, &beta, vec![-1], 1e-5).unwrap(),
    ] {
        let clif = compile(&call).clif();
        assert!(clif.contains("f32x4"), "{clif}");
    }
}
