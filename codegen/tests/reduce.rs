//! Reduction kernels (`sum`, `max`, `mean`: last axis, a symbolic axis, all axes, with
//! and without `keepdims`) and `softmax`, against ndarray references in f64.
//!
//! Tolerances: `|got - want| <= tol * max(1, |want|)` plus one 16-bit ulp of the output
//! for f16/bf16 storage. `max` is exact; `sum`/`mean` use `1e-4` (f32 accumulation over
//! rows of up to 129 elements, or up to 129 * 64 elements for all axes on non-negative
//! inputs, where no cancellation inflates the relative error); softmax probabilities
//! use `1e-5`.

mod common;

use common::*;
use ndarray::{ArrayD, Axis};
use oxrelax_dsl::op;
use oxrelax_dsl::{DType, Expr, SymExpr};

#[derive(Clone, Copy, Debug)]
enum Reduce {
    Sum,
    Max,
    Mean,
}

impl Reduce {
    fn build(self, x: &Expr, axes: Option<Vec<i64>>, keepdims: bool) -> Expr {
        match self {
            Reduce::Sum => op::sum(x, axes, keepdims),
            Reduce::Max => op::max(x, axes, keepdims),
            Reduce::Mean => op::mean(x, axes, keepdims),
        }
        .unwrap()
    }

    /// The reduction of `x` over `axes` (normalized), computed with ndarray.
    fn reference(self, x: &ArrayD<f64>, axes: &[usize], keepdims: bool) -> ArrayD<f64> {
        let mut descending = axes.to_vec();
        descending.sort_unstable_by(|a, b| b.cmp(a));
        let mut out = x.clone();
        for &axis in &descending {
            out = match self {
                Reduce::Max => out.fold_axis(Axis(axis), f64::NEG_INFINITY, |m, &v| m.max(v)),
                Reduce::Sum | Reduce::Mean => out.sum_axis(Axis(axis)),
            };
            if keepdims {
                out.insert_axis_inplace(Axis(axis));
            }
        }
        if let Reduce::Mean = self {
            let count: usize = axes.iter().map(|&a| x.shape()[a]).product();
            out /= count as f64;
        }
        out
    }

    fn tolerance(self) -> f64 {
        match self {
            Reduce::Max => 0.0,
            Reduce::Sum | Reduce::Mean => 1e-4,
        }
    }
}

/// Reduces `shape` over `axes` (`None`: all) with both `keepdims`, for every float dtype
/// and `n`, on inputs in `[lo, hi)`.
fn check_reduce(reduce: Reduce, shape: &[SymExpr], axes: Option<Vec<i64>>, range: (f32, f32)) {
    let mut rng = rng(10);
    let rank = shape.len() as i64;
    let normalized: Vec<usize> = axes
        .clone()
        .unwrap_or_else(|| (0..rank).collect())
        .iter()
        .map(|&a| usize::try_from(if a < 0 { a + rank } else { a }).unwrap())
        .collect();
    for dtype in FLOATS {
        for keepdims in [false, true] {
            let x = var("x", shape.to_vec(), dtype);
            let kernel = compile(&reduce.build(&x, axes.clone(), keepdims));
            for n in NS {
                let x = random(&mut rng, &dims(shape, n), dtype, range.0, range.1);
                let want = reduce.reference(&f64s(&x), &normalized, keepdims);
                let what = format!(
                    "{reduce:?} {dtype} {:?} axes {axes:?} keepdims {keepdims}",
                    x.shape()
                );
                assert_close(
                    &kernel.run1(n, &[&x]),
                    &want,
                    dtype,
                    reduce.tolerance(),
                    &what,
                );
            }
        }
    }
}

fn last_axis_shapes() -> [Vec<SymExpr>; 4] {
    [
        vec![n(), c(129)],
        vec![c(3), n(), c(17)],
        vec![n(), c(64)],
        vec![c(17), n()],
    ]
}

macro_rules! reduce_tests {
    ($($last:ident, $symbolic:ident, $all:ident: $reduce:expr;)*) => {$(
        #[test]
        fn $last() {
            for shape in last_axis_shapes() {
                check_reduce($reduce, &shape, Some(vec![-1]), (-1.0, 1.0));
            }
        }

        #[test]
        fn $symbolic() {
            check_reduce($reduce, &[n(), c(64)], Some(vec![0]), (-1.0, 1.0));
            check_reduce($reduce, &[n(), c(3), c(17)], Some(vec![2, 0]), (-1.0, 1.0));
        }

        #[test]
        fn $all() {
            check_reduce($reduce, &[n(), c(64)], None, (0.0, 1.0));
            check_reduce($reduce, &[c(3), n(), c(17)], None, (0.0, 1.0));
            check_reduce($reduce, &[c(1)], None, (-1.0, 1.0));
        }
    )*};
}

reduce_tests! {
    sum_last_axis, sum_symbolic_axes, sum_all_axes: Reduce::Sum;
    max_last_axis, max_symbolic_axes, max_all_axes: Reduce::Max;
    mean_last_axis, mean_symbolic_axes, mean_all_axes: Reduce::Mean;
}

/// Softmax of `x` along `axis`, computed stably in f64.
fn softmax_reference(x: &ArrayD<f64>, axis: usize) -> ArrayD<f64> {
    let mut out = x.clone();
    for mut lane in out.lanes_mut(Axis(axis)) {
        let max = lane.fold(f64::NEG_INFINITY, |m, &v| m.max(v));
        lane.mapv_inplace(|v| (v - max).exp());
        let total = lane.sum();
        lane.mapv_inplace(|v| v / total);
    }
    out
}

/// Softmax along `axis` of `shape` for every float dtype and `n`, on inputs from `make`.
fn check_softmax(
    shape: &[SymExpr],
    axis: i64,
    make: impl Fn(&mut rand::rngs::StdRng, &[usize], DType) -> ArrayD<f32>,
) {
    let mut rng = rng(11);
    let normalized = usize::try_from(if axis < 0 {
        axis + shape.len() as i64
    } else {
        axis
    })
    .unwrap();
    for dtype in FLOATS {
        let kernel = compile(&op::softmax(&var("x", shape.to_vec(), dtype), axis).unwrap());
        for n in NS {
            let x = make(&mut rng, &dims(shape, n), dtype);
            let want = softmax_reference(&f64s(&x), normalized);
            let what = format!("softmax {dtype} {:?} axis {axis}", x.shape());
            assert_close(&kernel.run1(n, &[&x]), &want, dtype, 1e-5, &what);
        }
    }
}

#[test]
fn softmax_last_axis() {
    for shape in last_axis_shapes() {
        check_softmax(&shape, -1, |rng, dims, dtype| {
            random(rng, dims, dtype, -5.0, 5.0)
        });
    }
}

#[test]
fn softmax_symbolic_axis() {
    check_softmax(&[n(), c(17)], 0, |rng, dims, dtype| {
        random(rng, dims, dtype, -5.0, 5.0)
    });
}

#[test]
fn softmax_of_large_values_does_not_overflow() {
    for range in [(1000.0, 1010.0), (-1010.0, -1000.0)] {
        check_softmax(&[n(), c(64)], -1, |rng, dims, dtype| {
            random(rng, dims, dtype, range.0, range.1)
        });
    }
}

#[test]
fn softmax_gives_masked_entries_zero_weight() {
    // Every third column (never the first) is -inf, as an attention mask makes it.
    let masked = |rng: &mut rand::rngs::StdRng, dims: &[usize], dtype: DType| {
        let mut x = random(rng, dims, dtype, -5.0, 5.0);
        let last = x.ndim() - 1;
        for (index, v) in x.indexed_iter_mut() {
            if index[last] % 3 == 1 {
                *v = f32::NEG_INFINITY;
            }
        }
        x
    };
    for shape in last_axis_shapes() {
        check_softmax(&shape, -1, masked);
    }
}

/// The softmax output stage (`exp(x - max) / sum`) stores contiguously and is vectorized.
#[test]
fn softmax_output_stage_is_vectorized() {
    for dtype in FLOATS {
        let x = var("x", vec![n(), c(129)], dtype);
        let clif = compile(&op::softmax(&x, -1).unwrap()).clif();
        assert!(clif.contains("f32x4"), "{dtype}:\n{clif}");
    }
}
