//! `LiftTransformParams` (as Relax's): every op call that depends only on weights (the
//! parameters after a function's `num_input` inputs) moves into one exported function,
//! [`TRANSFORM_PARAMS`], run once when weights are loaded or an artifact is written.
//! Weighted functions then take the transformed weights instead: inputs, then every
//! output of `transform_params` in order (the raw weights still read directly, then the
//! lifted values). Identical computations of several functions are lifted once.

use super::{Pass, PassError};
use oxrelax_dsl::ir::NUM_INPUT_ATTR;
use oxrelax_dsl::ir::{Binding, BindingBlock, BindingValue, Call, Callee, Function};
use oxrelax_dsl::{AttrValue, Expr, IRModule, StructInfo, Var};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The name of the lifted function (the runtime's name for the weight transform).
pub const TRANSFORM_PARAMS: &str = oxrelax_runtime::artifact::WEIGHT_TRANSFORM;

/// Lifts weight-only computations of weighted functions into [`TRANSFORM_PARAMS`].
pub struct LiftTransformParams;

impl Pass for LiftTransformParams {
    fn name(&self) -> &'static str {
        "lift-transform-params"
    }

    fn run(&self, mut module: IRModule) -> Result<IRModule, PassError> {
        let Some(weights) = shared_weights(&module.functions) else {
            return Ok(module);
        };
        let mut lifted = Lifted::default();
        let mut renames: BTreeMap<String, HashMap<String, String>> = BTreeMap::new();
        for (name, function) in module.functions.iter_mut() {
            if function.num_inputs().is_some() {
                renames.insert(name.clone(), lifted.take_from(function, &weights));
            }
        }
        if lifted.bindings.is_empty() {
            return Ok(module);
        }
        let outputs = used_values(&module.functions, &renames, &weights, &lifted);
        for (name, rename) in &renames {
            let function = module
                .functions
                .get_mut(name)
                .expect("renamed functions exist");
            rewire(function, rename, &outputs);
        }
        module.functions.insert(
            TRANSFORM_PARAMS.to_string(),
            lifted.function(&weights, &outputs),
        );
        Ok(module)
    }
}

/// The weights every weighted function takes (the same names and struct info in each);
/// `None` when there is no weighted function or they disagree.
fn shared_weights(functions: &BTreeMap<String, Function>) -> Option<Vec<Var>> {
    let mut shared: Option<Vec<Var>> = None;
    for function in functions.values() {
        let Some(inputs) = function.num_inputs() else {
            continue;
        };
        let weights = function.params.get(inputs..)?.to_vec();
        match &shared {
            Some(existing) if *existing != weights => return None,
            _ => shared = Some(weights),
        }
    }
    shared.filter(|w| !w.is_empty())
}

/// The bindings moved to `transform_params` so far, each a (non-dataflow) variable.
#[derive(Default)]
struct Lifted {
    bindings: Vec<(Var, Call)>,
}

impl Lifted {
    /// Removes the weight-only op calls of `function`'s dataflow blocks and records them;
    /// returns how the function's removed variables are named among the lifted ones.
    fn take_from(&mut self, function: &mut Function, weights: &[Var]) -> HashMap<String, String> {
        let mut rename: HashMap<String, String> = weights
            .iter()
            .map(|w| (w.name.clone(), w.name.clone()))
            .collect();
        for block in function.blocks.iter_mut().filter(|b| b.dataflow) {
            block
                .bindings
                .retain(|binding| match weight_only_call(binding, &rename) {
                    Some(call) => {
                        let lifted = self.intern(call, &binding.var);
                        rename.insert(binding.var.name.clone(), lifted);
                        false
                    }
                    None => true,
                });
        }
        rename.retain(|from, _| !weights.iter().any(|w| &w.name == from));
        rename
    }

    /// The lifted variable computing `call` (already renamed): an existing one or a new
    /// one named after the weight it reads and the op.
    fn intern(&mut self, call: Call, var: &Var) -> String {
        if let Some((existing, _)) = self.bindings.iter().find(|(_, c)| *c == call) {
            return existing.name.clone();
        }
        let op = match &call.callee {
            Callee::Op(op) => op.clone(),
            _ => "value".to_string(),
        };
        let source = call
            .args
            .iter()
            .find_map(Expr::as_var)
            .map_or_else(|| "const".to_string(), |v| v.name.clone());
        let base = format!("{source}.{op}");
        let taken = |name: &str| self.bindings.iter().any(|(v, _)| v.name == name);
        let name = oxrelax_dsl::names::fresh_name(&base, taken);
        let lifted = Var {
            name: name.clone(),
            sinfo: var.sinfo.clone(),
            dataflow: false,
        };
        self.bindings.push((lifted, call));
        name
    }

    /// `transform_params(weights...)`: the lifted bindings, returning `outputs`.
    fn function(&self, weights: &[Var], outputs: &[Var]) -> Function {
        let mut bindings: Vec<Binding> = largest_weights_first(&self.bindings, weights)
            .into_iter()
            .map(|(var, call)| Binding {
                var: Var {
                    dataflow: true,
                    ..var.clone()
                },
                value: BindingValue::Expr(Expr::Call(Box::new(call.clone()))),
            })
            .collect();
        let lifted: BTreeSet<&str> = self.bindings.iter().map(|(v, _)| v.name.as_str()).collect();
        let fields: Vec<Expr> = outputs
            .iter()
            .map(|v| {
                Expr::Var(Var {
                    dataflow: lifted.contains(v.name.as_str()),
                    ..v.clone()
                })
            })
            .collect();
        let result = Var::new(
            "transformed",
            StructInfo::Tuple(fields.iter().map(Expr::sinfo).collect()),
        );
        bindings.push(Binding {
            var: result.clone(),
            value: BindingValue::Expr(Expr::Tuple(fields)),
        });
        let mut attrs = oxrelax_dsl::Attrs::new();
        attrs.insert(NUM_INPUT_ATTR.to_string(), AttrValue::Int(0));
        Function {
            params: weights.to_vec(),
            blocks: vec![BindingBlock {
                dataflow: true,
                bindings,
            }],
            ret: Expr::Var(result),
            exported: true,
            attrs,
        }
    }
}

/// The lifted bindings reordered so the computations reading the largest weight come
/// first, then the next largest, ...: when weights are loaded, each raw weight is dropped
/// once transformed, so the peak (the transformed weights so far plus the raw weight in
/// flight) comes while few are transformed. Each binding belongs to the weight it reads
/// (or, through a lifted value, its chain's weight); the original order is kept within a
/// weight, and entirely when some binding would come before a value it reads.
fn largest_weights_first<'a>(bindings: &'a [(Var, Call)], weights: &[Var]) -> Vec<&'a (Var, Call)> {
    let bits: HashMap<&str, usize> = weights
        .iter()
        .map(|w| (w.name.as_str(), static_bits(w).unwrap_or(0)))
        .collect();
    // Per weight and lifted value: its weight's (bits, first binding reading it).
    let mut group: HashMap<&str, (usize, usize)> = HashMap::new();
    let mut keyed = Vec::with_capacity(bindings.len());
    for (index, (var, call)) in bindings.iter().enumerate() {
        let mut args = call.args.iter().filter_map(Expr::as_var);
        let key = args
            .find_map(|v| match bits.get(v.name.as_str()) {
                Some(&size) => Some(*group.entry(v.name.as_str()).or_insert((size, index))),
                None => group.get(v.name.as_str()).copied(),
            })
            .unwrap_or((0, index));
        group.insert(var.name.as_str(), key);
        keyed.push((std::cmp::Reverse(key.0), key.1, index));
    }
    keyed.sort();
    let position: HashMap<&str, usize> = keyed
        .iter()
        .enumerate()
        .map(|(at, &(_, _, index))| (bindings[index].0.name.as_str(), at))
        .collect();
    let ordered = keyed.iter().enumerate().all(|(at, &(_, _, index))| {
        let reads = bindings[index].1.args.iter().filter_map(Expr::as_var);
        reads
            .filter_map(|v| position.get(v.name.as_str()))
            .all(|&p| p < at)
    });
    if ordered {
        keyed
            .iter()
            .map(|&(_, _, index)| &bindings[index])
            .collect()
    } else {
        bindings.iter().collect()
    }
}

/// The bits of a tensor variable of static shape.
fn static_bits(var: &Var) -> Option<usize> {
    let tensor = var.sinfo.as_tensor()?;
    let elements: Option<i64> = tensor.dims()?.iter().map(|d| d.as_const()).product();
    usize::try_from(elements? * i64::from(tensor.dtype.bits())).ok()
}

/// `call` renamed, if `binding` is an op call whose every variable argument is a weight
/// or an already lifted value (`rename` maps both to their lifted names).
fn weight_only_call(binding: &Binding, rename: &HashMap<String, String>) -> Option<Call> {
    let BindingValue::Expr(Expr::Call(call)) = &binding.value else {
        return None;
    };
    if !matches!(call.callee, Callee::Op(_)) || !call.sinfo.sym_vars().is_empty() {
        return None;
    }
    let mut call = (**call).clone();
    for arg in &mut call.args {
        match arg {
            Expr::Var(v) => v.name.clone_from(rename.get(&v.name)?),
            Expr::Constant(_) | Expr::Prim(_) | Expr::Shape(_) | Expr::Str(_) => {}
            _ => return None,
        }
        if let Expr::Var(v) = arg {
            v.dataflow = false;
        }
    }
    Some(call)
}

/// The values weighted functions still read after lifting, in order: raw weights (in
/// parameter order), then lifted values (in lifting order).
fn used_values(
    functions: &BTreeMap<String, Function>,
    renames: &BTreeMap<String, HashMap<String, String>>,
    weights: &[Var],
    lifted: &Lifted,
) -> Vec<Var> {
    let mut used: BTreeSet<String> = BTreeSet::new();
    for (name, rename) in renames {
        let function = &functions[name];
        let mut note = |v: &Var| {
            used.insert(rename.get(&v.name).unwrap_or(&v.name).clone());
        };
        for binding in function.bindings() {
            binding.value.expr().for_each_var(&mut note);
        }
        function.ret.for_each_var(&mut note);
    }
    let raw = weights.iter().filter(|w| used.contains(&w.name)).cloned();
    let values = lifted.bindings.iter().map(|(v, _)| v);
    raw.chain(values.filter(|v| used.contains(&v.name)).cloned())
        .collect()
}

/// `function` taking `outputs` as its weights, reading lifted values by their new names.
fn rewire(function: &mut Function, rename: &HashMap<String, String>, outputs: &[Var]) {
    let inputs = function.num_inputs().unwrap_or(0);
    function.params.truncate(inputs);
    function.params.extend(outputs.iter().cloned());
    let lookup: HashMap<&str, &Var> = outputs.iter().map(|v| (v.name.as_str(), v)).collect();
    let mut retarget = |v: &mut Var| {
        if let Some(target) = rename.get(&v.name).and_then(|n| lookup.get(n.as_str())) {
            *v = (*target).clone();
        }
    };
    for binding in function.blocks.iter_mut().flat_map(|b| &mut b.bindings) {
        binding.value.expr_mut().for_each_var_mut(&mut retarget);
    }
    function.ret.for_each_var_mut(&mut retarget);
}
