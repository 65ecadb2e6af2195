//! The rewrite phase: graph rewrites as e-graph rules (egg). Each phase is a pass with
//! its own rule table and limits. A dataflow block's op calls are split into segments
//! (one per decoder layer, `segment`); a segment becomes an e-graph whose analysis
//! carries the struct info the op registry infers; the phase's rules run on it until it
//! saturates or a limit stops them; extraction picks, per e-class, the e-node that
//! minimizes the cost of the DAG the segment's results need (`extract`); and the
//! choice replaces the segment's bindings. Identical segments (the layers of a model)
//! are rewritten once and the result is reused. A segment no rule changed is left as it
//! was.

mod extract;
mod lang;
mod rules;
mod segment;
#[cfg(test)]
mod tests;

pub use rules::{Rule, DEQUANTIZE_RULES, LAYOUT_RULES, NORM_RULES, SPLIT_RULES, TRANSPOSE_RULES};

use super::{Pass, PassError};
use egg::{Runner, StopReason};
use lang::SegmentAnalysis;
use oxrelax_dsl::ir::{BindingBlock, Function};
use oxrelax_dsl::{Expr, IRModule, Target};
use segment::{Plan, Segment};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A rewrite phase: a rule table and the limits of each e-graph run.
#[derive(Debug)]
pub struct Phase {
    /// The pass name (`dump-ir --after <name>`).
    pub name: &'static str,
    /// The rules, in order.
    pub rules: &'static [Rule],
    /// At most this many iterations per e-graph.
    pub iterations: usize,
    /// At most this many e-nodes per e-graph.
    pub nodes: usize,
    /// At most this long per e-graph.
    pub time: Duration,
}

/// Most e-nodes one phase's e-graph may grow to.
const NODE_LIMIT: usize = 50_000;

/// Longest one phase may run on one e-graph.
const TIME_LIMIT: Duration = Duration::from_secs(5);

/// Phase `name` running `rules` for at most `iterations`, within the shared node and
/// time limits.
const fn phase(name: &'static str, rules: &'static [Rule], iterations: usize) -> Phase {
    Phase {
        name,
        rules,
        iterations,
        nodes: NODE_LIMIT,
        time: TIME_LIMIT,
    }
}

/// The phase before weight quantization: fused projections whose output is sliced are
/// split into one projection per part (so each part's weight is quantized on its own).
pub const SPLIT_PHASE: Phase = phase("rewrite-split", SPLIT_RULES, 4);

/// The phases after weight quantization, in pipeline order: the transposes of
/// dequantized weights fused into their dequantization, then dequantized weights fused
/// into their readers, then the float weights' transposes fused into their packing,
/// then the `add+rms_norm` rule family ([`NORM_RULES`]), whose fusion of a residual add
/// into the norm reading it extraction keeps only when nothing else reads the sum (on
/// the supported models every sum has another reader, the next residual add or for the
/// last the slice of the last position, so it is never kept).
pub const PHASES: [Phase; 4] = [
    phase("rewrite-transpose", TRANSPOSE_RULES, 4),
    phase("rewrite-dequantize", DEQUANTIZE_RULES, 8),
    phase("rewrite-layout", LAYOUT_RULES, 8),
    phase("rewrite-norm", NORM_RULES, 4),
];

/// What a phase did to a module.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct PhaseReport {
    /// Segments rewritten (one e-graph each).
    pub egraphs: usize,
    /// Segments that reused the rewrite of an identical one.
    pub reused: usize,
    /// Iterations over all e-graphs.
    pub iterations: usize,
    /// The largest e-graph: e-nodes and e-classes.
    pub largest: (usize, usize),
    /// Times each rule fired (new unions), by name.
    pub fired: BTreeMap<String, usize>,
    /// Why the e-graph runs stopped, with how many stopped so.
    pub stops: BTreeMap<String, usize>,
    /// Wall time of the phase.
    pub elapsed: Duration,
}

impl std::fmt::Display for PhaseReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |map: &BTreeMap<String, usize>| {
            let items: Vec<String> = map.iter().map(|(k, v)| format!("{k} x{v}")).collect();
            if items.is_empty() {
                "none".to_string()
            } else {
                items.join(", ")
            }
        };
        write!(
            f,
            "{} e-graphs ({} segments reused), {} iterations, largest {} nodes / {} classes; \
             fired: {}; stopped: {}; {:.1} ms",
            self.egraphs,
            self.reused,
            self.iterations,
            self.largest.0,
            self.largest.1,
            list(&self.fired),
            list(&self.stops),
            self.elapsed.as_secs_f64() * 1e3
        )
    }
}

/// A rewrite phase as a pass.
pub struct RewritePhase {
    /// The phase.
    pub phase: &'static Phase,
    /// The target whose panels the rules pack for.
    pub target: Target,
    report: Mutex<Option<PhaseReport>>,
}

impl RewritePhase {
    /// The pass of `phase` for `target`.
    pub fn new(phase: &'static Phase, target: &Target) -> Self {
        RewritePhase {
            phase,
            target: target.clone(),
            report: Mutex::new(None),
        }
    }

    /// The report of the last run.
    pub fn last_report(&self) -> Option<PhaseReport> {
        self.report.lock().ok()?.clone()
    }
}

impl Pass for RewritePhase {
    fn name(&self) -> &'static str {
        self.phase.name
    }

    fn run(&self, mut module: IRModule) -> Result<IRModule, PassError> {
        let start = Instant::now();
        let mut run = PhaseRun {
            phase: self.phase,
            block: self.target.matmul_tiles().hp,
            rewrites: rules::rewrites(self.phase.rules),
            plans: HashMap::new(),
            report: PhaseReport::default(),
        };
        for function in module.functions.values_mut() {
            run.function(function);
        }
        run.report.elapsed = start.elapsed();
        if let Ok(mut slot) = self.report.lock() {
            *slot = Some(run.report);
        }
        Ok(module)
    }

    fn report(&self) -> Option<String> {
        self.last_report().map(|r| r.to_string())
    }
}

/// One run of a phase over a module.
struct PhaseRun {
    phase: &'static Phase,
    block: i64,
    rewrites: Vec<egg::Rewrite<lang::Node, SegmentAnalysis>>,
    /// The plan of every segment rewritten so far, by key (`None`: no rule applied).
    plans: HashMap<String, Option<Plan>>,
    report: PhaseReport,
}

impl PhaseRun {
    fn function(&mut self, function: &mut Function) {
        let inputs = function.num_inputs().unwrap_or(function.params.len());
        let weights: BTreeSet<String> = function
            .params
            .iter()
            .skip(inputs)
            .map(|p| p.name.clone())
            .collect();
        let mut taken: HashSet<String> = function.params.iter().map(|p| p.name.clone()).collect();
        taken.extend(function.bindings().map(|b| b.var.name.clone()));
        for index in 0..function.blocks.len() {
            if !function.blocks[index].dataflow {
                continue;
            }
            let outside = used_outside_block(function, index);
            let block = &mut function.blocks[index];
            let segments = segment::segments(block, &weights, &outside);
            let mut replaced = HashMap::new();
            for segment in &segments {
                let Some(plan) = self.plan(segment) else {
                    continue;
                };
                let inputs: Vec<Expr> = segment.inputs.iter().map(|i| i.expr.clone()).collect();
                let locals: Vec<_> = segment
                    .positions
                    .iter()
                    .map(|&p| block.bindings[p].var.clone())
                    .collect();
                let by_local = plan.instantiate(&inputs, &locals, &mut taken);
                for (local, &position) in segment.positions.iter().enumerate() {
                    replaced.insert(position, by_local.get(&local).cloned().unwrap_or_default());
                }
            }
            rebuild(block, replaced);
        }
    }

    /// The plan of `segment`: computed, or reused from an identical segment; `None` when
    /// no rule changed it.
    fn plan(&mut self, segment: &Segment) -> Option<Plan> {
        let key = segment.key();
        if let Some(plan) = self.plans.get(&key) {
            self.report.reused += 1;
            return plan.clone();
        }
        let plan = self.rewrite(segment);
        self.plans.insert(key, plan.clone());
        plan
    }

    /// Runs the phase's rules on `segment`'s e-graph and extracts the result.
    fn rewrite(&mut self, segment: &Segment) -> Option<Plan> {
        let (egraph, classes) = segment.egraph(self.block);
        let runner = Runner::<lang::Node, SegmentAnalysis>::new(SegmentAnalysis::default())
            .with_egraph(egraph)
            .with_iter_limit(self.phase.iterations)
            .with_node_limit(self.phase.nodes)
            .with_time_limit(self.phase.time)
            .run(&self.rewrites);
        let report = &mut self.report;
        report.egraphs += 1;
        report.iterations += runner.iterations.len();
        let size = (
            runner.egraph.total_number_of_nodes(),
            runner.egraph.number_of_classes(),
        );
        report.largest = report.largest.max(size);
        let mut fired = 0;
        for iteration in &runner.iterations {
            for (rule, count) in &iteration.applied {
                *report.fired.entry(rule.to_string()).or_default() += count;
                fired += count;
            }
        }
        let stop = stop_reason(runner.stop_reason.as_ref());
        *report.stops.entry(stop).or_default() += 1;
        if fired == 0 {
            return None;
        }
        let roots: Vec<egg::Id> = segment.roots.iter().map(|&r| classes[r]).collect();
        let choice = extract::extract(&runner.egraph, &roots);
        Plan::new(segment, &runner.egraph, &classes, &choice)
    }
}

/// A stop reason as the report names it.
fn stop_reason(reason: Option<&StopReason>) -> String {
    match reason {
        None | Some(StopReason::Saturated) => "saturated".to_string(),
        Some(StopReason::IterationLimit(n)) => format!("iteration limit {n}"),
        Some(StopReason::NodeLimit(n)) => format!("node limit {n}"),
        Some(StopReason::TimeLimit(s)) => format!("time limit {s}s"),
        Some(StopReason::Other(why)) => why.clone(),
    }
}

/// The variables used outside block `index` of `function` (other blocks, the result).
fn used_outside_block(function: &Function, index: usize) -> HashSet<String> {
    let mut used = HashSet::new();
    let mut note = |expr: &Expr| {
        expr.for_each_var(&mut |v| {
            used.insert(v.name.clone());
        })
    };
    for (i, block) in function.blocks.iter().enumerate() {
        if i != index {
            block.bindings.iter().for_each(|b| note(b.value.expr()));
        }
    }
    note(&function.ret);
    used
}

/// Replaces the bindings at the positions in `replaced` by their new bindings.
fn rebuild(block: &mut BindingBlock, mut replaced: HashMap<usize, Vec<oxrelax_dsl::ir::Binding>>) {
    if replaced.is_empty() {
        return;
    }
    let old = std::mem::take(&mut block.bindings);
    for (position, binding) in old.into_iter().enumerate() {
        match replaced.remove(&position) {
            Some(bindings) => block.bindings.extend(bindings),
            None => block.bindings.push(binding),
        }
    }
}
