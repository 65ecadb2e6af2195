//! QNN emission: the partition's outlined graphs lowered to QNN ops ([`lower`]), given
//! QNN types and encodings by the W4A16 recipe ([`recipe`]), checked by the structural
//! validator ([`validate`], `oxrelax qnn-validate`), and written as an artifact's `npu/`
//! folder ([`emit`]) in the formats of `oxrelax_runtime::qnn`.

pub mod cpp;
pub mod emit;
pub mod error;
#[cfg(test)]
mod htp_tests;
pub mod lower;
pub mod names;
pub mod recipe;
pub mod validate;
pub mod variants;

pub use error::QnnError;
pub use lower::{lower_module, FloatNet};
