//! The memory-bandwidth probe: summing a large f32 buffer, on one thread and on the pool.

use super::buffer::HostBuffer;
use super::BenchError;
use oxrelax_runtime::ThreadPool;
use std::hint::black_box;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Bytes the probe reads per pass (far beyond any cache).
pub const PROBE_BYTES: usize = 256 << 20;

/// Passes per probe; the median is reported.
const PASSES: usize = 5;

/// Read bandwidth in GB/s (10^9 bytes per second), median of `PASSES` passes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bandwidth {
    /// On the calling thread alone.
    pub single: f64,
    /// Split across every thread of the pool.
    pub multi: f64,
    /// The pool's thread count.
    pub threads: usize,
}

/// Measures read bandwidth over a buffer of `bytes` (rounded down to whole f32s).
pub fn probe(pool: &ThreadPool, bytes: usize) -> Result<Bandwidth, BenchError> {
    let len = bytes / std::mem::size_of::<f32>();
    let mut buffer = HostBuffer::zeroed(len).map_err(|_| BenchError::Alloc {
        kernel: "bandwidth probe",
        shape: format!("{len}"),
        buffer: "data".into(),
        bytes,
    })?;
    buffer.fill_random(7);
    let data = buffer.as_slice();
    let single = median_rate(data, || {
        black_box(sum(data));
        Ok(())
    })?;
    let multi = median_rate(data, || {
        black_box(parallel_sum(pool, data)?);
        Ok(())
    })?;
    Ok(Bandwidth {
        single,
        multi,
        threads: pool.threads(),
    })
}

/// The median GB/s of [`PASSES`] runs of `pass`, each reading all of `data`.
fn median_rate(
    data: &[f32],
    mut pass: impl FnMut() -> Result<(), BenchError>,
) -> Result<f64, BenchError> {
    let mut times = Vec::with_capacity(PASSES);
    for _ in 0..PASSES {
        let start = Instant::now();
        pass()?;
        times.push(start.elapsed());
    }
    times.sort_unstable();
    let median = times.get(PASSES / 2).copied().unwrap_or(Duration::MAX);
    Ok(std::mem::size_of_val(data) as f64 / median.as_secs_f64() / 1e9)
}

/// Sums `data` with independent accumulators (so the loop vectorizes).
pub fn sum(data: &[f32]) -> f32 {
    let mut acc = [0.0f32; 16];
    let chunks = data.chunks_exact(acc.len());
    let rest: f32 = chunks.remainder().iter().sum();
    for chunk in chunks {
        for (a, &v) in acc.iter_mut().zip(chunk) {
            *a += v;
        }
    }
    acc.iter().sum::<f32>() + rest
}

/// Sums `data` in contiguous blocks, one task per block, on `pool`.
pub fn parallel_sum(pool: &ThreadPool, data: &[f32]) -> Result<f32, BenchError> {
    let tasks = pool.threads() * 4;
    let block = data.len().div_ceil(tasks).max(1);
    let partials: Vec<AtomicU32> = (0..tasks).map(|_| AtomicU32::new(0)).collect();
    let code = pool.parallel_for(tasks as i64, &|task| {
        let Some((task, slot)) = usize::try_from(task)
            .ok()
            .and_then(|t| Some((t, partials.get(t)?)))
        else {
            return 1;
        };
        let start = task.saturating_mul(block).min(data.len());
        let end = start.saturating_add(block).min(data.len());
        slot.store(sum(&data[start..end]).to_bits(), Ordering::Relaxed);
        0
    });
    if code != 0 {
        return Err(BenchError::Failed {
            what: "bandwidth probe".into(),
            code,
        });
    }
    Ok(partials
        .iter()
        .map(|p| f32::from_bits(p.load(Ordering::Relaxed)))
        .sum())
}
