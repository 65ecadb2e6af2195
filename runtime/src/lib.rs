//! The runtime (no compiler inside): compiled artifacts loaded and checked, tensors, values and packed functions, the kernel ABI,
//! the thread pool, microkernels, KV caches, the VM that runs compiled graph functions, and
//! chat text (tokenizer, chat template, streaming detokenizer).

pub mod abi;
pub mod artifact;
pub mod capi;
pub mod chat;
#[cfg(feature = "cli")]
pub mod cli;
pub mod dtype;
pub mod engine;
pub mod files;
pub mod gguf;
pub use oxrelax_abi::host;
pub mod kv_cache;
pub mod memory;
pub mod microkernel;
pub mod packed;
pub mod pool;
#[cfg(feature = "npu")]
pub mod qnn;
pub mod report;
pub mod sampler;
pub mod tensor;
pub mod trace;
pub mod value;
pub mod vm;
pub mod weights;

pub use abi::{KernelFn, KernelLibrary, KernelTable, RtEnv, RuntimeEnv};
pub use chat::{ChatError, ChatTemplate, Detokenizer, Message, Tokenizer};
pub use dtype::{DType, Element};
pub use engine::{Chat, Engine, EngineConfig, EngineError};
pub use kv_cache::{KvCache, KvCacheError, KvFormat, SharedKvCache};
pub use packed::{Args, BuiltinError, BuiltinFailure, PackedFunc, Registry};
pub use pool::ThreadPool;
pub use sampler::{InvalidSampling, Sampler, SamplingConfig};
pub use tensor::{Arena, StorageKind, Tensor, TensorError};
pub use value::{Object, Value, ValueKind};
pub use vm::{Executable, VirtualMachine, VmError};
pub use weights::{ExpectedTensor, WeightError, WeightStore};
