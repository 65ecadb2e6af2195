//! Errors of the [`BlockBuilder`](super::BlockBuilder).

use crate::normalize::NormalizeError;
use crate::struct_info::StructInfo;

/// A misuse of the builder or an expression it could not emit.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BuildError {
    /// Something that needs an open function was called outside one.
    #[error("cannot {action} outside a function (call begin_function first)")]
    NoFunction {
        /// What was attempted.
        action: &'static str,
    },
    /// A function was begun while another one is open.
    #[error("cannot begin function `{requested}` while function `{open}` is open")]
    FunctionAlreadyOpen {
        /// The open function.
        open: String,
        /// The function that was begun.
        requested: String,
    },
    /// A function name is already taken in the module.
    #[error("the module already has a function named `{name}`")]
    DuplicateFunction {
        /// The name.
        name: String,
    },
    /// Two parameters of a function share a name.
    #[error("function `{function}` has two parameters named `{param}`")]
    DuplicateParam {
        /// The function.
        function: String,
        /// The parameter name.
        param: String,
    },
    /// Something that needs an open dataflow block was called outside one.
    #[error("cannot {action} in function `{function}`: no dataflow block is open")]
    DataflowNotOpen {
        /// The function.
        function: String,
        /// What was attempted.
        action: &'static str,
    },
    /// A dataflow block was begun inside another one.
    #[error("cannot begin a dataflow block in function `{function}`: one is already open")]
    DataflowAlreadyOpen {
        /// The function.
        function: String,
    },
    /// A function was ended (or the module finished) with a dataflow block still open.
    #[error("cannot end function `{function}`: its dataflow block is still open")]
    DataflowStillOpen {
        /// The function.
        function: String,
    },
    /// The module was finished while a function is still open.
    #[error("cannot finish the module: function `{function}` is still open")]
    FunctionStillOpen {
        /// The function.
        function: String,
    },
    /// An expression refers to a variable that is not defined (or no longer visible).
    #[error("function `{function}`: variable `{var}` is not defined here")]
    UndefinedVar {
        /// The function.
        function: String,
        /// The variable.
        var: String,
    },
    /// A match_cast between struct infos that can never match.
    #[error("function `{function}`: cannot match_cast a value of {from} to {to}")]
    IncompatibleCast {
        /// The function.
        function: String,
        /// The value's struct info.
        from: StructInfo,
        /// The target struct info.
        to: StructInfo,
    },
    /// An argument of `emit_te` is not a tensor of known shape.
    #[error("emit_te `{name}`: argument {index} is {sinfo}, not a tensor of known shape")]
    TeArgument {
        /// The name hint of the computation.
        name: String,
        /// The argument's position.
        index: usize,
        /// Its struct info.
        sinfo: Box<StructInfo>,
    },
    /// Lowering a tensor expression failed.
    #[error("emit_te `{name}`: {source}")]
    TeLower {
        /// The name hint of the computation.
        name: String,
        /// What lowering reported.
        source: Box<crate::te::TeError>,
    },
    /// Normalization (struct-info inference) of an emitted expression failed.
    #[error("function `{function}`: {source}")]
    Normalize {
        /// The function.
        function: String,
        /// The error.
        source: Box<NormalizeError>,
    },
}
