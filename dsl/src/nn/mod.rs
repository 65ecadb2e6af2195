//! nn modules: a model frontend in the spirit of `nn.Module`.
//!
//! A model is a tree of [`Module`]s, each owning [`Param`]s named by their full Hugging
//! Face path ([`Prefix`]: `model.layers.0.self_attn.q_proj.weight`). A module's forward
//! function takes the [`BlockBuilder`](crate::BlockBuilder) and input expressions and
//! emits ops. A [`Spec`] lists the exported functions with their (symbolic) input shapes
//! and builds them into an [`IRModule`](crate::IRModule), every parameter becoming a
//! function parameter.

mod activation;
mod embedding;
mod error;
mod linear;
mod mask;
mod module;
mod norm;
mod param;
mod rope;
mod spec;
#[cfg(test)]
mod tests;

pub use activation::Activation;
pub use embedding::Embedding;
pub use error::NnError;
pub use linear::Linear;
pub use mask::causal_mask;
pub use module::{Module, ModuleList};
pub use norm::{LayerNorm, RMSNorm};
pub use param::{Param, Prefix};
pub use rope::{Llama3RopeScaling, RopeScaling, RotaryEmbedding};
pub use spec::{Forward, Spec};
