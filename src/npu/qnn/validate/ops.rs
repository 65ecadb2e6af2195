//! The ops the emitter writes (package `qti.aisw`), as data: their inputs, their
//! parameters and their shape rules, after QNN's public op definitions.

use super::shapes::{self, NodeView};
use oxrelax_runtime::qnn::net::{scalar_value, NetNode};
use oxrelax_runtime::qnn::QnnDataType;

/// One input of an op.
#[derive(Debug, Clone, Copy)]
pub struct InputSpec {
    /// What the op definition calls it.
    pub name: &'static str,
    /// Whether it must be a STATIC tensor (weights, biases, norm scales).
    pub is_static: bool,
    /// Whether it may be left out (only trailing inputs are).
    pub optional: bool,
}

/// Whether a parameter is a tensor or a scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    /// Listed in `tensor_params`, its data inline.
    Tensor,
    /// Listed in `scalar_params` as `{"<code>": value}`.
    Scalar,
}

/// One parameter of an op.
#[derive(Debug, Clone, Copy)]
pub struct ParamSpec {
    /// Its name.
    pub name: &'static str,
    /// Tensor or scalar.
    pub kind: ParamKind,
    /// Its data type.
    pub dtype: QnnDataType,
    /// Whether a node must give it.
    pub required: bool,
}

/// One op type: its inputs, parameters and shape rule (one output each).
#[derive(Debug, Clone, Copy)]
pub struct OpSpec {
    /// The op type (`Conv2d`).
    pub op_type: &'static str,
    /// The inputs, in order.
    pub inputs: &'static [InputSpec],
    /// The parameters.
    pub params: &'static [ParamSpec],
    /// The output shape (and parameter values) rule.
    pub shape: fn(&NodeView) -> Result<(), String>,
}

impl OpSpec {
    /// The least number of inputs a node must give.
    pub fn min_inputs(&self) -> usize {
        self.inputs.iter().filter(|i| !i.optional).count()
    }
}

const fn input(name: &'static str) -> InputSpec {
    InputSpec {
        name,
        is_static: false,
        optional: false,
    }
}

const fn weight(name: &'static str, optional: bool) -> InputSpec {
    InputSpec {
        name,
        is_static: true,
        optional,
    }
}

const fn param(
    name: &'static str,
    kind: ParamKind,
    dtype: QnnDataType,
    required: bool,
) -> ParamSpec {
    ParamSpec {
        name,
        kind,
        dtype,
        required,
    }
}

use ParamKind::{Scalar, Tensor};
use QnnDataType::{Float32, Uint32};

/// Every op type the validator knows.
pub const OPS: &[OpSpec] = &[
    OpSpec {
        op_type: "Conv2d",
        inputs: &[input("in"), weight("filter", false), weight("bias", true)],
        params: &[
            param("stride", Tensor, Uint32, true),
            param("pad_amount", Tensor, Uint32, true),
            param("dilation", Tensor, Uint32, false),
            param("group", Scalar, Uint32, false),
        ],
        shape: shapes::conv2d,
    },
    OpSpec {
        op_type: "Reshape",
        inputs: &[input("in")],
        params: &[],
        shape: shapes::reshape,
    },
    OpSpec {
        op_type: "Transpose",
        inputs: &[input("in")],
        params: &[param("perm", Tensor, Uint32, true)],
        shape: shapes::transpose,
    },
    OpSpec {
        op_type: "RmsNorm",
        inputs: &[input("in"), weight("gamma", false), weight("beta", true)],
        params: &[
            param("epsilon", Scalar, Float32, true),
            param("axes", Tensor, Uint32, true),
        ],
        shape: shapes::rms_norm,
    },
    OpSpec {
        op_type: "ElementWiseAdd",
        inputs: &[input("in0"), input("in1")],
        params: &[],
        shape: shapes::broadcast,
    },
    OpSpec {
        op_type: "ElementWiseMultiply",
        inputs: &[input("in0"), input("in1")],
        params: &[],
        shape: shapes::broadcast,
    },
    OpSpec {
        op_type: "Sigmoid",
        inputs: &[input("in")],
        params: &[],
        shape: shapes::same,
    },
];

/// The spec of `op_type`, if it is known.
pub fn op_spec(op_type: &str) -> Option<&'static OpSpec> {
    OPS.iter().find(|op| op.op_type == op_type)
}

/// What is wrong with `node`'s parameters against `spec`: missing, of the wrong kind or
/// data type, malformed, or unknown.
pub(crate) fn param_problems(node: &NetNode, spec: &OpSpec) -> Vec<String> {
    let mut problems: Vec<String> = spec
        .params
        .iter()
        .filter_map(|p| param_problem(node, p))
        .collect();
    let given = node.tensor_params.keys().chain(node.scalar_params.keys());
    for name in given {
        if !spec.params.iter().any(|p| p.name == name) {
            problems.push(format!("unknown parameter `{name}`"));
        }
    }
    problems
}

fn param_problem(node: &NetNode, spec: &ParamSpec) -> Option<String> {
    let name = spec.name;
    let want = spec.dtype.code();
    let (as_tensor, as_scalar) = (node.tensor_params.get(name), node.scalar_params.get(name));
    match (spec.kind, as_tensor, as_scalar) {
        (_, None, None) if spec.required => Some(format!("missing parameter `{name}`")),
        (_, None, None) => None,
        (Tensor, Some(p), _) if p.data_type != want => Some(format!(
            "parameter `{name}` has data type {:#06x}, expected {want:#06x}",
            p.data_type
        )),
        (Tensor, Some(p), _) if p.data.len() as u64 != super::context::numel(&p.dims) => {
            Some(format!(
                "parameter `{name}` has {} values for dims {:?}",
                p.data.len(),
                p.dims
            ))
        }
        (Tensor, Some(_), _) => None,
        (Scalar, _, Some(p)) => match scalar_value(p) {
            None => Some(format!(
                "scalar parameter `{name}` is not one `{{\"<code>\": value}}` entry: {p:?}"
            )),
            Some((t, _)) if t != spec.dtype => Some(format!(
                "scalar parameter `{name}` has data type {:#06x}, expected {want:#06x}",
                t.code()
            )),
            Some(_) => None,
        },
        (Tensor, None, Some(_)) => Some(format!("`{name}` is a tensor parameter, given a scalar")),
        (Scalar, Some(_), None) => Some(format!("`{name}` is a scalar parameter, given a tensor")),
    }
}
