//! `PackMatmulWeights`: `matmul(x, permute_dims(w))` with `w` a 2-D weight parameter (a
//! `Linear`) becomes `packed_matmul(x, pack_weight(w))`, the weight packed into the column
//! panels of the target's matmul microkernels. In a function marked for quantized weights
//! ([`WEIGHT_QUANT_ATTR`], one of [`WEIGHT_FORMATS`]), an f32 weight is quantized instead:
//! `packed_matmul_quant(x, pack_weight_quant(w, s), s)` with `s = quantize_scales(w)`.
//! Packing and quantizing depend on the weight only, so `LiftTransformParams` moves them
//! to compile time; the transpose disappears. In such a function an embedding lookup
//! `take(w, ids)` of an f32 weight reads a quantized table too: `take_quant(q, s, ids)`
//! with the table quantized exactly as a linear weight of the same shape, so a tied
//! embedding and output head share one quantized copy (the lift computes it once).
//!
//! A format with int8 activations (w8a8, w4a8) packs the weight in the quads layout and
//! quantizes each activation at run time, once per activation however many linear layers
//! read it (q/k/v, gate/up): `xs = activation_scales(x)`, `xq = quantize_activations(x,
//! xs)`, `y = packed_matmul_int(xq, xs, packed, scales, weight_correction(packed,
//! scales))`.

use super::{Pass, PassError};
use oxrelax_dsl::ir::{Binding, BindingValue, Call, Callee, Function};
use oxrelax_dsl::op::{
    activation_scales, pack_weight, pack_weight_quant, packed_matmul, packed_matmul_int,
    packed_matmul_quant, quantize_activations, quantize_scales, take_quant, weight_correction,
    QuantLayout,
};
use oxrelax_dsl::{AttrValue, DataType, Expr, IRModule, Target, Var};
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
    pub scales: DataType,
    /// The panels' layout: `Quads` for int8 activations (the dot-product microkernels).
    pub layout: QuantLayout,
}

impl WeightFormat {
    /// Whether linear layers quantize their activations to int8 at run time.
    fn int8_activations(&self) -> bool {
        self.layout == QuantLayout::Quads
    }
}

/// A format of f32-activation panels.
const fn float_activations(name: &'static str, bits: i64, scales: DataType) -> WeightFormat {
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
        scales: DataType::F16,
        layout: QuantLayout::Quads,
    }
}

/// Every quantized weight format.
pub const WEIGHT_FORMATS: [WeightFormat; 5] = [
    float_activations("q8", 8, DataType::F32),
    float_activations("q4f32", 4, DataType::F32),
    float_activations("q4f16", 4, DataType::F16),
    int8_activations("w8a8", 8),
    int8_activations("w4a8", 4),
];

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
    let w = static_weight(call.args.first()?, weights, &[DataType::F32, DataType::F16])?;
    axes_ok.then_some(w)
}

/// `expr` when it is a weight parameter of static 2-D shape and one of `dtypes`.
fn static_weight(expr: &Expr, weights: &BTreeSet<String>, dtypes: &[DataType]) -> Option<Var> {
    let Expr::Var(w) = expr else {
        return None;
    };
    let tensor = w.sinfo.as_tensor()?;
    let dims = tensor.dims()?;
    let static_2d = dims.len() == 2 && dims.iter().all(|d| d.as_const().is_some());
    let fits = static_2d && dtypes.contains(&tensor.dtype) && weights.contains(&w.name);
    fits.then(|| w.clone())
}

fn pack_function(function: &mut Function, block: i64) {
    let Some(inputs) = function.num_inputs() else {
        return;
    };
    let format = match function.attrs.get(WEIGHT_QUANT_ATTR) {
        Some(AttrValue::Str(name)) => WEIGHT_FORMATS.iter().find(|f| f.name == name),
        _ => None,
    };
    let weights: BTreeSet<String> = function
        .params
        .iter()
        .skip(inputs)
        .map(|p| p.name.clone())
        .collect();
    let mut transposed: HashMap<String, Var> = HashMap::new();
    for binding_block in &mut function.blocks {
        let mut quantized_activations = HashMap::new();
        let mut rewritten = Vec::with_capacity(binding_block.bindings.len());
        for binding in binding_block.bindings.drain(..) {
            let value = binding.value.expr();
            if let Some(w) =
                op_call(value, "permute_dims").and_then(|c| transposed_weight(c, &weights))
            {
                transposed.insert(binding.var.name.clone(), w);
            }
            let quantized_take =
                format.and_then(|f| quantized_take(&binding, &weights, (block, f)));
            if let Some(bindings) = quantized_take {
                rewritten.extend(bindings);
                continue;
            }
            let rewrite = Rewrite {
                transposed: &transposed,
                activations: &mut quantized_activations,
                block,
                format,
            };
            match rewrite.packed_bindings(&binding) {
                Some(bindings) => rewritten.extend(bindings),
                None => rewritten.push(binding),
            }
        }
        binding_block.bindings = rewritten;
    }
}

/// `[scales = quantize_scales(w), q = pack_weight_quant(w, scales),
/// y = take_quant(q, scales, ids)]` replacing `y = take(w, ids, axis=0)` of a static 2-D
/// f32 weight `w` (quantized in `block`-wide panels of `format`, as a linear weight).
fn quantized_take(
    binding: &Binding,
    weights: &BTreeSet<String>,
    (block, format): (i64, &WeightFormat),
) -> Option<Vec<Binding>> {
    let call = op_call(binding.value.expr(), "take")?;
    let [table, ids] = call.args.as_slice() else {
        return None;
    };
    let axis_zero = matches!(call.attrs.get("axis"), None | Some(AttrValue::Int(0)));
    let w = static_weight(table, weights, &[DataType::F32]).filter(|_| axis_zero)?;
    let dims = w.sinfo.as_tensor()?.dims()?;
    let shape = (dims[0].as_const()?, dims[1].as_const()?);
    let mut bindings = Vec::new();
    let (packed, scales) = quantized(&mut bindings, binding, &Expr::Var(w), (block, format))?;
    let rows = take_quant(&packed, &scales, ids, shape).ok()?;
    finish(bindings, binding, rows)
}

/// What rewriting a matmul needs: the transposed weights seen so far, the int8
/// activations already quantized in this block (by variable), the panel width and format.
struct Rewrite<'a> {
    transposed: &'a HashMap<String, Var>,
    activations: &'a mut HashMap<String, (Expr, Expr)>,
    block: i64,
    format: Option<&'a WeightFormat>,
}

impl Rewrite<'_> {
    /// The bindings replacing `y = matmul(x, wt)` where `wt` transposes weight `w`:
    /// `[packed = pack_weight(w), y = packed_matmul(x, packed)]`, or with a quantized
    /// `format` (and an f32 weight) `[scales = quantize_scales(w), packed =
    /// pack_weight_quant(w, scales), y = packed_matmul_quant(x, packed, scales)]` (int8
    /// activations: [`Rewrite::int8_product`]).
    fn packed_bindings(self, binding: &Binding) -> Option<Vec<Binding>> {
        let call = op_call(binding.value.expr(), "matmul")?;
        let [x, Expr::Var(wt)] = call.args.as_slice() else {
            return None;
        };
        let w = self.transposed.get(&wt.name)?;
        let w_sinfo = w.sinfo.as_tensor()?;
        let features = w_sinfo.dims()?[0].as_const()?;
        let weight = Expr::Var(w.clone());
        let mut bindings = Vec::new();
        let product = match self.format.filter(|_| w_sinfo.dtype == DataType::F32) {
            Some(format) if format.int8_activations() => {
                let (packed, scales) =
                    quantized(&mut bindings, binding, &weight, (self.block, format))?;
                let correction = weight_correction(&packed, &scales).ok()?;
                let correction = bind(&mut bindings, binding, "correction", correction);
                let (xq, xs) = self.quantized_activation(&mut bindings, binding, x)?;
                packed_matmul_int((&xq, &xs), (&packed, &scales, &correction), features).ok()?
            }
            Some(format) => {
                let (packed, scales) =
                    quantized(&mut bindings, binding, &weight, (self.block, format))?;
                packed_matmul_quant(x, &packed, &scales, features).ok()?
            }
            None => {
                let packed = pack_weight(&weight, self.block).ok()?;
                let packed = bind(&mut bindings, binding, "packed", packed);
                packed_matmul(x, &packed, features).ok()?
            }
        };
        finish(bindings, binding, product)
    }

    /// `x`'s int8 codes and row scales: bound (after `bindings`) the first time a
    /// variable `x` is multiplied in this block, reused after.
    fn quantized_activation(
        self,
        bindings: &mut Vec<Binding>,
        binding: &Binding,
        x: &Expr,
    ) -> Option<(Expr, Expr)> {
        let key = match x {
            Expr::Var(var) => Some(var.name.clone()),
            _ => None,
        };
        if let Some(found) = key.as_ref().and_then(|k| self.activations.get(k)) {
            return Some(found.clone());
        }
        let scales = bind(bindings, binding, "x_scales", activation_scales(x).ok()?);
        let codes = quantize_activations(x, &scales).ok()?;
        let quantized = (bind(bindings, binding, "xq", codes), scales);
        if let Some(key) = key {
            self.activations.insert(key, quantized.clone());
        }
        Some(quantized)
    }
}

/// Binds `weight`'s quantized panels `block` wide and their scales (after `bindings`),
/// and returns `(packed, scales)`.
fn quantized(
    bindings: &mut Vec<Binding>,
    binding: &Binding,
    weight: &Expr,
    (block, format): (i64, &WeightFormat),
) -> Option<(Expr, Expr)> {
    let scales = quantize_scales(weight, block, format.bits, format.scales).ok()?;
    let scales = bind(bindings, binding, "scales", scales);
    let packed = pack_weight_quant(weight, &scales, (format.bits, format.layout)).ok()?;
    Some((bind(bindings, binding, "packed", packed), scales))
}

/// Appends a binding of `value` to a variable named after `binding`'s (`{name}_{suffix}`),
/// and returns that variable.
fn bind(bindings: &mut Vec<Binding>, binding: &Binding, suffix: &str, value: Expr) -> Expr {
    let var = Var {
        name: format!("{}_{suffix}", binding.var.name),
        sinfo: value.sinfo(),
        dataflow: binding.var.dataflow,
    };
    bindings.push(Binding {
        var: var.clone(),
        value: BindingValue::Expr(value),
    });
    Expr::Var(var)
}

/// `bindings` then `binding`'s variable bound to `value`, which must have its struct info.
fn finish(mut bindings: Vec<Binding>, binding: &Binding, value: Expr) -> Option<Vec<Binding>> {
    if value.sinfo() != binding.var.sinfo {
        return None;
    }
    bindings.push(Binding {
        var: binding.var.clone(),
        value: BindingValue::Expr(value),
    });
    Some(bindings)
}
