//! Elementwise kernels: every unary op, `astype`, every binary op with numpy
//! broadcasting, and `where`, against ndarray references in f64.
//!
//! Tolerances: `|got - want| <= tol * max(1, |want|)`, plus one 16-bit ulp of the output
//! for f16/bf16 storage (the reference runs on the same rounded inputs). Exact ops
//! (negation, min/max, conversions) use `tol = 0`; the others `1e-5` (f32 math is
//! accurate to a few 1e-7; see `src/tests.rs`).

mod common;

use common::*;
use ndarray::{ArrayD, IxDyn, Zip};
use oxrelax_dsl::op::{self, InferError};
use oxrelax_dsl::{DType, Expr, SymExpr};

type Build1 = fn(&Expr) -> Result<Expr, InferError>;
type Build2 = fn(&Expr, &Expr) -> Result<Expr, InferError>;

/// Runs unary op `build` on `[n, 64]` and `[17, n]` (inner dim symbolic, vector tail) for
/// every float dtype and every `n`, against `reference` on inputs in `[lo, hi)`.
fn check_unary(name: &str, build: Build1, reference: fn(f64) -> f64, range: (f32, f32), tol: f64) {
    let mut rng = rng(1);
    for dtype in FLOATS {
        for shape in [vec![n(), c(64)], vec![c(17), n()]] {
            let kernel = compile(&build(&var("x", shape.clone(), dtype)).unwrap());
            for n in NS {
                let x = random(&mut rng, &dims(&shape, n), dtype, range.0, range.1);
                let got = kernel.run1(n, &[&x]);
                let what = format!("{name} {dtype} {:?}", x.shape());
                assert_close(&got, &f64s(&x).mapv(reference), dtype, tol, &what);
            }
        }
    }
}

fn logistic(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// GELU, `x * Phi(x)` with the normal CDF from erf.
fn gelu_erf_form(x: f64) -> f64 {
    0.5 * x * (1.0 + common::erf::erf64(x / 2f64.sqrt()))
}

/// GELU's tanh approximation.
fn gelu_tanh_form(x: f64) -> f64 {
    let inner = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x.powi(3));
    0.5 * x * (1.0 + inner.tanh())
}

macro_rules! unary_tests {
    ($($name:ident: $build:expr, $reference:expr, [$lo:expr, $hi:expr], $tol:expr;)*) => {$(
        #[test]
        fn $name() {
            check_unary(stringify!($name), $build, $reference, ($lo, $hi), $tol);
        }
    )*};
}

unary_tests! {
    negative: op::negative, |x| -x, [-4.0, 4.0], 0.0;
    exp: op::exp, f64::exp, [-10.0, 10.0], 1e-5;
    log: op::log, f64::ln, [0.01, 100.0], 1e-5;
    sqrt: op::sqrt, f64::sqrt, [0.0, 100.0], 1e-5;
    rsqrt: op::rsqrt, |x| 1.0 / x.sqrt(), [0.01, 100.0], 1e-5;
    sin: op::sin, f64::sin, [-10.0, 10.0], 1e-5;
    cos: op::cos, f64::cos, [-10.0, 10.0], 1e-5;
    tanh: op::tanh, f64::tanh, [-6.0, 6.0], 1e-5;
    sigmoid: op::sigmoid, logistic, [-10.0, 10.0], 1e-5;
    silu: op::silu, |x| x * logistic(x), [-10.0, 10.0], 1e-5;
    gelu_erf: |x| op::gelu(x, false), gelu_erf_form, [-6.0, 6.0], 1e-5;
    gelu_tanh: |x| op::gelu(x, true), gelu_tanh_form, [-6.0, 6.0], 1e-5;
}

#[test]
fn astype_converts_between_storage_dtypes() {
    use DType::{BF16, F16, F32, I32};
    let mut rng = rng(2);
    let shape = vec![n(), c(17)];
    for (from, to) in [
        (F32, F16),
        (F32, BF16),
        (F16, F32),
        (BF16, F32),
        (F16, BF16),
        (BF16, F16),
        (F32, I32),
        (I32, F32),
        (F32, F32),
    ] {
        let kernel = compile(&op::astype(&var("x", shape.clone(), from), to).unwrap());
        for n in NS {
            let x = random(&mut rng, &dims(&shape, n), from, -1000.0, 1000.0);
            let want = x.mapv(|v| f64::from(round_to(to, v)));
            assert_exact(
                &kernel.run1(n, &[&x]),
                &want,
                &format!("astype {from}->{to}"),
            );
        }
    }
}

#[test]
fn astype_to_8_bit_truncates_and_wraps_as_the_scalar_cast_does() {
    let mut rng = rng(12);
    let shape = vec![n(), c(19)];
    let wrap = |to: DType, v: f32| {
        let int = v.trunc() as i64;
        f64::from(if to == DType::U8 {
            i32::from(int as u8)
        } else {
            i32::from(int as i8)
        })
    };
    for to in [DType::U8, DType::I8] {
        let kernel = compile(&op::astype(&var("x", shape.clone(), DType::F32), to).unwrap());
        for n in NS {
            let x = random(&mut rng, &dims(&shape, n), DType::F32, -1000.0, 1000.0);
            let want = x.mapv(|v| wrap(to, v));
            assert_exact(&kernel.run1(n, &[&x]), &want, &format!("astype f32->{to}"));
        }
    }
}

/// `f` applied elementwise to `a` and `b` broadcast together.
fn zip2(a: &ArrayD<f64>, b: &ArrayD<f64>, f: impl Fn(f64, f64) -> f64) -> ArrayD<f64> {
    let shape = IxDyn(&broadcast_shape(a.shape(), b.shape()));
    Zip::from(&a.broadcast(shape.clone()).unwrap())
        .and(&b.broadcast(shape).unwrap())
        .map_collect(|&x, &y| f(x, y))
}

/// The operand shapes binary ops are tested on (1, 3, 17, 64, 129 and `n`).
fn broadcast_cases() -> Vec<(Vec<SymExpr>, Vec<SymExpr>)> {
    vec![
        (vec![n(), c(64)], vec![n(), c(64)]),
        (vec![n(), c(1)], vec![c(1), c(64)]),
        (vec![c(17)], vec![c(3), c(17)]),
        (vec![n(), c(3), c(17)], vec![c(17)]),
        (vec![c(1)], vec![n(), c(129)]),
        (vec![c(129), c(1)], vec![n()]),
    ]
}

/// Runs binary op `build` on every broadcast case, float dtype and `n`; the lhs is in
/// `[-4, 4)`, the rhs in `rhs` (keeps divisors away from 0).
fn check_binary(
    name: &str,
    build: Build2,
    reference: fn(f64, f64) -> f64,
    rhs: (f32, f32),
    tol: f64,
) {
    let mut rng = rng(3);
    for dtype in FLOATS {
        for (sa, sb) in broadcast_cases() {
            let call = build(&var("a", sa.clone(), dtype), &var("b", sb.clone(), dtype)).unwrap();
            let kernel = compile(&call);
            for n in NS {
                let a = random(&mut rng, &dims(&sa, n), dtype, -4.0, 4.0);
                let b = random(&mut rng, &dims(&sb, n), dtype, rhs.0, rhs.1);
                let want = zip2(&f64s(&a), &f64s(&b), reference);
                let what = format!("{name} {dtype} {:?} {:?}", a.shape(), b.shape());
                assert_close(&kernel.run1(n, &[&a, &b]), &want, dtype, tol, &what);
            }
        }
    }
}

macro_rules! binary_tests {
    ($($name:ident: $build:expr, $reference:expr, [$lo:expr, $hi:expr], $tol:expr;)*) => {$(
        #[test]
        fn $name() {
            check_binary(stringify!($name), $build, $reference, ($lo, $hi), $tol);
        }
    )*};
}

binary_tests! {
    add: op::add, |a, b| a + b, [-4.0, 4.0], 1e-6;
    subtract: op::subtract, |a, b| a - b, [-4.0, 4.0], 1e-6;
    multiply: op::multiply, |a, b| a * b, [-4.0, 4.0], 1e-6;
    divide: op::divide, |a, b| a / b, [0.25, 4.0], 1e-6;
    maximum: op::maximum, f64::max, [-4.0, 4.0], 0.0;
    minimum: op::minimum, f64::min, [-4.0, 4.0], 0.0;
}

#[test]
fn where_selects_with_broadcasting() {
    let mut rng = rng(4);
    let cases = [
        (vec![n(), c(1)], vec![n(), c(64)], vec![c(64)]),
        (vec![n(), c(17)], vec![c(1)], vec![c(3), c(1), c(17)]),
        (vec![c(129)], vec![n(), c(129)], vec![n(), c(129)]),
    ];
    for dtype in FLOATS {
        for (sc, sa, sb) in &cases {
            let cond = var("cond", sc.clone(), DType::Bool);
            let (a, b) = (var("a", sa.clone(), dtype), var("b", sb.clone(), dtype));
            let kernel = compile(&op::r#where(&cond, &a, &b).unwrap());
            for n in NS {
                let cond = random(&mut rng, &dims(sc, n), DType::Bool, 0.0, 2.0);
                let a = random(&mut rng, &dims(sa, n), dtype, -4.0, 4.0);
                let b = random(&mut rng, &dims(sb, n), dtype, -4.0, 4.0);
                let shape = broadcast_shape(&broadcast_shape(cond.shape(), a.shape()), b.shape());
                let shape = IxDyn(&shape);
                let want = Zip::from(&cond.broadcast(shape.clone()).unwrap())
                    .and(&a.broadcast(shape.clone()).unwrap())
                    .and(&b.broadcast(shape).unwrap())
                    .map_collect(|&c, &a, &b| f64::from(if c != 0.0 { a } else { b }));
                assert_exact(
                    &kernel.run1(n, &[&cond, &a, &b]),
                    &want,
                    &format!("where {dtype}"),
                );
            }
        }
    }
}

#[test]
fn static_shapes_without_dims() {
    let mut rng = rng(5);
    for (sa, sb) in [
        (vec![c(1)], vec![c(1)]),
        (vec![c(3), c(17)], vec![c(3), c(17)]),
    ] {
        let (a, b) = (
            var("a", sa.clone(), DType::F32),
            var("b", sb.clone(), DType::F32),
        );
        let kernel = compile(&op::multiply(&a, &b).unwrap());
        assert!(kernel.func.dims.is_empty());
        let a = random(&mut rng, &dims(&sa, 0), DType::F32, -4.0, 4.0);
        let b = random(&mut rng, &dims(&sb, 0), DType::F32, -4.0, 4.0);
        let want = zip2(&f64s(&a), &f64s(&b), |x, y| x * y);
        assert_close(
            &kernel.run1(0, &[&a, &b]),
            &want,
            DType::F32,
            1e-6,
            "static multiply",
        );
    }
}

#[test]
fn contiguous_elementwise_kernels_are_vectorized() {
    let f32 = DType::F32;
    let x = var("x", vec![n(), c(64)], f32);
    let calls = [
        ("add", op::add(&x, &x).unwrap()),
        ("exp", op::exp(&x).unwrap()),
        ("tanh", op::tanh(&x).unwrap()),
        ("silu", op::silu(&x).unwrap()),
        ("gelu", op::gelu(&x, false).unwrap()),
        (
            "broadcast add",
            op::add(
                &var("a", vec![n(), c(1)], f32),
                &var("b", vec![c(1), c(64)], f32),
            )
            .unwrap(),
        ),
        (
            "f16 multiply",
            op::multiply(
                &var("a", vec![c(17), n()], DType::F16),
                &var("b", vec![n()], DType::F16),
            )
            .unwrap(),
        ),
    ];
    for (name, call) in calls {
        let clif = compile(&call).clif();
        assert!(clif.contains("f32x4"), "{name} is not vectorized:\n{clif}");
    }
}

/// A rank-4 nest with enough work to be parallelized: the default schedule fuses its
/// three outer (serial) loops into one.
#[test]
fn rank4_nest_large_enough_to_parallelize() {
    let mut rng = rng(6);
    let shape = vec![c(2), c(4), n(), c(16)];
    let x = var("x", shape.clone(), DType::F32);
    let kernel = compile(&op::add(&x, &x).unwrap());
    for n in NS {
        let x = random(&mut rng, &dims(&shape, n), DType::F32, -4.0, 4.0);
        let want = f64s(&x).mapv(|v| v + v);
        assert_exact(&kernel.run1(n, &[&x, &x]), &want, "add [2, 4, n, 16]");
    }
}
