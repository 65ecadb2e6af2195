//! The runtime (no compiler inside): tensors, values and packed functions, the kernel ABI,
//! the thread pool, KV caches, and the VM that runs compiled graph functions.

pub mod dtype;
pub mod tensor;

pub use dtype::{DType, Element};
pub use tensor::{Arena, StorageKind, Tensor, TensorError};
