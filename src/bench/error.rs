//! Why a benchmark could not run.

use oxrelax_codegen::CodegenError;
use oxrelax_dsl::legalize::LegalizeError;
use oxrelax_dsl::op::InferError;

/// A benchmark error; every variant names the command-line value or the kernel involved.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A `--matmul` (or `--cold-gemv`) value is not `MxNxK`.
    #[error("bad {flag} shape `{value}`: {reason} (expected MxNxK, three positive integers separated by `x`, e.g. 128x2048x2048)")]
    BadMatmulShape {
        /// The option (`--matmul` or `--cold-gemv`).
        flag: &'static str,
        /// The value as given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A numeric option is out of range.
    #[error("bad {flag} {value}: {reason}")]
    BadOption {
        /// The option (e.g. `--threads`).
        flag: &'static str,
        /// The value as given.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A buffer of the benchmark's shape does not fit in memory.
    #[error("{kernel} {shape}: cannot allocate {bytes} bytes for `{buffer}`")]
    Alloc {
        /// The kernel.
        kernel: &'static str,
        /// The benchmark shape.
        shape: String,
        /// The buffer parameter.
        buffer: String,
        /// Its size.
        bytes: usize,
    },
    /// The op call could not be built.
    #[error("{kernel} {shape}: cannot build the op call")]
    Op {
        /// The kernel.
        kernel: &'static str,
        /// The benchmark shape.
        shape: String,
        /// The shape-inference error.
        source: Box<InferError>,
    },
    /// The op call could not be legalized.
    #[error("{kernel} {shape}: cannot legalize")]
    Legalize {
        /// The kernel.
        kernel: &'static str,
        /// The benchmark shape.
        shape: String,
        /// The legalization error.
        source: Box<LegalizeError>,
    },
    /// The scheduled function could not be compiled.
    #[error("{kernel} {shape}: cannot compile")]
    Codegen {
        /// The kernel.
        kernel: &'static str,
        /// The benchmark shape.
        shape: String,
        /// The codegen error.
        source: Box<CodegenError>,
    },
    /// The legalized function has something the harness does not bind or allocate.
    #[error("{kernel} {shape}: the harness does not support {what}")]
    Unsupported {
        /// The kernel.
        kernel: &'static str,
        /// The benchmark shape.
        shape: String,
        /// What is not supported (a dim, a dtype, a buffer shape).
        what: String,
    },
    /// A kernel (or the bandwidth probe) returned a nonzero status.
    #[error("{what} returned status {code}")]
    Failed {
        /// The kernel and shape, or the probe.
        what: String,
        /// The status.
        code: i32,
    },
    /// The thread pool could not be started.
    #[error("cannot start a pool of {threads} threads")]
    Pool {
        /// The requested thread count.
        threads: usize,
        /// The spawn error.
        source: std::io::Error,
    },
    /// Writing the report failed.
    #[error("cannot write the report")]
    Output(#[from] std::io::Error),
}
