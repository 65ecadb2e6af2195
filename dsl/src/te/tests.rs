use super::*;
use crate::sym::SymBindings;
use crate::tir::eval::{pseudo_random, run_with_inputs};
use crate::tir::{BinOp, PrimExpr, Stmt};
use crate::{DType, SymExpr, SymVar};

fn n() -> SymExpr {
    SymVar::bounded("n", 64).expr()
}

fn c(v: i64) -> SymExpr {
    SymExpr::int(v)
}

fn bind(pairs: &[(&str, i64)]) -> SymBindings {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn loop_vars(stmt: &Stmt, out: &mut Vec<String>) {
    match stmt {
        Stmt::For { var, body, .. } => {
            out.push(var.name.clone());
            loop_vars(body, out);
        }
        Stmt::Seq(items) => items.iter().for_each(|s| loop_vars(s, out)),
        Stmt::Allocate { body, .. } | Stmt::Let { body, .. } => loop_vars(body, out),
        _ => {}
    }
}

#[test]
fn elementwise_stage_lowers_to_one_loop_nest() {
    let x = placeholder("x", vec![n(), c(4)], DType::F32);
    let y = compute("y", vec![n(), c(4)], |i| x.at(i) * 2.0 + 1.0);
    let func = lower("affine", &[x], &[y]).unwrap();
    assert_eq!(
        func.params
            .iter()
            .map(|b| b.name.as_str())
            .collect::<Vec<_>>(),
        ["x", "y"]
    );
    assert_eq!(func.num_outputs, 1);
    assert_eq!(func.dims, vec![SymVar::bounded("n", 64)]);
    let Stmt::Seq(stages) = &func.body else {
        panic!("{:?}", func.body)
    };
    let Stmt::For {
        var, extent, body, ..
    } = &stages[0]
    else {
        panic!()
    };
    assert_eq!(var.name, "i0");
    assert_eq!(extent, &PrimExpr::from(n()));
    let Stmt::For {
        var, extent, body, ..
    } = body.as_ref()
    else {
        panic!()
    };
    assert_eq!((var.name.as_str(), extent), ("i1", &PrimExpr::index(4)));
    let Stmt::Store {
        buffer,
        indices,
        value,
    } = body.as_ref()
    else {
        panic!()
    };
    assert_eq!(buffer, "y");
    assert_eq!(indices.len(), 2);
    assert!(matches!(value, PrimExpr::Binary(BinOp::Add, _, _)));
    let input = pseudo_random(1, 12);
    let out = run_with_inputs(&func, &bind(&[("n", 3)]), std::slice::from_ref(&input)).unwrap();
    for (o, x) in out[0].iter().zip(&input) {
        assert!((o - (x * 2.0 + 1.0)).abs() < 1e-6);
    }
}

#[test]
fn dims_are_the_parameters_sym_vars_sorted_by_name() {
    let (m, b) = (SymVar::new("m").expr(), SymVar::new("b").expr());
    let x = placeholder("x", vec![m.clone(), n()], DType::F32);
    let y = compute("y", vec![&m * 2, n()], |i| {
        x.at(&[i[0].floordiv(2), i[1].clone()])
    });
    let z = placeholder("z", vec![b], DType::F32);
    let w = compute("w", vec![c(1)], |_| z.at(&[Expr::int(0)]));
    let func = lower("f", &[x, z], &[y, w]).unwrap();
    let names: Vec<&str> = func.dims.iter().map(|d| d.name()).collect();
    assert_eq!(names, ["b", "m", "n"]);
    assert_eq!(func.num_outputs, 2);
}

#[test]
fn intermediates_are_allocated_and_stages_run_in_order() {
    let x = placeholder("x", vec![n()], DType::F32);
    let doubled = compute("doubled", vec![n()], |i| x.at(i) * 2.0);
    let shifted = compute("shifted", vec![n()], |i| doubled.at(i) + 1.0);
    let out = compute("out", vec![n()], |i| shifted.at(i) * doubled.at(i));
    let func = lower("chain", &[x], &[out]).unwrap();
    let Stmt::Allocate { buffer, body } = &func.body else {
        panic!()
    };
    assert_eq!(buffer.name, "doubled");
    let Stmt::Allocate { buffer, body } = body.as_ref() else {
        panic!()
    };
    assert_eq!(buffer.name, "shifted");
    let Stmt::Seq(stages) = body.as_ref() else {
        panic!()
    };
    assert_eq!(stages.len(), 3);
    let mut vars = Vec::new();
    loop_vars(&func.body, &mut vars);
    assert_eq!(vars, ["i0", "i1", "i2"]);
    for len in [1, 3, 17] {
        let input = pseudo_random(len as u64, len);
        let out = run_with_inputs(
            &func,
            &bind(&[("n", len as i64)]),
            std::slice::from_ref(&input),
        )
        .unwrap();
        for (o, x) in out[0].iter().zip(&input) {
            assert!((o - (2.0 * x + 1.0) * 2.0 * x).abs() < 1e-5);
        }
    }
}

#[test]
fn top_level_reduction_accumulates_into_the_output() {
    let (k_dim, m_dim) = (c(5), c(3));
    let a = placeholder("a", vec![m_dim.clone(), k_dim.clone()], DType::F32);
    let b = placeholder("b", vec![k_dim.clone(), n()], DType::F32);
    let k = reduce_axis("k", k_dim);
    let out = compute("out", vec![m_dim, n()], |i| {
        sum(
            a.at(&[i[0].clone(), k.var()]) * b.at(&[k.var(), i[1].clone()]),
            std::slice::from_ref(&k),
        )
    });
    let func = lower("matmul", &[a, b], &[out]).unwrap();
    let body = crate::test_util::under_loops(&func, 2);
    let Stmt::Seq(parts) = body else {
        panic!("{body:?}")
    };
    assert!(matches!(&parts[0], Stmt::Store { value: PrimExpr::Float(v, _), .. } if *v == 0.0));
    assert!(matches!(&parts[1], Stmt::For { var, .. } if var.name == "k0"));
    let (av, bv) = (pseudo_random(2, 15), pseudo_random(3, 5 * 4));
    let out = run_with_inputs(&func, &bind(&[("n", 4)]), &[av.clone(), bv.clone()]).unwrap();
    for r in 0..3 {
        for col in 0..4 {
            let expected: f64 = (0..5).map(|k| av[r * 5 + k] * bv[k * 4 + col]).sum();
            assert!((out[0][r * 4 + col] - expected).abs() < 1e-5);
        }
    }
}

#[test]
fn nested_reduction_uses_a_local_accumulator() {
    let x = placeholder("x", vec![c(2), n()], DType::F16);
    let k = reduce_axis("k", n());
    let mean = compute("mean", vec![c(2)], |i| {
        let total = sum(
            x.at(&[i[0].clone(), k.var()]).cast(DType::F32),
            std::slice::from_ref(&k),
        );
        (total / Expr::from(n()).cast(DType::F32)).cast(DType::F16)
    });
    let func = lower("mean", &[x], &[mean]).unwrap();
    let Stmt::Seq(stages) = &func.body else {
        panic!()
    };
    let Stmt::For { body, .. } = &stages[0] else {
        panic!()
    };
    let Stmt::Allocate { buffer, .. } = body.as_ref() else {
        panic!("{body:?}")
    };
    assert_eq!((buffer.name.as_str(), buffer.dtype), ("acc0", DType::F32));
    let input: Vec<f64> = (0..6).map(|v| v as f64).collect();
    let out = run_with_inputs(&func, &bind(&[("n", 3)]), &[input]).unwrap();
    assert_eq!(out[0], vec![1.0, 4.0]);
}

#[test]
fn reduction_identities_are_infinities_or_integer_extremes() {
    let x = placeholder("x", vec![n()], DType::F32);
    let k = reduce_axis("k", n());
    let hi = compute("hi", vec![], |_| {
        max(x.at(&[k.var()]), std::slice::from_ref(&k))
    });
    let lo = compute("lo", vec![], |_| {
        min(x.at(&[k.var()]), std::slice::from_ref(&k))
    });
    let func = lower("extremes", &[x], &[hi, lo]).unwrap();
    let out = run_with_inputs(&func, &bind(&[("n", 0)]), &[vec![]]).unwrap();
    assert_eq!(out, vec![vec![f64::NEG_INFINITY], vec![f64::INFINITY]]);
    let out = run_with_inputs(&func, &bind(&[("n", 3)]), &[vec![-1.0, 5.0, 2.0]]).unwrap();
    assert_eq!(out, vec![vec![5.0], vec![-1.0]]);
    let y = placeholder("y", vec![n()], DType::I32);
    let hi = compute("hi", vec![], |_| {
        max(y.at(&[k.var()]), std::slice::from_ref(&k))
    });
    let func = lower("int_max", &[y], &[hi]).unwrap();
    let out = run_with_inputs(&func, &bind(&[("n", 0)]), &[vec![]]).unwrap();
    assert_eq!(out[0], vec![f64::from(i32::MIN)]);
}

#[test]
fn an_unlisted_input_is_named() {
    let x = placeholder("x", vec![n()], DType::F32);
    let w = placeholder("weights", vec![n()], DType::F32);
    let y = compute("y", vec![n()], |i| x.at(i) * w.at(i));
    let err = lower("scale", &[x], &[y]).unwrap_err();
    assert_eq!(
        err,
        TeError::UnlistedInput {
            func: "scale".to_string(),
            tensor: "weights".to_string(),
        }
    );
    assert!(err.to_string().contains("`weights`"));
}

#[test]
fn dtype_mismatches_are_typed_errors() {
    let x = placeholder("x", vec![n()], DType::F32);
    let y = placeholder("y", vec![n()], DType::F16);
    let z = compute("z", vec![n()], |i| x.at(i) + y.at(i));
    let err = lower("mixed", &[x.clone(), y], &[z]).unwrap_err();
    assert!(matches!(
        err,
        TeError::DtypeMismatch { lhs: DType::F32, rhs: DType::F16, ref stage, .. } if stage == "z"
    ));
    let bad = compute("bad", vec![n()], |i| select(x.at(i), x.at(i), x.at(i)));
    let err = lower("bad_select", std::slice::from_ref(&x), &[bad]).unwrap_err();
    assert!(matches!(
        err,
        TeError::BadDtype {
            got: DType::F32,
            ..
        }
    ));
    let bad = compute("bad", vec![n()], |i| x.at(&[i[0].cast(DType::I32)]));
    let err = lower("bad_index", &[x], &[bad]).unwrap_err();
    assert!(matches!(err, TeError::BadDtype { ref op, .. } if op == "index of `x`"));
}

#[test]
fn read_rank_and_scoping_errors() {
    let x = placeholder("x", vec![n(), c(2)], DType::F32);
    let y = compute("y", vec![n()], |i| x.at(i));
    let err = lower("f", std::slice::from_ref(&x), &[y]).unwrap_err();
    assert!(matches!(
        err,
        TeError::ReadRank {
            expected: 2,
            got: 1,
            ..
        }
    ));
    let k = reduce_axis("k", c(2));
    let y = compute("y", vec![n()], |i| x.at(&[i[0].clone(), k.var()]));
    let err = lower("f", std::slice::from_ref(&x), &[y]).unwrap_err();
    assert!(matches!(err, TeError::UnboundAxis { ref axis, .. } if axis == "k"));
    let m = SymVar::new("m").expr();
    let y = compute("y", vec![n()], |i| x.at(&[i[0].clone(), Expr::from(&m)]));
    let err = lower("f", std::slice::from_ref(&x), &[y]).unwrap_err();
    assert!(matches!(err, TeError::UnboundDim { ref dim, .. } if dim == "m"));
    let t = compute("t", vec![m], |_| Expr::f32(0.0));
    let y = compute("y", vec![n()], |_| t.at(&[Expr::int(0)]));
    let err = lower("f", &[], &[y]).unwrap_err();
    assert!(matches!(err, TeError::UnboundDim { ref stage, .. } if stage == "t"));
}

#[test]
fn parameters_must_be_distinct_and_outputs_computed() {
    let x = placeholder("x", vec![n()], DType::F32);
    let y = compute("y", vec![n()], |i| x.at(i) + 1.0);
    let err = lower("f", &[x.clone(), x.clone()], &[y]).unwrap_err();
    assert!(matches!(err, TeError::DuplicateParam { .. }));
    let other = placeholder("x", vec![n()], DType::F32);
    let y = compute("y", vec![n()], |i| x.at(i) + other.at(i));
    let err = lower("f", &[x.clone(), other], &[y]).unwrap_err();
    assert!(matches!(err, TeError::DuplicateParam { ref name, .. } if name == "x"));
    let err = lower("f", &[], &[x]).unwrap_err();
    assert!(matches!(err, TeError::OutputNotComputed { .. }));
}

#[test]
fn loop_names_avoid_dims_and_intermediates_get_unique_names() {
    let i0 = SymVar::new("i0").expr();
    let x = placeholder("x", vec![i0.clone()], DType::F32);
    let t = compute("y", vec![i0.clone()], |i| x.at(i) + 1.0);
    let y = compute("y", vec![i0], |i| t.at(i) * 3.0);
    let func = lower("f", &[x], &[y]).unwrap();
    let mut vars = Vec::new();
    loop_vars(&func.body, &mut vars);
    assert_eq!(vars, ["i1", "i2"]);
    let Stmt::Allocate { buffer, .. } = &func.body else {
        panic!()
    };
    assert_eq!(buffer.name, "y_0");
    let out = run_with_inputs(&func, &bind(&[("i0", 2)]), &[vec![1.0, 2.0]]).unwrap();
    assert_eq!(out[0], vec![6.0, 9.0]);
}

#[test]
fn builders_fold_trivial_arithmetic_and_type_immediates() {
    let i = Expr::int(7);
    assert_eq!((&i + 0).as_int(), Some(7));
    assert_eq!((i.clone() * Expr::int(3)).as_int(), Some(21));
    let x = placeholder("x", vec![n()], DType::F16);
    let v = x.at(&[Expr::int(0)]);
    assert_eq!((&v * 2.0).dtype(), DType::F16);
    assert_eq!((1.0 - &v).dtype(), DType::F16);
    assert_eq!(v.lt(v.clone()).dtype(), DType::Bool);
    assert_eq!(Expr::int(3).cast(DType::F32).dtype(), DType::F32);
    assert_eq!((Expr::int(7) / Expr::int(2)).as_int(), None);
    assert_eq!(Expr::from(&c(5)).as_int(), Some(5));
    assert_eq!(Expr::neg_inf(DType::F32).dtype(), DType::F32);
}

#[test]
fn integer_division_operator_floors() {
    let x = placeholder("x", vec![n()], DType::I64);
    let y = compute("y", vec![n()], |i| x.at(i) / 2 + (-x.at(i)).floormod(3));
    let func = lower("f", &[x], &[y]).unwrap();
    let out = run_with_inputs(&func, &bind(&[("n", 3)]), &[vec![5.0, -5.0, 4.0]]).unwrap();
    assert_eq!(out[0], vec![2.0 + 1.0, -3.0 + 2.0, 2.0 + 2.0]);
}

#[test]
fn intrinsics_and_logic_lower_and_evaluate() {
    let x = placeholder("x", vec![n()], DType::F32);
    let y = compute("y", vec![n()], |i| {
        let v = x.at(i);
        let positive = v.gt(0.0).and(!v.gt(10.0));
        select(positive, v.sqrt() + v.exp().log(), v.abs().fma(2.0, 1.0))
    });
    let func = lower("f", &[x], &[y]).unwrap();
    let out = run_with_inputs(&func, &bind(&[("n", 3)]), &[vec![4.0, -3.0, 16.0]]).unwrap();
    assert!((out[0][0] - 6.0).abs() < 1e-5);
    assert_eq!(out[0][1], 7.0);
    assert_eq!(out[0][2], 33.0);
}

/// Per row `r` of `x [n, 5]`: its maximum `m`, then `x - m`, then
/// `out[r, j] = sum(x - m) + j * m`.
fn per_row_stages() -> (Tensor, Tensor) {
    let x = placeholder("x", vec![n(), c(5)], DType::F32);
    let k = reduce_axis("k", c(5));
    let peak = compute("peak", vec![n()], |i| {
        max(x.at(&[i[0].clone(), k.var()]), std::slice::from_ref(&k))
    });
    let shifted = compute("shifted", vec![n(), c(5)], |i| x.at(i) - peak.at(&i[..1]));
    let k = reduce_axis("k", c(5));
    let out = compute("out", vec![n(), c(2)], |i| {
        let total = sum(
            shifted.at(&[i[0].clone(), k.var()]),
            std::slice::from_ref(&k),
        );
        total + peak.at(&i[..1]) * i[1].cast(DType::F32)
    });
    (x, out)
}

#[test]
fn shared_outer_loops_hold_one_element_per_intermediate_and_compute_the_same() {
    let (x, out) = per_row_stages();
    let plain = lower("rows", std::slice::from_ref(&x), std::slice::from_ref(&out)).unwrap();
    let nested = lower_nested(
        "rows",
        std::slice::from_ref(&x),
        std::slice::from_ref(&out),
        1,
    )
    .unwrap();
    // One loop over the rows, inside it the intermediates: one element and one row.
    let Stmt::For { body, .. } = &nested.body else {
        panic!("{:?}", nested.body)
    };
    let Stmt::Allocate { buffer, body } = body.as_ref() else {
        panic!()
    };
    assert_eq!(
        (buffer.name.as_str(), &buffer.shape[..]),
        ("peak", &[c(1)][..])
    );
    let Stmt::Allocate { buffer, .. } = body.as_ref() else {
        panic!()
    };
    assert_eq!(
        (buffer.name.as_str(), &buffer.shape[..]),
        ("shifted", &[c(5)][..])
    );
    for rows in [1, 4, 9] {
        let input = pseudo_random(rows as u64, rows * 5);
        let dims = bind(&[("n", rows as i64)]);
        let want = run_with_inputs(&plain, &dims, std::slice::from_ref(&input)).unwrap();
        let got = run_with_inputs(&nested, &dims, std::slice::from_ref(&input)).unwrap();
        assert_eq!(got, want);
    }
}

#[test]
fn shared_outer_loops_need_every_stage_over_them_and_reads_at_their_own_element() {
    let x = placeholder("x", vec![n()], DType::F32);
    let scalar = compute("scalar", vec![c(1)], |_| Expr::f32(2.0));
    let out = compute("out", vec![n()], |i| x.at(i) * scalar.at(&[Expr::int(0)]));
    let err = lower_nested("f", std::slice::from_ref(&x), std::slice::from_ref(&out), 1);
    assert!(
        matches!(&err, Err(TeError::SharedDims { stage, .. }) if stage == "scalar"),
        "{err:?}"
    );
    let doubled = compute("doubled", vec![n()], |i| x.at(i) * 2.0);
    let out = compute("out", vec![n()], |_| doubled.at(&[Expr::int(0)]));
    let err = lower_nested("f", &[x], &[out], 1);
    assert!(
        matches!(&err, Err(TeError::SharedRead { tensor, .. }) if tensor == "doubled"),
        "{err:?}"
    );
}
