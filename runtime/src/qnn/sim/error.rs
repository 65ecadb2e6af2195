//! What can go wrong loading or running a QNN net on the host reference backend.

use std::path::PathBuf;

/// An error of the host reference backend; each names the file, graph, node or tensor.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A file of the `npu/` folder could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS or the archive reader reported.
        source: std::io::Error,
    },
    /// `model_net.json` is not a valid net file.
    #[error("{}: not a valid net file: {message}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// What the JSON reader reported.
        message: String,
    },
    /// No graph of this name in the net.
    #[error("no graph `{0}` in the net")]
    UnknownGraph(String),
    /// A graph or node refers to a tensor or node the net does not declare.
    #[error("`{user}` refers to `{name}`, which the net does not declare")]
    Undeclared {
        /// The graph or node holding the reference.
        user: String,
        /// The missing name.
        name: String,
    },
    /// A static tensor has no `<name>.raw` entry in `model.bin`.
    #[error("static tensor `{0}` has no data in model.bin")]
    MissingStatic(String),
    /// A static tensor's data is not `numel x stored bytes` long.
    #[error("static tensor `{tensor}` holds {actual} bytes, its dims and type need {expected}")]
    StaticSize {
        /// The tensor.
        tensor: String,
        /// Bytes its dims and type need.
        expected: u64,
        /// Bytes `model.bin` holds.
        actual: u64,
    },
    /// A stored integer outside its fixed-point type's range (an int4 byte above 7).
    #[error("static tensor `{tensor}` holds {value} at index {index}, outside its type's range")]
    StaticValue {
        /// The tensor.
        tensor: String,
        /// The element's index.
        index: usize,
        /// The stored value.
        value: i64,
    },
    /// A tensor of a data type the backend does not execute.
    #[error(
        "tensor `{tensor}` has data type code {code:#06x}, which the simulator does not execute"
    )]
    DType {
        /// The tensor.
        tensor: String,
        /// Its `Qnn_DataType_t` code.
        code: u32,
    },
    /// A tensor's quantization encoding is missing, inconsistent with its dims or invalid.
    #[error("tensor `{tensor}` has an invalid encoding: {reason}")]
    Encoding {
        /// The tensor.
        tensor: String,
        /// What is wrong.
        reason: String,
    },
    /// A graph called with the wrong number of inputs.
    #[error("graph `{graph}` takes {expected} inputs, got {actual}")]
    InputCount {
        /// The graph.
        graph: String,
        /// Its input count.
        expected: usize,
        /// Inputs given.
        actual: usize,
    },
    /// A graph input of the wrong length.
    #[error("input `{tensor}` of graph `{graph}` needs {expected} values, got {actual}")]
    InputLength {
        /// The graph.
        graph: String,
        /// The input tensor.
        tensor: String,
        /// Its element count.
        expected: usize,
        /// Values given.
        actual: usize,
    },
    /// A node reads a tensor no earlier node (nor the app) produced.
    #[error("`{user}` reads `{tensor}` before any node produces it")]
    NotProduced {
        /// The node or graph reading it.
        user: String,
        /// The tensor.
        tensor: String,
    },
    /// A node of an op type the backend does not execute.
    #[error("node `{node}`: op `{package}.{op_type}` is not supported")]
    UnknownOp {
        /// The node.
        node: String,
        /// Its op package.
        package: String,
        /// Its op type.
        op_type: String,
    },
    /// A node the backend cannot execute as configured (shapes, parameters, encodings).
    #[error("node `{node}` ({op_type}): {reason}")]
    Node {
        /// The node.
        node: String,
        /// Its op type.
        op_type: String,
        /// What is unsupported or inconsistent.
        reason: String,
    },
}
