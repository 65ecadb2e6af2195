//! The peer GEMM figure: `numpy.matmul` on the same shapes (and, for the cold GEMV, the
//! same ring of weight matrices), timed in a Python subprocess with the same run plan and
//! thread count.

use super::spec::{KernelSpec, MatmulShape};
use super::timing::{RunPlan, Timing};
use crate::quantization::Quantization;
use serde::Deserialize;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The Python interpreter that runs the peer.
const PYTHON: &str = "python3";

/// Times `numpy.matmul(a, b, out=c)` per entry of the plan in `argv[1]` (JSON), where
/// `b` cycles through `ring` distinct weight matrices (one: always the same), and prints
/// `{"numpy": version, "results": [{"shape": [m, n, k], "ring": r, "times": [s, ...]}]}`
/// in the order asked.
const SCRIPT: &str = r#"
import json, sys, time
import numpy as np

cfg = json.loads(sys.argv[1])
rng = np.random.default_rng(0)

def timed(run, count, budget):
    times, spent = [], 0.0
    while len(times) < count:
        if times and spent + times[-1] > budget:
            break
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
        spent += times[-1]
    return times

def uniform(shape):
    x = rng.random(shape, dtype=np.float32)
    x *= 2
    x -= 1
    return x

results = []
for (m, n, k), ring in zip(cfg["shapes"], cfg["rings"]):
    a = uniform((m, k))
    bs = [uniform((k, n)) for _ in range(ring)]
    c = np.empty((m, n), dtype=np.float32)
    calls = [0]
    def run():
        b = bs[calls[0] % ring]
        calls[0] += 1
        np.matmul(a, b, out=c)
    timed(run, cfg["warmup"], cfg["budget"] / 2)
    results.append({"shape": [m, n, k], "ring": ring, "times": timed(run, cfg["runs"], cfg["budget"])})
    del a, bs, c
print(json.dumps({"numpy": np.__version__, "results": results}))
"#;

/// Environment variables that set the BLAS thread count numpy uses.
const THREAD_VARS: [&str; 3] = ["OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"];

/// The outcome of the peer measurement.
#[derive(Clone, Debug, PartialEq)]
pub enum Peer {
    /// `python3 -c "import numpy"` does not succeed.
    Unavailable,
    /// numpy is there but the timing script failed.
    Failed(String),
    /// The timings, per kernel in the order asked.
    Measured {
        /// numpy's version.
        numpy: String,
        /// One timing per kernel with a peer (matmul and cold GEMV).
        timings: Vec<(KernelSpec, Timing)>,
    },
}

#[derive(Deserialize)]
struct Report {
    numpy: String,
    results: Vec<ShapeResult>,
}

#[derive(Deserialize)]
struct ShapeResult {
    shape: [usize; 3],
    ring: usize,
    times: Vec<f64>,
}

/// The kernels of `specs` numpy has a peer for: matmuls and cold GEMVs over f32
/// weights, in order.
pub fn with_peer(specs: &[KernelSpec]) -> Vec<KernelSpec> {
    specs
        .iter()
        .filter(|s| match s {
            KernelSpec::GemvCold(cold) => cold.quant == Quantization::Q0f32,
            _ => s.matmul_shape().is_some(),
        })
        .copied()
        .collect()
}

/// Times numpy's matmul on the matmuls and cold GEMVs of `specs` (same shapes, same
/// weight ring size) with `plan`, with BLAS limited to `threads`.
pub fn measure_numpy(specs: &[KernelSpec], plan: &RunPlan, threads: usize) -> Peer {
    let specs = with_peer(specs);
    let has_numpy = Command::new(PYTHON)
        .args(["-c", "import numpy"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !has_numpy {
        return Peer::Unavailable;
    }
    match run_script(&specs, plan, threads) {
        Ok((numpy, timings)) => Peer::Measured { numpy, timings },
        Err(message) => Peer::Failed(message),
    }
}

type Measured = (String, Vec<(KernelSpec, Timing)>);

fn run_script(specs: &[KernelSpec], plan: &RunPlan, threads: usize) -> Result<Measured, String> {
    let shapes: Vec<MatmulShape> = specs.iter().filter_map(KernelSpec::matmul_shape).collect();
    let rings: Vec<usize> = specs.iter().filter_map(KernelSpec::ring).collect();
    let config = serde_json::json!({
        "shapes": shapes.iter().map(|s| [s.m, s.n, s.k]).collect::<Vec<_>>(),
        "rings": rings,
        "warmup": plan.warmup,
        "runs": plan.runs,
        "budget": plan.budget.as_secs_f64(),
    });
    let mut command = Command::new(PYTHON);
    command.args(["-c", SCRIPT, &config.to_string()]);
    for var in THREAD_VARS {
        command.env(var, threads.to_string());
    }
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {PYTHON}: {e}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr.lines().last().unwrap_or("no message");
        return Err(format!("{PYTHON} exited with {}: {last}", output.status));
    }
    let report: Report = serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("unreadable output of the numpy script: {e}"))?;
    if report.results.len() != specs.len() {
        return Err(format!(
            "the numpy script timed {} kernels of {}",
            report.results.len(),
            specs.len()
        ));
    }
    specs
        .iter()
        .zip(&report.results)
        .map(|(&spec, result)| {
            let shape = spec
                .matmul_shape()
                .unwrap_or(MatmulShape { m: 0, n: 0, k: 0 });
            if result.shape != [shape.m, shape.n, shape.k] || Some(result.ring) != spec.ring() {
                return Err(format!(
                    "the numpy script timed {:?} ring {} instead of {} {}",
                    result.shape,
                    result.ring,
                    spec.name(),
                    spec.shape()
                ));
            }
            let times = result
                .times
                .iter()
                .map(|&t| Duration::try_from_secs_f64(t).map_err(|e| format!("time {t}: {e}")))
                .collect::<Result<Vec<_>, _>>()?;
            let timing = Timing::from_times(times, plan.runs).ok_or_else(|| {
                format!(
                    "the numpy script timed {} {} 0 times",
                    spec.name(),
                    spec.shape()
                )
            })?;
            Ok((spec, timing))
        })
        .collect::<Result<Vec<_>, String>>()
        .map(|timings| (report.numpy, timings))
}
