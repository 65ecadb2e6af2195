//! What an artifact's `npu/` folder holds for Qualcomm's NPU (QNN HTP): the enum codes
//! ([`codes`]), the graphs in the QNN converter's JSON form ([`net`]) and their static
//! data ([`bin`]). The compiler writes these; the validator and the host reference
//! backend read them.

pub mod bin;
pub mod bind;
pub mod codes;
pub mod device;
pub mod htp;
pub mod net;
pub mod sim;
#[cfg(test)]
mod tests;

pub use codes::QnnDataType;
pub use net::{NetFile, NetGraph, NetNode, NetTensor, QuantParams, ScaleOffset};
