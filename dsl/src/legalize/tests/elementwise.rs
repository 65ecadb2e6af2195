//! Unary element-wise ops, broadcasting binary ops and `where`.

use super::*;
use crate::tir::{PrimExpr, Stmt};

type Unary = fn(f64) -> f64;
type Binary = fn(f64, f64) -> f64;

fn unary(name: &str, dtype: DType, attrs: Vec<(&str, AttrValue)>) -> Call {
    let x = tensor("x", vec![n(), c(2)], dtype);
    op(name, vec![x], attrs, out(vec![n(), c(2)], dtype))
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

#[test]
fn math_functions_match_f64() {
    let table: [(&str, Unary); 9] = [
        ("negative", |x| -x),
        ("exp", f64::exp),
        ("log", |x| x.abs().ln()),
        ("sqrt", |x| x.abs().sqrt()),
        ("rsqrt", |x| 1.0 / x.abs().sqrt()),
        ("sin", f64::sin),
        ("cos", f64::cos),
        ("tanh", f64::tanh),
        ("sigmoid", sigmoid),
    ];
    for (name, f) in table {
        for n in SIZES {
            let mut input = pseudo_random(n as u64, 2 * n);
            if matches!(name, "log" | "sqrt" | "rsqrt") {
                input.iter_mut().for_each(|v| *v = v.abs() + 0.1);
            }
            let got = run(&unary(name, DType::F32, vec![]), n, vec![input.clone()]);
            let want: Vec<f64> = input.iter().map(|&v| f(v)).collect();
            assert_close(&got[0], &want, 1e-6);
        }
    }
}

#[test]
fn silu_is_x_times_sigmoid() {
    let input = pseudo_random(5, 6);
    let got = run(&unary("silu", DType::F32, vec![]), 3, vec![input.clone()]);
    let want: Vec<f64> = input.iter().map(|&x| x * sigmoid(x)).collect();
    assert_close(&got[0], &want, 1e-6);
    assert_eq!(pattern(&unary("silu", DType::F32, vec![])), "elemwise");
}

#[test]
fn gelu_erf_and_tanh_forms() {
    let input = vec![1.0, -0.5, 0.0, 2.0];
    let erf_form = [
        0.841_344_746_068_542_9,
        -0.154_268_776_169_963_7,
        0.0,
        1.954_499_736_103_642,
    ];
    let got = run(&unary("gelu", DType::F32, vec![]), 2, vec![input.clone()]);
    assert_close(&got[0], &erf_form, 1e-6);
    let tanh = vec![("approximate", AttrValue::Str("tanh".to_string()))];
    let got = run(&unary("gelu", DType::F32, tanh), 2, vec![input.clone()]);
    let want: Vec<f64> = input
        .iter()
        .map(|&x| {
            let inner = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
            0.5 * x * (1.0 + inner.tanh())
        })
        .collect();
    assert_close(&got[0], &want, 1e-6);
    let bad = vec![("approximate", AttrValue::Str("fast".to_string()))];
    let err = legalize_call(&unary("gelu", DType::F32, bad)).unwrap_err();
    assert!(matches!(err, LegalizeError::BadAttr { ref attr, .. } if attr == "approximate"));
}

#[test]
fn half_inputs_compute_in_f32_and_store_back() {
    let call = unary("exp", DType::F16, vec![]);
    let func = legalize_call(&call).unwrap().func;
    let body = crate::test_util::under_loops(&func, 2);
    let Stmt::Store { value, .. } = body else {
        panic!()
    };
    let PrimExpr::Cast(DType::F16, inner) = value else {
        panic!("{value:?}")
    };
    let PrimExpr::Call(_, args) = inner.as_ref() else {
        panic!()
    };
    assert!(
        matches!(&args[0], PrimExpr::Cast(DType::F32, load) if matches!(**load, PrimExpr::Load { .. }))
    );
    let got = run(&call, 1, vec![vec![1.0, 0.5]]);
    assert_eq!(got[0], vec![2.71875, 1.6484375]);
}

#[test]
fn astype_converts_and_needs_its_dtype() {
    let x = tensor("x", vec![n()], DType::F32);
    let dtype = vec![("dtype", AttrValue::DType(DType::I32))];
    let call = op("astype", vec![x.clone()], dtype, out(vec![n()], DType::I32));
    assert_eq!(
        run(&call, 3, vec![vec![2.7, -2.7, 40.0]])[0],
        vec![2.0, -2.0, 40.0]
    );
    let call = op("astype", vec![x], vec![], out(vec![n()], DType::I32));
    assert!(matches!(
        legalize_call(&call),
        Err(LegalizeError::MissingAttr { .. })
    ));
}

#[test]
fn math_on_integers_is_rejected() {
    let err = legalize_call(&unary("exp", DType::I32, vec![])).unwrap_err();
    assert!(matches!(
        err,
        LegalizeError::UnsupportedDtype {
            dtype: DType::I32,
            ..
        }
    ));
    let got = run(
        &unary("negative", DType::I32, vec![]),
        1,
        vec![vec![3.0, -4.0]],
    );
    assert_eq!(got[0], vec![-3.0, 4.0]);
}

/// `a[n, 1, 3] op b[4, 1]` broadcast to `[n, 4, 3]`, checked against direct loops.
#[test]
fn binary_ops_broadcast_like_numpy() {
    let table: [(&str, Binary); 6] = [
        ("add", |a, b| a + b),
        ("subtract", |a, b| a - b),
        ("multiply", |a, b| a * b),
        ("divide", |a, b| a / b),
        ("maximum", f64::max),
        ("minimum", f64::min),
    ];
    for (name, f) in table {
        let a = tensor("a", vec![n(), c(1), c(3)], DType::F32);
        let b = tensor("b", vec![c(4), c(1)], DType::F32);
        let call = op(
            name,
            vec![a, b],
            vec![],
            out(vec![n(), c(4), c(3)], DType::F32),
        );
        for n in SIZES {
            let (av, bv) = (pseudo_random(n as u64, n * 3), pseudo_random(7, 4));
            let got = run(&call, n, vec![av.clone(), bv.clone()]);
            let want: Vec<f64> = indices(&[n, 4, 3])
                .iter()
                .map(|i| f(av[i[0] * 3 + i[2]], bv[i[1]]))
                .collect();
            assert_close(&got[0], &want, 1e-6);
        }
    }
}

#[test]
fn same_shape_binary_is_elemwise_and_integer_divide_floors() {
    let a = tensor("a", vec![n()], DType::I64);
    let b = tensor("b", vec![n()], DType::I64);
    let call = op("divide", vec![a, b], vec![], out(vec![n()], DType::I64));
    assert_eq!(pattern(&call), "elemwise");
    let got = run(&call, 3, vec![vec![7.0, -7.0, 6.0], vec![2.0, 2.0, -4.0]]);
    assert_eq!(got[0], vec![3.0, -4.0, -2.0]);
}

#[test]
fn where_selects_with_a_broadcast_condition() {
    let cond = tensor("mask", vec![c(1), n()], DType::Bool);
    let a = tensor("a", vec![c(2), n()], DType::F32);
    let b = tensor("b", vec![c(1)], DType::F32);
    let call = op(
        "where",
        vec![cond, a, b],
        vec![],
        out(vec![c(2), n()], DType::F32),
    );
    let got = run(
        &call,
        3,
        vec![
            vec![1.0, 0.0, 1.0],
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            vec![-9.0],
        ],
    );
    assert_eq!(got[0], vec![1.0, -9.0, 3.0, 4.0, -9.0, 6.0]);
    let names = crate::test_util::param_names(&legalize_call(&call).unwrap().func);
    assert_eq!(names, ["cond", "a", "b", "out"]);
    let float_cond = tensor("mask", vec![c(2), n()], DType::F32);
    let x = tensor("a", vec![c(2), n()], DType::F32);
    let call = op(
        "where",
        vec![float_cond, x.clone(), x],
        vec![],
        out(vec![c(2), n()], DType::F32),
    );
    assert!(matches!(
        legalize_call(&call),
        Err(LegalizeError::UnsupportedDtype { index: 0, .. })
    ));
}
