//! The memory-bandwidth probe: summing a large f32 buffer, on one thread and on the pool,
//! each thread reading [`STREAMS`] parts of its block in lockstep.

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

/// Sequential streams each thread reads at once, as a decode GEMV reads 4 weight panels
/// in lockstep: one stream per core does not reach the memory system's rate everywhere.
const STREAMS: usize = 4;

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

/// Sums `data` as [`STREAMS`] contiguous parts read in lockstep, 16 floats of each at a
/// time into independent accumulators (so the loop vectorizes); the tail after the
/// parts is summed last.
pub fn sum(data: &[f32]) -> f32 {
    const LANES: usize = 16;
    let part = data.len() / (STREAMS * LANES) * LANES;
    let (parts, tail) = data.split_at(part * STREAMS);
    let mut acc = [[0.0f32; LANES]; STREAMS];
    if part > 0 {
        let [p0, p1, p2, p3]: [&[f32]; STREAMS] =
            std::array::from_fn(|s| &parts[s * part..(s + 1) * part]);
        let lockstep = p0
            .chunks_exact(LANES)
            .zip(p1.chunks_exact(LANES))
            .zip(p2.chunks_exact(LANES))
            .zip(p3.chunks_exact(LANES));
        for (((c0, c1), c2), c3) in lockstep {
            for (a, c) in acc.iter_mut().zip([c0, c1, c2, c3]) {
                for (x, &v) in a.iter_mut().zip(c) {
                    *x += v;
                }
            }
        }
    }
    acc.iter().flatten().sum::<f32>() + tail.iter().sum::<f32>()
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
