//! `oxrelax bench-kernel`: times what the compiler emits today for the hot kernels of an
//! LLM (matmul, softmax, rms_norm, and a decode GEMV on cold weights) with a dynamic token
//! count, next to reference figures (measured memory bandwidth and fp32 FMA peak,
//! numpy's matmul when available). `--json` adds the results as one JSON line.
//!
//! Each kernel is built as the compiler builds it: an op call on f32 tensors whose
//! leading dim is the symbolic `n` (a matmul is `packed_matmul` on a weight packed into
//! panels, as compiled models run it), legalized, scheduled by the host target's rules and
//! compiled with the JIT; `n` is bound to the benchmarked row count at run time and
//! parallel loops run on a thread pool of `--threads` participants. The cold GEMV is the
//! exception: its rows are static, as in a compiled `decode` function.

mod args;
mod buffer;
mod error;
mod fma_peak;
mod kernel;
mod membw;
mod peer;
mod report;
mod spec;
#[cfg(test)]
mod tests;
mod timing;

pub use args::{
    BenchArgs, BenchPlan, DEFAULT_COLD_GEMV, DEFAULT_COLD_MIB, DEFAULT_COLS, DEFAULT_MATMULS,
    DEFAULT_ROWS,
};
pub use error::BenchError;
pub use kernel::BenchKernel;
pub use membw::{probe, Bandwidth, PROBE_BYTES};
pub use peer::{measure_numpy, with_peer, Peer};
pub use report::{json_line, json_rows, JsonRow, KernelResult};
pub use spec::{ColdGemv, KernelSpec, MatmulShape, RowShape, MAX_DIM, N_BOUND};
pub use timing::{measure, measure_with, RunPlan, Timing};

use oxrelax_runtime::{RuntimeEnv, ThreadPool};
use std::io::Write;
use std::sync::Arc;

/// Runs `bench-kernel` with `args` and writes the report to `out` (flushed line by line
/// as results come in); with `--json`, the JSON rows last, on one line.
pub fn run(args: &BenchArgs, out: &mut dyn Write) -> Result<(), BenchError> {
    let plan = args.plan()?;
    let pool = ThreadPool::new(plan.threads).map_err(|source| BenchError::Pool {
        threads: plan.threads,
        source,
    })?;
    let pool = Arc::new(pool);
    report::header(out, &plan.runs, plan.threads)?;
    report::fma_peak(out, fma_peak::probe(&pool)?.as_ref())?;
    let bandwidth = probe(&pool, plan.probe_bytes)?;
    report::bandwidth(out, &bandwidth, plan.probe_bytes)?;
    report::cold_note(out, &plan.kernels)?;
    report::table_header(out)?;
    out.flush()?;
    let env = RuntimeEnv::new(pool);
    let mut results = Vec::with_capacity(plan.kernels.len());
    for &spec in &plan.kernels {
        let result = bench_kernel(spec, &plan.runs, &env)?;
        report::kernel_line(out, &result, plan.threads)?;
        out.flush()?;
        results.push(result);
    }
    report::best(out, &results)?;
    let peer = if with_peer(&plan.kernels).is_empty() {
        Peer::Unavailable
    } else {
        let peer = measure_numpy(&plan.kernels, &plan.runs, plan.threads);
        report::peer(out, &peer, &results, plan.threads)?;
        peer
    };
    if plan.json {
        let rows = json_rows(&results, &peer, plan.threads);
        writeln!(out, "{}", json_line(&rows))?;
    }
    Ok(())
}

/// Builds and times one kernel.
pub fn bench_kernel(
    spec: KernelSpec,
    plan: &RunPlan,
    env: &RuntimeEnv,
) -> Result<KernelResult, BenchError> {
    let mut kernel = BenchKernel::build(spec)?;
    let timing = measure(plan, || kernel.run(env))?.ok_or(BenchError::BadOption {
        flag: "--runs",
        value: plan.runs.to_string(),
        reason: "too small",
    })?;
    Ok(KernelResult {
        spec,
        bytes: kernel.bytes(),
        timing,
    })
}
