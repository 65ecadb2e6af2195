//! `FuseOps`: element-wise work joins the kernel producing its input, so it costs no
//! separate pass over memory. For each `call_tir` of an element-wise function, an input
//! produced earlier in the same block by a fusible kernel and read nowhere else is fused
//! with it ([`oxrelax_dsl::fuse::fuse_elementwise`]): a matmul takes it as an epilogue
//! (residual add, bias add, SiLU, the gate's `silu(g) * up`), an element-wise producer is
//! inlined (`silu` into `multiply`). Producers that are matmuls are preferred, then the
//! latest. The fused call replaces the consumer; the producer's binding goes away.

use super::{intern, Pass, PassError};
use oxrelax_dsl::fuse::{fuse_elementwise, fused_ops, pattern};
use oxrelax_dsl::ir::{Binding, BindingValue, Call, Callee, Function};
use oxrelax_dsl::legalize::OpPattern;
use oxrelax_dsl::tir::PrimFunc;
use oxrelax_dsl::{Expr, IRModule};
use std::collections::{BTreeMap, HashMap};

/// Fuses element-wise kernels into their producers.
pub struct FuseOps;

impl Pass for FuseOps {
    fn name(&self) -> &'static str {
        "fuse-ops"
    }

    fn run(&self, mut module: IRModule) -> Result<IRModule, PassError> {
        for function in module.functions.values_mut() {
            fuse_function(function, &mut module.prim_funcs);
        }
        Ok(module)
    }
}

/// A `call_tir` binding: its callee and arguments.
fn tir_call(binding: &Binding) -> Option<(&str, &Call)> {
    match binding.value.expr() {
        Expr::Call(call) => match &call.callee {
            Callee::Tir(name) => Some((name.as_str(), call)),
            _ => None,
        },
        _ => None,
    }
}

/// How often each variable is read in `function` (its result included).
fn use_counts(function: &Function) -> HashMap<String, usize> {
    let mut uses = HashMap::new();
    let mut count = |v: &oxrelax_dsl::Var| *uses.entry(v.name.clone()).or_insert(0) += 1;
    for binding in function.bindings() {
        binding.value.expr().for_each_var(&mut count);
    }
    function.ret.for_each_var(&mut count);
    uses
}

fn fuse_function(function: &mut Function, prim_funcs: &mut BTreeMap<String, PrimFunc>) {
    let uses = use_counts(function);
    for block in &mut function.blocks {
        let mut bindings: Vec<Option<Binding>> = block.bindings.drain(..).map(Some).collect();
        let mut produced_at: HashMap<String, usize> = HashMap::new();
        for index in 0..bindings.len() {
            let fused = bindings[index]
                .as_ref()
                .and_then(|b| fuse_binding(b, &bindings, &produced_at, &uses, prim_funcs));
            if let Some((producer_index, binding)) = fused {
                bindings[producer_index] = None;
                bindings[index] = Some(binding);
            }
            if let Some(binding) = &bindings[index] {
                if tir_call(binding).is_some() {
                    produced_at.insert(binding.var.name.clone(), index);
                }
            }
        }
        block.bindings = bindings.into_iter().flatten().collect();
    }
}

/// The binding fusing `consumer` with one of its producers, and where that producer was.
fn fuse_binding(
    consumer: &Binding,
    bindings: &[Option<Binding>],
    produced_at: &HashMap<String, usize>,
    uses: &HashMap<String, usize>,
    prim_funcs: &mut BTreeMap<String, PrimFunc>,
) -> Option<(usize, Binding)> {
    let (callee, call) = tir_call(consumer)?;
    let consumer_func = prim_funcs.get(callee)?.clone();
    let mut candidates: Vec<(bool, usize, usize)> = call
        .args
        .iter()
        .enumerate()
        .filter_map(|(operand, arg)| {
            let Expr::Var(v) = arg else { return None };
            let at = *produced_at.get(&v.name)?;
            let producer = tir_call(bindings[at].as_ref()?)?.0;
            let is_matmul = pattern(prim_funcs.get(producer)?) == Some(OpPattern::OutEwiseFusible);
            (uses.get(&v.name) == Some(&1)).then_some((is_matmul, at, operand))
        })
        .collect();
    candidates.sort();
    candidates.into_iter().rev().find_map(|(_, at, operand)| {
        let (producer, producer_call) = tir_call(bindings[at].as_ref()?)?;
        let fused = fuse_elementwise(prim_funcs.get(producer)?, &consumer_func, operand)?;
        let hint = format!("fused_{}", fused_ops(&fused).join("_"));
        let name = intern(prim_funcs, &hint, fused);
        let mut args = producer_call.args.clone();
        args.extend(
            (call.args.iter().enumerate())
                .filter(|(i, _)| *i != operand)
                .map(|(_, a)| a.clone()),
        );
        let value = Expr::Call(Box::new(Call {
            callee: Callee::Tir(name),
            args,
            attrs: call.attrs.clone(),
            sinfo: call.sinfo.clone(),
        }));
        let binding = Binding {
            var: consumer.var.clone(),
            value: BindingValue::Expr(value),
        };
        Some((at, binding))
    })
}
