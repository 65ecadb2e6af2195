use super::scalar::{self, Scalar};
use super::*;
use crate::tir::{BinOp, ForKind, Intrinsic, PrimCmp, TVar};
use crate::{SymExpr, SymVar};

fn var(name: &str) -> PrimExpr {
    PrimExpr::Var(TVar::new(name, DType::I64))
}

fn load(buffer: &str, dtype: DType, index: PrimExpr) -> PrimExpr {
    PrimExpr::Load {
        buffer: buffer.to_string(),
        dtype,
        indices: vec![index],
    }
}

fn store(buffer: &str, index: PrimExpr, value: PrimExpr) -> Stmt {
    Stmt::Store {
        buffer: buffer.to_string(),
        indices: vec![index],
        value,
    }
}

fn for_n(name: &str, extent: PrimExpr, body: Stmt) -> Stmt {
    Stmt::For {
        var: TVar::new(name, DType::I64),
        extent,
        kind: ForKind::Serial,
        body: Box::new(body),
    }
}

/// `out[i] = f(x[i])` over `n` elements of `dtype`.
fn map_func(dtype: DType, out_dtype: DType, f: impl Fn(PrimExpr) -> PrimExpr) -> PrimFunc {
    let n = SymVar::new("n");
    PrimFunc {
        params: vec![
            Buffer::new("x", dtype, vec![n.expr()]),
            Buffer::new("out", out_dtype, vec![n.expr()]),
        ],
        num_outputs: 1,
        dims: vec![n.clone()],
        body: for_n(
            "i",
            PrimExpr::from(n.expr()),
            store("out", var("i"), f(load("x", dtype, var("i")))),
        ),
        attrs: Default::default(),
    }
}

fn dims(n: i64) -> SymBindings {
    [("n".to_string(), n)].into_iter().collect()
}

fn run_map(func: &PrimFunc, input: Vec<f64>) -> Vec<f64> {
    let n = input.len() as i64;
    run_with_inputs(func, &dims(n), &[input]).unwrap().remove(0)
}

#[test]
fn integer_ops_wrap_and_floor() {
    let func = map_func(DType::I32, DType::I32, |x| {
        x.binary(BinOp::FloorDiv, PrimExpr::Int(3, DType::I32))
    });
    assert_eq!(
        run_map(&func, vec![7.0, -7.0, 6.0, -1.0]),
        vec![2.0, -3.0, 2.0, -1.0]
    );
    let func = map_func(DType::I32, DType::I32, |x| {
        x.binary(BinOp::FloorMod, PrimExpr::Int(3, DType::I32))
    });
    assert_eq!(
        run_map(&func, vec![7.0, -7.0, 6.0, -1.0]),
        vec![1.0, 2.0, 0.0, 2.0]
    );
    let func = map_func(DType::I32, DType::I32, |x| {
        x * PrimExpr::Int(1 << 20, DType::I32)
    });
    assert_eq!(run_map(&func, vec![4096.0]), vec![0.0]);
    let func = map_func(DType::I32, DType::U8, |x| x.cast(DType::U8));
    assert_eq!(run_map(&func, vec![257.0, -1.0]), vec![1.0, 255.0]);
}

#[test]
fn float_to_int_casts_truncate_toward_zero() {
    let func = map_func(DType::F32, DType::I64, |x| x.cast(DType::I64));
    assert_eq!(run_map(&func, vec![2.7, -2.7, 0.5]), vec![2.0, -2.0, 0.0]);
}

#[test]
fn half_floats_round_to_nearest_even_and_overflow() {
    assert_eq!(scalar::round_to(1.0 + 2f64.powi(-11), DType::F16), 1.0);
    assert_eq!(
        scalar::round_to(1.0 + 3.0 * 2f64.powi(-11), DType::F16),
        1.0 + 2f64.powi(-9)
    );
    assert_eq!(scalar::round_to(65519.0, DType::F16), 65504.0);
    assert_eq!(scalar::round_to(65520.0, DType::F16), f64::INFINITY);
    assert_eq!(scalar::round_to(2f64.powi(-24), DType::F16), 2f64.powi(-24));
    assert_eq!(scalar::round_to(2f64.powi(-26), DType::F16), 0.0);
    assert_eq!(scalar::round_to(1.0 + 2f64.powi(-8), DType::BF16), 1.0);
    assert_eq!(
        scalar::round_to(-3.0 - 2f64.powi(-6), DType::BF16),
        -3.0 - 2f64.powi(-6)
    );
    assert_eq!(scalar::round_to(0.1, DType::F32), 0.1f32 as f64);
}

#[test]
fn erf_matches_known_values() {
    let known = [
        (0.0, 0.0),
        (0.5, 0.520_499_877_813_046_5),
        (1.0, 0.842_700_792_949_714_9),
        (-2.0, -0.995_322_265_018_952_7),
        (3.5, 0.999_999_256_901_627_7),
    ];
    for (x, erf) in known {
        assert!((scalar::erf(x) - erf).abs() < 1e-12, "erf({x})");
    }
}

#[test]
fn intrinsics_compute_in_the_operand_dtype() {
    let func = map_func(DType::F32, DType::F32, |x| {
        PrimExpr::call(Intrinsic::Sigmoid, vec![x.clone()])
            + PrimExpr::call(Intrinsic::Pow, vec![x, PrimExpr::f32(2.0)])
    });
    let out = run_map(&func, vec![0.0, 1.0]);
    assert_eq!(out[0], 0.5);
    assert!((out[1] - (1.0 + 1.0 / (1.0 + (-1f64).exp()))).abs() < 1e-6);
    let abs = scalar::intrinsic(Intrinsic::Abs, &[Scalar::Int(-3)], DType::I32);
    assert_eq!(abs, Scalar::Int(3));
}

#[test]
fn reads_outside_a_buffer_are_errors() {
    let func = map_func(DType::F32, DType::F32, |_| {
        load("x", DType::F32, var("i") + PrimExpr::index(1))
    });
    let err = run_with_inputs(&func, &dims(2), &[vec![1.0, 2.0]]).unwrap_err();
    assert_eq!(
        err,
        EvalError::OutOfBounds {
            buffer: "x".to_string(),
            indices: vec![2],
            shape: vec![2],
        }
    );
}

#[test]
fn select_evaluates_both_branches() {
    let func = map_func(DType::F32, DType::F32, |x| {
        let i = var("i");
        let first = i.clone().compare(PrimCmp::Eq, PrimExpr::index(0));
        let previous = load("x", DType::F32, i - PrimExpr::index(1));
        PrimExpr::select(first, x, previous)
    });
    let err = run_with_inputs(&func, &dims(2), &[vec![1.0, 2.0]]).unwrap_err();
    assert!(matches!(err, EvalError::OutOfBounds { indices, .. } if indices == vec![-1]));
}

#[test]
fn buffers_are_checked_against_the_signature() {
    let func = map_func(DType::F32, DType::F32, |x| x);
    let mut too_few = vec![vec![0.0; 3]];
    assert_eq!(
        run_prim_func(&func, &dims(3), &mut too_few),
        Err(EvalError::BufferCount {
            expected: 2,
            got: 1
        })
    );
    let mut short = vec![vec![0.0; 3], vec![0.0; 2]];
    assert_eq!(
        run_prim_func(&func, &dims(3), &mut short),
        Err(EvalError::BufferLength {
            buffer: "out".to_string(),
            expected: 3,
            got: 2,
        })
    );
    assert_eq!(
        short[0].len(),
        3,
        "buffers are left with the caller on error"
    );
    let err = run_prim_func(&func, &SymBindings::new(), &mut short).unwrap_err();
    assert_eq!(
        err,
        EvalError::UnboundDim {
            dim: "n".to_string()
        }
    );
}

#[test]
fn let_if_and_allocate_statements_run() {
    let n = SymVar::new("n");
    let t = TVar::new("t", DType::F32);
    let tmp = Buffer::new("tmp", DType::F32, vec![SymExpr::int(1)]);
    let body = for_n(
        "i",
        PrimExpr::from(n.expr()),
        Stmt::Allocate {
            buffer: tmp,
            body: Box::new(Stmt::Seq(vec![
                store("tmp", PrimExpr::index(0), load("x", DType::F32, var("i"))),
                Stmt::Let {
                    var: t.clone(),
                    value: load("tmp", DType::F32, PrimExpr::index(0)) * PrimExpr::f32(10.0),
                    body: Box::new(Stmt::If {
                        cond: PrimExpr::Var(t.clone()).compare(PrimCmp::Gt, PrimExpr::f32(15.0)),
                        then: Box::new(store("out", var("i"), PrimExpr::Var(t))),
                        otherwise: Some(Box::new(store("out", var("i"), PrimExpr::f32(-1.0)))),
                    }),
                },
            ])),
        },
    );
    let func = PrimFunc {
        body,
        ..map_func(DType::F32, DType::F32, |x| x)
    };
    assert_eq!(run_map(&func, vec![1.0, 2.0, 3.0]), vec![-1.0, 20.0, 30.0]);
}

#[test]
fn unwritten_float_outputs_stay_nan() {
    let mut func = map_func(DType::F32, DType::F32, |x| x);
    func.body = Stmt::Seq(Vec::new());
    assert!(run_map(&func, vec![1.0]).iter().all(|v| v.is_nan()));
}
