//! The well-formedness checker: what every pass may assume about a module.
//!
//! In every graph function: each variable is defined before it is used and names are
//! unique; dataflow variables are bound only in dataflow blocks and never used after
//! their block (nor returned); a variable's struct info accepts its value's (a
//! match_cast's equals its target); an op call records the struct info inference gives;
//! `call_tir` callees exist in the module with matching input counts; every symbolic dim
//! is bound by a parameter or an earlier match_cast before it is used; call arguments,
//! match_cast values and the result are leaves (normal form).

mod error;
mod function;
#[cfg(test)]
mod tests;

pub use error::{Problem, Site, WellFormedError};

use crate::ir::{Function, IRModule};
use function::FunctionChecker;

/// Checks every graph function of `module`; reports the first problem found.
pub fn check_module(module: &IRModule) -> Result<(), WellFormedError> {
    module
        .functions
        .iter()
        .try_for_each(|(name, function)| check_function(module, name, function))
}

/// Checks one graph function `name` of `module` (the module supplies `call_tir` callees).
pub fn check_function(
    module: &IRModule,
    name: &str,
    function: &Function,
) -> Result<(), WellFormedError> {
    FunctionChecker::new(module)
        .check(function)
        .map_err(|problem| WellFormedError {
            function: name.to_string(),
            problem: Box::new(problem),
        })
}
