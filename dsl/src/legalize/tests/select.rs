//! `concat`, `split`, `strided_slice`, `take`, `triu` and the constant fills.

use super::*;
use crate::ir::PrimValue;

fn tuple(items: &[(&str, Vec<SymExpr>)]) -> Expr {
    Expr::Tuple(
        items
            .iter()
            .map(|(name, shape)| tensor(name, shape.clone(), DType::F32))
            .collect(),
    )
}

#[test]
fn concat_along_the_last_axis_matches_the_parts() {
    let parts = tuple(&[
        ("p", vec![n(), c(2)]),
        ("q", vec![n(), c(3)]),
        ("r", vec![n(), c(1)]),
    ]);
    let call = op(
        "concat",
        vec![parts],
        vec![("axis", AttrValue::Int(-1))],
        out(vec![n(), c(6)], DType::F32),
    );
    let legalized = legalize_call(&call).unwrap();
    assert_eq!(legalized.args.len(), 3);
    assert_eq!(legalized.func.inputs().len(), 3);
    for n in SIZES {
        let (p, q, r) = (
            pseudo_random(1, 2 * n),
            pseudo_random(2, 3 * n),
            pseudo_random(3, n),
        );
        let got = run(&call, n, vec![p.clone(), q.clone(), r.clone()]);
        let want: Vec<f64> = (0..n)
            .flat_map(|row| {
                let mut v = p[row * 2..row * 2 + 2].to_vec();
                v.extend_from_slice(&q[row * 3..row * 3 + 3]);
                v.push(r[row]);
                v
            })
            .collect();
        assert_eq!(got[0], want);
    }
}

#[test]
fn concat_of_symbolic_parts_along_axis_zero() {
    let parts = tuple(&[("p", vec![n(), c(2)]), ("q", vec![c(3), c(2)])]);
    let call = op(
        "concat",
        vec![parts],
        vec![],
        out(vec![n() + 3, c(2)], DType::F32),
    );
    for n in SIZES {
        let (p, q) = (pseudo_random(4, 2 * n), pseudo_random(5, 6));
        assert_eq!(
            run(&call, n, vec![p.clone(), q.clone()])[0],
            [p, q].concat()
        );
    }
}

#[test]
fn a_tuple_variable_is_flattened_into_projections() {
    let fields = vec![out(vec![c(2)], DType::F32), out(vec![c(1)], DType::F32)];
    let parts = Expr::Var(Var::new("parts", StructInfo::Tuple(fields)));
    let call = op(
        "concat",
        vec![parts.clone()],
        vec![],
        out(vec![c(3)], DType::F32),
    );
    let legalized = legalize_call(&call).unwrap();
    let projections = vec![
        Expr::TupleGetItem(Box::new(parts.clone()), 0),
        Expr::TupleGetItem(Box::new(parts), 1),
    ];
    assert_eq!(legalized.args, projections);
}

#[test]
fn split_then_concat_round_trips() {
    let x = tensor("x", vec![c(2), &n() * 3], DType::F32);
    let part = out(vec![c(2), n()], DType::F32);
    let sinfo = StructInfo::Tuple(vec![part.clone(), part.clone(), part]);
    let attrs = vec![("axis", AttrValue::Int(1)), ("sections", AttrValue::Int(3))];
    let split = op("split", vec![x], attrs, sinfo);
    let legalized = legalize_call(&split).unwrap();
    assert_eq!(legalized.func.num_outputs, 3);
    let names: Vec<&str> = legalized
        .func
        .outputs()
        .iter()
        .map(|b| b.name.as_str())
        .collect();
    assert_eq!(names, ["out0", "out1", "out2"]);
    let parts = tuple(&[
        ("a", vec![c(2), n()]),
        ("b", vec![c(2), n()]),
        ("c", vec![c(2), n()]),
    ]);
    let concat = op(
        "concat",
        vec![parts],
        vec![("axis", AttrValue::Int(1))],
        out(vec![c(2), &n() * 3], DType::F32),
    );
    for n in SIZES {
        let input = pseudo_random(n as u64, 6 * n);
        let pieces = run(&split, n, vec![input.clone()]);
        assert_eq!(pieces[1][..n], input[n..2 * n]);
        assert_eq!(run(&concat, n, pieces)[0], input);
    }
}

#[test]
fn strided_slice_clamps_begin_and_steps() {
    let x = tensor("x", vec![n(), c(10)], DType::F32);
    let attrs = vec![
        ("axes", AttrValue::Ints(vec![1])),
        ("begin", AttrValue::Shape(vec![c(-8)])),
        ("end", AttrValue::Shape(vec![c(10)])),
        ("strides", AttrValue::Ints(vec![3])),
    ];
    let call = op(
        "strided_slice",
        vec![x],
        attrs,
        out(vec![n(), c(3)], DType::F32),
    );
    for n in SIZES {
        let input = pseudo_random(n as u64, 10 * n);
        let want: Vec<f64> = (0..n)
            .flat_map(|r| [2, 5, 8].map(|col| input[r * 10 + col]))
            .collect();
        assert_eq!(run(&call, n, vec![input])[0], want);
    }
    let x = tensor("x", vec![c(8)], DType::F32);
    let attrs = vec![
        ("axes", AttrValue::Ints(vec![0])),
        ("begin", AttrValue::Shape(vec![n()])),
        ("end", AttrValue::Shape(vec![c(8)])),
    ];
    let call = op(
        "strided_slice",
        vec![x],
        attrs,
        out(vec![c(8) - n()], DType::F32),
    );
    let input: Vec<f64> = (0..8).map(f64::from).collect();
    assert_eq!(run(&call, 3, vec![input])[0], vec![3.0, 4.0, 5.0, 6.0, 7.0]);
}

#[test]
fn take_gathers_rows_by_index() {
    let table = tensor("table", vec![c(10), c(4)], DType::F32);
    let ids = tensor("ids", vec![c(1), n()], DType::I32);
    let call = op(
        "take",
        vec![table, ids],
        vec![],
        out(vec![c(1), n(), c(4)], DType::F32),
    );
    assert_eq!(pattern(&call), "injective");
    let weights = pseudo_random(9, 40);
    for n in SIZES {
        let ids: Vec<f64> = (0..n).map(|i| ((i * 7) % 10) as f64).collect();
        let got = run(&call, n, vec![weights.clone(), ids.clone()]);
        let want: Vec<f64> = ids
            .iter()
            .flat_map(|&id| weights[id as usize * 4..id as usize * 4 + 4].to_vec())
            .collect();
        assert_eq!(got[0], want);
    }
}

#[test]
fn take_along_an_inner_axis_clamps_indices() {
    let x = tensor("x", vec![n(), c(3)], DType::F32);
    let idx = tensor("idx", vec![c(4)], DType::I64);
    let call = op(
        "take",
        vec![x, idx],
        vec![("axis", AttrValue::Int(1))],
        out(vec![n(), c(4)], DType::F32),
    );
    let input = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let got = run(&call, 2, vec![input, vec![2.0, 0.0, 7.0, -1.0]]);
    assert_eq!(got[0], vec![3.0, 1.0, 3.0, 1.0, 6.0, 4.0, 6.0, 4.0]);
    let x = tensor("x", vec![n()], DType::F32);
    let bad = tensor("idx", vec![c(2)], DType::F32);
    let call = op("take", vec![x, bad], vec![], out(vec![c(2)], DType::F32));
    assert!(matches!(
        legalize_call(&call),
        Err(LegalizeError::UnsupportedDtype { index: 1, .. })
    ));
}

#[test]
fn triu_zeroes_below_the_kth_diagonal() {
    for k in [0, 1, -1] {
        let x = tensor("x", vec![c(2), n(), n()], DType::F32);
        let call = op(
            "triu",
            vec![x],
            vec![("k", AttrValue::Int(k))],
            out(vec![c(2), n(), n()], DType::F32),
        );
        for n in SIZES {
            let input = pseudo_random(n as u64, 2 * n * n);
            let want: Vec<f64> = indices(&[2, n, n])
                .iter()
                .zip(&input)
                .map(|(i, &v)| {
                    if i[2] as i64 - i[1] as i64 >= k {
                        v
                    } else {
                        0.0
                    }
                })
                .collect();
            assert_eq!(run(&call, n, vec![input])[0], want);
        }
    }
}

#[test]
fn constant_fills_are_baked_in() {
    let shape = vec![n(), c(2)];
    let dtype = vec![("dtype", AttrValue::DType(DType::I32))];
    let full = op(
        "full",
        vec![
            Expr::Shape(shape.clone()),
            Expr::Prim(PrimValue::Int(c(7), DType::I32)),
        ],
        dtype.clone(),
        out(shape.clone(), DType::I32),
    );
    let legalized = legalize_call(&full).unwrap();
    assert!(legalized.args.is_empty() && legalized.func.inputs().is_empty());
    assert_eq!(run(&full, 3, vec![])[0], vec![7.0; 6]);
    let ones = op(
        "ones",
        vec![Expr::Shape(shape.clone())],
        dtype.clone(),
        out(shape.clone(), DType::I32),
    );
    assert_eq!(run(&ones, 2, vec![])[0], vec![1.0; 4]);
    let f32_dtype = vec![("dtype", AttrValue::DType(DType::F32))];
    let zeros = op(
        "zeros",
        vec![Expr::Shape(shape.clone())],
        f32_dtype,
        out(shape.clone(), DType::F32),
    );
    assert_eq!(run(&zeros, 1, vec![])[0], vec![0.0; 2]);
    let fill = Expr::Prim(PrimValue::Int(n(), DType::I32));
    let symbolic = op(
        "full",
        vec![Expr::Shape(shape.clone()), fill],
        dtype,
        out(shape, DType::I32),
    );
    assert!(matches!(
        legalize_call(&symbolic),
        Err(LegalizeError::NonConstantFill { .. })
    ));
}
