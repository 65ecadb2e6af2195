//! `matmul` against a triple loop.

use super::*;
use crate::tir::Stmt;

/// Reference `[batch..., m, k] x [batch..., k, n]` with explicit broadcast index maps.
fn reference(
    out_shape: &[usize],
    k: usize,
    a_at: impl Fn(&[usize], usize) -> f64,
    b_at: impl Fn(&[usize], usize) -> f64,
) -> Vec<f64> {
    indices(out_shape)
        .iter()
        .map(|i| (0..k).map(|kk| a_at(i, kk) * b_at(i, kk)).sum())
        .collect()
}

/// f32 times f32 weights, and f32 times f16 weights (widened into an f32 product).
#[test]
fn matrix_product_equals_a_triple_loop() {
    for weights in [DType::F32, DType::F16] {
        let a = tensor("a", vec![n(), c(5)], DType::F32);
        let b = tensor("b", vec![c(5), c(3)], weights);
        let call = op(
            "matmul",
            vec![a, b],
            vec![],
            out(vec![n(), c(3)], DType::F32),
        );
        assert_eq!(pattern(&call), "out_ewise_fusible");
        for n in SIZES {
            let (av, bv) = (pseudo_random(n as u64, n * 5), pseudo_random(11, 15));
            let got = run(&call, n, vec![av.clone(), bv.clone()]);
            let want = reference(&[n, 3], 5, |i, k| av[i[0] * 5 + k], |i, k| bv[k * 3 + i[1]]);
            assert_close(&got[0], &want, 1e-5);
        }
    }
}

#[test]
fn batch_dims_broadcast() {
    let a = tensor("a", vec![c(2), c(1), n(), c(3)], DType::F32);
    let b = tensor("b", vec![c(4), c(3), c(5)], DType::F32);
    let shape = vec![c(2), c(4), n(), c(5)];
    let call = op("matmul", vec![a, b], vec![], out(shape, DType::F32));
    for n in SIZES {
        let (av, bv) = (pseudo_random(1, 2 * n * 3), pseudo_random(2, 4 * 3 * 5));
        let got = run(&call, n, vec![av.clone(), bv.clone()]);
        let want = reference(
            &[2, 4, n, 5],
            3,
            |i, k| av[offset(&[2, n, 3], &[i[0], i[2], k])],
            |i, k| bv[offset(&[4, 3, 5], &[i[1], k, i[3]])],
        );
        assert_close(&got[0], &want, 1e-5);
    }
}

#[test]
fn vector_operands_drop_their_dim() {
    let v = tensor("v", vec![n()], DType::F32);
    let m = tensor("m", vec![c(2), n(), c(3)], DType::F32);
    let vm = op(
        "matmul",
        vec![v.clone(), m],
        vec![],
        out(vec![c(2), c(3)], DType::F32),
    );
    let w = tensor("w", vec![c(4), n()], DType::F32);
    let mv = op(
        "matmul",
        vec![w, v.clone()],
        vec![],
        out(vec![c(4)], DType::F32),
    );
    let dot = op(
        "matmul",
        vec![v.clone(), v],
        vec![],
        out(vec![], DType::F32),
    );
    for n in SIZES {
        let (vv, mm) = (pseudo_random(3, n), pseudo_random(4, 2 * n * 3));
        let got = run(&vm, n, vec![vv.clone(), mm.clone()]);
        let want = reference(
            &[2, 3],
            n,
            |_, k| vv[k],
            |i, k| mm[offset(&[2, n, 3], &[i[0], k, i[1]])],
        );
        assert_close(&got[0], &want, 1e-5);
        let ww = pseudo_random(5, 4 * n);
        let got = run(&mv, n, vec![ww.clone(), vv.clone()]);
        let want = reference(&[4], n, |i, k| ww[i[0] * n + k], |_, k| vv[k]);
        assert_close(&got[0], &want, 1e-5);
        let got = run(&dot, n, vec![vv.clone(), vv.clone()]);
        assert_close(&got[0], &[vv.iter().map(|x| x * x).sum()], 1e-5);
    }
}

#[test]
fn half_matmul_accumulates_in_f32() {
    let a = tensor("a", vec![c(1), n()], DType::F16);
    let b = tensor("b", vec![n(), c(1)], DType::F16);
    let call = op(
        "matmul",
        vec![a, b],
        vec![],
        out(vec![c(1), c(1)], DType::F16),
    );
    let func = legalize_call(&call).unwrap().func;
    let body = crate::test_util::under_loops(&func, 2);
    let Stmt::Allocate { buffer, .. } = body else {
        panic!("{body:?}")
    };
    assert_eq!(buffer.dtype, DType::F32);
    // 2048 + 1 + 1 is exact in f32 but 2048 + 1 rounds back to 2048 in f16.
    let got = run(&call, 3, vec![vec![2048.0, 1.0, 1.0], vec![1.0, 1.0, 1.0]]);
    assert_eq!(got[0], vec![2050.0]);
}

#[test]
fn mismatched_reduction_dims_are_rejected() {
    let a = tensor("a", vec![n(), c(4)], DType::F32);
    let b = tensor("b", vec![c(5), c(3)], DType::F32);
    let call = op(
        "matmul",
        vec![a, b],
        vec![],
        out(vec![n(), c(3)], DType::F32),
    );
    let err = legalize_call(&call).unwrap_err();
    assert!(matches!(err, LegalizeError::Shape { .. }));
    assert!(
        err.to_string().contains("matmul: reduction dims differ"),
        "{err}"
    );
}
