//! Graph selection (mllm's "multiple graph selection"): the prefill graphs lowered again
//! for fewer tokens per call, added to the net as variants of the graphs they repeat
//! (`prefill_npu0_t8` of `prefill_npu0`). A call then runs the variant with the least
//! padding; the variants share every static tensor with their graph, and its activation
//! encodings ([`encoded_like`]).

use super::lower::FloatNet;
use oxrelax_runtime::qnn::net::GraphSpec;

/// The name of `graph`'s variant for `tokens` tokens per call.
fn variant_name(graph: &str, tokens: u32) -> String {
    format!("{graph}_t{tokens}")
}

/// `name` with the prefix of graph `from` (`from__`) replaced by `to`'s, or unchanged.
fn renamed(name: &str, from: &str, to: &str) -> String {
    match name.strip_prefix(from).and_then(|r| r.strip_prefix("__")) {
        Some(rest) => format!("{to}__{rest}"),
        None => name.to_string(),
    }
}

/// Adds the graphs of `variant` (the same model lowered with `tokens` tokens per prefill
/// call) that repeat a graph of `net` over another number of tokens, as its variants.
/// Tensors `net` has already (the shared statics) are not added again.
pub fn add_chunk_variant(net: &mut FloatNet, variant: FloatNet, tokens: u32) {
    let repeated: Vec<&GraphSpec> = (variant.graphs.iter())
        .filter(|g| g.tokens == tokens)
        .filter(|g| {
            net.graphs
                .iter()
                .any(|b| b.name == g.name && b.tokens != tokens)
        })
        .collect();
    for graph in repeated {
        let name = variant_name(&graph.name, tokens);
        let rename = |n: &String| renamed(n, &graph.name, &name);
        let own = |tensor: &str| tensor.starts_with(&format!("{}__", graph.name));
        for (tensor, info) in variant.graph.tensors.iter().filter(|(t, _)| own(t)) {
            let new = rename(tensor);
            if !net.graph.tensors.contains_key(&new) {
                if let Some(values) = variant.statics.get(tensor) {
                    net.statics.insert(new.clone(), values.clone());
                }
                net.graph.tensors.insert(new, info.clone());
            }
        }
        for node_name in &graph.nodes {
            let mut node = variant.graph.nodes[node_name].clone();
            node.input_names = node.input_names.iter().map(rename).collect();
            node.output_names = node.output_names.iter().map(rename).collect();
            net.graph.nodes.insert(rename(node_name), node);
        }
        for (tensor, axis) in &variant.token_axes {
            if own(tensor) {
                net.token_axes.insert(rename(tensor), *axis);
            }
        }
        net.graphs.push(GraphSpec {
            name: name.clone(),
            tokens,
            inputs: graph.inputs.iter().map(rename).collect(),
            outputs: graph.outputs.iter().map(rename).collect(),
            nodes: graph.nodes.iter().map(rename).collect(),
            variant_of: Some(graph.name.clone()),
        });
    }
}

/// The tensor whose encoding `name` takes: for a variant's tensor, the same tensor of
/// the graph it repeats (so every variant computes what that graph would); else itself.
pub fn encoded_like(graphs: &[GraphSpec], name: &str) -> String {
    let variant = graphs.iter().find_map(|g| {
        let base = g.variant_of.as_deref()?;
        name.strip_prefix(g.name.as_str())?.strip_prefix("__")?;
        Some(renamed(name, &g.name, base))
    });
    variant.unwrap_or_else(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_graph_prefix_is_renamed() {
        assert_eq!(
            renamed("prefill_npu0__x", "prefill_npu0", "prefill_npu0_t8"),
            "prefill_npu0_t8__x"
        );
        assert_eq!(
            renamed("prefill_npu01__x", "prefill_npu0", "p"),
            "prefill_npu01__x"
        );
        assert_eq!(renamed("model_w", "prefill_npu0", "p"), "model_w");
        let graphs = [GraphSpec {
            name: "prefill_npu0_t8".into(),
            tokens: 8,
            inputs: Vec::new(),
            outputs: Vec::new(),
            nodes: Vec::new(),
            variant_of: Some("prefill_npu0".into()),
        }];
        assert_eq!(
            encoded_like(&graphs, "prefill_npu0_t8__x"),
            "prefill_npu0__x"
        );
        assert_eq!(encoded_like(&graphs, "decode_npu0__x"), "decode_npu0__x");
    }
}
