//! The printed report: header, reference figures, one line per kernel, the peer block.

use super::membw::Bandwidth;
use super::peer::Peer;
use super::spec::KernelSpec;
use super::timing::{RunPlan, Timing};
use std::io::{self, Write};

/// The fp32 FMA peak of this machine kind with 128-bit vectors (GFLOP/s), as DESIGN.md
/// documents it.
pub const DOCUMENTED_PEAK_GFLOPS: f64 = 113.0;

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

/// The header: build, plan and the documented peak.
pub fn header(out: &mut dyn Write, plan: &RunPlan, threads: usize) -> io::Result<()> {
    let build = if cfg!(debug_assertions) {
        "debug build: figures are not meaningful, use --release"
    } else {
        "release build"
    };
    writeln!(
        out,
        "oxrelax bench-kernel ({build}): f32, default schedule, Cranelift JIT; \
         M/rows bound at run time to the symbolic n (n <= max(2048, M))"
    )?;
    writeln!(
        out,
        "plan: threads {threads}, warmup {}, runs {}, budget {:.1} s per shape \
         (times are medians; * = the budget cut the runs short)",
        plan.warmup,
        plan.runs,
        plan.budget.as_secs_f64()
    )?;
    writeln!(out, "{}", machine())?;
    writeln!(
        out,
        "reference (documented in DESIGN.md, not measured): fp32 FMA peak of this machine \
         kind (2 cores, 128-bit vectors) = {DOCUMENTED_PEAK_GFLOPS:.0} (GFLOP/s)"
    )
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
        "{:<9} {:<15} {:>7} {:>5} {:>11} {:>11} {:>9} {:>8}",
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
        "{:<9} {:<15} {:>7} {:>5} {:>11} {:>11} {:>9} {:>8}",
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

/// The peer block: numpy's times on the matmul shapes and our speed relative to them
/// (`ours/peer` = peer median / our median; above 1 means oxrelax is faster).
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
        "peer: numpy {numpy} matmul, BLAS threads {threads}, same shapes and plan \
         (ours/peer = peer median / our median)"
    )?;
    for (shape, timing) in timings {
        let spec = KernelSpec::Matmul(*shape);
        let seconds = timing.median.as_secs_f64();
        let ratio = ours
            .iter()
            .find(|r| r.spec == spec)
            .map_or_else(String::new, |r| {
                format!("{}x", significant(seconds / r.timing.median.as_secs_f64()))
            });
        writeln!(
            out,
            "peer      {:<15} {:>7} {:>5} {:>11} {:>11} {:>9}  ours/peer {ratio}",
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
