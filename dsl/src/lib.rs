//! oxrelax's language: symbolic arithmetic, the Relax-style graph IR with struct info, the
//! op registry, tensor expressions and TIR, the BlockBuilder and nn modules, and the text
//! form of modules.

pub mod attrs;
pub mod builder;
pub mod fuse;
pub mod ir;
pub mod legalize;
pub mod names;
pub mod nn;
pub mod normalize;
pub mod op;
pub mod struct_info;
pub mod sym;
pub mod target;
pub mod te;
#[cfg(test)]
mod test_util;
pub mod text;
pub mod tir;
pub mod wellformed;

pub use attrs::{AttrValue, Attrs};
pub use builder::BlockBuilder;
pub use ir::{Expr, Function, IRModule, Var};
pub use oxrelax_abi::DType;
pub use struct_info::{StructInfo, TensorInfo, TensorShape};
pub use sym::{SymExpr, SymVar};
pub use target::{IntMatmulTiles, MatmulTiles, Target};
