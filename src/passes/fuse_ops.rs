//! `FuseOps`: element-wise work joins the kernel producing its input, so it costs no
//! separate pass over memory. For each `call_tir` of an element-wise function, an input
//! produced earlier in the same block by a fusible kernel and read nowhere else is fused
//! with it ([`oxrelax_dsl::fuse::fuse_elementwise`]): a matmul takes it as an epilogue
//! (residual add, bias add, SiLU, the gate's `silu(g) * up`), an element-wise producer is
//! inlined (`silu` into `multiply`). Producers that are matmuls are preferred, then the
//! latest. The fused call replaces the consumer; the producer's binding goes away.
//!
//! A consumer whose input is a matmul's result reshaped into heads (`[.., H]` to
//! `[.., H / d, d]`), reading it only within each head (RoPE), becomes a windowed
//! epilogue of the matmul ([`oxrelax_dsl::fuse::fuse_windowed`]): the fused call
//! produces the matmul's shape and the reshape follows it, so Q and K leave their
//! projection already rotated.

use super::{intern, Pass, PassError};
use oxrelax_dsl::fuse::{fuse_elementwise, fuse_windowed, fused_ops, pattern};
use oxrelax_dsl::ir::{Binding, BindingValue, Call, Callee, Function};
use oxrelax_dsl::legalize::OpPattern;
use oxrelax_dsl::tir::PrimFunc;
use oxrelax_dsl::{Expr, IRModule, Var};
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

/// A `call_tir` binding's value: its callee and call.
fn tir_call(binding: &Binding) -> Option<(&str, &Call)> {
    match binding.value.expr() {
        Expr::Call(call) => match &call.callee {
            Callee::Tir(name) => Some((name.as_str(), call)),
            _ => None,
        },
        _ => None,
    }
}

/// The variable a `reshape` binding reshapes.
fn reshaped(binding: &Binding) -> Option<&Var> {
    match binding.value.expr() {
        Expr::Call(call) if matches!(&call.callee, Callee::Op(op) if op == "reshape") => {
            match call.args.first() {
                Some(Expr::Var(v)) => Some(v),
                _ => None,
            }
        }
        _ => None,
    }
}

/// How often each variable is read in `function` (its result included).
fn use_counts(function: &Function) -> HashMap<String, usize> {
    let mut uses = HashMap::new();
    let mut count = |v: &Var| *uses.entry(v.name.clone()).or_insert(0) += 1;
    for binding in function.bindings() {
        binding.value.expr().for_each_var(&mut count);
    }
    function.ret.for_each_var(&mut count);
    uses
}

/// The bindings of a block seen so far that a later consumer may fuse with, by variable:
/// `call_tir` producers and reshapes, with the slot each sits in.
#[derive(Default)]
struct Earlier {
    bindings: HashMap<String, (usize, Binding)>,
}

impl Earlier {
    /// The producer binding of `var` (a `call_tir` read only there) and its slot.
    fn producer(&self, var: &Var, uses: &HashMap<String, usize>) -> Option<&(usize, Binding)> {
        let found = self.bindings.get(&var.name)?;
        (tir_call(&found.1).is_some() && uses.get(&var.name) == Some(&1)).then_some(found)
    }
}

/// A fusion: the bindings it removes (slot and variable) and the ones replacing the
/// consumer.
struct Fused {
    removed: Vec<(usize, String)>,
    replacement: Vec<Binding>,
}

fn fuse_function(function: &mut Function, prim_funcs: &mut BTreeMap<String, PrimFunc>) {
    let uses = use_counts(function);
    for block in &mut function.blocks {
        let mut slots: Vec<Vec<Binding>> = block.bindings.drain(..).map(|b| vec![b]).collect();
        let mut earlier = Earlier::default();
        for index in 0..slots.len() {
            let fused = slots[index].first().and_then(|consumer| {
                fuse_binding(consumer, &earlier, &uses, prim_funcs)
                    .or_else(|| fuse_through_reshape(consumer, &earlier, &uses, prim_funcs))
            });
            if let Some(Fused {
                removed,
                replacement,
            }) = fused
            {
                for (at, var) in removed {
                    slots[at].retain(|b| b.var.name != var);
                    earlier.bindings.remove(&var);
                }
                slots[index] = replacement;
            }
            for binding in &slots[index] {
                if tir_call(binding).is_some() || reshaped(binding).is_some() {
                    let entry = (index, binding.clone());
                    earlier.bindings.insert(binding.var.name.clone(), entry);
                }
            }
        }
        block.bindings = slots.into_iter().flatten().collect();
    }
}

/// `consumer` (an element-wise `call_tir`) fused with one of its producers.
fn fuse_binding(
    consumer: &Binding,
    earlier: &Earlier,
    uses: &HashMap<String, usize>,
    prim_funcs: &mut BTreeMap<String, PrimFunc>,
) -> Option<Fused> {
    let (callee, call) = tir_call(consumer)?;
    let consumer_func = prim_funcs.get(callee)?.clone();
    let mut candidates: Vec<(bool, usize, usize)> = call
        .args
        .iter()
        .enumerate()
        .filter_map(|(operand, arg)| {
            let Expr::Var(v) = arg else { return None };
            let (at, binding) = earlier.producer(v, uses)?;
            let producer = prim_funcs.get(tir_call(binding)?.0)?;
            let is_matmul = pattern(producer) == Some(OpPattern::OutEwiseFusible);
            Some((is_matmul, *at, operand))
        })
        .collect();
    candidates.sort();
    candidates.into_iter().rev().find_map(|(_, at, operand)| {
        let Expr::Var(v) = &call.args[operand] else {
            return None;
        };
        let producer = &earlier.producer(v, uses)?.1;
        let (producer_callee, _) = tir_call(producer)?;
        let fused = fuse_elementwise(prim_funcs.get(producer_callee)?, &consumer_func, operand)?;
        let binding = fused_binding(prim_funcs, fused, (producer, consumer), operand)?;
        Some(Fused {
            removed: vec![(at, v.name.clone())],
            replacement: vec![Binding {
                var: consumer.var.clone(),
                ..binding
            }],
        })
    })
}

/// `consumer` (a `call_tir`) fused as a windowed epilogue into the matmul whose result
/// one of its inputs reshapes: the fused call binds the matmul's variable, then the
/// consumer's variable binds the reshape of it.
fn fuse_through_reshape(
    consumer: &Binding,
    earlier: &Earlier,
    uses: &HashMap<String, usize>,
    prim_funcs: &mut BTreeMap<String, PrimFunc>,
) -> Option<Fused> {
    let (callee, call) = tir_call(consumer)?;
    let consumer_func = prim_funcs.get(callee)?.clone();
    call.args.iter().enumerate().find_map(|(operand, arg)| {
        let Expr::Var(split) = arg else { return None };
        let (reshape_at, reshape) = earlier.bindings.get(&split.name)?;
        let source = reshaped(reshape)?;
        let (producer_at, producer) = earlier.producer(source, uses)?;
        if uses.get(&split.name) != Some(&1) {
            return None;
        }
        let producer_func = prim_funcs.get(tir_call(producer)?.0)?;
        let fused = fuse_windowed(producer_func, &consumer_func, operand)?;
        let binding = fused_binding(prim_funcs, fused, (producer, consumer), operand)?;
        let Expr::Call(reshape_call) = reshape.value.expr() else {
            return None;
        };
        let reshape_again = Binding {
            var: consumer.var.clone(),
            value: BindingValue::Expr(Expr::Call(Box::new(Call {
                sinfo: consumer.var.sinfo.clone(),
                ..(**reshape_call).clone()
            }))),
        };
        Some(Fused {
            removed: vec![
                (*producer_at, source.name.clone()),
                (*reshape_at, split.name.clone()),
            ],
            replacement: vec![binding, reshape_again],
        })
    })
}

/// The binding of the producer's variable to a call of `fused` (interned): the
/// producer's arguments, then the consumer's other than `operand`, with the producer's
/// result struct info.
fn fused_binding(
    prim_funcs: &mut BTreeMap<String, PrimFunc>,
    fused: PrimFunc,
    (producer, consumer): (&Binding, &Binding),
    operand: usize,
) -> Option<Binding> {
    let (_, producer_call) = tir_call(producer)?;
    let (_, call) = tir_call(consumer)?;
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
        attrs: producer_call.attrs.clone(),
        sinfo: producer_call.sinfo.clone(),
    }));
    Some(Binding {
        var: producer.var.clone(),
        value: BindingValue::Expr(value),
    })
}
