//! `DeadCodeElimination`: drops bindings whose value nobody reads (unless the value has
//! effects) and functions nobody calls (unless exported).

use super::{Pass, PassError};
use oxrelax_dsl::ir::{Binding, BindingValue, Callee, Function};
use oxrelax_dsl::{Expr, IRModule, SymVar};
use std::collections::BTreeSet;

/// Removes unused pure bindings, unexported graph functions and unreferenced primitive
/// functions.
pub struct DeadCodeElimination;

impl Pass for DeadCodeElimination {
    fn name(&self) -> &'static str {
        "dead-code-elimination"
    }

    fn run(&self, module: IRModule) -> Result<IRModule, PassError> {
        let functions: std::collections::BTreeMap<_, _> = module
            .functions
            .into_iter()
            .filter(|(_, f)| f.exported)
            .map(|(name, f)| (name, remove_dead_bindings(f)))
            .collect();
        let mut called = BTreeSet::new();
        for binding in functions.values().flat_map(Function::bindings) {
            binding.value.expr().for_each_call(&mut |call| {
                if let Callee::Tir(name) = &call.callee {
                    called.insert(name.clone());
                }
            });
        }
        let prim_funcs = module
            .prim_funcs
            .into_iter()
            .filter(|(name, _)| called.contains(name))
            .collect();
        Ok(IRModule {
            functions,
            prim_funcs,
        })
    }
}

/// Whether evaluating the expression may have an effect beyond its value: builtins
/// (`call_packed`) may mutate runtime objects such as the KV cache.
fn has_effects(expr: &Expr) -> bool {
    let mut effects = false;
    expr.for_each_call(&mut |call| effects |= matches!(call.callee, Callee::Packed(_)));
    effects
}

/// Whether removing the binding could lose a definition of a symbolic dim: a match_cast
/// whose struct info mentions dims the parameters do not bind.
fn binds_new_dims(binding: &Binding, param_dims: &BTreeSet<SymVar>) -> bool {
    match &binding.value {
        BindingValue::MatchCast(_, sinfo) => !sinfo.sym_vars().is_subset(param_dims),
        BindingValue::Expr(_) => false,
    }
}

fn remove_dead_bindings(mut function: Function) -> Function {
    let param_dims: BTreeSet<SymVar> = function
        .params
        .iter()
        .flat_map(|p| p.sinfo.sym_vars())
        .collect();
    let mut live: BTreeSet<String> = BTreeSet::new();
    function.ret.for_each_var(&mut |v| {
        live.insert(v.name.clone());
    });
    for block in function.blocks.iter_mut().rev() {
        let mut kept = Vec::with_capacity(block.bindings.len());
        for binding in block.bindings.drain(..).rev() {
            let needed = live.contains(&binding.var.name)
                || has_effects(binding.value.expr())
                || binds_new_dims(&binding, &param_dims);
            if needed {
                binding.value.expr().for_each_var(&mut |v| {
                    live.insert(v.name.clone());
                });
                kept.push(binding);
            }
        }
        kept.reverse();
        block.bindings = kept;
    }
    function.blocks.retain(|b| !b.bindings.is_empty());
    function
}
