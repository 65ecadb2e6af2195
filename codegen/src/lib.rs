//! Codegen: scheduled TIR to Cranelift IR, JIT for the host and AOT objects for a target
//! triple; the QNN emitter for NPU-bound subgraphs.
//!
//! Nothing is implemented yet; see the README's Status section.
