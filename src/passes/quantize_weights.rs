//! `QuantizeWeights`: in a function marked for quantized weights ([`WEIGHT_QUANT_ATTR`],
//! one of [`WEIGHT_FORMATS`]), every static 2-D f32 weight that a linear layer
//! (`permute_dims(w)`) or an embedding lookup (`take(w, ids)`) reads is replaced by its
//! quantized form, dequantized: `dequantize_weight(pack_weight_quant(w, s), s)` with `s =
//! quantize_scales(w)`, in the panels of the target's matmul microkernels (the layout of
//! the format: rows, or quads for int8 activations). The rewrite phase then fuses each
//! `dequantize_weight` into the op reading it, so no dequantized weight is written to
//! memory; quantizing and packing depend on the weight only, so `LiftTransformParams`
//! moves them to compile time. A tied embedding and output head read one quantized copy.
//!
//! The embedding table and the output head are int8 with float activations under every
//! format ([`WeightFormat::head`]): under the 4-bit ones they stay at 8 bits, as llama.cpp
//! keeps them above its 4-bit body (a 4-bit tied embedding costs accuracy out of
//! proportion to its size), and under the int8-activation ones the logits are computed
//! from the float hidden state (rounding it to int8 would put its error straight into
//! the logits). They are a small part of
//! the bytes a decode step streams in larger models; the embedding table's lookup reads
//! one row per token.

use super::{Pass, PassError};
use oxrelax_dsl::ir::{Binding, BindingValue, Callee, Function};
use oxrelax_dsl::op::{dequantize_weight, pack_weight_quant, quantize_scales, QuantLayout};
use oxrelax_dsl::{AttrValue, DType, Expr, IRModule, Target, Var};
use std::collections::{BTreeSet, HashMap};

/// The function attribute naming the packed-weight format of its linear layers and
/// embedding table, one of [`WEIGHT_FORMATS`] (absent: float panels).
pub const WEIGHT_QUANT_ATTR: &str = "weight_quant";

/// A quantized weight format: bits per weight and the dtype of its group scales.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WeightFormat {
    /// Its name (the value of [`WEIGHT_QUANT_ATTR`]).
    pub name: &'static str,
    /// Bits per weight (8: int8 panels, 4: int4 panels).
    pub bits: i64,
    /// The dtype the group scales are stored in.
    pub scales: DType,
    /// The panels' layout: `Quads` for int8 activations (the dot-product microkernels).
    pub layout: QuantLayout,
}

/// A format of f32-activation panels.
const fn float_activations(name: &'static str, bits: i64, scales: DType) -> WeightFormat {
    WeightFormat {
        name,
        bits,
        scales,
        layout: QuantLayout::Rows,
    }
}

/// A format of int8-activation panels (f16 group scales).
const fn int8_activations(name: &'static str, bits: i64) -> WeightFormat {
    WeightFormat {
        name,
        bits,
        scales: DType::F16,
        layout: QuantLayout::Quads,
    }
}

impl WeightFormat {
    /// The format of the embedding table and the output head under this one: int8 with
    /// f32 scales and float activations (`q8`, [`WEIGHT_FORMATS`]' first) under every
    /// format.
    pub fn head(&'static self) -> &'static WeightFormat {
        &WEIGHT_FORMATS[0]
    }
}

/// The name (as [`short_weight_name`] gives it) of an untied output head's weight.
const OUTPUT_HEAD: &str = "lm_head";

/// Every quantized weight format.
pub const WEIGHT_FORMATS: [WeightFormat; 5] = [
    float_activations("q8", 8, DType::F32),
    float_activations("q4f32", 4, DType::F32),
    float_activations("q4f16", 4, DType::F16),
    int8_activations("w8a8", 8),
    int8_activations("w4a8", 4),
];

/// Quantizes the linear and embedding weights of marked functions for a target.
pub struct QuantizeWeights {
    /// Whose panel width to pack for.
    pub target: Target,
}

impl Pass for QuantizeWeights {
    fn name(&self) -> &'static str {
        "quantize-weights"
    }

    fn run(&self, mut module: IRModule) -> Result<IRModule, PassError> {
        let block = self.target.matmul_tiles().hp;
        for function in module.functions.values_mut() {
            let format = match function.attrs.get(WEIGHT_QUANT_ATTR) {
                Some(AttrValue::Str(name)) => WEIGHT_FORMATS.iter().find(|f| f.name == name),
                _ => None,
            };
            if let Some(format) = format {
                quantize_function(function, (block, format));
            }
        }
        Ok(module)
    }
}

/// The weights of `function` that a linear layer or an embedding lookup reads: static
/// 2-D f32 values computed from its parameters after its inputs alone (a parameter, or a
/// weight transform such as the slice of a fused projection), used as `permute_dims(w)`
/// or `take(w, ids)`; by name, each with whether it is an embedding table (read by
/// `take`) or the output head.
fn quantizable_weights(function: &Function) -> HashMap<String, (Var, bool)> {
    let Some(inputs) = function.num_inputs() else {
        return HashMap::new();
    };
    let static_f32_2d = |w: &Var| {
        w.sinfo.as_tensor().is_some_and(|t| {
            let dims = t.dims().unwrap_or_default();
            t.dtype == DType::F32 && dims.len() == 2 && dims.iter().all(|d| d.as_const().is_some())
        })
    };
    let mut weight_only: HashMap<&str, &Var> = function.params[inputs..]
        .iter()
        .map(|w| (w.name.as_str(), w))
        .collect();
    let mut read = HashMap::new();
    for binding in function.bindings() {
        let Expr::Call(call) = binding.value.expr() else {
            continue;
        };
        let mut from_weights = matches!(call.callee, Callee::Op(_));
        binding.value.expr().for_each_var(&mut |v| {
            from_weights &= weight_only.contains_key(v.name.as_str());
        });
        if from_weights {
            weight_only.insert(&binding.var.name, &binding.var);
        }
        let (reader, lookup) = match &call.callee {
            Callee::Op(op) => (op == "permute_dims" || op == "take", op == "take"),
            _ => (false, false),
        };
        if let (true, Some(Expr::Var(w))) = (reader, call.args.first()) {
            if let Some(&weight) = weight_only
                .get(w.name.as_str())
                .filter(|w| static_f32_2d(w))
            {
                let head = lookup || short_weight_name(&weight.name) == OUTPUT_HEAD;
                let entry = read
                    .entry(w.name.clone())
                    .or_insert_with(|| (weight.clone(), false));
                entry.1 |= head;
            }
        }
    }
    read
}

fn quantize_function(function: &mut Function, (block, format): (i64, &'static WeightFormat)) {
    let params = quantizable_weights(function);
    let mut taken: BTreeSet<String> = function.params.iter().map(|p| p.name.clone()).collect();
    taken.extend(function.bindings().map(|b| b.var.name.clone()));
    for binding_block in &mut function.blocks {
        let mut panels: HashMap<String, (Expr, Expr)> = HashMap::new();
        let mut binder = Binder {
            taken: &mut taken,
            dataflow: binding_block.dataflow,
            bindings: Vec::with_capacity(binding_block.bindings.len()),
        };
        for mut binding in std::mem::take(&mut binding_block.bindings) {
            let mut uses = BTreeSet::new();
            binding.value.expr().for_each_var(&mut |v| {
                if params.contains_key(&v.name) {
                    uses.insert(v.name.clone());
                }
            });
            let mut dequantized = HashMap::new();
            for name in uses {
                let (weight, head) = &params[&name];
                let format = if *head { format.head() } else { format };
                let (scales, packed) = panels
                    .entry(name.clone())
                    .or_insert_with(|| binder.panels(weight, (block, format)))
                    .clone();
                let value = binder.dequantized(weight, &packed, &scales);
                dequantized.insert(name, value);
            }
            replace_weights(binding.value.expr_mut(), &dequantized);
            binder.bindings.push(binding);
        }
        binding_block.bindings = binder.bindings;
    }
}

/// Binds new variables in a block being rewritten.
struct Binder<'a> {
    taken: &'a mut BTreeSet<String>,
    dataflow: bool,
    bindings: Vec<Binding>,
}

impl Binder<'_> {
    /// Binds `value` to a fresh variable named after `weight` and `suffix`.
    fn bind(&mut self, weight: &Var, suffix: &str, value: Expr) -> Expr {
        let hint = format!("{}_{suffix}", short_weight_name(&weight.name));
        let name = oxrelax_dsl::names::fresh_name(&hint, |n| self.taken.contains(n));
        self.taken.insert(name.clone());
        let var = Var {
            name,
            sinfo: value.sinfo(),
            dataflow: self.dataflow,
        };
        self.bindings.push(Binding {
            var: var.clone(),
            value: BindingValue::Expr(value),
        });
        Expr::Var(var)
    }

    /// Binds `weight`'s scales and quantized panels; `(scales, packed)`.
    fn panels(&mut self, weight: &Var, (block, format): (i64, &WeightFormat)) -> (Expr, Expr) {
        let w = Expr::Var(weight.clone());
        let scales = quantize_scales(&w, block, format.bits, format.scales)
            .expect("a static 2-D f32 weight has group scales");
        let scales = self.bind(weight, "scales", scales);
        let packed = pack_weight_quant(&w, &scales, (format.bits, format.layout))
            .expect("a static 2-D f32 weight packs with its scales");
        (scales.clone(), self.bind(weight, "packed", packed))
    }

    /// Binds `weight` dequantized from its panels, next to the call reading it (so the
    /// rewrite phase sees both in one segment); the dequantized weight.
    fn dequantized(&mut self, weight: &Var, packed: &Expr, scales: &Expr) -> Expr {
        let dims = weight
            .sinfo
            .as_tensor()
            .and_then(|t| t.dims())
            .unwrap_or_default();
        let shape = (
            dims[0].as_const().unwrap_or(0),
            dims[1].as_const().unwrap_or(0),
        );
        let value = dequantize_weight(packed, scales, shape, false).expect("panels dequantize");
        self.bind(weight, "dequantized", value)
    }
}

/// The part of a weight's name that says what it is (`q_proj` of
/// `model.layers.0.self_attn.q_proj.weight`, `embed_tokens`, `lm_head`).
fn short_weight_name(name: &str) -> &str {
    let mut parts = name.rsplit('.');
    match (parts.next(), parts.next()) {
        (Some("weight"), Some(owner)) => owner,
        (Some(last), _) => last,
        _ => name,
    }
}

/// Replaces every use of a weight in `expr` by its dequantized form.
fn replace_weights(expr: &mut Expr, dequantized: &HashMap<String, Expr>) {
    match expr {
        Expr::Var(v) => {
            if let Some(value) = dequantized.get(&v.name) {
                *expr = value.clone();
            }
        }
        Expr::Call(call) => call
            .args
            .iter_mut()
            .for_each(|a| replace_weights(a, dequantized)),
        Expr::Tuple(items) => items
            .iter_mut()
            .for_each(|a| replace_weights(a, dequantized)),
        Expr::TupleGetItem(tuple, _) => replace_weights(tuple, dequantized),
        _ => {}
    }
}
