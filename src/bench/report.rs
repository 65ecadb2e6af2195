//! The printed report: header, reference figures, one line per kernel, the peer block.

use super::fma_peak::FmaPeak;
use super::membw::Bandwidth;
use super::peer::Peer;
use super::spec::KernelSpec;
use super::timing::{RunPlan, Timing};
use crate::quantization::Quantization;
use serde::Serialize;
use std::io::{self, Write};

/// One measured kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelResult {
    /// What ran.
    pub spec: KernelSpec,
    /// Bytes of its inputs and outputs.
    pub bytes: usize,
    /// Its timed runs.
    pub timing: Timing,
}

/// The header: build and plan.
pub fn header(out: &mut dyn Write, plan: &RunPlan, threads: usize) -> io::Result<()> {
    let build = if cfg!(debug_assertions) {
        "debug build: figures are not meaningful, use --release"
    } else {
        "release build"
    };
    writeln!(
        out,
        "oxrelax bench-kernel ({build}): f32, the host target's schedule rules, Cranelift JIT; \
         M/rows bound at run time to the symbolic n (n <= max(2048, M)); the cold GEMV's M static, as in decode"
    )?;
    writeln!(
        out,
        "plan: threads {threads}, warmup {}, runs {}, budget {:.1} s per shape \
         (times are medians; * = the budget cut the runs short)",
        plan.warmup,
        plan.runs,
        plan.budget.as_secs_f64()
    )?;
    writeln!(out, "{}", machine())
}

/// The measured FMA peak line.
pub fn fma_peak(out: &mut dyn Write, peak: Option<&FmaPeak>) -> io::Result<()> {
    match peak {
        Some(peak) => writeln!(
            out,
            "reference (measured): fp32 FMA peak, independent {} FMA chains on {} threads = {} \
             GFLOP/s",
            peak.isa,
            peak.threads,
            significant(peak.gflops)
        ),
        None => writeln!(
            out,
            "reference: no vector FMA on this CPU; no FMA peak measured"
        ),
    }
}

/// The machine line: cores and, where the OS tells it, the load average (other processes
/// on the cores make the figures noisy).
fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().map(str::to_string));
    match load {
        Some(load) => format!("machine: {cores} cores, 1-minute load average {load} at start"),
        None => format!("machine: {cores} cores"),
    }
}

/// The measured memory bandwidth line.
pub fn bandwidth(out: &mut dyn Write, bandwidth: &Bandwidth, bytes: usize) -> io::Result<()> {
    writeln!(
        out,
        "reference (measured): memory read bandwidth, sum of {} MiB of f32: \
         single thread {:.1} GB/s, pool (threads {}) {:.1} GB/s",
        bytes >> 20,
        bandwidth.single,
        bandwidth.threads,
        bandwidth.multi
    )
}

/// The column titles of [`kernel_line`].
pub fn table_header(out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "{:<9} {:<19} {:>7} {:>5} {:>11} {:>11} {:>9} {:>8}",
        "kernel", "shape", "threads", "runs", "median ms", "min ms", "GFLOP/s", "GB/s"
    )
}

/// One kernel's line: GFLOP/s from the median (`-` where no flop count is defined) and
/// GB/s of its inputs and outputs over the median.
pub fn kernel_line(out: &mut dyn Write, result: &KernelResult, threads: usize) -> io::Result<()> {
    let seconds = result.timing.median.as_secs_f64();
    let gflops = result
        .spec
        .flops()
        .map_or_else(|| "-".to_string(), |f| significant(f / seconds / 1e9));
    writeln!(
        out,
        "{:<9} {:<19} {:>7} {:>5} {:>11} {:>11} {:>9} {:>8}",
        result.spec.name(),
        result.spec.shape(),
        threads,
        runs_cell(&result.timing),
        significant(seconds * 1e3),
        significant(result.timing.min.as_secs_f64() * 1e3),
        gflops,
        significant(result.bytes as f64 / seconds / 1e9)
    )
}

/// The fastest kernel with a FLOP count: `best: matmul 1x5632x2048 at 1.23 GFLOP/s`.
pub fn best(out: &mut dyn Write, results: &[KernelResult]) -> io::Result<()> {
    let rate = |r: &KernelResult| {
        r.spec
            .flops()
            .map(|f| f / r.timing.median.as_secs_f64() / 1e9)
    };
    let fastest = results
        .iter()
        .filter_map(|r| rate(r).map(|g| (r, g)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    match fastest {
        Some((r, g)) => writeln!(
            out,
            "best: {} {} at {} GFLOP/s",
            r.spec.name(),
            r.spec.shape(),
            significant(g)
        ),
        None => Ok(()),
    }
}

/// The cold GEMV note: what its runs read.
pub fn cold_note(out: &mut dyn Write, kernels: &[KernelSpec]) -> io::Result<()> {
    for spec in kernels {
        if let KernelSpec::GemvCold(cold) = spec {
            let peer = if cold.quant == Quantization::Q0f32 {
                "numpy cycles through a ring of the same size"
            } else {
                "stored as the scheme stores them (no numpy peer)"
            };
            writeln!(
                out,
                "gemv_cold {}: each run reads the next of {} distinct [K, N] weight matrices, \
                 {} MiB in all (--cold-mib; the default 256 MiB is well over the caches); {peer}",
                spec.shape(),
                cold.ring,
                significant(cold.ring_bytes() as f64 / (1u64 << 20) as f64)
            )?;
        }
    }
    Ok(())
}

/// The peer block: numpy's times on the matmul and cold GEMV shapes and our speed
/// relative to them (`ours/peer` = peer median / our median; above 1 means oxrelax is
/// faster).
pub fn peer(
    out: &mut dyn Write,
    peer: &Peer,
    ours: &[KernelResult],
    threads: usize,
) -> io::Result<()> {
    let (numpy, timings) = match peer {
        Peer::Unavailable => return writeln!(out, "peer: numpy not available (pip install numpy)"),
        Peer::Failed(message) => return writeln!(out, "peer: numpy failed: {message}"),
        Peer::Measured { numpy, timings } => (numpy, timings),
    };
    writeln!(
        out,
        "peer: numpy {numpy} matmul, BLAS threads {threads}, same shapes, weight rings and \
         plan (ours/peer = peer median / our median)"
    )?;
    for (spec, timing) in timings {
        let seconds = timing.median.as_secs_f64();
        let ratio = ours
            .iter()
            .find(|r| r.spec == *spec)
            .map_or_else(String::new, |r| {
                format!("{}x", significant(seconds / r.timing.median.as_secs_f64()))
            });
        writeln!(
            out,
            "peer {:<9} {:<15} {:>7} {:>5} {:>11} {:>11} {:>9}  ours/peer {ratio}",
            spec.name(),
            spec.shape(),
            threads,
            runs_cell(timing),
            significant(seconds * 1e3),
            significant(timing.min.as_secs_f64() * 1e3),
            significant(spec.flops().unwrap_or(0.0) / seconds / 1e9),
        )?;
    }
    Ok(())
}

/// One row of `bench-kernel --json`: a kernel's figures from its median, and numpy's
/// where it has a peer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JsonRow {
    /// `matmul`, `gemv_cold`, `softmax` or `rms_norm`.
    pub kernel: &'static str,
    /// `MxNxK` or `RxC`.
    pub shape: String,
    /// Pool size.
    pub threads: usize,
    /// Timed runs.
    pub runs: usize,
    /// Median run time in ms.
    pub median_ms: f64,
    /// Fastest run time in ms.
    pub min_ms: f64,
    /// GFLOP/s from the median; `null` for the row-wise kernels.
    pub gflops: Option<f64>,
    /// GB/s of the inputs and outputs one run reads and writes, from the median.
    pub gbs: f64,
    /// Distinct weight matrices the runs cycle through (1 for a matmul); `null` for the
    /// row-wise kernels.
    pub ring: Option<usize>,
    /// numpy's median in ms; `null` without a peer.
    pub numpy_median_ms: Option<f64>,
    /// numpy's GFLOP/s from its median; `null` without a peer.
    pub numpy_gflops: Option<f64>,
    /// numpy's median / ours (above 1: oxrelax is faster); `null` without a peer.
    pub ratio_vs_numpy: Option<f64>,
}

/// The JSON rows of `results`, with numpy's figures from `peer` where it timed the kernel.
pub fn json_rows(results: &[KernelResult], peer: &Peer, threads: usize) -> Vec<JsonRow> {
    let peer_timings: &[(KernelSpec, Timing)] = match peer {
        Peer::Measured { timings, .. } => timings,
        Peer::Unavailable | Peer::Failed(_) => &[],
    };
    results
        .iter()
        .map(|r| {
            let seconds = r.timing.median.as_secs_f64();
            let numpy = peer_timings
                .iter()
                .find(|(spec, _)| *spec == r.spec)
                .map(|(_, t)| t.median.as_secs_f64());
            JsonRow {
                kernel: r.spec.name(),
                shape: r.spec.shape(),
                threads,
                runs: r.timing.runs,
                median_ms: seconds * 1e3,
                min_ms: r.timing.min.as_secs_f64() * 1e3,
                gflops: r.spec.flops().map(|f| f / seconds / 1e9),
                gbs: r.bytes as f64 / seconds / 1e9,
                ring: r.spec.ring(),
                numpy_median_ms: numpy.map(|s| s * 1e3),
                numpy_gflops: numpy.and_then(|s| r.spec.flops().map(|f| f / s / 1e9)),
                ratio_vs_numpy: numpy.map(|s| s / seconds),
            }
        })
        .collect()
}

/// The JSON rows as one line (no newline).
pub fn json_line(rows: &[JsonRow]) -> String {
    serde_json::to_string(rows).unwrap_or_else(|e| format!("[{{\"error\":\"{e}\"}}]"))
}

/// The runs count, marked `*` when the budget cut the runs short.
fn runs_cell(timing: &Timing) -> String {
    let mark = if timing.cut_short { "*" } else { "" };
    format!("{}{mark}", timing.runs)
}

/// `value` with three significant digits (no exponent).
pub fn significant(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let decimals = (2 - value.abs().log10().floor() as i64).clamp(0, 12) as usize;
    format!("{value:.decimals$}")
}
