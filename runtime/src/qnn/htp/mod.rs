//! Qualcomm's own HTP backend (`libQnnHtp.so`) through the QNN C API: our declarations of
//! the API ([`api`]), loading the library ([`library`]), a backend and device for a SoC
//! ([`backend`]), and contexts holding a net's graphs, built node by node or restored
//! from a context binary, and run on real values ([`context`]). On x86-64 the library
//! prepares graphs for the SoC and executes them in simulation. The same code is designed
//! to load the device's library on a phone, but has only been exercised with the x86-64
//! library so far.

pub mod api;
pub mod backend;
pub mod context;
mod error;
pub mod library;
pub mod stored;
mod tensor;

pub use backend::HtpBackend;
pub use context::{BinaryRecord, HtpContext, TensorIds, ValidateOps};
pub use error::HtpError;
pub use library::{library_dir, QnnLibrary, LIB_DIR_ENV};
