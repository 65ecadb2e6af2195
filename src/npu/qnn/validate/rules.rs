//! The rules, as a table ([`RULES`]), and the structural ones: op types, inputs and
//! parameters, tensor references and kinds, dims and shapes. The quantization rules are
//! in [`super::quant`], the static-data rules in [`super::data`].

use super::context::{Ctx, Findings};
use super::ops::{op_spec, param_problems, OpSpec};
use super::shapes::NodeView;
use super::{data, quant};
use oxrelax_runtime::qnn::codes::{tensor_type, DATA_FORMAT_FLAT_BUFFER, PACKAGE_QTI_AISW};
use oxrelax_runtime::qnn::NetNode;
use std::collections::{BTreeMap, BTreeSet};

/// A named check over the whole net.
pub struct Rule {
    /// The name violations carry (`bias-scale`).
    pub name: &'static str,
    /// What it requires.
    pub summary: &'static str,
    pub(crate) check: fn(&Ctx, &mut Findings),
}

/// Every rule, in the order violations are reported.
pub const RULES: &[Rule] = &[
    rule(
        "op-type",
        "a known op type of package qti.aisw; op_types lists the types used",
        op_type,
    ),
    rule(
        "op-inputs",
        "the op's number of inputs, one output, static inputs STATIC",
        op_inputs,
    ),
    rule(
        "op-params",
        "required params present, of the right kind and type; no others",
        op_params,
    ),
    rule(
        "tensor-refs",
        "names resolve; one producer per non-static tensor, before use",
        tensor_refs,
    ),
    rule(
        "tensor-kinds",
        "inputs APP_WRITE, outputs APP_READ, intermediates NATIVE, weights STATIC",
        tensor_kinds,
    ),
    rule("dims", "rank >= 1 and every dim > 0", dims),
    rule("op-shapes", "each op's shape rule", op_shapes),
    rule(
        "encoding",
        "a known data type with the encoding its kind needs",
        quant::encoding,
    ),
    rule(
        "lpbq",
        "blockwise-expansion encodings consistent with the dims, in a layout HTP computes",
        quant::lpbq,
    ),
    rule(
        "lpbq-codes",
        "stored LPBQ codes within the 4-bit range [-8, 7]",
        quant::lpbq_codes,
    ),
    rule(
        "bias-scale",
        "a quantized Conv2d bias scale = input scale x weight scale",
        quant::bias_scale,
    ),
    rule(
        "bin-sizes",
        "a model.bin entry of the right size for each static tensor, no others",
        data::bin_sizes,
    ),
    rule(
        "weights-shared",
        "prefill and decode graphs read the same projection weights",
        data::weights_shared,
    ),
    rule(
        "context-budget",
        "static bytes within the budget",
        data::context_budget,
    ),
];

const fn rule(name: &'static str, summary: &'static str, check: fn(&Ctx, &mut Findings)) -> Rule {
    Rule {
        name,
        summary,
        check,
    }
}

fn nodes<'a>(ctx: &Ctx<'a>) -> impl Iterator<Item = (String, &'a NetNode)> {
    let all = &ctx.net.graph.nodes;
    all.iter()
        .map(|(name, node)| (format!("node {name}"), node))
}

fn known<'a>(ctx: &Ctx<'a>) -> impl Iterator<Item = (String, &'a NetNode, &'static OpSpec)> {
    nodes(ctx).filter_map(|(at, node)| op_spec(&node.op_type).map(|spec| (at, node, spec)))
}

fn op_type(ctx: &Ctx, f: &mut Findings) {
    for (at, node) in nodes(ctx) {
        if op_spec(&node.op_type).is_none() {
            f.push(&at, format!("unknown op type `{}`", node.op_type));
        }
        if node.package != PACKAGE_QTI_AISW {
            f.push(
                &at,
                format!("package `{}`, expected `{PACKAGE_QTI_AISW}`", node.package),
            );
        }
    }
    let used: BTreeSet<&str> = ctx
        .net
        .graph
        .nodes
        .values()
        .map(|n| n.op_type.as_str())
        .collect();
    if !ctx
        .net
        .op_types
        .iter()
        .map(String::as_str)
        .eq(used.iter().copied())
    {
        f.push(
            "op_types",
            format!("{:?}, the nodes use {used:?}", ctx.net.op_types),
        );
    }
}

fn op_inputs(ctx: &Ctx, f: &mut Findings) {
    for (at, node, spec) in known(ctx) {
        let (min, max, given) = (spec.min_inputs(), spec.inputs.len(), node.input_names.len());
        if !(min..=max).contains(&given) {
            f.push(
                &at,
                format!("{} takes {min}..={max} inputs, given {given}", spec.op_type),
            );
        }
        if node.output_names.len() != 1 {
            f.push(
                &at,
                format!("{} outputs, expected 1", node.output_names.len()),
            );
        }
        for (input, name) in spec.inputs.iter().zip(&node.input_names) {
            if input.is_static && ctx.tensor(name).is_some() && !ctx.is_static(name) {
                f.push(
                    &at,
                    format!("input `{}` ({name}) must be STATIC", input.name),
                );
            }
        }
    }
}

fn op_params(ctx: &Ctx, f: &mut Findings) {
    for (at, node, spec) in known(ctx) {
        for problem in param_problems(node, spec) {
            f.push(&at, problem);
        }
    }
}

fn tensor_refs(ctx: &Ctx, f: &mut Findings) {
    for (at, node) in nodes(ctx) {
        for name in node.input_names.iter().chain(&node.output_names) {
            if ctx.tensor(name).is_none() {
                f.push(&at, format!("`{name}` is not a tensor"));
            }
        }
    }
    for name in ctx.net.graph.tensors.keys() {
        let count = ctx.producer_count(name);
        let want = usize::from(!ctx.graph_inputs.contains(name.as_str()));
        if !ctx.is_static(name) && count != want {
            f.push(
                format!("tensor {name}"),
                format!("produced by {count} nodes, expected {want}"),
            );
        }
    }
    graph_refs(ctx, f);
}

/// Each graph's names resolve, each node belongs to one graph, and a graph reads a
/// non-static tensor only after one of its nodes produced it (or it is its input).
fn graph_refs(ctx: &Ctx, f: &mut Findings) {
    let mut owners: BTreeMap<&str, usize> = BTreeMap::new();
    for graph in &ctx.net.graphs {
        let at = format!("graph {}", graph.name);
        let mut ready: BTreeSet<&str> = graph.inputs.iter().map(String::as_str).collect();
        for name in graph.inputs.iter().chain(&graph.outputs) {
            if ctx.tensor(name).is_none() {
                f.push(&at, format!("`{name}` is not a tensor"));
            }
        }
        for name in &graph.nodes {
            *owners.entry(name).or_default() += 1;
            let Some(node) = ctx.net.graph.nodes.get(name) else {
                f.push(&at, format!("`{name}` is not a node"));
                continue;
            };
            for input in &node.input_names {
                let known = ctx.tensor(input).is_some() && !ctx.is_static(input);
                if known && !ready.contains(input.as_str()) {
                    f.push(
                        &at,
                        format!("node `{name}` reads `{input}` before it is produced"),
                    );
                }
            }
            ready.extend(node.output_names.iter().map(String::as_str));
        }
        for name in &graph.outputs {
            if !ready.contains(name.as_str()) {
                f.push(&at, format!("output `{name}` is not produced by its nodes"));
            }
        }
    }
    for name in ctx.net.graph.nodes.keys() {
        let count = owners.get(name.as_str()).copied().unwrap_or(0);
        if count != 1 {
            f.push(
                format!("node {name}"),
                format!("listed by {count} graphs, expected 1"),
            );
        }
    }
}

fn tensor_kinds(ctx: &Ctx, f: &mut Findings) {
    for (name, tensor) in &ctx.net.graph.tensors {
        let (want, role) = if ctx.graph_inputs.contains(name.as_str()) {
            (tensor_type::APP_WRITE, "a graph input")
        } else if ctx.graph_outputs.contains(name.as_str()) {
            (tensor_type::APP_READ, "a graph output")
        } else if ctx.producer_count(name) > 0 {
            (tensor_type::NATIVE, "a node output")
        } else {
            (tensor_type::STATIC, "a tensor no node produces")
        };
        let at = format!("tensor {name}");
        if tensor.kind != want {
            let (got_name, want_name) =
                (tensor_type::c_name(tensor.kind), tensor_type::c_name(want));
            f.push(
                &at,
                format!(
                    "type {} ({got_name}) for {role}, expected {want} ({want_name})",
                    tensor.kind
                ),
            );
        }
        if tensor.data_format != DATA_FORMAT_FLAT_BUFFER {
            f.push(
                &at,
                format!(
                    "dataFormat {}, expected {DATA_FORMAT_FLAT_BUFFER}",
                    tensor.data_format
                ),
            );
        }
    }
}

fn dims(ctx: &Ctx, f: &mut Findings) {
    for (name, tensor) in &ctx.net.graph.tensors {
        if tensor.dims.is_empty() || tensor.dims.contains(&0) {
            f.push(
                format!("tensor {name}"),
                format!("dims {:?}: need rank >= 1, every dim > 0", tensor.dims),
            );
        }
    }
}

fn op_shapes(ctx: &Ctx, f: &mut Findings) {
    for (at, node, spec) in known(ctx) {
        if let Some(view) = checkable(ctx, node, spec) {
            if let Err(message) = (spec.shape)(&view) {
                f.push(&at, format!("{}: {message}", spec.op_type));
            }
        }
    }
}

/// The node's dims for its shape rule, when the other rules pass on it (so a broken
/// reference or parameter is reported once, by its own rule).
fn checkable<'a>(ctx: &Ctx<'a>, node: &'a NetNode, spec: &OpSpec) -> Option<NodeView<'a>> {
    let dims = |names: &'a [String]| {
        let positive = |n: &String| {
            let d = ctx.tensor(n)?.dims.as_slice();
            (!d.is_empty() && !d.contains(&0)).then_some(d)
        };
        names.iter().map(positive).collect::<Option<Vec<_>>>()
    };
    let count_ok = (spec.min_inputs()..=spec.inputs.len()).contains(&node.input_names.len());
    if !count_ok || node.output_names.len() != 1 || !param_problems(node, spec).is_empty() {
        return None;
    }
    Some(NodeView {
        node,
        inputs: dims(&node.input_names)?,
        outputs: dims(&node.output_names)?,
    })
}
