//! Errors of nn modules and of exporting a [`Spec`](super::Spec).

use crate::builder::BuildError;
use crate::op::InferError;

/// Why a forward function or an export failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NnError {
    /// The builder refused an emit (or a scope operation).
    #[error(transparent)]
    Build(#[from] Box<BuildError>),
    /// An op of a module's forward function got inputs it cannot take.
    #[error("module `{module}`: {source}")]
    Op {
        /// The module's full name (or its kind, for modules without parameters).
        module: String,
        /// What inference reported.
        source: Box<InferError>,
    },
    /// An input has a kind, rank, shape or dtype a module cannot take.
    #[error("module `{module}`: input must be {expected}, got {got}")]
    BadInput {
        /// The module.
        module: String,
        /// What the input must be.
        expected: String,
        /// What it is.
        got: Box<crate::StructInfo>,
    },
    /// A module was configured with values it cannot use.
    #[error("module `{module}`: {reason}")]
    Config {
        /// The module.
        module: String,
        /// What is wrong.
        reason: String,
    },
}

impl From<BuildError> for NnError {
    fn from(e: BuildError) -> Self {
        NnError::Build(Box::new(e))
    }
}

impl NnError {
    /// A mapper of op errors raised inside `module`'s forward function.
    pub fn op(module: &str) -> impl Fn(InferError) -> NnError + Copy + '_ {
        move |source| NnError::Op {
            module: module.to_string(),
            source: Box::new(source),
        }
    }
}
