//! Extraction: one e-node per e-class, chosen to minimize the cost of the whole DAG that
//! the roots need (a subterm shared by several consumers counts once, as it is computed
//! once): greedily per e-class, then refined over the roots' DAG; with a cost model of
//! bytes moved per token that prefers fused kernels.

use super::lang::{Facts, Node, SegmentGraph};
use egg::{Id, Language};
use oxrelax_dsl::{StructInfo, SymExpr};
use std::collections::{BTreeMap, HashMap};

/// The fixed cost of one kernel call, in bytes moved (a call costs about as much as
/// streaming this many bytes: argument checks, a dispatch, a pass over the threads).
const CALL_COST: f64 = 4096.0;

/// How much a byte an op moves costs, relative to one of a kernel that a schedule rule
/// tensorizes onto a microkernel of the target's table (1, the default for ops not
/// listed): ops whose loops the schedules only tile and vectorize read their operands at
/// a fraction of the microkernels' rate.
const BYTE_COST: &[(&str, f64)] = &[
    ("matmul", 2.0),
    ("take", 2.0),
    ("permute_dims", 2.0),
    ("dequantize_weight", 2.0),
];

/// What a weight-only computation's cost counts for: it runs once, at compile time, so
/// it weighs next to nothing against any per-token cost, but of two weight-only
/// alternatives the fused one (fewer calls and bytes) is still the cheaper.
const COMPILE_TIME_WEIGHT: f64 = 1e-9;

/// The cost of one e-node: nothing for a leaf, else a call plus the bytes it reads and
/// writes, weighted by [`BYTE_COST`], and by [`COMPILE_TIME_WEIGHT`] for a weight-only
/// computation. Sizes count symbolic dims as 1: per token.
fn node_cost(egraph: &SegmentGraph, id: Id, node: &Node) -> f64 {
    let Node::Op(op, children) = node else {
        return 0.0;
    };
    let factor = BYTE_COST
        .iter()
        .find(|(name, _)| *name == op.as_str())
        .map_or(1.0, |(_, f)| *f);
    let read: f64 = children.iter().map(|c| bytes(&egraph[*c].data)).sum();
    let cost = CALL_COST + factor * (read + bytes(&egraph[id].data));
    if egraph[id].data.constant() {
        cost * COMPILE_TIME_WEIGHT
    } else {
        cost
    }
}

/// The bytes of a tensor value per token (symbolic dims count as 1).
fn bytes(facts: &Facts) -> f64 {
    let Some(StructInfo::Tensor(tensor)) = facts.sinfo() else {
        return 0.0;
    };
    let Some(dims) = tensor.dims() else {
        return 0.0;
    };
    let per_token = |d: &SymExpr| d.subst(&|_| Some(SymExpr::int(1))).as_const();
    let elements: f64 = dims
        .iter()
        .map(|d| per_token(d).unwrap_or(1) as f64)
        .product();
    elements * f64::from(tensor.dtype.bits()) / 8.0
}

/// A chosen e-node per e-class, and the cost of the DAG below it (each e-class once).
struct Choice {
    node: Node,
    dag: BTreeMap<Id, f64>,
    total: f64,
}

/// The e-node chosen for every e-class that has an acyclic choice: a greedy DAG
/// extraction run to a fixpoint ([`greedy`]), then refined for the DAG that `roots`
/// need together ([`refine`]).
pub fn extract(egraph: &SegmentGraph, roots: &[Id]) -> HashMap<Id, Node> {
    let mut chosen = greedy(egraph);
    refine(egraph, roots, &mut chosen);
    chosen
}

/// A greedy DAG extraction run to a fixpoint: per e-class, the e-node whose own DAG
/// costs least, an e-node's cost being the sum, over the set of e-classes its choice
/// needs (itself included), of their own nodes' costs.
fn greedy(egraph: &SegmentGraph) -> HashMap<Id, Node> {
    let mut chosen: HashMap<Id, Choice> = HashMap::new();
    let mut changed = true;
    while changed {
        changed = false;
        for class in egraph.classes() {
            for node in &class.nodes {
                let Some(candidate) = dag_of(egraph, class.id, node, &chosen) else {
                    continue;
                };
                let better = chosen
                    .get(&class.id)
                    .is_none_or(|c| candidate.total < c.total);
                if better {
                    chosen.insert(class.id, candidate);
                    changed = true;
                }
            }
        }
    }
    chosen.into_iter().map(|(id, c)| (id, c.node)).collect()
}

/// Improves `chosen` for the roots' DAG as a whole, one e-class's e-node at a time,
/// until no single change lowers its cost. Greedy extraction prices each e-class alone,
/// so it takes a fused node that recomputes a value another root needs anyway (a
/// residual sum both normed and passed on): here that value is counted once.
fn refine(egraph: &SegmentGraph, roots: &[Id], chosen: &mut HashMap<Id, Node>) {
    let Some(mut best) = dag_cost(egraph, roots, chosen) else {
        return;
    };
    let mut improved = true;
    while improved {
        improved = false;
        for class in egraph.classes().filter(|c| c.nodes.len() > 1) {
            for node in &class.nodes {
                if chosen.get(&class.id) == Some(node) {
                    continue;
                }
                let Some(previous) = chosen.insert(class.id, node.clone()) else {
                    chosen.remove(&class.id);
                    continue;
                };
                match dag_cost(egraph, roots, chosen) {
                    Some(cost) if cost < best => {
                        best = cost;
                        improved = true;
                    }
                    _ => {
                        chosen.insert(class.id, previous);
                    }
                }
            }
        }
    }
}

/// The cost of the DAG that `roots` need under `chosen` (each e-class once); `None` when
/// a needed e-class has no choice or the choices form a cycle.
fn dag_cost(egraph: &SegmentGraph, roots: &[Id], chosen: &HashMap<Id, Node>) -> Option<f64> {
    // Per e-class: `false` while its children are being visited, `true` once done.
    let mut state: HashMap<Id, bool> = HashMap::new();
    let mut total = 0.0;
    let mut stack: Vec<(Id, bool)> = roots.iter().map(|&r| (egraph.find(r), false)).collect();
    while let Some((id, children_done)) = stack.pop() {
        if children_done {
            state.insert(id, true);
            total += node_cost(egraph, id, &chosen[&id]);
            continue;
        }
        match state.get(&id) {
            Some(true) => continue,
            Some(false) => return None,
            None => {}
        }
        state.insert(id, false);
        stack.push((id, true));
        for child in chosen.get(&id)?.children() {
            let child = egraph.find(*child);
            match state.get(&child) {
                Some(true) => {}
                Some(false) => return None,
                None => stack.push((child, false)),
            }
        }
    }
    Some(total)
}

/// The DAG of `node` in e-class `id` with its children's current choices; `None` while a
/// child has none or when the choice would need `id` itself (a cycle).
fn dag_of(
    egraph: &SegmentGraph,
    id: Id,
    node: &Node,
    chosen: &HashMap<Id, Choice>,
) -> Option<Choice> {
    let mut dag = BTreeMap::new();
    for child in node.children() {
        let child = egraph.find(*child);
        let choice = chosen.get(&child)?;
        if choice.dag.contains_key(&id) {
            return None;
        }
        dag.extend(choice.dag.iter().map(|(k, v)| (*k, *v)));
    }
    dag.insert(id, node_cost(egraph, id, node));
    let total = dag.values().sum();
    Some(Choice {
        node: node.clone(),
        dag,
        total,
    })
}
