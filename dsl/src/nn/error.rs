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
    /// An input is not a tensor where a module needs one.
    #[error("module `{module}`: expected a tensor input, got {got}")]
    NotATensor {
        /// The module.
        module: String,
        /// What the input is.
        got: Box<crate::StructInfo>,
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
