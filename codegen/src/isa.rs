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

/// Features every x86-64 target gets besides those given (x86-64-v2: the SSE4.1 vector
/// instructions the lowering relies on, e.g. `roundps` for `floor`).
const X86_64_BASELINE: &[&str] = &["sse3", "ssse3", "sse4.1", "sse4.2", "popcnt"];

/// The ISA of `triple` (e.g. `aarch64-unknown-linux-gnu`), position-independent and
/// configured for speed, with `features` (LLVM-style names with or without a leading
/// `+`: `avx2`, `fma`, `sse4.1`, `lse`; those of the tile tables' features Cranelift has
/// no setting for only select microkernels), on top of the x86-64-v2 baseline on x86-64
/// (NEON is part of aarch64's baseline).
pub fn target_isa(triple: &str, features: &[String]) -> Result<OwnedTargetIsa, CodegenError> {
    let parsed: target_lexicon::Triple = triple
        .parse()
        .map_err(|e| CodegenError::Isa(format!("target `{triple}`: {e}")))?;
    let mut builder = cranelift_codegen::isa::lookup(parsed)
        .map_err(|e| CodegenError::Isa(format!("target `{triple}`: {e}")))?;
    let is_x86 = triple.starts_with("x86_64");
    let baseline = if is_x86 { X86_64_BASELINE } else { &[] };
    let defaults: Vec<String> = baseline
        .iter()
        .map(|f| f.to_string())
        .chain(features.iter().cloned())
        .collect();
    let arch = triple.split('-').next().unwrap_or("");
    let selects_microkernels = |name: &str| {
        oxrelax_dsl::target::KNOWN_FEATURES
            .iter()
            .any(|(a, known)| *a == arch && known.contains(&name))
    };
    for feature in &defaults {
        let name = feature.trim_start_matches('+');
        let flag = format!("has_{}", name.replace('.', ""));
        match builder.enable(&flag) {
            Ok(()) => {}
            // A feature Cranelift's code does not use (F16C, AVX-512 VNNI, dotprod, ...)
            // only selects microkernels.
            Err(_) if selects_microkernels(name) => {}
            Err(e) => {
                let message = format!("feature `{feature}` of `{triple}`: {e}");
                return Err(CodegenError::Isa(message));
            }
        }
    }
    let mut flags = settings::builder();
    for (name, value) in [("opt_level", "speed"), ("is_pic", "true")] {
        flags
            .set(name, value)
            .map_err(|e| CodegenError::Isa(format!("{name}={value}: {e}")))?;
    }
    builder
        .finish(settings::Flags::new(flags))
        .map_err(|e| CodegenError::Isa(e.to_string()))
}
