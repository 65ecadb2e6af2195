//! `LegalizeOps`: replaces every op call by a `call_tir` of a primitive function built
//! from the op's tensor-expression definition (see [`oxrelax_dsl::legalize`]), except the
//! view ops ([`VIEW_OPS`]: reshape, squeeze, expand_dims), which stay op calls that the VM
//! runs as views of their input, never as a copy kernel.

use super::{intern, Pass, PassError};
use oxrelax_dsl::ir::{BindingValue, Call, Callee};
use oxrelax_dsl::op::VIEW_OPS;
use oxrelax_dsl::{Attrs, Expr, IRModule};

/// Lowers op calls to `call_tir` of legalized primitive functions. Identical primitive
/// functions are shared; names come from the op (`matmul`, `matmul1`, ...).
pub struct LegalizeOps;

impl Pass for LegalizeOps {
    fn name(&self) -> &'static str {
        "legalize-ops"
    }

    fn run(&self, mut module: IRModule) -> Result<IRModule, PassError> {
        let mut prim_funcs = std::mem::take(&mut module.prim_funcs);
        for (name, function) in module.functions.iter_mut() {
            for binding in function.blocks.iter_mut().flat_map(|b| &mut b.bindings) {
                let BindingValue::Expr(Expr::Call(call)) = &binding.value else {
                    continue;
                };
                match &call.callee {
                    Callee::Op(op) if !VIEW_OPS.contains(&op.as_str()) => {}
                    _ => continue,
                }
                let legalized = oxrelax_dsl::legalize::legalize_call(call).map_err(|source| {
                    PassError::Legalize {
                        function: name.clone(),
                        var: binding.var.name.clone(),
                        source: Box::new(source),
                    }
                })?;
                let callee = intern(&mut prim_funcs, &legalized.name_hint, legalized.func);
                binding.value = BindingValue::Expr(Expr::Call(Box::new(Call {
                    callee: Callee::Tir(callee),
                    args: legalized.args,
                    attrs: Attrs::new(),
                    sinfo: call.sinfo.clone(),
                })));
            }
        }
        module.prim_funcs = prim_funcs;
        Ok(module)
    }
}
