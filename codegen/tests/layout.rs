//! Data-movement and creation kernels: `take`, `permute_dims`, `reshape`, `concat`,
//! `split`, `strided_slice`, `triu`, `full`, against ndarray references.
//!
//! These ops only move or produce storage values, so every comparison is exact (f16 and
//! bf16 values survive a widen-then-narrow round trip bit for bit).

mod common;

use common::*;
use ndarray::{concatenate, s, ArrayD, Axis, IxDyn, Slice};
use oxrelax_dsl::ir::Expr;
use oxrelax_dsl::op;
use oxrelax_dsl::{DType, SymExpr};

/// Builds an op on inputs of `shapes` (named `x0`, `x1`, ...) for every float dtype,
/// runs it for every `n` on inputs in `[-4, 4)` and compares every output exactly with
/// `reference` (given the inputs and `n`).
fn check(
    name: &str,
    shapes: &[Vec<SymExpr>],
    build: impl Fn(&[Expr]) -> Expr,
    reference: impl Fn(&[ArrayD<f64>], i64) -> Vec<ArrayD<f64>>,
) {
    let mut rng = rng(30);
    for dtype in FLOATS {
        let vars: Vec<Expr> = shapes
            .iter()
            .enumerate()
            .map(|(i, shape)| var(&format!("x{i}"), shape.clone(), dtype))
            .collect();
        let kernel = compile(&build(&vars));
        for n in NS {
            let inputs: Vec<ArrayD<f32>> = shapes
                .iter()
                .map(|shape| random(&mut rng, &dims(shape, n), dtype, -4.0, 4.0))
                .collect();
            let refs: Vec<&ArrayD<f32>> = inputs.iter().collect();
            let got = kernel.run(n, &refs);
            let want = reference(&inputs.iter().map(f64s).collect::<Vec<_>>(), n);
            assert_eq!(got.len(), want.len(), "{name}: output count");
            for (i, (got, want)) in got.iter().zip(&want).enumerate() {
                assert_exact(got, want, &format!("{name} {dtype} n={n} output {i}"));
            }
        }
    }
}

#[test]
fn take_gathers_embedding_rows() {
    let mut rng = rng(31);
    for dtype in FLOATS {
        for index_dtype in [DType::I32, DType::I64] {
            for index_shape in [vec![n()], vec![c(3), n()]] {
                let table = var("table", vec![c(129), c(64)], dtype);
                let ids = var("ids", index_shape.clone(), index_dtype);
                let kernel = compile(&op::take(&table, &ids, 0).unwrap());
                for n in NS {
                    let table = random(&mut rng, &[129, 64], dtype, -4.0, 4.0);
                    let ids = random(&mut rng, &dims(&index_shape, n), index_dtype, 0.0, 129.0);
                    let rows: Vec<_> = ids
                        .iter()
                        .map(|&id| {
                            table
                                .index_axis(Axis(0), id as usize)
                                .mapv(f64::from)
                                .insert_axis(Axis(0))
                        })
                        .collect();
                    let views: Vec<_> = rows.iter().map(|r| r.view()).collect();
                    let mut shape = ids.shape().to_vec();
                    shape.push(64);
                    let want = concatenate(Axis(0), &views)
                        .unwrap()
                        .into_shape_with_order(IxDyn(&shape))
                        .unwrap();
                    let what = format!("take {dtype} ids {index_dtype} {shape:?}");
                    assert_exact(&kernel.run1(n, &[&table, &ids]), &want, &what);
                }
            }
        }
    }
}

#[test]
fn take_along_an_inner_axis() {
    let mut rng = rng(32);
    let x = var("x", vec![c(3), c(17)], DType::F32);
    let ids = var("ids", vec![n()], DType::I32);
    let kernel = compile(&op::take(&x, &ids, 1).unwrap());
    for n in NS {
        let x = random(&mut rng, &[3, 17], DType::F32, -4.0, 4.0);
        let ids = random(&mut rng, &[n as usize], DType::I32, 0.0, 17.0);
        let want = ArrayD::from_shape_fn(IxDyn(&[3, n as usize]), |i| {
            f64::from(x[[i[0], ids[[i[1]]] as usize]])
        });
        assert_exact(&kernel.run1(n, &[&x, &ids]), &want, "take axis 1");
    }
}

#[test]
fn permute_dims_moves_axes() {
    let cases: [(Vec<SymExpr>, Option<Vec<i64>>); 4] = [
        (vec![n(), c(64)], None),
        (vec![n(), c(3), c(17)], Some(vec![2, 0, 1])),
        (vec![c(1), n(), c(129)], Some(vec![0, 2, 1])),
        (vec![c(3), c(17), n()], None),
    ];
    for (shape, axes) in cases {
        let order: Vec<usize> = match &axes {
            Some(axes) => axes.iter().map(|&a| a as usize).collect(),
            None => (0..shape.len()).rev().collect(),
        };
        let build = |x: &[Expr]| op::permute_dims(&x[0], axes.clone()).unwrap();
        let reference = |x: &[ArrayD<f64>], _| {
            let permuted = x[0].clone().permuted_axes(IxDyn(&order));
            vec![permuted.as_standard_layout().into_owned()]
        };
        check("permute_dims", &[shape], build, reference);
    }
}

#[test]
fn reshape_keeps_row_major_order() {
    // (input shape, requested shape, the requested shape with its -1 resolved)
    let cases = [
        (
            vec![n(), c(64)],
            vec![n(), c(4), c(16)],
            vec![n(), c(4), c(16)],
        ),
        (
            vec![n(), c(3), c(17)],
            vec![c(-1), c(17)],
            vec![&n() * 3, c(17)],
        ),
        (vec![c(3), n()], vec![n(), c(3)], vec![n(), c(3)]),
        (vec![c(1), c(129)], vec![c(3), c(43)], vec![c(3), c(43)]),
    ];
    for (from, to, resolved) in cases {
        let build = |x: &[Expr]| op::reshape(&x[0], to.clone()).unwrap();
        let reference = |x: &[ArrayD<f64>], n: i64| {
            let shape = IxDyn(&dims(&resolved, n));
            vec![x[0].clone().into_shape_with_order(shape).unwrap()]
        };
        check("reshape", &[from], build, reference);
    }
}

#[test]
fn concat_joins_along_static_and_symbolic_axes() {
    let cases: [(Vec<Vec<SymExpr>>, i64); 3] = [
        (
            vec![vec![n(), c(64)], vec![c(3), c(64)], vec![c(1), c(64)]],
            0,
        ),
        (vec![vec![n(), c(3)], vec![n(), c(17)]], 1),
        (vec![vec![c(2), n(), c(1)], vec![c(2), n(), c(64)]], -1),
    ];
    for (shapes, axis) in cases {
        let build = |x: &[Expr]| op::concat(x, axis).unwrap();
        let reference = |x: &[ArrayD<f64>], _| {
            let axis = if axis < 0 {
                x[0].ndim() - 1
            } else {
                axis as usize
            };
            let views: Vec<_> = x.iter().map(|a| a.view()).collect();
            vec![concatenate(Axis(axis), &views).unwrap()]
        };
        check("concat", &shapes, build, reference);
    }
}

/// The parts of `x` along `axis` between `points` (clamped to the dim).
fn split_reference(x: &ArrayD<f64>, axis: usize, points: &[usize]) -> Vec<ArrayD<f64>> {
    let len = x.shape()[axis];
    let bounds: Vec<usize> = std::iter::once(0)
        .chain(points.iter().map(|&p| p.min(len)))
        .chain(std::iter::once(len))
        .collect();
    bounds
        .windows(2)
        .map(|w| x.slice_axis(Axis(axis), Slice::from(w[0]..w[1])).to_owned())
        .collect()
}

#[test]
fn split_into_equal_sections() {
    check(
        "split sections last axis",
        &[vec![n(), c(64)]],
        |x| op::split_sections(&x[0], 2, -1).unwrap(),
        |x, _| split_reference(&x[0], 1, &[32]),
    );
    check(
        "split sections symbolic axis",
        &[vec![&n() * 2, c(3)]],
        |x| op::split_sections(&x[0], 2, 0).unwrap(),
        |x, _| split_reference(&x[0], 0, &[x[0].shape()[0] / 2]),
    );
}

#[test]
fn split_at_points_along_a_symbolic_axis() {
    check(
        "split indices",
        &[vec![n(), c(17)]],
        |x| op::split_indices(&x[0], vec![1, 4], 0).unwrap(),
        |x, _| split_reference(&x[0], 0, &[1, 4]),
    );
    check(
        "split indices last axis",
        &[vec![n(), c(129)]],
        |x| op::split_indices(&x[0], vec![1, 3, 17, 64], 1).unwrap(),
        |x, _| split_reference(&x[0], 1, &[1, 3, 17, 64]),
    );
}

#[test]
fn strided_slice_with_steps_and_symbolic_bounds() {
    check(
        "strided_slice step 2",
        &[vec![n(), c(129)]],
        |x| op::strided_slice(&x[0], vec![1], vec![c(1)], vec![c(129)], Some(vec![2])).unwrap(),
        |x, _| vec![x[0].slice(s![.., 1..129;2]).to_owned().into_dyn()],
    );
    check(
        "strided_slice symbolic end",
        &[vec![n(), c(64)]],
        |x| op::strided_slice(&x[0], vec![0], vec![c(1)], vec![n()], None).unwrap(),
        |x, _| vec![x[0].slice(s![1.., ..]).to_owned().into_dyn()],
    );
    check(
        "strided_slice negative begin, clamped end, two axes",
        &[vec![c(3), n(), c(17)]],
        |x| {
            let (begin, end) = (vec![c(-5), c(1)], vec![c(1000), c(3)]);
            op::strided_slice(&x[0], vec![2, 0], begin, end, Some(vec![3, 1])).unwrap()
        },
        |x, _| vec![x[0].slice(s![1..3, .., 12..17;3]).to_owned().into_dyn()],
    );
}

#[test]
fn triu_keeps_the_upper_triangle() {
    for (shape, k) in [
        (vec![n(), n()], 0),
        (vec![n(), n()], 1),
        (vec![c(3), c(17)], 2),
        (vec![c(17), c(3)], -1),
        (vec![c(2), n(), c(17)], -3),
    ] {
        let reference = |x: &[ArrayD<f64>], _| {
            let rank = x[0].ndim();
            let mut out = x[0].clone();
            for (index, v) in out.indexed_iter_mut() {
                if (index[rank - 1] as i64) - (index[rank - 2] as i64) < k {
                    *v = 0.0;
                }
            }
            vec![out]
        };
        check("triu", &[shape], |x| op::triu(&x[0], k).unwrap(), reference);
    }
}

#[test]
fn full_fills_a_symbolic_shape() {
    for (dtype, fill) in [
        (DType::F32, 0.1),
        (DType::F16, 0.1),
        (DType::BF16, -2.5),
        (DType::I32, 7.0),
    ] {
        let shape = vec![n(), c(17)];
        let kernel = compile(&op::full(shape.clone(), fill, dtype).unwrap());
        for n in NS {
            let want = ArrayD::from_elem(
                IxDyn(&dims(&shape, n)),
                f64::from(round_to(dtype, fill as f32)),
            );
            assert_exact(&kernel.run1(n, &[]), &want, &format!("full {dtype} {fill}"));
        }
    }
}

/// Gathering embedding rows copies each row with vector loads and stores.
#[test]
fn take_copies_rows_with_vectors() {
    let table = var("table", vec![c(129), c(64)], DType::F32);
    let ids = var("ids", vec![n()], DType::I32);
    let clif = compile(&op::take(&table, &ids, 0).unwrap()).clif();
    assert!(clif.contains("load.f32x4"), "{clif}");
}

/// Concatenating onto an empty part (a KV cache before the first token: `n = 0`) reads
/// nothing from it.
#[test]
fn concat_with_an_empty_part() {
    let parts = [
        var("past", vec![n(), c(16)], DType::F32),
        var("new", vec![c(3), c(16)], DType::F32),
    ];
    let kernel = compile(&op::concat(&parts, 0).unwrap());
    let mut rng = rng(31);
    for rows in [0, 2] {
        let past = random(&mut rng, &[rows, 16], DType::F32, -4.0, 4.0);
        let new = random(&mut rng, &[3, 16], DType::F32, -4.0, 4.0);
        let got = kernel.run(rows as i64, &[&past, &new]);
        let want = concatenate(Axis(0), &[past.view(), new.view()]).unwrap();
        assert_eq!(got[0], want, "rows = {rows}");
    }
}
