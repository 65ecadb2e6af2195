//! The host ISA, configured for speed with the host's CPU features.

use crate::CodegenError;
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};

/// Builds the host ISA: `opt_level=speed` and every CPU feature the host has (FMA, AVX2,
/// ...), so vector code and `fma` lower to native instructions.
pub fn host_isa(is_pic: bool) -> Result<OwnedTargetIsa, CodegenError> {
    let mut flags = settings::builder();
    let set = |flags: &mut settings::Builder, name: &str, value: &str| {
        flags
            .set(name, value)
            .map_err(|e| CodegenError::Isa(format!("{name}={value}: {e}")))
    };
    set(&mut flags, "opt_level", "speed")?;
    set(&mut flags, "is_pic", if is_pic { "true" } else { "false" })?;
    let builder = cranelift_native::builder().map_err(|e| CodegenError::Isa(e.to_string()))?;
    builder
        .finish(settings::Flags::new(flags))
        .map_err(|e| CodegenError::Isa(e.to_string()))
}

/// The names of the boolean ISA flags that are enabled (e.g. `has_fma`), for reports.
pub fn enabled_features(isa: &OwnedTargetIsa) -> Vec<&'static str> {
    isa.isa_flags()
        .iter()
        .filter(|f| f.as_bool() == Some(true))
        .map(|f| f.name)
        .collect()
}
