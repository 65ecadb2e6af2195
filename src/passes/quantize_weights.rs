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
use oxrelax_dsl::op::{
    add, astype, dequantize_weight, expand_dims, matmul, pack_weight_quant, permute_dims,
    quantize_offsets, quantize_scales, reshape, subtract, sum, QuantLayout,
};
use oxrelax_dsl::tir::QUANT_GROUP;
use oxrelax_dsl::{AttrValue, DType, Expr, IRModule, SymExpr, Target, Var};
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
    /// Whether groups are asymmetric (4 bits): a scale spanning each group and an offset
    /// (stored as the scales are), which a linear layer applies as the product of its
    /// activations' group sums with the offsets.
    pub offsets: bool,
}

/// A format of f32-activation panels.
const fn float_activations(name: &'static str, bits: i64, scales: DType) -> WeightFormat {
    WeightFormat {
        name,
        bits,
        scales,
        layout: QuantLayout::Rows,
        offsets: false,
    }
}

/// A format of int8-activation panels (f16 group scales).
const fn int8_activations(name: &'static str, bits: i64) -> WeightFormat {
    WeightFormat {
        name,
        bits,
        scales: DType::F16,
        layout: QuantLayout::Quads,
        offsets: false,
    }
}

/// `format` with asymmetric 4-bit groups.
const fn with_offsets(format: WeightFormat) -> WeightFormat {
    WeightFormat {
        offsets: true,
        ..format
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
pub const WEIGHT_FORMATS: [WeightFormat; 7] = [
    float_activations("q8", 8, DType::F32),
    float_activations("q4f32", 4, DType::F32),
    float_activations("q4f16", 4, DType::F16),
    int8_activations("w8a8", 8),
    int8_activations("w4a8", 4),
    with_offsets(float_activations("q4f16_asym", 4, DType::F16)),
    with_offsets(int8_activations("w4a8_asym", 4)),
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
    let asymmetric = match format.offsets {
        true => linear_only_weights(function, &params),
        false => BTreeSet::new(),
    };
    let mut taken: BTreeSet<String> = function.params.iter().map(|p| p.name.clone()).collect();
    taken.extend(function.bindings().map(|b| b.var.name.clone()));
    for binding_block in &mut function.blocks {
        let mut panels: HashMap<String, Panels> = HashMap::new();
        // The offsets of the weight each transposed weight of `asymmetric` stands for.
        let mut offsets_of: HashMap<String, Expr> = HashMap::new();
        // The group sums of each activation an offsets' term has read.
        let mut group_sums: HashMap<String, Expr> = HashMap::new();
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
                let asymmetric = asymmetric.contains(&name);
                let weight_panels = panels
                    .entry(name.clone())
                    .or_insert_with(|| binder.panels(weight, (block, format), asymmetric))
                    .clone();
                if let Some(offsets) = weight_panels.offsets.clone() {
                    offsets_of.insert(binding.var.name.clone(), offsets);
                }
                let value = binder.dequantized(weight, &weight_panels);
                dequantized.insert(name, value);
            }
            replace_weights(binding.value.expr_mut(), &dequantized);
            match linear_offsets(&binding, &offsets_of) {
                Some((x, offsets)) => {
                    binder.with_offset_term(binding, (&x, &mut group_sums), &offsets)
                }
                None => binder.bindings.push(binding),
            }
        }
        binding_block.bindings = binder.bindings;
    }
}

/// The weights that get asymmetric groups: non-head weights a whole number of groups
/// deep whose every read is `t = permute_dims(w)` and every read of `t` is
/// `matmul(x, t)` in the same block (the offsets enter as a term of each such matmul).
/// A weight read otherwise keeps symmetric groups.
fn linear_only_weights(
    function: &Function,
    params: &HashMap<String, (Var, bool)>,
) -> BTreeSet<String> {
    let candidate = |w: &&Var| {
        let found = params.get(&w.name);
        found.is_some_and(|(w, head)| !head && static_dims(w)[1] % QUANT_GROUP == 0)
    };
    // Each transposed candidate weight: the weight and the block transposing it.
    let mut transposed: HashMap<String, (String, usize)> = HashMap::new();
    let mut refused: BTreeSet<String> = BTreeSet::new();
    for (index, block) in function.blocks.iter().enumerate() {
        for binding in &block.bindings {
            let expr = binding.value.expr();
            if let Some(w) = transpose_of(expr).filter(candidate) {
                transposed.insert(binding.var.name.clone(), (w.name.clone(), index));
                continue;
            }
            expr.for_each_var(&mut |v| match transposed.get(&v.name) {
                Some((w, at)) if !linear_read(expr, v) || *at != index => {
                    refused.insert(w.clone());
                }
                Some(_) => {}
                None if params.contains_key(&v.name) => {
                    refused.insert(v.name.clone());
                }
                None => {}
            });
        }
    }
    function.ret.for_each_var(&mut |v| {
        let read = transposed.get(&v.name).map_or(&v.name, |(w, _)| w);
        refused.insert(read.clone());
    });
    transposed
        .into_values()
        .map(|(w, _)| w)
        .filter(|w| !refused.contains(w))
        .collect()
}

/// `w` of `permute_dims(w)` with the default axes (a 2-D weight's transpose).
fn transpose_of(expr: &Expr) -> Option<&Var> {
    let Expr::Call(call) = expr else {
        return None;
    };
    let transpose =
        call.callee == Callee::Op("permute_dims".into()) && !call.attrs.contains_key("axes");
    match call.args.first() {
        Some(Expr::Var(w)) if transpose => Some(w),
        _ => None,
    }
}

/// Whether `expr` is `matmul(x, t)` with `t` the variable `t` (and `x` another one).
fn linear_read(expr: &Expr, t: &Var) -> bool {
    let Expr::Call(call) = expr else {
        return false;
    };
    let matmul = call.callee == Callee::Op("matmul".into());
    matmul && matches!(&call.args[..], [Expr::Var(x), Expr::Var(w)] if w == t && x != t)
}

/// For `y = matmul(x, t)` with `t` a transposed weight of asymmetric groups, `x` and the
/// weight's offsets.
fn linear_offsets(binding: &Binding, offsets_of: &HashMap<String, Expr>) -> Option<(Expr, Expr)> {
    let Expr::Call(call) = binding.value.expr() else {
        return None;
    };
    match (&call.callee, &call.args[..]) {
        (Callee::Op(op), [x, Expr::Var(t)]) if op == "matmul" => {
            Some((x.clone(), offsets_of.get(&t.name)?.clone()))
        }
        _ => None,
    }
}

/// A weight's quantized form, bound: its group scales, its panels and, with asymmetric
/// groups, its offsets (`[H, L/32]`).
#[derive(Clone)]
struct Panels {
    scales: Expr,
    packed: Expr,
    offsets: Option<Expr>,
}

/// Binds new variables in a block being rewritten.
struct Binder<'a> {
    taken: &'a mut BTreeSet<String>,
    dataflow: bool,
    bindings: Vec<Binding>,
}

impl Binder<'_> {
    /// Binds `value` to a fresh variable named after `hint`.
    fn bind(&mut self, hint: &str, value: Expr) -> Expr {
        let name = oxrelax_dsl::names::fresh_name(hint, |n| self.taken.contains(n));
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

    /// Binds `weight`'s scales, offsets (with `asymmetric` groups) and quantized panels.
    fn panels(
        &mut self,
        weight: &Var,
        (block, format): (i64, &WeightFormat),
        asymmetric: bool,
    ) -> Panels {
        let name = short_weight_name(&weight.name);
        let w = Expr::Var(weight.clone());
        let scales = quantize_scales(&w, block, (format.bits, format.scales), asymmetric)
            .expect("a static 2-D f32 weight has group scales");
        let scales = self.bind(&format!("{name}_scales"), scales);
        let (centered, offsets) = match asymmetric {
            true => {
                let (centered, offsets) = self.centered(weight, &scales, format.scales);
                (centered, Some(offsets))
            }
            false => (w, None),
        };
        let packed = pack_weight_quant(&centered, &scales, (format.bits, format.layout))
            .expect("a static 2-D f32 weight packs with its scales");
        Panels {
            scales,
            packed: self.bind(&format!("{name}_packed"), packed),
            offsets,
        }
    }

    /// Binds `weight`'s group offsets under asymmetric `scales` (stored as `dtype`) and
    /// the weight minus them; `(centered weight, offsets)`.
    fn centered(&mut self, weight: &Var, scales: &Expr, dtype: DType) -> (Expr, Expr) {
        let name = short_weight_name(&weight.name);
        let w = Expr::Var(weight.clone());
        let offsets = quantize_offsets(&w, scales, dtype).expect("offsets of whole groups");
        let offsets = self.bind(&format!("{name}_offsets"), offsets);
        let shape = static_dims(weight).map(SymExpr::int);
        let grouped = reshape(&w, in_groups(&shape)).expect("whole groups");
        let grouped = self.bind(&format!("{name}_grouped"), grouped);
        let wide = astype(&offsets, DType::F32).expect("f16 offsets widen");
        let wide = self.bind(&format!("{name}_wide_offsets"), wide);
        let wide = expand_dims(&wide, vec![-1]).expect("offsets broadcast over groups");
        let wide = self.bind(&format!("{name}_wide_offsets"), wide);
        let centered = subtract(&grouped, &wide).expect("offsets broadcast over groups");
        let centered = self.bind(&format!("{name}_centered_groups"), centered);
        let centered = reshape(&centered, shape.to_vec()).expect("the weight's shape");
        (self.bind(&format!("{name}_centered"), centered), offsets)
    }

    /// Binds `weight` dequantized from its panels (without its offsets), next to the
    /// call reading it (so the rewrite phase sees both in one segment); the dequantized
    /// weight.
    fn dequantized(&mut self, weight: &Var, panels: &Panels) -> Expr {
        let [rows, depth] = static_dims(weight);
        let value = dequantize_weight(&panels.packed, &panels.scales, (rows, depth), false)
            .expect("panels dequantize");
        self.bind(
            &format!("{}_dequantized", short_weight_name(&weight.name)),
            value,
        )
    }

    /// Binds `y = matmul(x, t)` (`binding`, `t` the symmetric part of a weight of
    /// asymmetric groups) as `matmul(x, t) + matmul(group_sums(x), offsets^T)`; the
    /// group sums of an activation several such matmuls read are bound once (in `sums`,
    /// by its variable's name).
    fn with_offset_term(
        &mut self,
        binding: Binding,
        (x, sums): (&Expr, &mut HashMap<String, Expr>),
        offsets: &Expr,
    ) {
        let name = binding.var.name.clone();
        let main = self.bind(&format!("{name}_symmetric"), binding.value.expr().clone());
        let key = match x {
            Expr::Var(v) => Some(v.name.clone()),
            _ => None,
        };
        let known = key.as_ref().and_then(|k| sums.get(k)).cloned();
        let x_sums = known.unwrap_or_else(|| {
            let sinfo = x.sinfo();
            let dims = sinfo.as_tensor().and_then(|t| t.dims()).unwrap_or_default();
            let grouped = reshape(x, in_groups(dims)).expect("whole groups");
            let grouped = self.bind(&format!("{name}_grouped"), grouped);
            let x_sums = sum(&grouped, Some(vec![-1]), false).expect("group sums");
            let x_sums = self.bind(&format!("{name}_group_sums"), x_sums);
            if let Some(key) = key {
                sums.insert(key, x_sums.clone());
            }
            x_sums
        });
        let transposed = permute_dims(offsets, None).expect("2-D offsets");
        let transposed = self.bind(&format!("{name}_offsets"), transposed);
        let term = matmul(&x_sums, &transposed).expect("group sums times offsets");
        let term = self.bind(&format!("{name}_offset_term"), term);
        let total = add(&main, &term).expect("two products of one shape");
        self.bindings.push(Binding {
            var: binding.var,
            value: BindingValue::Expr(total),
        });
    }
}

/// `dims` with the last (a whole number of groups) split into `[groups, QUANT_GROUP]`.
fn in_groups(dims: &[SymExpr]) -> Vec<SymExpr> {
    let (depth, outer) = dims.split_last().expect("a tensor of at least one dim");
    let groups = depth.as_const().expect("a static depth") / QUANT_GROUP;
    let mut grouped = outer.to_vec();
    grouped.extend([SymExpr::int(groups), SymExpr::int(QUANT_GROUP)]);
    grouped
}

/// The static `[rows, depth]` of a 2-D weight.
fn static_dims(weight: &Var) -> [i64; 2] {
    let dims = weight
        .sinfo
        .as_tensor()
        .and_then(|t| t.dims())
        .unwrap_or_default();
    let at = |i: usize| dims.get(i).and_then(|d| d.as_const()).unwrap_or(0);
    [at(0), at(1)]
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
