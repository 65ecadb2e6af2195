//! Matmul kernels: plain, batched, batch-broadcast, symbolic `K`, rank-1 operands, and a
//! transposed operand produced by a separately legalized `permute_dims`, against a numpy
//! style matmul written with ndarray's `dot` in f64.
//!
//! Tolerance: `|got - want| <= 1e-4 * max(1, |want|)` (f32 accumulation of up to 129
//! products of values in `[-1, 1)`), plus one 16-bit ulp of the output for f16/bf16.

mod common;

use common::*;
use ndarray::{Array3, ArrayD, Axis, IxDyn};
use oxrelax_dsl::op;
use oxrelax_dsl::SymExpr;

const TOL: f64 = 1e-4;

/// `[batch.., m, k]` broadcast to `batch` and flattened to `[prod(batch), m, k]`.
fn batched(x: &ArrayD<f64>, batch: &[usize]) -> Array3<f64> {
    let (rows, cols) = (x.shape()[x.ndim() - 2], x.shape()[x.ndim() - 1]);
    let full: Vec<usize> = batch.iter().copied().chain([rows, cols]).collect();
    let count = batch.iter().product::<usize>();
    x.broadcast(IxDyn(&full))
        .unwrap()
        .as_standard_layout()
        .into_owned()
        .into_shape_with_order((count, rows, cols))
        .unwrap()
}

/// numpy's `matmul`: a rank-1 lhs is a row vector, a rank-1 rhs a column vector (their
/// axis is dropped from the result), leading batch dims broadcast.
fn matmul_reference(a: &ArrayD<f64>, b: &ArrayD<f64>) -> ArrayD<f64> {
    let (a_vector, b_vector) = (a.ndim() == 1, b.ndim() == 1);
    let a = if a_vector {
        a.clone().insert_axis(Axis(0))
    } else {
        a.clone()
    };
    let b = if b_vector {
        b.clone().insert_axis(Axis(1))
    } else {
        b.clone()
    };
    let batch = broadcast_shape(&a.shape()[..a.ndim() - 2], &b.shape()[..b.ndim() - 2]);
    let (a3, b3) = (batched(&a, &batch), batched(&b, &batch));
    let (m, n) = (a3.shape()[1], b3.shape()[2]);
    let mut out = Array3::<f64>::zeros((a3.shape()[0], m, n));
    for ((mut o, x), y) in out
        .outer_iter_mut()
        .zip(a3.outer_iter())
        .zip(b3.outer_iter())
    {
        o.assign(&x.dot(&y));
    }
    let shape: Vec<usize> = batch.iter().copied().chain([m, n]).collect();
    let mut out = out.into_dyn().into_shape_with_order(IxDyn(&shape)).unwrap();
    if b_vector {
        let last = out.ndim() - 1;
        out = out.remove_axis(Axis(last));
    }
    if a_vector {
        let axis = out.ndim() - if b_vector { 1 } else { 2 };
        out = out.remove_axis(Axis(axis));
    }
    out
}

/// `a @ b` for every float dtype and `n`, on inputs in `[-1, 1)`.
fn check_matmul(sa: &[SymExpr], sb: &[SymExpr]) {
    let mut rng = rng(20);
    for dtype in FLOATS {
        let call =
            op::matmul(&var("a", sa.to_vec(), dtype), &var("b", sb.to_vec(), dtype)).unwrap();
        let kernel = compile(&call);
        for n in NS {
            let a = random(&mut rng, &dims(sa, n), dtype, -1.0, 1.0);
            let b = random(&mut rng, &dims(sb, n), dtype, -1.0, 1.0);
            let want = matmul_reference(&f64s(&a), &f64s(&b));
            let what = format!("matmul {dtype} {:?} x {:?}", a.shape(), b.shape());
            assert_close(&kernel.run1(n, &[&a, &b]), &want, dtype, TOL, &what);
        }
    }
}

#[test]
fn matmul_2d() {
    check_matmul(&[n(), c(64)], &[c(64), c(129)]);
    check_matmul(&[c(3), c(17)], &[c(17), n()]);
}

#[test]
fn matmul_symbolic_reduction_dim() {
    check_matmul(&[c(3), n()], &[n(), c(17)]);
}

#[test]
fn matmul_batched() {
    check_matmul(&[c(2), n(), c(17)], &[c(2), c(17), c(3)]);
}

#[test]
fn matmul_broadcasts_batch_dims() {
    check_matmul(&[c(4), n(), c(16)], &[c(16), c(8)]);
    check_matmul(&[c(17), c(3)], &[c(2), c(3), n()]);
    check_matmul(&[c(1), n(), c(17)], &[c(3), c(17), c(1)]);
}

#[test]
fn matmul_with_rank1_operands() {
    check_matmul(&[c(64)], &[c(64), c(17)]);
    check_matmul(&[n(), c(64)], &[c(64)]);
    check_matmul(&[c(2), n(), c(17)], &[c(17)]);
    check_matmul(&[n()], &[c(3), n(), c(129)]);
}

#[test]
fn matmul_of_two_vectors_is_a_dot_product() {
    check_matmul(&[n()], &[n()]);
}

/// `a @ permute_dims(bt)` and `permute_dims(at) @ b`: the transposition is its own
/// kernel whose output feeds the matmul kernel.
#[test]
fn matmul_with_a_transposed_operand() {
    let mut rng = rng(21);
    for dtype in FLOATS {
        let bt = var("bt", vec![c(129), c(64)], dtype);
        let b = op::permute_dims(&bt, None).unwrap();
        let a = var("a", vec![n(), c(64)], dtype);
        let transpose_b = compile(&b);
        let times_b = compile(&op::matmul(&a, &b).unwrap());
        let at = var("at", vec![c(2), c(17), n()], dtype);
        let a_t = op::permute_dims(&at, Some(vec![0, 2, 1])).unwrap();
        let transpose_a = compile(&a_t);
        let b3 = var("b3", vec![c(17), c(3)], dtype);
        let a_t_times = compile(&op::matmul(&a_t, &b3).unwrap());
        for n in NS {
            let (bt, a) = (
                random(&mut rng, &[129, 64], dtype, -1.0, 1.0),
                random(&mut rng, &[n as usize, 64], dtype, -1.0, 1.0),
            );
            let b = transpose_b.run1(n, &[&bt]);
            let want = matmul_reference(&f64s(&a), &f64s(&bt).reversed_axes());
            let what = format!("a @ bt.T {dtype} n={n}");
            assert_close(&times_b.run1(n, &[&a, &b]), &want, dtype, TOL, &what);

            let (at, b3) = (
                random(&mut rng, &[2, 17, n as usize], dtype, -1.0, 1.0),
                random(&mut rng, &[17, 3], dtype, -1.0, 1.0),
            );
            let a = transpose_a.run1(n, &[&at]);
            let mut at_t = f64s(&at);
            at_t.swap_axes(1, 2);
            let want = matmul_reference(&at_t, &f64s(&b3));
            let what = format!("at.T @ b {dtype} n={n}");
            assert_close(&a_t_times.run1(n, &[&a, &b3]), &want, dtype, TOL, &what);
        }
    }
}

#[test]
fn reference_matmul_follows_numpy_shapes() {
    let a = ArrayD::from_shape_vec(IxDyn(&[2, 3]), (0..6).map(f64::from).collect()).unwrap();
    let v = ArrayD::from_shape_vec(IxDyn(&[3]), vec![1.0, 0.0, -1.0]).unwrap();
    let out = matmul_reference(&a, &v);
    assert_eq!(out.shape(), [2]);
    assert_eq!(out.into_raw_vec_and_offset().0, [-2.0, -2.0]);
    let batched = matmul_reference(
        &ArrayD::zeros(IxDyn(&[4, 1, 2, 3])),
        &ArrayD::zeros(IxDyn(&[5, 3, 7])),
    );
    assert_eq!(batched.shape(), [4, 5, 2, 7]);
}

/// The default schedule fuses all three output loops of a batched matmul into one
/// parallel loop (the reduction stays serial inside it).
#[test]
fn batched_matmul_runs_one_parallel_loop_over_the_output() {
    let dtype = oxrelax_dsl::DType::F32;
    let a = var("a", vec![c(2), n(), c(17)], dtype);
    let b = var("b", vec![c(2), c(17), c(3)], dtype);
    let kernel = compile(&op::matmul(&a, &b).unwrap());
    let text = oxrelax_dsl::text::print_prim_func("matmul", &kernel.func);
    assert!(text.contains("for i0_i1_i2 in parallel("), "{text}");
    assert!(text.contains("in serial(17)"), "{text}");
}
