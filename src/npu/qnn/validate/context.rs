//! What every rule reads: the net, the static data, the options, and the facts derived
//! from them once (who produces each tensor, which tensors are graph inputs).

use super::report::Violation;
use super::ValidateOptions;
use oxrelax_runtime::qnn::codes::tensor_type;
use oxrelax_runtime::qnn::{NetFile, NetTensor};
use std::collections::{BTreeMap, BTreeSet};

/// The inputs of a validation and what is derived from them.
pub(crate) struct Ctx<'a> {
    /// The graphs.
    pub net: &'a NetFile,
    /// `model.bin`'s entries (tensor name -> bytes).
    pub bin: &'a BTreeMap<String, Vec<u8>>,
    /// The limits.
    pub options: &'a ValidateOptions,
    /// Tensor name -> the nodes listing it as an output.
    pub producers: BTreeMap<&'a str, Vec<&'a str>>,
    /// Names listed as some graph's input.
    pub graph_inputs: BTreeSet<&'a str>,
    /// Names listed as some graph's output.
    pub graph_outputs: BTreeSet<&'a str>,
}

impl<'a> Ctx<'a> {
    /// Derives the producer map and the graph inputs and outputs.
    pub fn new(
        net: &'a NetFile,
        bin: &'a BTreeMap<String, Vec<u8>>,
        options: &'a ValidateOptions,
    ) -> Ctx<'a> {
        let mut producers: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (name, node) in &net.graph.nodes {
            for output in &node.output_names {
                producers.entry(output).or_default().push(name);
            }
        }
        let graph_inputs = net.graphs.iter().flat_map(|g| &g.inputs);
        let graph_outputs = net.graphs.iter().flat_map(|g| &g.outputs);
        Ctx {
            net,
            bin,
            options,
            producers,
            graph_inputs: graph_inputs.map(String::as_str).collect(),
            graph_outputs: graph_outputs.map(String::as_str).collect(),
        }
    }

    /// The tensor named `name`.
    pub fn tensor(&self, name: &str) -> Option<&'a NetTensor> {
        self.net.graph.tensors.get(name)
    }

    /// Whether `name` is a STATIC tensor.
    pub fn is_static(&self, name: &str) -> bool {
        self.tensor(name)
            .is_some_and(|t| t.kind == tensor_type::STATIC)
    }

    /// How many nodes produce `name`.
    pub fn producer_count(&self, name: &str) -> usize {
        self.producers.get(name).map_or(0, Vec::len)
    }

    /// The static tensors with their bytes (numel x stored bytes; 0 for an unknown type).
    pub fn static_tensors(&self) -> impl Iterator<Item = (&'a str, &'a NetTensor, u64)> {
        let tensors = &self.net.graph.tensors;
        tensors
            .iter()
            .filter(|(_, t)| t.kind == tensor_type::STATIC)
            .map(|(name, t)| (name.as_str(), t, byte_size(t)))
    }
}

/// The product of `dims`, saturating (no overflow on any input).
pub(crate) fn numel(dims: &[u32]) -> u64 {
    dims.iter()
        .fold(1u64, |acc, &d| acc.saturating_mul(u64::from(d)))
}

/// A tensor's bytes as stored (0 when its data type is unknown).
pub(crate) fn byte_size(tensor: &NetTensor) -> u64 {
    let per = tensor.dtype().map_or(0, |t| t.stored_bytes() as u64);
    numel(&tensor.dims).saturating_mul(per)
}

/// Where one rule's violations go.
pub(crate) struct Findings<'v> {
    rule: &'static str,
    out: &'v mut Vec<Violation>,
}

impl<'v> Findings<'v> {
    /// Collects violations of `rule` into `out`.
    pub fn new(rule: &'static str, out: &'v mut Vec<Violation>) -> Findings<'v> {
        Findings { rule, out }
    }

    /// Records a violation at `at` (`node N`, `tensor T`, ...).
    pub fn push(&mut self, at: impl Into<String>, message: impl Into<String>) {
        self.out.push(Violation {
            rule: self.rule,
            at: at.into(),
            message: message.into(),
        });
    }
}
