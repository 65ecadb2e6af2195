//! `PackMatmulWeights`: `matmul(x, permute_dims(w))` with `w` a 2-D weight parameter (a
//! `Linear`) becomes `packed_matmul(x, pack_weight(w))`, the weight packed into the column
//! panels of the target's matmul microkernels. The packing depends on the weight only, so
//! `LiftTransformParams` moves it to compile time; the transpose disappears.

use super::{Pass, PassError};
use oxrelax_dsl::ir::{Binding, BindingValue, Call, Callee, Function};
use oxrelax_dsl::op::{pack_weight, packed_matmul};
use oxrelax_dsl::{AttrValue, DataType, Expr, IRModule, Target, Var};
use std::collections::{BTreeSet, HashMap};

/// Rewrites linear layers of weighted functions (those with a `num_input` attribute) to
/// packed matmuls for a target.
pub struct PackMatmulWeights {
    /// Whose panel width to pack for.
    pub target: Target,
}

impl Pass for PackMatmulWeights {
    fn name(&self) -> &'static str {
        "pack-matmul-weights"
    }

    fn run(&self, mut module: IRModule) -> Result<IRModule, PassError> {
        let block = self.target.matmul_tiles().hp;
        for function in module.functions.values_mut() {
            pack_function(function, block);
        }
        Ok(module)
    }
}

/// The call of op `name`, if `expr` is one.
fn op_call<'a>(expr: &'a Expr, name: &str) -> Option<&'a Call> {
    match expr {
        Expr::Call(call) if matches!(&call.callee, Callee::Op(op) if op == name) => Some(call),
        _ => None,
    }
}

/// The weight transposed by `call` when it is `permute_dims(w)` of a 2-D f32 or f16 weight
/// `w` with static dims (no axes, or `[1, 0]`).
fn transposed_weight(call: &Call, weights: &BTreeSet<String>) -> Option<Var> {
    let axes_ok = match call.attrs.get("axes") {
        None => true,
        Some(AttrValue::Ints(axes)) => axes == &[1, 0],
        Some(_) => false,
    };
    let Some(Expr::Var(w)) = call.args.first() else {
        return None;
    };
    let tensor = w.sinfo.as_tensor()?;
    let dims = tensor.dims()?;
    let static_2d = dims.len() == 2 && dims.iter().all(|d| d.as_const().is_some());
    let packable = matches!(tensor.dtype, DataType::F32 | DataType::F16) && static_2d;
    (axes_ok && packable && weights.contains(&w.name)).then(|| w.clone())
}

fn pack_function(function: &mut Function, block: i64) {
    let Some(inputs) = function.num_inputs() else {
        return;
    };
    let weights: BTreeSet<String> = function
        .params
        .iter()
        .skip(inputs)
        .map(|p| p.name.clone())
        .collect();
    let mut transposed: HashMap<String, Var> = HashMap::new();
    for binding_block in &mut function.blocks {
        let mut rewritten = Vec::with_capacity(binding_block.bindings.len());
        for binding in binding_block.bindings.drain(..) {
            let value = binding.value.expr();
            if let Some(w) =
                op_call(value, "permute_dims").and_then(|c| transposed_weight(c, &weights))
            {
                transposed.insert(binding.var.name.clone(), w);
            }
            match packed_bindings(&binding, &transposed, block) {
                Some(pair) => rewritten.extend(pair),
                None => rewritten.push(binding),
            }
        }
        binding_block.bindings = rewritten;
    }
}

/// `[packed = pack_weight(w), y = packed_matmul(x, packed)]` replacing `y = matmul(x, wt)`
/// where `wt` transposes weight `w`.
fn packed_bindings(
    binding: &Binding,
    transposed: &HashMap<String, Var>,
    block: i64,
) -> Option<[Binding; 2]> {
    let call = op_call(binding.value.expr(), "matmul")?;
    let [x, Expr::Var(wt)] = call.args.as_slice() else {
        return None;
    };
    let w = transposed.get(&wt.name)?;
    let features = w.sinfo.as_tensor()?.dims()?[0].as_const()?;
    let packed = pack_weight(&Expr::Var(w.clone()), block).ok()?;
    let packed_var = Var {
        name: format!("{}_packed", binding.var.name),
        sinfo: packed.sinfo(),
        dataflow: binding.var.dataflow,
    };
    let product = packed_matmul(x, &Expr::Var(packed_var.clone()), features).ok()?;
    if product.sinfo() != binding.var.sinfo {
        return None;
    }
    Some([
        Binding {
            var: packed_var,
            value: BindingValue::Expr(packed),
        },
        Binding {
            var: binding.var.clone(),
            value: BindingValue::Expr(product),
        },
    ])
}
