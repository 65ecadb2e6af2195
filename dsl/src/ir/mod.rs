//! The Relax-style graph IR: expressions with struct info, binding blocks, graph
//! functions, and the [`IRModule`] holding graph and primitive functions.

mod expr;
mod function;
mod module;
mod subst;

pub use expr::{Call, Callee, Constant, Expr, PrimValue, Var};
pub use function::{Binding, BindingBlock, BindingValue, Function, NUM_INPUT_ATTR};
pub use module::IRModule;
pub use subst::DimMap;
