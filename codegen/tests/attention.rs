//! The fused `attention` op scheduled by the attention rule (one microkernel call per
//! query row and kv head, over the query heads sharing it), on the host's best
//! microkernels and on forced scalar ones, against grouped-query attention computed in
//! f64. (The rule against the unscheduled, legalized function is checked in the TIR
//! interpreter by the schedules crate.)
//!
//! Shapes cover a symbolic query count `n` with `t = n + past` key positions (a prefill
//! after `past` cached tokens; `n = 1` is a decode step), grouped heads (2, 3, 8 and 9
//! query heads per kv head, and none), odd head dims, causal and not; over f32 keys and
//! values and over int8 ones with row scales (`attention_q8kv`: an int8 KV cache), whose
//! reference is the f64 attention over the dequantized rows.

mod common;

use common::*;
use ndarray::{ArrayD, IxDyn};
use oxrelax_dsl::op;
use oxrelax_dsl::{AttrValue, DType, Target};

const TOL: f64 = 1e-5;

/// `(heads, kv_heads, head_dim)`: groups of 2, 3, 1, 8 (a whole batch of the AVX-512
/// kernel) and 9 (a batch and one row more).
const HEADS: [(i64, i64, i64); 6] = [
    (4, 2, 16),
    (3, 1, 7),
    (2, 2, 64),
    (6, 2, 5),
    (16, 2, 20),
    (9, 1, 16),
];

/// Cached positions before the queries.
const PAST: [i64; 3] = [0, 3, 40];

/// Values of `n` (query rows).
const ROWS: [i64; 3] = [1, 5, 33];

/// Grouped-query attention in f64; query `i` sees keys `j <= t - n + i` when `causal`.
fn reference(
    q: &ArrayD<f32>,
    k: &ArrayD<f32>,
    v: &ArrayD<f32>,
    scale: f64,
    causal: bool,
) -> ArrayD<f64> {
    let (n, heads, dim) = (q.shape()[0], q.shape()[1], q.shape()[2]);
    let (t, kv_heads) = (k.shape()[0], k.shape()[1]);
    let group = heads / kv_heads;
    let mut out = ArrayD::<f64>::zeros(IxDyn(&[n, heads, dim]));
    for i in 0..n {
        for h in 0..heads {
            let g = h / group;
            let keys = if causal { t - n + i + 1 } else { t };
            let scores: Vec<f64> = (0..keys)
                .map(|j| {
                    let dot: f64 = (0..dim)
                        .map(|d| f64::from(q[[i, h, d]]) * f64::from(k[[j, g, d]]))
                        .sum();
                    scale * dot
                })
                .collect();
            let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let total: f64 = weights.iter().sum();
            for d in 0..dim {
                let sum: f64 = (0..keys)
                    .map(|j| weights[j] * f64::from(v[[j, g, d]]))
                    .sum();
                out[[i, h, d]] = sum / total;
            }
        }
    }
    out
}

/// Int8 codes `[t, g, d]` times their row scales `[t, g]`.
fn dequantized(codes: &ArrayD<f32>, scales: &ArrayD<f32>) -> ArrayD<f32> {
    let mut rows = codes.clone();
    for ((j, g, _), value) in rows
        .indexed_iter_mut()
        .map(|(i, v)| ((i[0], i[1], i[2]), v))
    {
        *value *= scales[[j, g]];
    }
    rows
}

fn rule(kernel: &Kernel) -> Option<&str> {
    match kernel.func.attrs.get("schedule_rule") {
        Some(AttrValue::Str(rule)) => Some(rule),
        _ => None,
    }
}

/// Compiles the attention of every shape for `target` and checks it against
/// [`reference`].
fn check(target: &Target, q8: bool) {
    let mut rng = rng(11);
    let kv_dtype = if q8 { DType::I8 } else { DType::F32 };
    for (heads, kv_heads, dim) in HEADS {
        for past in PAST {
            for causal in [true, false] {
                let q = var("q", vec![n(), c(heads), c(dim)], DType::F32);
                let kv_shape = vec![n() + c(past), c(kv_heads), c(dim)];
                let k = var("k", kv_shape.clone(), kv_dtype);
                let v = var("v", kv_shape, kv_dtype);
                let scale = 1.0 / (dim as f64).sqrt();
                let call = if q8 {
                    let rows = vec![n() + c(past), c(kv_heads)];
                    let ks = var("k_scales", rows.clone(), DType::F32);
                    let vs = var("v_scales", rows, DType::F32);
                    op::attention_q8kv(&q, (&k, &ks), (&v, &vs), scale, causal).unwrap()
                } else {
                    op::attention(&q, &k, &v, scale, causal).unwrap()
                };
                let kernel = compile_for(&call, target);
                assert_eq!(rule(&kernel), Some("attention"));
                for rows in ROWS {
                    let (n, t) = (rows as usize, (rows + past) as usize);
                    let (h, g, d) = (heads as usize, kv_heads as usize, dim as usize);
                    let qs = random(&mut rng, &[n, h, d], DType::F32, -2.0, 2.0);
                    let (got, want) = if q8 {
                        let codes =
                            [0, 1].map(|_| random(&mut rng, &[t, g, d], DType::I8, -127.0, 128.0));
                        let scales =
                            [0, 1].map(|_| random(&mut rng, &[t, g], DType::F32, 0.0, 0.03));
                        let inputs = [&qs, &codes[0], &codes[1], &scales[0], &scales[1]];
                        let (ks, vs) = (
                            dequantized(&codes[0], &scales[0]),
                            dequantized(&codes[1], &scales[1]),
                        );
                        (
                            kernel.run1(rows, &inputs),
                            reference(&qs, &ks, &vs, scale, causal),
                        )
                    } else {
                        let ks = random(&mut rng, &[t, g, d], DType::F32, -2.0, 2.0);
                        let vs = random(&mut rng, &[t, g, d], DType::F32, -2.0, 2.0);
                        let got = kernel.run1(rows, &[&qs, &ks, &vs]);
                        (got, reference(&qs, &ks, &vs, scale, causal))
                    };
                    let what = format!(
                        "{:?} {kv_dtype} heads={heads}/{kv_heads} dim={dim} past={past} n={rows} causal={causal}",
                        target.features
                    );
                    assert_close(&got, &want, DType::F32, TOL, &what);
                }
            }
        }
    }
}

#[test]
fn the_attention_rule_matches_f64_attention_on_host_and_scalar_microkernels() {
    let host = Target::host();
    let scalar = Target::new(&host.triple, &[]);
    for target in [&host, &scalar] {
        check(target, false);
    }
}

#[test]
fn the_attention_rule_over_int8_kv_matches_f64_attention_over_the_dequantized_rows() {
    let host = Target::host();
    let scalar = Target::new(&host.triple, &[]);
    for target in [&host, &scalar] {
        check(target, true);
    }
}
