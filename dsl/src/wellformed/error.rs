//! What the well-formedness checker reports.

use crate::struct_info::StructInfo;
use std::fmt;

/// The first problem found in a module: the function and what is wrong in it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("function `{function}`: {problem}")]
pub struct WellFormedError {
    /// The graph function.
    pub function: String,
    /// What is wrong.
    pub problem: Box<Problem>,
}

/// Where in a function a problem is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Site {
    /// A parameter, by name.
    Param(String),
    /// A binding, by the name of its variable.
    Binding(String),
    /// The function's result.
    Result,
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Site::Param(name) => write!(f, "parameter `{name}`"),
            Site::Binding(name) => write!(f, "binding `{name}`"),
            Site::Result => f.write_str("the result"),
        }
    }
}

/// One well-formedness violation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Problem {
    /// A variable is used where it is not defined.
    #[error("{site} uses variable `{var}`, which is not defined before it")]
    UndefinedVar {
        /// Where it is used.
        site: Site,
        /// The variable.
        var: String,
    },
    /// Two parameters or bindings share a name.
    #[error("{site} reuses the name `{name}`")]
    DuplicateName {
        /// The second definition.
        site: Site,
        /// The name.
        name: String,
    },
    /// A dataflow variable is used after its dataflow block.
    #[error("{site} uses dataflow variable `{var}` outside its dataflow block")]
    DataflowVarEscapes {
        /// Where it is used.
        site: Site,
        /// The variable.
        var: String,
    },
    /// A dataflow variable is bound in a plain (non-dataflow) block.
    #[error("dataflow variable `{var}` is bound outside a dataflow block")]
    DataflowVarInPlainBlock {
        /// The variable.
        var: String,
    },
    /// A variable's struct info does not accept the struct info of what it is bound to.
    #[error("variable `{var}` has struct info {declared} but is bound to a value of {value}")]
    StructInfoMismatch {
        /// The variable.
        var: String,
        /// Its struct info.
        declared: StructInfo,
        /// The value's struct info.
        value: StructInfo,
    },
    /// A reference to a variable carries struct info its definition does not satisfy.
    #[error("{site} refers to `{var}` as {reference}, but it is defined as {definition}")]
    StaleReference {
        /// Where the reference is.
        site: Site,
        /// The variable.
        var: String,
        /// The struct info on the reference.
        reference: StructInfo,
        /// The struct info of the definition.
        definition: StructInfo,
    },
    /// An op call's recorded struct info differs from what inference gives.
    #[error("{site}: op `{op}` records {recorded} but inference gives {inferred}")]
    OpStructInfo {
        /// The binding.
        site: Site,
        /// The op.
        op: String,
        /// The struct info on the call.
        recorded: StructInfo,
        /// The struct info inference gives.
        inferred: StructInfo,
    },
    /// An op call's struct info cannot be inferred.
    #[error("{site}: {source}")]
    OpInference {
        /// The binding.
        site: Site,
        /// What inference reported.
        source: Box<crate::normalize::NormalizeError>,
    },
    /// A `call_tir` names a primitive function the module does not have.
    #[error("{site} calls primitive function `{callee}`, which the module does not have")]
    UnknownPrimFunc {
        /// The binding.
        site: Site,
        /// The callee.
        callee: String,
    },
    /// A `call_tir` passes a different number of arguments than the callee has inputs.
    #[error("{site} passes {got} arguments to `{callee}`, which has {expected} inputs")]
    CallTirArity {
        /// The binding.
        site: Site,
        /// The callee.
        callee: String,
        /// The callee's input count.
        expected: usize,
        /// The argument count.
        got: usize,
    },
    /// A symbolic dim is used before a parameter or a match_cast binds it.
    #[error("{site} uses symbolic dim `{dim}`, which no parameter or earlier match_cast binds")]
    UnboundDim {
        /// Where it is used.
        site: Site,
        /// The dim's name.
        dim: String,
    },
    /// A call argument (or the result, or a match_cast value) is not a leaf.
    #[error("{site} is not in normal form: a nested call must be bound to a variable first")]
    NotNormalized {
        /// Where the nested call is.
        site: Site,
    },
    /// A projection out of a value that is not a tuple with that field.
    #[error("{site} takes field {index} of a value of {sinfo}")]
    BadProjection {
        /// Where the projection is.
        site: Site,
        /// The field.
        index: usize,
        /// The projected value's struct info.
        sinfo: StructInfo,
    },
}
