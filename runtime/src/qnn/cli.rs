//! The NPU's command-line flags (`--npu`, `--qnn-lib`, `--npu-soc`), shared by
//! `oxrelax-run` and `oxrelax` (behind the `cli` feature).

use super::bind::{NpuBackend, BACKEND_NAMES};
use clap::Args;

/// Which backend runs an artifact's NPU graphs (`compile --npu qnn` artifacts need one).
#[derive(Args, Clone, Default)]
pub struct NpuArgs {
    /// Run the artifact's NPU graphs: `htp` with Qualcomm's HTP library (libQnnHtp.so,
    /// from --qnn-lib or OXRELAX_QNN_LIB_DIR) on the artifact's context binary; `sim` on
    /// the host reference backend with QNN's quantized semantics as specified
    /// (dequantize, compute in f32, requantize); `sim-integer` with integer arithmetic
    /// where a fixed-point NPU uses it.
    #[arg(long, value_parser = BACKEND_NAMES)]
    pub npu: Option<String>,
    /// The folder holding libQnnHtp.so for `--npu htp` (default: OXRELAX_QNN_LIB_DIR).
    #[arg(long, value_name = "DIR")]
    pub qnn_lib: Option<std::path::PathBuf>,
    /// The SoC whose context binary `--npu htp` runs (default: the first the artifact
    /// was compiled for).
    #[arg(long, value_name = "SOC")]
    pub npu_soc: Option<String>,
}

impl NpuArgs {
    /// The backend asked for.
    pub fn backend(&self) -> Option<NpuBackend> {
        NpuBackend::named(
            self.npu.as_deref()?,
            self.qnn_lib.clone(),
            self.npu_soc.clone(),
        )
    }
}
