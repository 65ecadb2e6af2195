//! Legalization: each op call becomes a primitive function built from a tensor-expression
//! definition (one file per op family) plus the `call_tir` arguments that feed it.
//!
//! Conventions of the produced [`PrimFunc`]: parameters are the tensor inputs then the
//! outputs (`num_outputs` of them, several for `split`), buffers have readable names
//! (`x`, `a`, `b`, `weight`, `out`, `out0`, ...), `dims` are the parameters' symbolic
//! dims sorted by name, `attrs["op_pattern"]` is the [`OpPattern`] name and `attrs["op"]`
//! the op's (plus any op attributes a schedule rule needs, e.g. attention's `scale`). Shape and
//! scalar arguments are baked in. 16-bit floats are computed in f32.

mod attention;
mod binary;
mod call;
mod concat;
mod create;
mod elementwise;
mod error;
mod index;
mod int_quant;
mod kernel;
mod layout;
mod matmul;
mod norm;
mod packed;
mod quantize;
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

/// The primitive function attribute naming the op it was legalized from (schedule rules
/// recognize functions by it).
pub const OP_ATTR: &str = "op";

/// The primitive function attribute holding its [`OpPattern`] name (what fusion may do
/// with it).
pub const OP_PATTERN_ATTR: &str = "op_pattern";

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

type Legalizer = fn(&OpCall) -> Result<Legalized, LegalizeError>;

/// What a legalizer builds: tensor expressions to lower, or a primitive function written
/// directly as TIR (for ops a single compute expression cannot express without reading
/// out of bounds, such as concat over parts that may be empty).
enum Legalized {
    /// Tensor expressions, lowered with [`te::lower`].
    Te(Kernel),
    /// A finished primitive function and its `call_tir` arguments.
    Tir {
        /// The function (without the `op_pattern` attribute).
        func: PrimFunc,
        /// The `call_tir` arguments, in the function's input order.
        args: Vec<Expr>,
        /// The fusion pattern.
        pattern: kernel::OpPattern,
    },
}

impl From<Kernel> for Legalized {
    fn from(kernel: Kernel) -> Self {
        Legalized::Te(kernel)
    }
}

/// The op families: their ops and their legalizer.
const FAMILIES: &[(&[&str], Legalizer)] = &[
    (attention::OPS, |c| {
        attention::legalize(c).map(Legalized::from)
    }),
    (elementwise::OPS, |c| {
        elementwise::legalize(c).map(Legalized::from)
    }),
    (binary::OPS, |c| binary::legalize(c).map(Legalized::from)),
    (matmul::OPS, |c| matmul::legalize(c).map(Legalized::from)),
    (packed::OPS, |c| packed::legalize(c).map(Legalized::from)),
    (quantize::OPS, |c| {
        quantize::legalize(c).map(Legalized::from)
    }),
    (int_quant::OPS, |c| {
        int_quant::legalize(c).map(Legalized::from)
    }),
    (layout::OPS, |c| layout::legalize(c).map(Legalized::from)),
    (concat::OPS, concat::legalize),
    (index::OPS, |c| index::legalize(c).map(Legalized::from)),
    (softmax::OPS, |c| softmax::legalize(c).map(Legalized::from)),
    (reduce::OPS, |c| reduce::legalize(c).map(Legalized::from)),
    (norm::OPS, |c| norm::legalize(c).map(Legalized::from)),
    (create::OPS, |c| create::legalize(c).map(Legalized::from)),
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
    let (mut func, args, pattern) = match legalize(&OpCall { op, call })? {
        Legalized::Te(kernel) => {
            let (inputs, outputs) = (&kernel.inputs, &kernel.outputs);
            let mut func =
                te::lower_nested(op, inputs, outputs, kernel.shared_loops).map_err(|source| {
                    LegalizeError::Lower {
                        op: op.to_string(),
                        source: Box::new(source),
                    }
                })?;
            for (name, value) in kernel.attrs {
                func.attrs.insert(name.to_string(), value);
            }
            (func, kernel.args, kernel.pattern)
        }
        Legalized::Tir {
            func,
            args,
            pattern,
        } => (func, args, pattern),
    };
    func.attrs.insert(
        OP_PATTERN_ATTR.to_string(),
        AttrValue::Str(pattern.name().to_string()),
    );
    func.attrs
        .insert(OP_ATTR.to_string(), AttrValue::Str(op.to_string()));
    Ok(LegalizedCall {
        name_hint: op.to_string(),
        func,
        args,
    })
}
