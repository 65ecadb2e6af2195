//! Tensor expressions, in the spirit of TVM's TE: tensors declared as placeholders or as
//! element-wise [`compute`] definitions over scalar [`Expr`]s (with [`sum`] / [`max`] /
//! [`min`] reductions over [`ReduceAxis`]es), lowered by [`lower`] to a TIR
//! [`PrimFunc`](crate::tir::PrimFunc) with one serial loop nest per compute stage (or, by
//! [`lower_nested`], every stage inside one nest over the output's leading dims).
//!
//! ```
//! use oxrelax_dsl::{te, DType, SymExpr, SymVar};
//! let n = SymVar::new("n").expr();
//! let x = te::placeholder("x", vec![n.clone()], DType::F32);
//! let y = te::compute("y", vec![n], |i| x.at(i) * 2.0 + 1.0);
//! let func = te::lower("scale", &[x], &[y]).unwrap();
//! assert_eq!(func.params.len(), 2);
//! ```

mod error;
mod expr;
mod lower;
mod ops;
mod reduce;
mod tensor;
#[cfg(test)]
mod tests;

pub use error::TeError;
pub use expr::Expr;
pub use lower::{lower, lower_nested};
pub use ops::select;
pub use reduce::{max, min, reduce, reduce_axis, sum, ReduceAxis, ReduceKind};
pub use tensor::{compute, placeholder, Tensor};
