//! Why an NPU graph could not be emitted.

use oxrelax_runtime::WeightError;

/// An error of QNN emission, naming the graph and binding it is about.
#[derive(Debug, thiserror::Error)]
pub enum QnnError {
    /// A binding the lowering has no QNN form for (the partition should not have moved it).
    #[error("graph `{graph}`: binding `{binding}` ({what}) has no QNN lowering")]
    Unsupported {
        /// The outlined graph function.
        graph: String,
        /// The binding's variable.
        binding: String,
        /// What it is.
        what: String,
    },
    /// A tensor whose shape is not static, or not positive.
    #[error("graph `{graph}`: `{tensor}` has shape {shape}, not a static positive shape")]
    NotStatic {
        /// The outlined graph function.
        graph: String,
        /// The value.
        tensor: String,
        /// Its shape, as printed.
        shape: String,
    },
    /// A weight the graph reads could not be loaded.
    #[error("graph `{graph}`: weight `{weight}`")]
    Weight {
        /// The outlined graph function.
        graph: String,
        /// The weight's name.
        weight: String,
        /// Why.
        #[source]
        source: Box<WeightError>,
    },
    /// Two graphs define a static tensor of one name differently.
    #[error("static tensor `{tensor}` is defined twice, differently (graph `{graph}`)")]
    StaticConflict {
        /// The tensor's name.
        tensor: String,
        /// The graph defining it the second time.
        graph: String,
    },
    /// A tensor has no calibrated range to derive its encoding from.
    #[error("tensor `{tensor}` was never observed during calibration")]
    Uncalibrated {
        /// The tensor's name.
        tensor: String,
    },
    /// Writing the `npu/` folder failed.
    #[error("writing {path}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Building the graphs with Qualcomm's HTP library failed.
    #[error("building the NPU graphs with Qualcomm's HTP library")]
    Htp(#[from] oxrelax_runtime::qnn::htp::HtpError),
}
