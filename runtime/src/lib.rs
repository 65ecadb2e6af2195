//! The runtime (no compiler inside): tensors, packed functions, kernel libraries, the VM,
//! KV caches and the chat engine.
//!
//! Nothing is implemented yet; see the README's Status section.
