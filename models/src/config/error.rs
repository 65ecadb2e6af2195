//! Errors of reading a Hugging Face `config.json`.

use super::Architecture;
use std::path::PathBuf;

/// Why a `config.json` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS reported.
        source: std::io::Error,
    },
    /// An error in the file at `path`.
    #[error("{}: {source}", path.display())]
    InFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        source: Box<ConfigError>,
    },
    /// Not JSON, a required field missing, or a field of the wrong type.
    #[error("invalid config JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// None of the listed architectures (nor the `model_type`) is supported.
    #[error(
        "unsupported architecture {names:?} (supported: {})",
        supported_classes()
    )]
    UnknownArchitecture {
        /// The `architectures` (or `model_type`) given.
        names: Vec<String>,
    },
    /// A field whose value names a feature that is not supported.
    #[error("unsupported {field} `{value}` (supported: {supported})")]
    Unsupported {
        /// The field (`hidden_act`, `rope_scaling.rope_type`, ...).
        field: String,
        /// Its value.
        value: String,
        /// What is supported.
        supported: String,
    },
    /// A field whose value is out of range or inconsistent with another.
    #[error("invalid {field}: {reason}")]
    Invalid {
        /// The field.
        field: String,
        /// What is wrong.
        reason: String,
    },
}

impl ConfigError {
    /// An unsupported value of `field`.
    pub(crate) fn unsupported(field: &str, value: impl ToString, supported: &str) -> Self {
        ConfigError::Unsupported {
            field: field.to_string(),
            value: value.to_string(),
            supported: supported.to_string(),
        }
    }

    /// An invalid value of `field`.
    pub(crate) fn invalid(field: &str, reason: impl ToString) -> Self {
        ConfigError::Invalid {
            field: field.to_string(),
            reason: reason.to_string(),
        }
    }
}

/// The class names of every supported architecture, comma-separated.
fn supported_classes() -> String {
    let names: Vec<&str> = Architecture::ALL.iter().map(|a| a.class_name()).collect();
    names.join(", ")
}
