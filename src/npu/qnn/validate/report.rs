//! What a validation finds ([`Report`], [`Violation`]) and why it could not run
//! ([`ValidateError`]).

use serde::Serialize;
use std::fmt;
use std::path::PathBuf;

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// The rule's name (one of [`super::RULES`]).
    pub rule: &'static str,
    /// Where: `graph G`, `node N`, `tensor T` or `model.bin`.
    pub at: String,
    /// What is wrong, with the values.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.rule, self.at, self.message)
    }
}

/// The outcome of validating one `npu/` folder.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Graphs in `model_net.json`'s list.
    pub graphs: usize,
    /// Nodes of all graphs.
    pub nodes: usize,
    /// Tensors of all graphs.
    pub tensors: usize,
    /// Bytes of the static tensors, as the dims and data types say.
    pub static_bytes: u64,
    /// Every broken rule, in rule order.
    pub violations: Vec<Violation>,
}

impl Report {
    /// Whether no rule is broken.
    pub fn is_clean(&self) -> bool {
        self.violations.is_empty()
    }

    /// The one-line summary (`2 graphs, 10 nodes, 25 tensors, 2208 static bytes`).
    pub fn summary(&self) -> String {
        format!(
            "{} graphs, {} nodes, {} tensors, {} static bytes",
            self.graphs, self.nodes, self.tensors, self.static_bytes
        )
    }
}

/// A folder that could not be validated at all.
#[derive(Debug, thiserror::Error)]
pub enum ValidateError {
    /// A file is missing or unreadable.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// `model_net.json` is not a net file.
    #[error("{path} is not a QNN net file")]
    Json {
        /// The file.
        path: PathBuf,
        /// Where the JSON went wrong.
        #[source]
        source: serde_json::Error,
    },
    /// `model.bin` is not a tar of `<tensor>.raw` entries (or too large).
    #[error("{path} is not a QNN model.bin")]
    Bin {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
}
