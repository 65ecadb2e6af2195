//! [`HtpError`]: why a QNN backend library could not be loaded or a graph built, stored
//! or run on it.

use std::path::PathBuf;

/// Why the HTP backend failed.
#[derive(Debug, thiserror::Error)]
pub enum HtpError {
    /// Neither `--qnn-lib` nor the environment named the libraries' folder.
    #[error(
        "no QNN libraries: set {} (or pass --qnn-lib DIR) to the folder holding libQnnHtp.so \
         (a QNN SDK's lib/x86_64-linux-clang, a phone's vendor libraries, or the onnxruntime-qnn \
         wheel's onnxruntime_qnn folder)",
        super::library::LIB_DIR_ENV
    )]
    NoLibraryDir,
    /// The folder has no backend library.
    #[error("{}: no such file", path.display())]
    LibraryMissing {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// The library did not load or lacks the providers' entry point.
    #[error("{}: {message}", path.display())]
    LibraryLoad {
        /// The library.
        path: PathBuf,
        /// What the loader said.
        message: String,
    },
    /// No provider implements a core API version our declarations support.
    #[error("{}: implements QNN core API {found:?}; oxrelax supports {supported}", path.display())]
    UnsupportedApi {
        /// The library.
        path: PathBuf,
        /// The versions its providers implement.
        found: Vec<String>,
        /// What we support.
        supported: String,
    },
    /// The provider's table lacks an entry point we call.
    #[error("the QNN library has no `{0}` entry point")]
    MissingFunction(&'static str),
    /// A backend for another SoC is open in this process.
    #[error("a QNN HTP backend for {open} is open in this process; one for {asked} cannot be opened beside it")]
    BackendBusy {
        /// The SoC of the open backend.
        open: String,
        /// The SoC asked for.
        asked: String,
    },
    /// A QNN call failed.
    #[error(
        "{call} failed{}: QNN error {code}{}{}",
        on_what(what),
        message_text(message),
        log_text(log)
    )]
    Call {
        /// The API function.
        call: &'static str,
        /// What it was called on (a graph, node or tensor name).
        what: String,
        /// The error code (low 16 bits of the error handle).
        code: u64,
        /// The library's message for the code.
        message: String,
        /// The library's error and warning lines written during the call.
        log: Vec<String>,
    },
    /// A tensor of the net cannot be declared to QNN as it is.
    #[error("tensor `{tensor}`: {reason}")]
    Tensor {
        /// The tensor.
        tensor: String,
        /// What is wrong.
        reason: String,
    },
    /// A call named a graph the context does not hold.
    #[error("the QNN context has no graph `{0}`")]
    UnknownGraph(String),
    /// A graph call's inputs do not match the graph.
    #[error("graph `{graph}`: {reason}")]
    Inputs {
        /// The graph.
        graph: String,
        /// What is wrong.
        reason: String,
    },
    /// A context binary or its record is not what the artifact says.
    #[error("{}: {reason}", path.display())]
    ContextBinary {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

fn on_what(what: &str) -> String {
    match what.is_empty() {
        true => String::new(),
        false => format!(" on `{what}`"),
    }
}

fn message_text(message: &str) -> String {
    match message.is_empty() {
        true => String::new(),
        false => format!(" ({message})"),
    }
}

fn log_text(log: &[String]) -> String {
    match log.is_empty() {
        true => String::new(),
        false => format!("; the library logged: {}", log.join(" | ")),
    }
}
