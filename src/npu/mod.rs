//! The NPU path (Qualcomm HTP through QNN): the SoCs it targets ([`soc`]), what their
//! NPU runs ([`capability`]), the pass that moves the static parts of a model's exported
//! functions onto it ([`partition`]), the QNN lowering, recipe, validator and emitter
//! ([`qnn`]), running a partitioned model with the host reference backend ([`load`]) and `compile --npu qnn` ([`compile`]).
//!
//! The NPU's compile side, behind the `npu` feature: it imports the compiler and the
//! runtime's NPU run side (`oxrelax_runtime::qnn`), never the reverse; the artifact
//! writer reaches it only through [`crate::artifact::GraphCompile`].

pub mod capability;
pub mod compile;
pub mod load;
pub mod partition;
pub mod qnn;
pub mod soc;
#[cfg(test)]
mod tests;

use crate::passes::{Normalize, Pipeline};

pub use capability::{Capability, OpRule, QNN_HTP};
pub use partition::{PartitionNpu, NPU_FUNCTIONS};
pub use soc::{Soc, SOCS};

/// The passes that partition a model's exported module for the NPU: normalize, then
/// `partition` (what `oxrelax dump-ir --npu qnn` shows).
pub fn partition_pipeline(partition: PartitionNpu) -> Pipeline {
    Pipeline::new().with(Normalize).with(partition)
}
