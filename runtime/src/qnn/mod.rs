//! What an artifact's `npu/` folder holds for Qualcomm's NPU (QNN HTP): the enum codes
//! ([`codes`]), the graphs in the QNN converter's JSON form ([`net`]) and their static
//! data ([`bin`]). The compiler writes these; the validator and the host reference
//! backend read them.
//!
//! The NPU's run side, behind the `npu` feature: the graphs run on the host reference
//! backend ([`sim`]) or Qualcomm's HTP library ([`htp`]), one call at a time on a device
//! thread ([`device`]), as builtins of the VM ([`bind`], whose [`bind::NpuBackend`] is the
//! artifact loader's [`crate::artifact::GraphBackend`]), asked for by `--npu` and
//! [`capi::oxrelax_open_npu`]. It imports the generic runtime; nothing else in the
//! runtime's library imports it (the `oxrelax-run` binary and the compiler's NPU side,
//! `oxrelax::npu`, do).

pub mod bin;
pub mod bind;
pub mod capi;
#[cfg(feature = "cli")]
pub mod cli;
pub mod codes;
pub mod device;
pub mod htp;
pub mod net;
pub mod sim;
#[cfg(test)]
mod tests;

use crate::packed::{BuiltinFailure, OffloadFailure};
pub use codes::QnnDataType;
pub use net::{NetFile, NetGraph, NetNode, NetTensor, QuantParams, ScaleOffset};

/// Each NPU error as a packed function's failure.
macro_rules! offload_failures {
    ($($error:ty),*) => {$(
        impl From<$error> for BuiltinFailure {
            fn from(error: $error) -> Self {
                BuiltinFailure::Offload(OffloadFailure::new(error))
            }
        }
    )*};
}

offload_failures!(sim::SimError, htp::HtpError, device::DeviceGone);
