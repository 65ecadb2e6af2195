//! Passes: pure, named `IRModule -> IRModule` transformations, and the pipeline that runs
//! them with instrumentation (dumps before/after each pass, timings, verification).

mod dce;
mod fuse_ops;
mod legalize;
mod lift_params;
mod memory_plan;
mod normalize;
mod pipeline;
mod quantize_weights;
pub mod rewrite;
mod schedule;
#[cfg(test)]
mod tests;

pub use dce::DeadCodeElimination;
pub use fuse_ops::FuseOps;
pub use legalize::LegalizeOps;
pub use lift_params::{LiftTransformParams, TRANSFORM_PARAMS};
pub use memory_plan::{
    arena_size, planned_bytes, StaticPlanBlockMemory, ARENA_ALIGN, ARENA_OFFSETS,
};
pub use normalize::Normalize;
pub use pipeline::{
    compile_pipeline, compile_pipeline_for, default_pipeline, default_pipeline_for, Instrument,
    PassTiming, Pipeline, PipelineReport, VERIFY_ENV,
};
pub use quantize_weights::{QuantizeWeights, WeightFormat, WEIGHT_FORMATS, WEIGHT_QUANT_ATTR};
pub use rewrite::{RewritePhase, PHASES, SPLIT_PHASE};
pub use schedule::ScheduleKernels;

use oxrelax_dsl::tir::PrimFunc;
use oxrelax_dsl::IRModule;
use std::collections::BTreeMap;

/// A module transformation.
pub trait Pass {
    /// A stable name (used in dumps, timings and `--after`).
    fn name(&self) -> &'static str;

    /// Transforms the module.
    fn run(&self, module: IRModule) -> Result<IRModule, PassError>;

    /// What the last run did, when the pass reports it (`--verbose`).
    fn report(&self) -> Option<String> {
        None
    }
}

/// Why a pass (or the pipeline around it) failed.
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    /// Normalization failed (an op's struct info could not be inferred).
    #[error(transparent)]
    Normalize(Box<oxrelax_dsl::normalize::NormalizeError>),
    /// An op could not be legalized.
    #[error("legalizing `{function}`, binding `{var}`: {source}")]
    Legalize {
        /// The graph function.
        function: String,
        /// The variable bound to the op call.
        var: String,
        /// What went wrong.
        source: Box<oxrelax_dsl::legalize::LegalizeError>,
    },
    /// The module is not well formed after a pass (when verification is on).
    #[error("module is not well formed after pass `{pass}`: {source}")]
    NotWellFormed {
        /// The pass that produced the module.
        pass: String,
        /// The first problem found.
        source: Box<oxrelax_dsl::wellformed::WellFormedError>,
    },
    /// A tensor's size has no upper bound, so it cannot get a place in the arena.
    #[error("cannot plan memory for `{var}` in `{function}`: {sinfo} has no upper bound (declare bounds on its dims)")]
    Unplannable {
        /// The graph function.
        function: String,
        /// The variable bound to the tensor.
        var: String,
        /// Its struct info.
        sinfo: String,
    },
    /// The module after a pass does not survive its text form (when checking text).
    #[error("the module after pass `{pass}` does not read back from its text form: {reason}")]
    TextRoundTrip {
        /// The pass that produced the module.
        pass: String,
        /// What went wrong.
        reason: String,
    },
    /// Writing an IR dump failed.
    #[error("cannot write IR dump {path}: {source}")]
    Dump {
        /// The dump file.
        path: std::path::PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// Adds `func` under a fresh name derived from `hint`, or returns the name of an
/// identical function already present.
fn intern(prim_funcs: &mut BTreeMap<String, PrimFunc>, hint: &str, func: PrimFunc) -> String {
    if let Some((name, _)) = prim_funcs.iter().find(|(_, f)| **f == func) {
        return name.clone();
    }
    let name = oxrelax_dsl::names::fresh_name(hint, |n| prim_funcs.contains_key(n));
    prim_funcs.insert(name.clone(), func);
    name
}
