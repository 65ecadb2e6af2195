//! Segments: the op calls of a dataflow block split where the weights they read change
//! from one decoder layer to the next (`model.layers.3.*`), each in a canonical form that
//! names its inputs by position, so identical layers have identical forms and are
//! rewritten once. A segment becomes an e-graph; what extraction chooses becomes a
//! [`Plan`], instantiated once per segment with that segment's variables.

use super::lang::{input_leaf, Input, Node, SegmentAnalysis, SegmentGraph};
use egg::{Id, Symbol};
use oxrelax_dsl::ir::{Binding, BindingBlock, BindingValue, Call, Callee};
use oxrelax_dsl::{Attrs, Expr, StructInfo, Var};
use std::collections::{BTreeSet, HashMap, HashSet};

/// An argument of a canonical op call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ref {
    /// The segment's input `j`.
    Input(usize),
    /// The result of the segment's op call `i`.
    Local(usize),
}

/// An op call of a segment with its arguments by reference.
#[derive(Debug, Clone, PartialEq)]
struct Term {
    op: String,
    attrs: Attrs,
    args: Vec<Ref>,
}

/// A run of a block's op calls reading the weights of one layer (or of none).
#[derive(Debug)]
pub struct Segment {
    /// The positions of its op calls in the block.
    pub positions: Vec<usize>,
    /// The op calls, canonical.
    terms: Vec<Term>,
    /// Its inputs: variables bound outside it and literal arguments, by first use.
    pub inputs: Vec<Input>,
    /// The op calls whose results are used outside the segment, in order.
    pub roots: Vec<usize>,
}

/// The op call bound by `binding`, when it calls a registered op on variables and
/// literals only (what a segment holds; every other binding stays where it is).
pub fn op_call(binding: &Binding) -> Option<&Call> {
    let BindingValue::Expr(Expr::Call(call)) = &binding.value else {
        return None;
    };
    let Callee::Op(op) = &call.callee else {
        return None;
    };
    let simple = call.args.iter().all(|a| {
        matches!(
            a,
            Expr::Var(_) | Expr::Shape(_) | Expr::Prim(_) | Expr::Constant(_)
        )
    });
    (simple && oxrelax_dsl::op::lookup(op).is_some()).then_some(call.as_ref())
}

/// The layer a weight belongs to: its name up to its first numeric component
/// (`model.layers.3`), or `None` for a weight of no layer.
fn layer_of(weight: &str) -> Option<&str> {
    let mut end = 0;
    for part in weight.split('.') {
        end += part.len();
        if !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) {
            return Some(&weight[..end]);
        }
        end += 1;
    }
    None
}

/// The block's op calls split into segments: a segment ends where a call reads a weight
/// of another layer than the segment's (calls reading no weight stay in the current one).
/// `outside` names the variables used outside the block.
pub fn segments(
    block: &BindingBlock,
    weights: &BTreeSet<String>,
    outside: &HashSet<String>,
) -> Vec<Segment> {
    let mut runs: Vec<Vec<usize>> = Vec::new();
    let mut current: Option<Option<String>> = None;
    for (position, binding) in block.bindings.iter().enumerate() {
        let Some(call) = op_call(binding) else {
            continue;
        };
        let layer = call.args.iter().find_map(|a| match a {
            Expr::Var(v) if weights.contains(&v.name) => Some(layer_of(&v.name).map(String::from)),
            _ => None,
        });
        let starts = match (&layer, &current) {
            (_, None) => true,
            (Some(layer), Some(now)) => layer != now,
            (None, Some(_)) => false,
        };
        if starts {
            runs.push(Vec::new());
            current = Some(layer.unwrap_or(None));
        }
        runs.last_mut().expect("a run was started").push(position);
    }
    let used_outside = uses_outside_runs(block, &runs, outside);
    let constants = weight_only(block, weights);
    runs.into_iter()
        .map(|positions| canonical(block, positions, &constants, &used_outside))
        .collect()
}

/// The weights and the variables the block binds to op calls on weights only (weight
/// transforms, computed once at compile time).
fn weight_only(block: &BindingBlock, weights: &BTreeSet<String>) -> HashSet<String> {
    let mut constants: HashSet<String> = weights.iter().cloned().collect();
    for binding in &block.bindings {
        let Some(call) = op_call(binding) else {
            continue;
        };
        let only_weights = call.args.iter().all(|a| match a {
            Expr::Var(v) => constants.contains(&v.name),
            _ => true,
        });
        if only_weights {
            constants.insert(binding.var.name.clone());
        }
    }
    constants
}

/// The variables a run's results are used by from elsewhere: other bindings than the
/// run's own op calls, or `outside` the block.
fn uses_outside_runs(
    block: &BindingBlock,
    runs: &[Vec<usize>],
    outside: &HashSet<String>,
) -> HashSet<String> {
    let run_of: HashMap<usize, usize> = runs
        .iter()
        .enumerate()
        .flat_map(|(r, run)| run.iter().map(move |&p| (p, r)))
        .collect();
    let defined_in: HashMap<&str, usize> = block
        .bindings
        .iter()
        .enumerate()
        .filter_map(|(p, b)| Some((b.var.name.as_str(), *run_of.get(&p)?)))
        .collect();
    let mut used = outside.clone();
    for (position, binding) in block.bindings.iter().enumerate() {
        binding.value.expr().for_each_var(&mut |var| {
            let same_run = match (defined_in.get(var.name.as_str()), run_of.get(&position)) {
                (Some(a), Some(b)) => a == b,
                _ => false,
            };
            if !same_run {
                used.insert(var.name.clone());
            }
        });
    }
    used
}

/// The canonical form of the run of op calls at `positions`; `constants` are the
/// weight-only variables.
fn canonical(
    block: &BindingBlock,
    positions: Vec<usize>,
    constants: &HashSet<String>,
    used_outside: &HashSet<String>,
) -> Segment {
    let mut locals: HashMap<&str, usize> = HashMap::new();
    let mut input_of: HashMap<String, usize> = HashMap::new();
    let mut inputs = Vec::new();
    let mut terms = Vec::new();
    let mut roots = Vec::new();
    for (local, &position) in positions.iter().enumerate() {
        let binding = &block.bindings[position];
        let call = op_call(binding).expect("segments hold op calls");
        let mut args = Vec::with_capacity(call.args.len());
        for arg in &call.args {
            let found = match arg {
                Expr::Var(v) => locals.get(v.name.as_str()).map(|&i| Ref::Local(i)),
                _ => None,
            };
            args.push(found.unwrap_or_else(|| {
                let key = match arg {
                    Expr::Var(v) => v.name.clone(),
                    _ => format!("literal{}", inputs.len()),
                };
                let index = *input_of.entry(key).or_insert_with(|| {
                    let constant = !matches!(arg, Expr::Var(v) if !constants.contains(&v.name));
                    inputs.push(Input {
                        expr: arg.clone(),
                        constant,
                    });
                    inputs.len() - 1
                });
                Ref::Input(index)
            }));
        }
        let Callee::Op(op) = &call.callee else {
            unreachable!("op_call returns op calls")
        };
        terms.push(Term {
            op: op.clone(),
            attrs: call.attrs.clone(),
            args,
        });
        locals.insert(binding.var.name.as_str(), local);
        if used_outside.contains(&binding.var.name) {
            roots.push(local);
        }
    }
    Segment {
        positions,
        terms,
        inputs,
        roots,
    }
}

impl Segment {
    /// What identical segments share: the calls, the inputs' struct info, weight flags
    /// and literals, and the roots (not the variables' names).
    pub fn key(&self) -> String {
        let inputs: Vec<(StructInfo, bool, Option<&Expr>)> = self
            .inputs
            .iter()
            .map(|i| {
                let literal = (!matches!(i.expr, Expr::Var(_))).then_some(&i.expr);
                (i.expr.sinfo(), i.constant, literal)
            })
            .collect();
        format!("{:?}", (&self.terms, inputs, &self.roots))
    }

    /// The segment's e-graph, packing for panels `block` wide, and the e-class of each of
    /// its op calls.
    pub fn egraph(&self, block: i64) -> (SegmentGraph, Vec<Id>) {
        let mut egraph = SegmentGraph::new(SegmentAnalysis::new(self.inputs.clone(), block));
        let inputs: Vec<Id> = (0..self.inputs.len())
            .map(|j| egraph.add(input_leaf(j)))
            .collect();
        let mut classes = Vec::with_capacity(self.terms.len());
        for term in &self.terms {
            let mut children: Vec<Id> = term
                .args
                .iter()
                .map(|a| match a {
                    Ref::Input(j) => inputs[*j],
                    Ref::Local(i) => classes[*i],
                })
                .collect();
            let leaf = egraph.analysis.attrs_leaf(&term.attrs);
            children.push(egraph.add(leaf));
            classes.push(egraph.add(Node::Op(Symbol::from(term.op.as_str()), children)));
        }
        (egraph, classes)
    }
}

/// An op call of a plan.
#[derive(Debug, Clone)]
struct Step {
    op: String,
    attrs: Attrs,
    args: Vec<Ref>,
    sinfo: StructInfo,
    /// The segment's op call of the same e-class, whose variable it reuses.
    origin: Option<usize>,
}

/// What a segment becomes: op calls in dependency order (`Ref::Local` refers to a step)
/// and the step or input each root is.
#[derive(Debug, Clone)]
pub struct Plan {
    steps: Vec<Step>,
    roots: Vec<(usize, Ref)>,
}

impl Plan {
    /// The plan of the chosen e-nodes (`choice`, by e-class) that the segment's roots
    /// need; `classes` are the segment's op calls' e-classes.
    pub fn new(
        segment: &Segment,
        egraph: &SegmentGraph,
        classes: &[Id],
        choice: &HashMap<Id, Node>,
    ) -> Option<Plan> {
        let mut builder = PlanBuilder {
            egraph,
            choice,
            origin: HashMap::new(),
            done: HashMap::new(),
            steps: Vec::new(),
        };
        for (local, class) in classes.iter().enumerate().rev() {
            builder.origin.insert(egraph.find(*class), local);
        }
        let mut roots = Vec::with_capacity(segment.roots.len());
        for &root in &segment.roots {
            roots.push((root, builder.reference(egraph.find(classes[root]))?));
        }
        Some(Plan {
            steps: builder.steps,
            roots,
        })
    }

    /// The bindings replacing the segment's op calls, by the op call they go in place of:
    /// a step of the plan that keeps an op call's e-class goes where that call was (after
    /// the steps it needs that are not bound yet), so what the rewrite did not change stays
    /// in order; each root is bound where it was. `inputs` and `locals` are this
    /// segment's input expressions and op calls' variables; new variables get names not
    /// in `taken`.
    pub fn instantiate(
        &self,
        inputs: &[Expr],
        locals: &[Var],
        taken: &mut HashSet<String>,
    ) -> HashMap<usize, Vec<Binding>> {
        let mut vars: Vec<Option<Var>> = vec![None; self.steps.len()];
        let mut used_locals = HashSet::new();
        let mut names = Names {
            taken,
            used_locals: &mut used_locals,
        };
        let kept: HashMap<usize, usize> = self
            .steps
            .iter()
            .enumerate()
            .filter_map(|(index, step)| Some((step.origin?, index)))
            .collect();
        let roots: HashMap<usize, Ref> = self.roots.iter().copied().collect();
        let mut out = HashMap::new();
        for (local, var) in locals.iter().enumerate() {
            let mut bindings = Vec::new();
            if let Some(&step) = kept.get(&local) {
                let context = (inputs, locals);
                self.emit(step, var, context, &mut vars, &mut bindings, &mut names);
            }
            if let Some(&reference) = roots.get(&local) {
                if let Ref::Local(step) = reference {
                    let context = (inputs, locals);
                    self.emit(step, var, context, &mut vars, &mut bindings, &mut names);
                }
                let value = self.expr(reference, inputs, &vars);
                if !matches!(&value, Expr::Var(v) if v == var) {
                    bindings.push(Binding {
                        var: var.clone(),
                        value: BindingValue::Expr(value),
                    });
                }
            }
            out.insert(local, bindings);
        }
        out
    }

    /// Emits step `index` and the steps it needs that are not yet bound; a new variable
    /// is named after `anchor`, the nearest consumer with a variable of the segment.
    fn emit(
        &self,
        index: usize,
        anchor: &Var,
        (inputs, locals): (&[Expr], &[Var]),
        vars: &mut Vec<Option<Var>>,
        bindings: &mut Vec<Binding>,
        names: &mut Names<'_>,
    ) {
        if vars[index].is_some() {
            return;
        }
        let step = &self.steps[index];
        let (var, own) = names.var_for(step, anchor, locals);
        let anchor = if own { &var } else { anchor };
        for arg in &step.args {
            if let Ref::Local(i) = arg {
                self.emit(*i, anchor, (inputs, locals), vars, bindings, names);
            }
        }
        let args = step
            .args
            .iter()
            .map(|a| self.expr(*a, inputs, vars))
            .collect();
        let call = Call {
            callee: Callee::Op(step.op.clone()),
            args,
            attrs: step.attrs.clone(),
            sinfo: step.sinfo.clone(),
        };
        bindings.push(Binding {
            var: var.clone(),
            value: BindingValue::Expr(Expr::Call(Box::new(call))),
        });
        vars[index] = Some(var);
    }

    fn expr(&self, reference: Ref, inputs: &[Expr], vars: &[Option<Var>]) -> Expr {
        match reference {
            Ref::Input(j) => inputs[j].clone(),
            Ref::Local(i) => Expr::Var(vars[i].clone().expect("steps are emitted first")),
        }
    }
}

/// Variable names while instantiating a plan.
struct Names<'a> {
    taken: &'a mut HashSet<String>,
    used_locals: &'a mut HashSet<usize>,
}

impl Names<'_> {
    /// The variable of `step`, and whether it is a variable of the segment: its origin's
    /// the first time, else a fresh one named after `anchor` and its op.
    fn var_for(&mut self, step: &Step, anchor: &Var, locals: &[Var]) -> (Var, bool) {
        if let Some(origin) = step.origin.filter(|o| self.used_locals.insert(*o)) {
            let var = &locals[origin];
            if var.sinfo == step.sinfo {
                return (var.clone(), true);
            }
        }
        let hint = format!("{}_{}", anchor.name, short_name(&step.op));
        let name = oxrelax_dsl::names::fresh_name(&hint, |n| self.taken.contains(n));
        self.taken.insert(name.clone());
        let var = Var {
            name,
            sinfo: step.sinfo.clone(),
            dataflow: anchor.dataflow,
        };
        (var, false)
    }
}

/// The suffix of a new variable bound to a call of `op`.
fn short_name(op: &str) -> &str {
    const SHORT: &[(&str, &str)] = &[
        ("activation_group_scales", "x_scales"),
        ("quantize_activations", "xq"),
        ("pack_weight", "packed"),
        ("pack_weight_quant", "packed"),
        ("quantize_scales", "scales"),
    ];
    SHORT
        .iter()
        .find(|(o, _)| *o == op)
        .map_or(op, |(_, short)| short)
}

/// Builds a plan by walking the chosen e-nodes from the roots.
struct PlanBuilder<'a> {
    egraph: &'a SegmentGraph,
    choice: &'a HashMap<Id, Node>,
    origin: HashMap<Id, usize>,
    done: HashMap<Id, Ref>,
    steps: Vec<Step>,
}

impl PlanBuilder<'_> {
    /// The reference to e-class `class` (canonical), adding the steps it needs.
    fn reference(&mut self, class: Id) -> Option<Ref> {
        if let Some(done) = self.done.get(&class) {
            return Some(*done);
        }
        let reference = match self.choice.get(&class)? {
            Node::Leaf(symbol) => Ref::Input(super::lang::input_index(*symbol)?),
            Node::Op(op, children) => {
                let (attrs, args) = children.split_last()?;
                let mut refs = Vec::with_capacity(args.len());
                for arg in args {
                    refs.push(self.reference(self.egraph.find(*arg))?);
                }
                let super::lang::Facts::Attrs(attrs) = &self.egraph[*attrs].data else {
                    return None;
                };
                self.steps.push(Step {
                    op: op.to_string(),
                    attrs: attrs.clone(),
                    args: refs,
                    sinfo: self.egraph[class].data.sinfo()?.clone(),
                    origin: self.origin.get(&class).copied(),
                });
                Ref::Local(self.steps.len() - 1)
            }
        };
        self.done.insert(class, reference);
        Some(reference)
    }
}
