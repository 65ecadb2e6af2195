//! The static-data rules: `model.bin`'s entries, the weights the prefill and decode
//! graphs share, and the context's byte budget.

use super::context::{Ctx, Findings};
use std::collections::BTreeSet;

/// Rule `bin-sizes`: every static tensor has a `<name>.raw` entry of numel x stored bytes,
/// and no other tensor has one.
pub(crate) fn bin_sizes(ctx: &Ctx, f: &mut Findings) {
    for (name, tensor, bytes) in ctx.static_tensors() {
        let at = format!("tensor {name}");
        match ctx.bin.get(name) {
            None => f.push(&at, format!("no `{name}.raw` in model.bin")),
            Some(raw) if tensor.dtype().is_some() && raw.len() as u64 != bytes => f.push(
                &at,
                format!(
                    "`{name}.raw` holds {} bytes, dims {:?} need {bytes}",
                    raw.len(),
                    tensor.dims
                ),
            ),
            Some(_) => {}
        }
    }
    for name in ctx.bin.keys() {
        if !ctx.is_static(name) {
            f.push(
                "model.bin",
                format!("entry `{name}.raw` is not a static tensor"),
            );
        }
    }
}

/// The projection weights (`Conv2d` filters) the nodes of graphs named `prefix*` read, if
/// there are such graphs.
fn weights_read<'a>(ctx: &Ctx<'a>, prefix: &str) -> Option<BTreeSet<&'a str>> {
    let graphs: Vec<_> = ctx
        .net
        .graphs
        .iter()
        .filter(|g| g.name.starts_with(prefix))
        .collect();
    let nodes = graphs.iter().flat_map(|g| &g.nodes);
    let inputs = nodes
        .filter_map(|n| ctx.net.graph.nodes.get(n))
        .filter(|n| n.op_type == "Conv2d")
        .filter_map(|n| n.input_names.get(1))
        .filter(|n| ctx.is_static(n));
    (!graphs.is_empty()).then(|| inputs.map(String::as_str).collect())
}

/// Rule `weights-shared`: the `prefill*` graphs read the same projection weights as the
/// `decode*` graphs (when there are both): the context holds one copy of them. (A norm's
/// weight may stay with the CPU in one of them: the partition groups each function's
/// bindings on its own.)
pub(crate) fn weights_shared(ctx: &Ctx, f: &mut Findings) {
    let (Some(prefill), Some(decode)) = (weights_read(ctx, "prefill"), weights_read(ctx, "decode"))
    else {
        return;
    };
    for name in prefill.difference(&decode) {
        f.push(
            format!("tensor {name}"),
            "read by the prefill graphs, not the decode graphs",
        );
    }
    for name in decode.difference(&prefill) {
        f.push(
            format!("tensor {name}"),
            "read by the decode graphs, not the prefill graphs",
        );
    }
}

/// Rule `context-budget`: the static tensors fit the budget.
pub(crate) fn context_budget(ctx: &Ctx, f: &mut Findings) {
    let total = static_bytes(ctx);
    let budget = ctx.options.context_budget;
    if total > budget {
        f.push(
            "model.bin",
            format!("{total} static bytes exceed the budget of {budget}"),
        );
    }
}

/// The bytes of all static tensors.
pub(crate) fn static_bytes(ctx: &Ctx) -> u64 {
    ctx.static_tensors()
        .fold(0, |sum, (_, _, bytes)| sum.saturating_add(bytes))
}
