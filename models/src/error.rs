//! Errors of building a model and exporting its functions.

use crate::config::{Architecture, ConfigError};
use oxrelax_dsl::nn::NnError;

/// Why a model could not be built or exported.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The config cannot be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A model class given a config of another architecture.
    #[error("{model} cannot be built from a {got} config")]
    WrongArchitecture {
        /// The model class.
        model: Architecture,
        /// The config's architecture.
        got: Architecture,
    },
    /// Export options out of range.
    #[error("invalid export option {option}: {reason}")]
    Options {
        /// The option.
        option: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A module or exported function could not be built.
    #[error(transparent)]
    Build(#[from] NnError),
}
