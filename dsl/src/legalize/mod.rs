//! Legalization: each op call becomes a primitive function built from a tensor-expression
//! definition (one file per op family) plus the `call_tir` arguments that feed it.
//!
//! Conventions of the produced [`PrimFunc`]: parameters are the tensor inputs then the
//! outputs (`num_outputs` of them, several for `split`), buffers have readable names
//! (`x`, `a`, `b`, `weight`, `out`, `out0`, ...), `dims` are the parameters' symbolic
//! dims sorted by name, and `attrs["op_pattern"]` is the [`OpPattern`] name. Shape and
//! scalar arguments are baked in. 16-bit floats are computed in f32.

mod binary;
mod call;
mod concat;
mod create;
mod elementwise;
mod error;
mod index;
mod kernel;
mod layout;
mod matmul;
mod norm;
mod reduce;
mod softmax;
#[cfg(test)]
mod tests;

pub use error::LegalizeError;
pub use kernel::OpPattern;

use crate::attrs::AttrValue;
use crate::ir::{Call, Callee, Expr};
use crate::te;
use crate::tir::PrimFunc;
use call::OpCall;
use kernel::Kernel;

/// A legalized op call: the primitive function and the arguments to call it with.
#[derive(Clone, Debug, PartialEq)]
pub struct LegalizedCall {
    /// A name for the function (the op name; the caller makes it unique).
    pub name_hint: String,
    /// The function.
    pub func: PrimFunc,
    /// The `call_tir` arguments: the tensor arguments in the function's input order
    /// (a tuple argument flattened into its fields).
    pub args: Vec<Expr>,
}

type Legalizer = fn(&OpCall) -> Result<Kernel, LegalizeError>;

/// The op families: their ops and their legalizer.
const FAMILIES: &[(&[&str], Legalizer)] = &[
    (elementwise::OPS, elementwise::legalize),
    (binary::OPS, binary::legalize),
    (matmul::OPS, matmul::legalize),
    (layout::OPS, layout::legalize),
    (concat::OPS, concat::legalize),
    (index::OPS, index::legalize),
    (softmax::OPS, softmax::legalize),
    (reduce::OPS, reduce::legalize),
    (norm::OPS, norm::legalize),
    (create::OPS, create::legalize),
];

fn legalizer(op: &str) -> Option<Legalizer> {
    FAMILIES
        .iter()
        .find(|(ops, _)| ops.contains(&op))
        .map(|(_, legalize)| *legalize)
}

/// Whether `op` has a legalizer.
pub fn has_legalizer(op: &str) -> bool {
    legalizer(op).is_some()
}

/// Legalizes a call of an op (`Callee::Op`) whose arguments and result carry struct info
/// of known shape.
pub fn legalize_call(call: &Call) -> Result<LegalizedCall, LegalizeError> {
    let op = match &call.callee {
        Callee::Op(op) => op.as_str(),
        Callee::Tir(name) | Callee::Packed(name) => {
            return Err(LegalizeError::NotAnOp {
                callee: name.clone(),
            })
        }
    };
    let legalize =
        legalizer(op).ok_or_else(|| LegalizeError::NoLegalizer { op: op.to_string() })?;
    let kernel = legalize(&OpCall { op, call })?;
    let mut func =
        te::lower(op, &kernel.inputs, &kernel.outputs).map_err(|source| LegalizeError::Lower {
            op: op.to_string(),
            source: Box::new(source),
        })?;
    func.attrs.insert(
        "op_pattern".to_string(),
        AttrValue::Str(kernel.pattern.name().to_string()),
    );
    Ok(LegalizedCall {
        name_hint: op.to_string(),
        func,
        args: kernel.args,
    })
}
