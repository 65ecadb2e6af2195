//! Models written in the DSL (Llama, Qwen2, Qwen3), their Hugging Face configs and weight
//! mappings, and quantization specs.
//!
//! Nothing is implemented yet; see the README's Status section.
