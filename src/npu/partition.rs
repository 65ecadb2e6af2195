//! `PartitionNpu`: moves the static subgraphs of a model's prefill and decode functions
//! onto the NPU, as Relax's `FuseOpsByPattern` + `MergeCompositeFunctions` do for an
//! external codegen, from the capability table alone (no per-model code).
//!
//! In each dataflow block, a binding is NPU-capable when the capability table takes its
//! op, its tensors have element types the NPU takes, and every shape is static once the
//! function's input dims are fixed to the chunk (`n := 32` for prefill: the NPU runs
//! chunks of a fixed size, the last one padded; decode's one token is static already).
//! Capable bindings are grouped in program order: a binding joins the group of one of its
//! capable producers unless a producer outside that group is reachable from the group,
//! counting paths through other groups, so every group is convex and the graph of groups
//! stays acyclic. Groups without an anchor op (a weight-stationary projection) return to
//! the CPU. Each remaining group becomes a graph function `<function>_npu<k>` with static
//! shapes (`codegen="qnn"`, the SoC and the chunk as attributes; activations first, then
//! the weights it reads, `num_input` counting the activations; weight-only bindings such
//! as a weight's transpose are copied in), and the caller calls it as the runtime builtin
//! `npu.<function>_npu<k>` on its activations alone (the weights are the NPU graph's
//! static tensors), whose tuple of outputs the following bindings take apart.
//! Attention, the rotary embedding, the embedding gather, the KV cache and the sampling
//! head's selections stay on the CPU.

use super::{Capability, Soc};
use crate::passes::{Pass, PassError};
use oxrelax_dsl::ir::{
    Binding, BindingBlock, BindingValue, Call, Callee, Function, NUM_INPUT_ATTR,
};
use oxrelax_dsl::{AttrValue, Attrs, Expr, IRModule, StructInfo, SymExpr, SymVar, Var};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};

/// The functions partitioned, and whether each runs over chunks of tokens (its input
/// dims fixed to the chunk) or one token, as mllm's QNN path builds them: a prefill graph
/// over a fixed chunk of tokens and a decode graph of one (and `prefill_all`, every
/// position's logits, for perplexity).
pub const NPU_FUNCTIONS: &[(&str, bool)] =
    &[("prefill", true), ("prefill_all", true), ("decode", false)];

/// The attribute naming the external codegen of an outlined function.
pub const CODEGEN_ATTR: &str = "codegen";

/// The partition pass for one SoC and chunk size.
#[derive(Debug, Clone)]
pub struct PartitionNpu {
    /// The SoC compiled for.
    pub soc: Soc,
    /// Tokens per prefill graph call.
    pub chunk: i64,
    /// What the NPU runs.
    pub capability: &'static Capability,
}

impl Pass for PartitionNpu {
    fn name(&self) -> &'static str {
        "partition-npu"
    }

    fn run(&self, mut module: IRModule) -> Result<IRModule, PassError> {
        for &(name, chunked) in NPU_FUNCTIONS {
            let Some(function) = module.functions.get(name) else {
                continue;
            };
            let tokens = if chunked { self.chunk } else { 1 };
            let (caller, graphs) = self.partition(name, function, tokens);
            module.functions.insert(name.to_string(), caller);
            module.functions.extend(graphs);
        }
        Ok(module)
    }
}

impl PartitionNpu {
    /// `function` with its NPU groups replaced by builtin calls, and the outlined graph
    /// functions by name.
    fn partition(
        &self,
        name: &str,
        function: &Function,
        tokens: i64,
    ) -> (Function, Vec<(String, Function)>) {
        let scope = Scope::of(function, tokens);
        let mut caller = function.clone();
        let mut graphs = Vec::new();
        let later_uses = uses_after_blocks(function);
        for (b, block) in function.blocks.iter().enumerate() {
            if !block.dataflow {
                continue;
            }
            let dag = Dag::of(&block.bindings, &scope);
            let capable: Vec<bool> = (0..dag.len())
                .map(|i| !dag.weight_only[i] && self.capable(&block.bindings[i], &scope, &dag))
                .collect();
            let groups: Vec<Vec<usize>> = group(&dag, &capable)
                .into_iter()
                .filter(|g| g.iter().any(|&i| self.anchors(&block.bindings[i])))
                .collect();
            if groups.is_empty() {
                continue;
            }
            let used_later = |var: &str| later_uses[b].contains(var);
            let outlined: Vec<Outlined> = groups
                .iter()
                .enumerate()
                .map(|(k, members)| {
                    let graph_name = format!("{name}_npu{}", graphs.len() + k);
                    self.outline(
                        graph_name,
                        &block.bindings,
                        members,
                        (&dag, &scope),
                        used_later,
                    )
                })
                .collect();
            let scheduled = schedule(&block.bindings, &dag, &groups, &outlined);
            caller.blocks[b].bindings = drop_unread_weight_only(scheduled, &dag, &later_uses[b]);
            graphs.extend(outlined.into_iter().map(|o| (o.name, o.function)));
        }
        (caller, graphs)
    }

    /// Whether the NPU takes `binding`: an op of the capability table, its weight operand
    /// a weight, every tensor of an allowed type and static (once specialized), none too
    /// large.
    fn capable(&self, binding: &Binding, scope: &Scope, dag: &Dag) -> bool {
        let BindingValue::Expr(Expr::Call(call)) = &binding.value else {
            return false;
        };
        let Callee::Op(op) = &call.callee else {
            return false;
        };
        let Some(rule) = self.capability.rule(op) else {
            return false;
        };
        let weight_ok = rule.weight_arg.is_none_or(|k| match call.args.get(k) {
            Some(Expr::Var(v)) => scope.weights.contains(&v.name) || dag.is_weight_only(&v.name),
            _ => false,
        });
        let sinfos = call
            .args
            .iter()
            .map(Expr::sinfo)
            .chain([binding.var.sinfo.clone()]);
        weight_ok
            && sinfos
                .into_iter()
                .all(|s| self.fits(&s.subst_dims(&scope.map())))
    }

    /// Whether a (specialized) value is one the NPU holds: a static tensor of an allowed
    /// type within the size bound, or a static shape.
    fn fits(&self, sinfo: &StructInfo) -> bool {
        let consts = |dims: &[SymExpr]| {
            dims.iter()
                .map(SymExpr::as_const)
                .collect::<Option<Vec<i64>>>()
        };
        match sinfo {
            StructInfo::Tensor(tensor) => {
                let Some(dims) = tensor.dims().and_then(consts) else {
                    return false;
                };
                let elements: i64 = dims.iter().product();
                let bytes = u64::try_from(elements).unwrap_or(u64::MAX)
                    * u64::from(tensor.dtype.bits().div_ceil(8));
                self.capability.dtypes.contains(&tensor.dtype)
                    && bytes <= self.capability.max_tensor_bytes
            }
            StructInfo::Shape(Some(dims)) => consts(dims).is_some(),
            _ => false,
        }
    }

    /// Whether `binding` calls an anchor op (a group holding one is worth offloading).
    fn anchors(&self, binding: &Binding) -> bool {
        match &binding.value {
            BindingValue::Expr(Expr::Call(call)) => match &call.callee {
                Callee::Op(op) => self.capability.rule(op).is_some_and(|r| r.anchor),
                _ => false,
            },
            _ => false,
        }
    }

    /// The graph function of group `members` (indices of `bindings`, in order), with
    /// the weight-only bindings they read copied in, shapes specialized.
    fn outline(
        &self,
        name: String,
        bindings: &[Binding],
        members: &[usize],
        (dag, scope): (&Dag, &Scope),
        used_later: impl Fn(&str) -> bool,
    ) -> Outlined {
        let inside: BTreeSet<usize> = members.iter().copied().collect();
        let copied = dag.weight_only_deps(members);
        let body: Vec<usize> = copied.iter().chain(members).copied().collect();
        let defined: BTreeSet<&str> = body
            .iter()
            .map(|&i| bindings[i].var.name.as_str())
            .collect();
        let mut inputs: Vec<Var> = Vec::new();
        for &i in &body {
            bindings[i].value.expr().for_each_var(&mut |v| {
                if !defined.contains(v.name.as_str()) && !inputs.iter().any(|x| x.name == v.name) {
                    inputs.push(v.clone());
                }
            });
        }
        inputs.sort_by_key(|v| scope.weights.contains(&v.name));
        let activations = inputs
            .iter()
            .filter(|v| !scope.weights.contains(&v.name))
            .count();
        let outputs: Vec<Var> = members
            .iter()
            .map(|&i| &bindings[i].var)
            .filter(|v| {
                used_later(&v.name) || dag.users_of(&v.name).any(|user| !inside.contains(&user))
            })
            .cloned()
            .collect();
        let mut graph_bindings: Vec<Binding> = body.iter().map(|&i| bindings[i].clone()).collect();
        for binding in &mut graph_bindings {
            if outputs.iter().any(|o| o.name == binding.var.name) {
                binding.var.dataflow = false;
            }
        }
        // Every use refers to its definition here: a parameter, or a binding (outputs are
        // not dataflow variables: they leave the function).
        let dataflow: HashMap<String, bool> = graph_bindings
            .iter()
            .map(|b| (b.var.name.clone(), b.var.dataflow))
            .collect();
        for binding in &mut graph_bindings {
            let expr = match &mut binding.value {
                BindingValue::Expr(e) | BindingValue::MatchCast(e, _) => e,
            };
            expr.for_each_var_mut(&mut |v| {
                v.dataflow = dataflow.get(&v.name).copied().unwrap_or(false)
            });
        }
        let returned: Vec<Expr> = outputs
            .iter()
            .map(|v| {
                Expr::Var(Var {
                    dataflow: false,
                    ..v.clone()
                })
            })
            .collect();
        let mut attrs = Attrs::new();
        attrs.insert(CODEGEN_ATTR.into(), AttrValue::Str("qnn".into()));
        attrs.insert("soc".into(), AttrValue::Str(self.soc.name.into()));
        attrs.insert("chunk".into(), AttrValue::Int(scope.chunk));
        attrs.insert(NUM_INPUT_ATTR.into(), AttrValue::Int(activations as i64));
        let function = Function {
            params: inputs
                .iter()
                .map(|v| Var {
                    dataflow: false,
                    ..v.clone()
                })
                .collect(),
            blocks: vec![BindingBlock {
                dataflow: true,
                bindings: graph_bindings,
            }],
            ret: Expr::Tuple(returned),
            exported: false,
            attrs,
        };
        inputs.truncate(activations);
        Outlined {
            name,
            function: function.subst_dims(&scope.map()),
            inputs,
            outputs,
        }
    }
}

/// An outlined group: its name, its graph function (specialized), and the caller's values
/// it takes and gives back.
struct Outlined {
    name: String,
    function: Function,
    /// The caller's values it reads: its activations (its weights are the graph's own,
    /// static on the NPU, so the call does not pass them).
    inputs: Vec<Var>,
    outputs: Vec<Var>,
}

/// What a function's partition needs to know of it: its weight parameters and the dims
/// fixed for the NPU.
struct Scope {
    /// Names of the weight parameters.
    weights: BTreeSet<String>,
    /// The symbolic dims of the input parameters, fixed to the chunk.
    fixed: BTreeMap<String, i64>,
    /// The chunk size.
    chunk: i64,
}

impl Scope {
    fn of(function: &Function, chunk: i64) -> Scope {
        let inputs = function.num_inputs().unwrap_or(function.params.len());
        let (input_params, weight_params) =
            function.params.split_at(inputs.min(function.params.len()));
        let fixed = input_params
            .iter()
            .flat_map(|p| p.sinfo.sym_vars())
            .map(|v| (v.name().to_string(), chunk))
            .collect();
        Scope {
            weights: weight_params.iter().map(|p| p.name.clone()).collect(),
            fixed,
            chunk,
        }
    }

    /// The substitution fixing the input dims.
    fn map(&self) -> impl Fn(&SymVar) -> Option<SymExpr> + '_ {
        |v| self.fixed.get(v.name()).map(|&c| SymExpr::int(c))
    }
}

/// The dependences of a dataflow block's bindings.
struct Dag {
    /// Per binding, the bindings of the block it reads.
    deps: Vec<Vec<usize>>,
    /// Per binding, the bindings of the block that read it.
    users: Vec<Vec<usize>>,
    /// Per binding, whether it is computed from weights only.
    weight_only: Vec<bool>,
    /// Binding index by variable name.
    index: HashMap<String, usize>,
}

impl Dag {
    fn of(bindings: &[Binding], scope: &Scope) -> Dag {
        let index: HashMap<String, usize> = bindings
            .iter()
            .enumerate()
            .map(|(i, b)| (b.var.name.clone(), i))
            .collect();
        let mut deps = vec![Vec::new(); bindings.len()];
        let mut users = vec![Vec::new(); bindings.len()];
        let mut weight_only = vec![false; bindings.len()];
        for (i, binding) in bindings.iter().enumerate() {
            let (mut reads, mut only_weights) = (0, true);
            binding.value.expr().for_each_var(&mut |v| {
                reads += 1;
                match index.get(&v.name) {
                    Some(&p) if p < i => {
                        only_weights &= weight_only[p];
                        if !deps[i].contains(&p) {
                            deps[i].push(p);
                            users[p].push(i);
                        }
                    }
                    _ => only_weights &= scope.weights.contains(&v.name),
                }
            });
            weight_only[i] = reads > 0 && only_weights;
        }
        Dag {
            deps,
            users,
            weight_only,
            index,
        }
    }

    fn len(&self) -> usize {
        self.deps.len()
    }

    fn is_weight_only(&self, name: &str) -> bool {
        self.index.get(name).is_some_and(|&i| self.weight_only[i])
    }

    /// The bindings reading the binding of variable `name`.
    fn users_of(&self, name: &str) -> impl Iterator<Item = usize> + '_ {
        self.index
            .get(name)
            .into_iter()
            .flat_map(|&i| self.users[i].iter().copied())
    }

    /// The weight-only bindings `members` read, directly or through each other, in order.
    fn weight_only_deps(&self, members: &[usize]) -> Vec<usize> {
        let mut found = BTreeSet::new();
        let mut stack: Vec<usize> = members.iter().flat_map(|&i| self.deps[i].clone()).collect();
        while let Some(p) = stack.pop() {
            if self.weight_only[p] && found.insert(p) {
                stack.extend(self.deps[p].iter().copied());
            }
        }
        found.into_iter().collect()
    }
}

/// Groups the capable bindings (see the module documentation); each group's members in
/// order.
fn group(dag: &Dag, capable: &[bool]) -> Vec<Vec<usize>> {
    let mut group_of: Vec<Option<usize>> = vec![None; dag.len()];
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for i in (0..dag.len()).filter(|&i| capable[i]) {
        let mut candidates: Vec<usize> = dag.deps[i].iter().filter_map(|&p| group_of[p]).collect();
        candidates.dedup();
        let joinable = candidates.into_iter().find(|&g| {
            let after = reachable_from(dag, &group_of, &groups, g);
            dag.deps[i]
                .iter()
                .all(|&p| group_of[p] == Some(g) || !after[p])
        });
        let g = joinable.unwrap_or_else(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[g].push(i);
        group_of[i] = Some(g);
    }
    groups
}

/// Which bindings must run after group `g`: those reachable from its members, where
/// reaching a member of another group reaches that whole group (it runs as one call)
/// and everything its members reach.
fn reachable_from(
    dag: &Dag,
    group_of: &[Option<usize>],
    groups: &[Vec<usize>],
    g: usize,
) -> Vec<bool> {
    let mut seen = vec![false; dag.len()];
    let mut expanded = vec![false; groups.len()];
    expanded[g] = true;
    let mut stack: Vec<usize> = groups[g]
        .iter()
        .flat_map(|&m| dag.users[m].clone())
        .collect();
    while let Some(x) = stack.pop() {
        if std::mem::replace(&mut seen[x], true) {
            continue;
        }
        stack.extend(dag.users[x].iter().copied());
        if let Some(h) = group_of[x].filter(|&h| !std::mem::replace(&mut expanded[h], true)) {
            stack.extend(groups[h].iter().copied());
        }
    }
    seen
}

/// The caller's bindings: every binding outside a group as it was, each group as the
/// call of its graph and one binding per output, in a topological order of the graph of
/// groups that keeps the original order where it can.
fn schedule(
    bindings: &[Binding],
    dag: &Dag,
    groups: &[Vec<usize>],
    outlined: &[Outlined],
) -> Vec<Binding> {
    // Units: one per group, then one per binding outside every group.
    let mut unit_of: Vec<usize> = vec![usize::MAX; dag.len()];
    for (g, members) in groups.iter().enumerate() {
        members.iter().for_each(|&m| unit_of[m] = g);
    }
    let mut units: Vec<Vec<usize>> = groups.to_vec();
    for (i, unit) in unit_of.iter_mut().enumerate() {
        if *unit == usize::MAX {
            *unit = units.len();
            units.push(vec![i]);
        }
    }
    let mut waiting: Vec<BTreeSet<usize>> = units
        .iter()
        .enumerate()
        .map(|(u, members)| {
            let deps = members
                .iter()
                .flat_map(|&m| dag.deps[m].iter().map(|&p| unit_of[p]));
            deps.filter(|&d| d != u).collect()
        })
        .collect();
    let mut ready: BinaryHeap<Reverse<(usize, usize)>> = BinaryHeap::new();
    for (u, deps) in waiting.iter().enumerate() {
        if deps.is_empty() {
            ready.push(Reverse((units[u][0], u)));
        }
    }
    let mut out = Vec::with_capacity(bindings.len());
    while let Some(Reverse((_, u))) = ready.pop() {
        match outlined.get(u) {
            Some(graph) => out.extend(call_graph(graph)),
            None => out.push(bindings[units[u][0]].clone()),
        }
        for v in 0..units.len() {
            if waiting[v].remove(&u) && waiting[v].is_empty() {
                ready.push(Reverse((units[v][0], v)));
            }
        }
    }
    out
}

/// The call of `graph` on its inputs (the `npu.<name>` builtin), and the bindings of its
/// outputs to the call's fields.
fn call_graph(graph: &Outlined) -> Vec<Binding> {
    let (name, inputs, outputs) = (&graph.name, &graph.inputs, &graph.outputs);
    let sinfo = StructInfo::Tuple(outputs.iter().map(|v| v.sinfo.clone()).collect());
    let result = Var {
        name: name.to_string(),
        sinfo: sinfo.clone(),
        dataflow: true,
    };
    let call = Call {
        callee: Callee::Packed(format!("npu.{name}")),
        args: inputs.iter().cloned().map(Expr::Var).collect(),
        attrs: Attrs::new(),
        sinfo,
    };
    let fields = outputs.iter().enumerate().map(|(k, v)| Binding {
        var: v.clone(),
        value: BindingValue::Expr(Expr::TupleGetItem(Box::new(Expr::Var(result.clone())), k)),
    });
    std::iter::once(Binding {
        var: result.clone(),
        value: BindingValue::Expr(Expr::Call(Box::new(call))),
    })
    .chain(fields)
    .collect()
}

/// `scheduled` without the weight-only bindings nothing reads any more (those only the
/// outlined graphs read, which copied them); `read_later` holds what later blocks read.
fn drop_unread_weight_only(
    scheduled: Vec<Binding>,
    dag: &Dag,
    read_later: &BTreeSet<String>,
) -> Vec<Binding> {
    let mut read: BTreeSet<String> = read_later.clone();
    for binding in &scheduled {
        binding.value.expr().for_each_var(&mut |v| {
            read.insert(v.name.clone());
        });
    }
    scheduled
        .into_iter()
        .filter(|b| !dag.is_weight_only(&b.var.name) || read.contains(&b.var.name))
        .collect()
}

/// Per block, the variables read by later blocks or the result.
fn uses_after_blocks(function: &Function) -> Vec<BTreeSet<String>> {
    let mut after = vec![BTreeSet::new(); function.blocks.len()];
    let mut seen: BTreeSet<String> = BTreeSet::new();
    function.ret.for_each_var(&mut |v| {
        seen.insert(v.name.clone());
    });
    for (b, block) in function.blocks.iter().enumerate().rev() {
        after[b] = seen.clone();
        for binding in &block.bindings {
            binding.value.expr().for_each_var(&mut |v| {
                seen.insert(v.name.clone());
            });
        }
    }
    after
}
