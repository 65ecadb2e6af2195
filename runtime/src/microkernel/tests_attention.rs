//! The attention microkernel against its scalar twin and an f64 reference, on random
//! rows of odd lengths and strides, with guards around `out`.

use super::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// What `out` holds before and after the row a kernel may write.
const GUARD: f32 = 7777.0;

/// Floats of guard on each side of `out`.
const GUARD_LEN: usize = 9;

/// One call: a query row, `keys` key and value rows at `stride`, an `out` with guards.
struct Case {
    keys: usize,
    dim: usize,
    stride: usize,
    scale: f32,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
}

impl Case {
    fn random(rng: &mut StdRng, keys: usize, dim: usize) -> Case {
        let stride = dim + rng.gen_range(0..=3) * 4;
        // Lanes between rows are NaN: the result must not depend on them.
        let row_major = |rng: &mut StdRng| -> Vec<f32> {
            let len = keys.saturating_sub(1) * stride + if keys > 0 { dim } else { 0 };
            (0..len)
                .map(|n| {
                    if n % stride < dim {
                        rng.gen_range(-2.0f32..2.0)
                    } else {
                        f32::NAN
                    }
                })
                .collect()
        };
        Case {
            keys,
            dim,
            stride,
            scale: 1.0 / (dim.max(1) as f32).sqrt(),
            q: (0..dim).map(|_| rng.gen_range(-2.0f32..2.0)).collect(),
            k: row_major(rng),
            v: row_major(rng),
        }
    }

    /// Runs `func`; asserts the guards are untouched; returns the row.
    fn run(&self, func: AttentionFn, what: &str) -> Vec<f32> {
        let mut out = vec![GUARD; GUARD_LEN + self.dim + GUARD_LEN];
        out[GUARD_LEN..GUARD_LEN + self.dim].fill(f32::NAN);
        // SAFETY: `q` holds dim floats, `k` and `v` (keys - 1) * stride + dim, and `out` dim
        // floats after the guard.
        unsafe {
            func(
                self.q.as_ptr(),
                self.k.as_ptr(),
                self.v.as_ptr(),
                out.as_mut_ptr().add(GUARD_LEN),
                self.keys as i64,
                self.stride as i64,
                self.dim as i64,
                self.scale,
            )
        };
        let (before, rest) = out.split_at(GUARD_LEN);
        let (row, after) = rest.split_at(self.dim);
        for guard in before.iter().chain(after) {
            assert_eq!(guard.to_bits(), GUARD.to_bits(), "{what}: wrote a guard");
        }
        row.to_vec()
    }

    /// The output row in f64.
    fn reference(&self) -> Vec<f64> {
        let row = |x: &[f32], j: usize| -> Vec<f64> {
            x[j * self.stride..j * self.stride + self.dim]
                .iter()
                .map(|&e| f64::from(e))
                .collect()
        };
        let scores: Vec<f64> = (0..self.keys)
            .map(|j| {
                let dot: f64 = self
                    .q
                    .iter()
                    .zip(row(&self.k, j))
                    .map(|(&a, b)| f64::from(a) * b)
                    .sum();
                f64::from(self.scale) * dot
            })
            .collect();
        let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
        let total: f64 = weights.iter().sum();
        (0..self.dim)
            .map(|d| {
                let sum: f64 = (0..self.keys)
                    .map(|j| weights[j] * row(&self.v, j)[d])
                    .sum();
                if self.keys == 0 {
                    0.0
                } else {
                    sum / total
                }
            })
            .collect()
    }
}

#[test]
fn every_attention_implementation_matches_the_twin_and_an_f64_reference() {
    let mut rng = StdRng::seed_from_u64(0xA77E);
    let kernel = Microkernel::AttentionF32;
    let twin = implementations()
        .find(|imp| imp.kernel == kernel && imp.isa == "scalar")
        .and_then(|imp| imp.func.attention())
        .expect("a scalar twin");
    for imp in implementations().filter(|imp| imp.kernel == kernel) {
        if !imp.features.iter().all(|f| host_has(f)) {
            println!("note: skipping attention ({}): host lacks it", imp.isa);
            continue;
        }
        let func = imp.func.attention().expect("an attention kernel");
        for keys in [0, 1, 2, 7, 8, 9, 31, 32, 33, 65, 100] {
            for dim in [1, 7, 8, 16, 23, 64, 67] {
                let case = Case::random(&mut rng, keys, dim);
                let what = format!("attention ({}) keys={keys} dim={dim}", imp.isa);
                let (got, want) = (case.run(func, &what), case.run(twin, &what));
                for (d, exact) in case.reference().into_iter().enumerate() {
                    for (who, value) in [("kernel", got[d]), ("twin", want[d])] {
                        let err = (f64::from(value) - exact).abs();
                        assert!(
                            err <= 1e-5 * (1.0 + exact.abs()),
                            "{what}: {who} out[{d}] = {value}, reference {exact}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn attention_is_in_the_table_with_its_signature() {
    let kernel = Microkernel::from_name("attention_f32");
    assert_eq!(kernel, Some(Microkernel::AttentionF32));
    assert_eq!(Microkernel::AttentionF32.gemm_block(), None);
    let set = MicrokernelSet::detect();
    let func = set.get(Microkernel::AttentionF32);
    assert!(func.attention().is_some() && func.gemm().is_none());
    assert_eq!(
        set.table()[Microkernel::AttentionF32 as usize],
        func.address()
    );
}
