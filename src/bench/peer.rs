//! The peer GEMM figure: `numpy.matmul` on the same shapes, timed in a Python subprocess
//! with the same run plan and thread count.

use super::spec::MatmulShape;
use super::timing::{RunPlan, Timing};
use serde::Deserialize;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The Python interpreter that runs the peer.
const PYTHON: &str = "python3";

/// Times `numpy.matmul(a, b, out=c)` per shape with the plan in `argv[1]` (JSON) and
/// prints `{"numpy": version, "results": [{"shape": [m, n, k], "times": [s, ...]}]}`.
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

results = []
for m, n, k in cfg["shapes"]:
    a = rng.random((m, k), dtype=np.float32) * 2 - 1
    b = rng.random((k, n), dtype=np.float32) * 2 - 1
    c = np.empty((m, n), dtype=np.float32)
    run = lambda: np.matmul(a, b, out=c)
    timed(run, cfg["warmup"], cfg["budget"] / 2)
    results.append({"shape": [m, n, k], "times": timed(run, cfg["runs"], cfg["budget"])})
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
    /// The timings, per shape in the order asked.
    Measured {
        /// numpy's version.
        numpy: String,
        /// One timing per shape.
        timings: Vec<(MatmulShape, Timing)>,
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
    times: Vec<f64>,
}

/// Times numpy's matmul on `shapes` with `plan`, with BLAS limited to `threads`.
pub fn measure_numpy(shapes: &[MatmulShape], plan: &RunPlan, threads: usize) -> Peer {
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
    match run_script(shapes, plan, threads) {
        Ok((numpy, timings)) => Peer::Measured { numpy, timings },
        Err(message) => Peer::Failed(message),
    }
}

type Measured = (String, Vec<(MatmulShape, Timing)>);

fn run_script(shapes: &[MatmulShape], plan: &RunPlan, threads: usize) -> Result<Measured, String> {
    let config = serde_json::json!({
        "shapes": shapes.iter().map(|s| [s.m, s.n, s.k]).collect::<Vec<_>>(),
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
    let timings = shapes
        .iter()
        .map(|&shape| {
            let result = report
                .results
                .iter()
                .find(|r| r.shape == [shape.m, shape.n, shape.k])
                .ok_or_else(|| format!("the numpy script did not time {shape}"))?;
            let times = result
                .times
                .iter()
                .map(|&t| Duration::try_from_secs_f64(t).map_err(|e| format!("time {t}: {e}")))
                .collect::<Result<Vec<_>, _>>()?;
            let timing = Timing::from_times(times, plan.runs)
                .ok_or_else(|| format!("the numpy script timed {shape} 0 times"))?;
            Ok((shape, timing))
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok((report.numpy, timings))
}
