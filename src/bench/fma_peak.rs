//! The FMA-peak probe: independent fused multiply-add chains on every thread of the pool,
//! in the widest vectors this CPU has: the compute ceiling the kernels are compared with.

use super::BenchError;
use oxrelax_runtime::ThreadPool;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Loop iterations per thread and pass (each iteration issues one FMA per chain).
const ITERATIONS: usize = 4_000_000;

/// Passes; the fastest is reported (a peak, not a typical rate).
const PASSES: usize = 3;

/// The measured fp32 FMA rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FmaPeak {
    /// GFLOP/s (an FMA counts as two flops), all threads together.
    pub gflops: f64,
    /// The vector ISA the chains ran in.
    pub isa: &'static str,
    /// The pool's thread count.
    pub threads: usize,
}

/// One thread's chains: the ISA's name, the flops of one iteration, and a function
/// running `iterations` iterations (returning a value that keeps the work alive).
type Chains = (&'static str, f64, fn(usize) -> f32);

/// The widest FMA chains this CPU runs, if it has vector FMA.
fn chains() -> Option<Chains> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F was detected.
            return Some(("avx512f", x86::AVX512_FLOPS, |n| unsafe {
                x86::chains_avx512(n)
            }));
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: AVX2 and FMA were detected.
            return Some(("avx2+fma", x86::AVX2_FLOPS, |n| unsafe {
                x86::chains_avx2(n)
            }));
        }
    }
    None
}

/// Measures the FMA peak on every thread of `pool`; `None` on CPUs without vector FMA.
pub fn probe(pool: &ThreadPool) -> Result<Option<FmaPeak>, BenchError> {
    let Some((isa, flops_per_iteration, run)) = chains() else {
        return Ok(None);
    };
    let threads = pool.threads();
    let mut best = Duration::MAX;
    for _ in 0..PASSES {
        let start = Instant::now();
        let code = pool.parallel_for(threads as i64, &|_| {
            black_box(run(black_box(ITERATIONS)));
            0
        });
        if code != 0 {
            return Err(BenchError::Failed {
                what: "FMA peak probe".into(),
                code,
            });
        }
        best = best.min(start.elapsed());
    }
    let flops = (threads * ITERATIONS) as f64 * flops_per_iteration;
    Ok(Some(FmaPeak {
        gflops: flops / best.as_secs_f64() / 1e9,
        isa,
        threads,
    }))
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Chains of [`chains_avx512`]: 16 FMAs of 16 lanes, two flops each, per iteration.
    pub(super) const AVX512_FLOPS: f64 = (16 * 16 * 2) as f64;
    /// Chains of [`chains_avx2`]: 12 FMAs of 8 lanes, two flops each, per iteration.
    pub(super) const AVX2_FLOPS: f64 = (12 * 8 * 2) as f64;

    /// 16 zmm chains (2 FMA ports x 4 cycles of latency, twice over).
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn chains_avx512(iterations: usize) -> f32 {
        let (a, b) = (_mm512_set1_ps(0.999_999), _mm512_set1_ps(1e-7));
        let mut acc = [_mm512_set1_ps(1.0); 16];
        for _ in 0..iterations {
            for x in acc.iter_mut() {
                *x = _mm512_fmadd_ps(*x, a, b);
            }
        }
        let total = acc
            .iter()
            .fold(_mm512_setzero_ps(), |t, &x| _mm512_add_ps(t, x));
        _mm512_reduce_add_ps(total)
    }

    /// 12 ymm chains (leaving registers for the two operands).
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn chains_avx2(iterations: usize) -> f32 {
        let (a, b) = (_mm256_set1_ps(0.999_999), _mm256_set1_ps(1e-7));
        let mut acc = [_mm256_set1_ps(1.0); 12];
        for _ in 0..iterations {
            for x in acc.iter_mut() {
                *x = _mm256_fmadd_ps(*x, a, b);
            }
        }
        let total = acc
            .iter()
            .fold(_mm256_setzero_ps(), |t, &x| _mm256_add_ps(t, x));
        let mut lanes = [0.0f32; 8];
        // SAFETY: `lanes` holds 8 floats.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), total) };
        lanes.iter().sum()
    }
}
