//! The command-line arguments of `bench-kernel`, their defaults and their checks.

use super::membw::PROBE_BYTES;
use super::spec::{ColdGemv, KernelSpec, MatmulShape, RowShape, MAX_DIM};
use super::timing::RunPlan;
use super::BenchError;
use crate::quantization::Quantization;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::ValueEnum;
use oxrelax_runtime::ThreadPool;
use std::time::Duration;

/// The matmul shapes (`MxNxK`) benchmarked by default: decode (M = 1) and prefill
/// (M = 128, 512) against the projections of a TinyLlama-sized model (hidden 2048,
/// MLP 5632), and the square SGEMM 2048^3.
pub const DEFAULT_MATMULS: [MatmulShape; 5] = [
    MatmulShape {
        m: 1,
        n: 2048,
        k: 2048,
    },
    MatmulShape {
        m: 1,
        n: 5632,
        k: 2048,
    },
    MatmulShape {
        m: 128,
        n: 2048,
        k: 2048,
    },
    MatmulShape {
        m: 512,
        n: 5632,
        k: 2048,
    },
    MatmulShape {
        m: 2048,
        n: 2048,
        k: 2048,
    },
];

/// The cold GEMV shape benchmarked by default: a decode step through TinyLlama's MLP
/// up-projection.
pub const DEFAULT_COLD_GEMV: MatmulShape = MatmulShape {
    m: 1,
    n: 5632,
    k: 2048,
};

/// The cold GEMV's ring size by default in MiB: well over this machine kind's 32 MiB L3.
pub const DEFAULT_COLD_MIB: usize = 256;

/// The row counts of the row-wise kernels benchmarked by default.
pub const DEFAULT_ROWS: [usize; 2] = [1, 128];

/// The row length of the row-wise kernels benchmarked by default.
pub const DEFAULT_COLS: usize = 4096;

/// The command-line arguments of `bench-kernel`.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Matmul shapes `MxNxK` ([M, K] x [K, N]; M is the symbolic token count).
    /// Default: 1x2048x2048 1x5632x2048 128x2048x2048 512x5632x2048 2048x2048x2048.
    #[arg(long, num_args = 1.., value_name = "MxNxK")]
    pub matmul: Vec<String>,
    /// Rows of the softmax and rms_norm inputs (the symbolic token count). Default: 1 128.
    #[arg(long, num_args = 1.., value_name = "R")]
    pub rows: Vec<usize>,
    /// Row length of the softmax and rms_norm inputs (the reduced axis).
    #[arg(long, value_name = "C", default_value_t = DEFAULT_COLS)]
    pub cols: usize,
    /// Threads of the pool kernels run on. Default: the machine's cores
    /// (or OXRELAX_NUM_THREADS).
    #[arg(long, value_name = "T")]
    pub threads: Option<usize>,
    /// Untimed runs before the timed ones.
    #[arg(long, value_name = "W", default_value_t = 3)]
    pub warmup: usize,
    /// Timed runs per shape (the median is reported).
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub runs: usize,
    /// Time budget per shape in seconds: fewer runs when they would take longer.
    #[arg(long, value_name = "S", default_value_t = 5.0)]
    pub budget_secs: f64,
    /// Size of the memory-bandwidth probe's buffer in MiB.
    #[arg(long, value_name = "MIB", default_value_t = PROBE_BYTES >> 20)]
    pub probe_mib: usize,
    /// Shape `MxNxK` of the cold GEMV: a matmul whose runs each read the next weight
    /// matrix of a ring larger than the caches (numpy runs the same ring).
    #[arg(long, value_name = "MxNxK", default_value_t = DEFAULT_COLD_GEMV.to_string())]
    pub cold_gemv: String,
    /// Total size of the cold GEMV's weight ring in MiB (at least 2 matrices); 0 skips
    /// the cold GEMV.
    #[arg(long, value_name = "MIB", default_value_t = DEFAULT_COLD_MIB)]
    pub cold_mib: usize,
    /// How the cold GEMV's weights are stored, one cold GEMV per scheme given: `q0f32`
    /// (f32 panels, the one numpy runs too), or the quantized panels and group scales of
    /// `q8f32`, `q4f32_1` or `q4f16_1` (GB/s counts the bytes as stored).
    #[arg(
        long,
        value_name = "Q",
        num_args = 1..,
        default_value = "q0f32",
        value_parser = cold_quant_parser()
    )]
    pub cold_quant: Vec<Quantization>,
    /// Also print the results as a JSON array (one object per kernel) on the last line.
    #[arg(long)]
    pub json: bool,
}

/// The schemes the cold GEMV times (f32 activations): the values `--cold-quant` lists
/// and accepts.
pub const COLD_QUANTS: [Quantization; 4] = [
    Quantization::Q0f32,
    Quantization::Q8f32,
    Quantization::Q4f32_1,
    Quantization::Q4f16_1,
];

/// The parser of `--cold-quant`: the name of one of [`COLD_QUANTS`].
fn cold_quant_parser() -> impl TypedValueParser<Value = Quantization> {
    PossibleValuesParser::new(COLD_QUANTS.map(Quantization::name))
        .try_map(|name| <Quantization as ValueEnum>::from_str(&name, false))
}

/// [`BenchArgs`] checked: what to run and how.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchPlan {
    /// The kernels, in the order they run.
    pub kernels: Vec<KernelSpec>,
    /// Pool size.
    pub threads: usize,
    /// Warmup, runs and budget per kernel.
    pub runs: RunPlan,
    /// Bytes of the bandwidth probe.
    pub probe_bytes: usize,
    /// Whether to print the JSON rows last.
    pub json: bool,
}

impl BenchArgs {
    /// Checks the arguments and fills in the defaults.
    pub fn plan(&self) -> Result<BenchPlan, BenchError> {
        let matmuls = if self.matmul.is_empty() {
            DEFAULT_MATMULS.to_vec()
        } else {
            self.matmul
                .iter()
                .map(|s| s.parse())
                .collect::<Result<_, _>>()?
        };
        let rows = if self.rows.is_empty() {
            DEFAULT_ROWS.to_vec()
        } else {
            self.rows.clone()
        };
        for &r in &rows {
            check_dim("--rows", r)?;
        }
        let cols = check_dim("--cols", self.cols)?;
        let threads = match self.threads {
            Some(t) => check_range("--threads", t, 1, 1024)?,
            None => ThreadPool::default_threads(),
        };
        let runs = check_range("--runs", self.runs, 1, 1_000_000)?;
        let budget = Duration::try_from_secs_f64(self.budget_secs)
            .ok()
            .filter(|b| !b.is_zero())
            .ok_or_else(|| BenchError::BadOption {
                flag: "--budget-secs",
                value: self.budget_secs.to_string(),
                reason: "must be a positive number of seconds",
            })?;
        let probe_mib = check_range("--probe-mib", self.probe_mib, 1, 1 << 16)?;
        let cold = match check_range("--cold-mib", self.cold_mib, 0, 1 << 16)? {
            0 => Vec::new(),
            mib => {
                let shape = self.cold_gemv.parse::<MatmulShape>().map_err(|e| match e {
                    BenchError::BadMatmulShape { value, reason, .. } => {
                        BenchError::BadMatmulShape {
                            flag: "--cold-gemv",
                            value,
                            reason,
                        }
                    }
                    other => other,
                })?;
                self.cold_quant
                    .iter()
                    .map(|&quant| ColdGemv::with_ring_bytes(shape, quant, mib << 20))
                    .collect::<Result<Vec<_>, _>>()?
            }
        };
        let row_specs = rows.iter().map(|&rows| RowShape { rows, cols });
        let kernels = matmuls
            .into_iter()
            .map(KernelSpec::Matmul)
            .chain(cold.into_iter().map(KernelSpec::GemvCold))
            .chain(row_specs.clone().map(KernelSpec::Softmax))
            .chain(row_specs.map(KernelSpec::RmsNorm))
            .collect();
        Ok(BenchPlan {
            kernels,
            threads,
            runs: RunPlan {
                warmup: self.warmup,
                runs,
                budget,
            },
            probe_bytes: probe_mib << 20,
            json: self.json,
        })
    }
}

fn check_dim(flag: &'static str, value: usize) -> Result<usize, BenchError> {
    check_range(flag, value, 1, MAX_DIM)
}

fn check_range(
    flag: &'static str,
    value: usize,
    lo: usize,
    hi: usize,
) -> Result<usize, BenchError> {
    if (lo..=hi).contains(&value) {
        Ok(value)
    } else {
        Err(BenchError::BadOption {
            flag,
            value: value.to_string(),
            reason: if value < lo { "too small" } else { "too large" },
        })
    }
}
