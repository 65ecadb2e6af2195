//! The op registry: every graph-IR op (see the op contract), its arguments, its attribute
//! specs and its struct-info inference, plus typed constructors for DSL users.
//!
//! [`call`] checks a call (op, argument count, attributes) and infers its result struct
//! info; the typed constructors ([`matmul`], [`add`], [`reshape`], ...) build their
//! arguments and attributes and go through it. Shapes are symbolic throughout: dims are
//! compared with [`SymExpr::prove_equal`](crate::SymExpr::prove_equal), and a check that cannot be proven is an error.

mod attention;
pub mod attr;
mod binary;
mod broadcast;
mod create;
mod ctx;
pub mod error;
mod int_quant;
mod join;
mod manipulate;
mod matmul;
mod norm;
mod packed;
mod quantize;
mod reduce;
#[cfg(test)]
mod tests;
mod unary;

pub use attention::{attention, attention_q8kv, Mask, ATTENTION_KV_DTYPES};
pub use attr::{AttrDefault, AttrKind, AttrSpec};
pub use binary::*;
pub use create::*;
pub use ctx::InferCtx;
pub use error::{ArgRef, Dims, InferError};
pub use int_quant::*;
pub use join::*;
pub use manipulate::*;
pub use matmul::*;
pub use norm::*;
pub use packed::*;
pub use quantize::*;
pub use reduce::*;
pub use unary::*;

use crate::ir::{Call, Callee};
use crate::{Attrs, Expr, StructInfo};

/// An op's struct-info inference, run after the call was checked against the op's spec.
pub type InferFn = fn(&InferCtx<'_>) -> Result<StructInfo, InferError>;

/// A registered op.
#[derive(Clone, Copy, Debug)]
pub struct OpDef {
    /// The op's name (`Callee::Op`).
    pub name: &'static str,
    /// The roles of its arguments, in order (`lhs`, `rhs`); their count is its arity.
    pub args: &'static [&'static str],
    /// The attributes it takes.
    pub attrs: &'static [AttrSpec],
    /// Its struct-info inference.
    pub infer: InferFn,
}

impl OpDef {
    /// The number of arguments the op takes.
    pub fn num_args(&self) -> usize {
        self.args.len()
    }

    /// The spec of attribute `name`, if the op takes it.
    pub fn attr(&self, name: &str) -> Option<&'static AttrSpec> {
        self.attrs.iter().find(|s| s.name == name)
    }

    /// Validates `attrs` against the op's specs and fills in the defaults.
    pub fn complete_attrs(&self, attrs: &Attrs) -> Result<Attrs, InferError> {
        attr::complete(self.name, self.attrs, attrs)
    }

    /// Checks a call of this op on values of struct info `args` and infers its result.
    pub fn infer_sinfo(
        &'static self,
        args: &[StructInfo],
        attrs: &Attrs,
    ) -> Result<StructInfo, InferError> {
        self.check(args, attrs).map(|(sinfo, _)| sinfo)
    }

    /// Checks a call (argument count, attributes) and infers its result; returns the
    /// result and the completed attributes.
    fn check(
        &'static self,
        args: &[StructInfo],
        attrs: &Attrs,
    ) -> Result<(StructInfo, Attrs), InferError> {
        if args.len() != self.num_args() {
            return Err(self.arg_count_error(args.len()));
        }
        let attrs = self.complete_attrs(attrs)?;
        let sinfo = (self.infer)(&InferCtx::new(self, args, &attrs))?;
        Ok((sinfo, attrs))
    }

    fn arg_count_error(&self, got: usize) -> InferError {
        InferError::ArgCount {
            op: self.name,
            expected: self.num_args(),
            roles: self.args.join(", "),
            got,
        }
    }
}

const FAMILIES: &[&[OpDef]] = &[
    attention::OPS,
    binary::OPS,
    unary::OPS,
    matmul::OPS,
    packed::OPS,
    quantize::OPS,
    int_quant::OPS,
    manipulate::OPS,
    join::OPS,
    reduce::OPS,
    norm::OPS,
    create::OPS,
];

/// Every registered op.
pub fn all() -> impl Iterator<Item = &'static OpDef> {
    FAMILIES.iter().flat_map(|family| family.iter())
}

/// The op named `name`.
pub fn lookup(name: &str) -> Option<&'static OpDef> {
    all().find(|def| def.name == name)
}

fn lookup_or_err(name: &str) -> Result<&'static OpDef, InferError> {
    lookup(name).ok_or_else(|| InferError::UnknownOp {
        op: name.to_string(),
    })
}

/// Checks a call of op `name` on `args` with `attrs` (op exists, argument count,
/// attributes against the spec) and infers its result struct info.
pub fn infer(name: &str, args: &[Expr], attrs: &Attrs) -> Result<StructInfo, InferError> {
    let sinfo: Vec<StructInfo> = args.iter().map(Expr::sinfo).collect();
    lookup_or_err(name)?.infer_sinfo(&sinfo, attrs)
}

/// Builds a checked call of op `name`: its attributes have the defaults filled in and its
/// struct info is inferred.
pub fn call(name: &str, args: Vec<Expr>, attrs: Attrs) -> Result<Expr, InferError> {
    let def = lookup_or_err(name)?;
    let sinfo: Vec<StructInfo> = args.iter().map(Expr::sinfo).collect();
    let (result, attrs) = def.check(&sinfo, &attrs)?;
    Ok(Expr::Call(Box::new(Call {
        callee: Callee::Op(def.name.to_string()),
        args,
        attrs,
        sinfo: result,
    })))
}

/// Attributes from `(name, value)` pairs, skipping absent values.
fn attrs<const N: usize>(pairs: [(&str, Option<crate::AttrValue>); N]) -> Attrs {
    pairs
        .into_iter()
        .filter_map(|(name, value)| Some((name.to_string(), value?)))
        .collect()
}
