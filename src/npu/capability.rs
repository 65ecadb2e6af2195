//! What an NPU runs, as data: the graph ops it takes (and which of them anchor a
//! subgraph worth offloading), the element types, and the largest tensor. The partition
//! pass consults it; nothing about a particular model is in it.

use oxrelax_dsl::DType;

/// How the NPU takes one graph op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpRule {
    /// The op's name in the op registry.
    pub op: &'static str,
    /// Whether a subgraph with this op is worth offloading (a weight-stationary
    /// projection); subgraphs of other ops only stay on the CPU.
    pub anchor: bool,
    /// The argument that must be a weight (computed from weights only, so it is static
    /// and becomes the layer's stored tensor), if any.
    pub weight_arg: Option<usize>,
}

/// An NPU's capabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capability {
    /// The backend (`qnn-htp`).
    pub name: &'static str,
    /// The ops it runs.
    pub ops: &'static [OpRule],
    /// The element types of the tensors it takes (before the NPU quantization recipe
    /// turns them into its integer encodings).
    pub dtypes: &'static [DType],
    /// The largest tensor, in bytes, a subgraph may hold (our bound: one activation of a
    /// chunk, never a whole vocabulary's logits of a long prompt).
    pub max_tensor_bytes: u64,
}

impl Capability {
    /// The rule of `op`, when the NPU runs it.
    pub fn rule(&self, op: &str) -> Option<&OpRule> {
        self.ops.iter().find(|rule| rule.op == op)
    }
}

/// A rule for an op that needs nothing particular.
const fn plain(op: &'static str) -> OpRule {
    OpRule {
        op,
        anchor: false,
        weight_arg: None,
    }
}

/// Qualcomm's HTP through QNN, as mllm and executorch lower to it: projections as
/// weight-stationary matmuls (1x1 convolutions), the norms, element-wise ops and layout
/// changes around them. Attention, the rotary embedding, the embedding gather and the
/// KV cache stay on the CPU.
pub const QNN_HTP: Capability = Capability {
    name: "qnn-htp",
    ops: &[
        OpRule {
            op: "matmul",
            anchor: true,
            weight_arg: Some(1),
        },
        plain("permute_dims"),
        plain("rms_norm"),
        plain("add"),
        plain("multiply"),
        plain("silu"),
        plain("sigmoid"),
        plain("reshape"),
    ],
    dtypes: &[DType::F32, DType::F16],
    max_tensor_bytes: 64 << 20,
};
