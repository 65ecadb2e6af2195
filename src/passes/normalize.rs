//! `Normalize`: A-normal form and re-inferred struct info (see
//! [`oxrelax_dsl::normalize`]).

use super::{Pass, PassError};
use oxrelax_dsl::IRModule;

/// Binds nested calls to variables and re-infers the struct info of op calls.
pub struct Normalize;

impl Pass for Normalize {
    fn name(&self) -> &'static str {
        "normalize"
    }

    fn run(&self, module: IRModule) -> Result<IRModule, PassError> {
        oxrelax_dsl::normalize::normalize_module(&module)
            .map_err(|e| PassError::Normalize(Box::new(e)))
    }
}
