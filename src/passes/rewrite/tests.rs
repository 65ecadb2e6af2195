//! Tests of the rewrite phases on a small decoder-like function (an embedding lookup,
//! layers of two linear projections of one activation, summed, and an output head tied
//! to the embedding) and on residual adds read by norms.

use super::*;
use crate::passes::{Pass, QuantizeWeights, WEIGHT_QUANT_ATTR};
use oxrelax_dsl::ir::{Binding, BindingValue, Callee};
use oxrelax_dsl::{op, AttrValue, Attrs, DType, StructInfo, SymExpr, Var};

const WIDTH: i64 = 40;

fn target() -> Target {
    Target::new("x86_64-unknown-linux-gnu", &["avx2", "fma"])
}

/// `f(ids, weights...)`: `h = take(embed, ids)`, per layer `h = h @ q^T + h @ k^T`, and
/// `h @ embed^T`, [`WIDTH`] wide.
fn layered(layers: usize, format: Option<&str>) -> IRModule {
    layered_of((layers, WIDTH), format)
}

/// [`layered`], `width` wide.
fn layered_of((layers, width): (usize, i64), format: Option<&str>) -> IRModule {
    let weight = |name: String, rows: i64| {
        let dims = vec![SymExpr::int(rows), SymExpr::int(width)];
        Var::new(&name, StructInfo::tensor(dims, DType::F32))
    };
    let ids = Var::new(
        "ids",
        StructInfo::tensor(vec![SymExpr::int(1), SymExpr::int(1)], DType::I32),
    );
    let embed = weight("model.embed_tokens.weight".into(), 50);
    let mut params = vec![ids.clone(), embed.clone()];
    let table = Expr::Var(embed);
    let mut bindings = Vec::new();
    let mut bind = |name: String, value: Expr| push_binding(&mut bindings, (&name, true), value);
    let mut h = bind("h".into(), op::take(&table, &Expr::Var(ids), 0).unwrap());
    for layer in 0..layers {
        let mut products = Vec::new();
        for proj in ["q", "k"] {
            let w = weight(format!("model.layers.{layer}.{proj}.weight"), width);
            params.push(w.clone());
            let t = bind(
                format!("{proj}t{layer}"),
                op::permute_dims(&Expr::Var(w), None).unwrap(),
            );
            products.push(bind(format!("{proj}{layer}"), op::matmul(&h, &t).unwrap()));
        }
        h = bind(
            format!("h{layer}"),
            op::add(&products[0], &products[1]).unwrap(),
        );
    }
    let head = bind("head".into(), op::permute_dims(&table, None).unwrap());
    let logits = op::matmul(&h, &head).unwrap();
    let out = Var::new("out", logits.sinfo());
    bindings.push(Binding {
        var: out.clone(),
        value: BindingValue::Expr(logits),
    });
    module_of((params, 1, format), bindings, Expr::Var(out))
}

/// Binds `value` to a new variable `name` (a dataflow one when `dataflow`: it is not
/// returned) at the end of `bindings`; the variable.
fn push_binding(bindings: &mut Vec<Binding>, (name, dataflow): (&str, bool), value: Expr) -> Expr {
    let var = Var {
        dataflow,
        ..Var::new(name, value.sinfo())
    };
    bindings.push(Binding {
        var: var.clone(),
        value: BindingValue::Expr(value),
    });
    Expr::Var(var)
}

/// A module of one exported function `f` of `params` (the first `inputs` of them its
/// inputs, the rest weights), in weight format `format`, binding `bindings` in one
/// dataflow block and returning `ret`.
fn module_of(
    (params, inputs, format): (Vec<Var>, i64, Option<&str>),
    bindings: Vec<Binding>,
    ret: Expr,
) -> IRModule {
    let mut attrs = Attrs::new();
    attrs.insert(
        oxrelax_dsl::ir::NUM_INPUT_ATTR.into(),
        AttrValue::Int(inputs),
    );
    if let Some(format) = format {
        attrs.insert(WEIGHT_QUANT_ATTR.into(), AttrValue::Str(format.into()));
    }
    let function = Function {
        params,
        blocks: vec![BindingBlock {
            dataflow: true,
            bindings,
        }],
        ret,
        exported: true,
        attrs,
    };
    IRModule {
        functions: [("f".to_string(), function)].into(),
        ..IRModule::default()
    }
}

/// The module after the phases and weight quantization, in the pipeline's order, and the
/// phases' reports (the split phase's first).
fn rewritten(module: IRModule) -> (IRModule, Vec<PhaseReport>) {
    let target = target();
    let split = RewritePhase::new(&SPLIT_PHASE, &target);
    let module = split.run(module).unwrap();
    let mut reports = vec![split.last_report().unwrap()];
    let mut module = QuantizeWeights {
        target: target.clone(),
    }
    .run(module)
    .unwrap();
    for phase in &PHASES {
        let pass = RewritePhase::new(phase, &target);
        module = pass.run(module).unwrap();
        reports.push(pass.last_report().unwrap());
    }
    (module, reports)
}

/// How many calls of `op` the module's function binds.
fn calls(module: &IRModule, op: &str) -> usize {
    module.functions["f"]
        .bindings()
        .filter(|b| matches!(b.value.expr(), Expr::Call(c) if c.callee == Callee::Op(op.into())))
        .count()
}

fn check_well_formed_and_text(module: &IRModule) {
    oxrelax_dsl::wellformed::check_module(module).unwrap();
    let text = oxrelax_dsl::text::print_module(module);
    assert_eq!(&oxrelax_dsl::text::parse_module(&text).unwrap(), module);
}

#[test]
fn no_quantized_weight_is_left_dequantized() {
    for format in crate::passes::WEIGHT_FORMATS {
        let (module, reports) = rewritten(layered(2, Some(format.name)));
        let int8 = format.layout == oxrelax_dsl::op::QuantLayout::Quads;
        assert_eq!(calls(&module, "dequantize_weight"), 0, "{}", format.name);
        assert_eq!(calls(&module, "take_quant"), 1);
        assert_eq!(calls(&module, "matmul"), 0);
        // The tied head reads the float hidden state under every format (int8 weights).
        let int_matmuls = if int8 { 4 } else { 0 };
        let quant_matmuls = 5 - int_matmuls;
        let counts = (
            calls(&module, "packed_matmul_int"),
            calls(&module, "packed_matmul_quant"),
        );
        assert_eq!(counts, (int_matmuls, quant_matmuls), "{}", format.name);
        // Both projections of a layer read one quantized activation (shared e-class).
        let quantized_activations = if int8 { 2 } else { 0 };
        assert_eq!(
            calls(&module, "activation_group_scales"),
            quantized_activations
        );
        assert_eq!(
            calls(&module, "quantize_activations"),
            quantized_activations
        );
        // Every projection's transpose was fused first (4 per layer, the head once).
        assert_eq!(reports[1].fired["dequantize-transpose"], 5);
        assert_eq!(
            reports[3].fired,
            BTreeMap::new(),
            "nothing is left for layout"
        );
        check_well_formed_and_text(&module);
    }
}

/// Asymmetric groups (a whole number of groups deep): each projection's quantized matmul
/// plus its offsets' term, a float matmul of the activation's group sums by the offsets
/// (f16 panels); the head stays symmetric 8-bit. A depth of no whole groups (the test
/// above) keeps symmetric groups.
#[test]
fn asymmetric_groups_add_an_offset_term_to_each_projection() {
    for format in crate::passes::WEIGHT_FORMATS.iter().filter(|f| f.offsets) {
        let (module, _) = rewritten(layered_of((2, 64), Some(format.name)));
        let int8 = format.layout == oxrelax_dsl::op::QuantLayout::Quads;
        assert_eq!(calls(&module, "quantize_offsets"), 4, "{}", format.name);
        assert_eq!(calls(&module, "dequantize_weight"), 0, "{}", format.name);
        assert_eq!(calls(&module, "matmul"), 0, "{}", format.name);
        let counts = (
            calls(&module, "packed_matmul_int"),
            calls(&module, "packed_matmul_quant"),
            calls(&module, "packed_matmul"),
        );
        let quantized = if int8 { (4, 1) } else { (0, 5) };
        assert_eq!(counts, (quantized.0, quantized.1, 4), "{}", format.name);
        let f16_offsets = module.functions["f"].bindings().filter(|b| {
            let Expr::Call(call) = b.value.expr() else {
                return false;
            };
            let packs = call.callee == Callee::Op("pack_weight".into());
            packs
                && call.args[0]
                    .sinfo()
                    .as_tensor()
                    .is_some_and(|t| t.dtype == DType::F16)
        });
        assert_eq!(f16_offsets.count(), 4, "{}", format.name);
        check_well_formed_and_text(&module);
    }
}

#[test]
fn float_weights_fuse_their_transpose_into_packing() {
    let (module, reports) = rewritten(layered(3, None));
    assert_eq!(calls(&module, "packed_matmul"), 7);
    assert_eq!(calls(&module, "pack_weight"), 7);
    assert_eq!(calls(&module, "permute_dims") + calls(&module, "matmul"), 0);
    assert_eq!(reports[1].fired, BTreeMap::new());
    assert_eq!(reports[2].fired, BTreeMap::new());
    // One e-graph per distinct segment: the embedding, the first layer, the head; the
    // other two layers are identical to the first and reuse its rewrite.
    assert_eq!((reports[3].egraphs, reports[3].reused), (3, 2));
    assert_eq!(reports[3].fired["transpose-matmul"], 3);
    assert_eq!(reports[3].stops["saturated"], 3);
    check_well_formed_and_text(&module);
}

#[test]
fn reused_rewrites_bind_each_layer_to_its_own_weights() {
    let (module, _) = rewritten(layered(3, Some("w4a8")));
    for layer in 0..3 {
        let weight = format!("model.layers.{layer}.k.weight");
        let reads = module.functions["f"].bindings().filter(|b| {
            let mut found = false;
            b.value
                .expr()
                .for_each_var(&mut |v| found |= v.name == weight);
            found
        });
        assert_eq!(reads.count(), 2, "scales and panels of {weight}");
    }
}

static ONE_ITERATION: Phase = Phase {
    name: "rewrite-one-iteration",
    rules: DEQUANTIZE_RULES,
    iterations: 1,
    nodes: 10_000,
    time: Duration::from_secs(5),
};

#[test]
fn a_limit_stops_an_egraph_and_the_report_says_which() {
    let target = target();
    let quantized = QuantizeWeights {
        target: target.clone(),
    }
    .run(layered(1, Some("q8")))
    .unwrap();
    let transposed = RewritePhase::new(&PHASES[0], &target)
        .run(quantized)
        .unwrap();
    assert_eq!(calls(&transposed, "permute_dims"), 0);
    let pass = RewritePhase::new(&ONE_ITERATION, &target);
    let module = pass.run(transposed).unwrap();
    let report = pass.last_report().unwrap();
    // The embedding and the layer with the head (the head's dequantized table reads no
    // weight of another layer, so it stays in the layer's segment).
    assert_eq!(report.stops["iteration limit 1"], 2, "{report}");
    // What one iteration found is still extracted.
    assert_eq!(calls(&module, "dequantize_weight"), 0);
    assert!(
        report.to_string().contains("dequantize-matmul x3"),
        "{report}"
    );
}

#[test]
fn every_rule_pattern_parses() {
    for phase in std::iter::once(&SPLIT_PHASE).chain(&PHASES) {
        assert_eq!(rules::rewrites(phase.rules).len(), phase.rules.len());
    }
}

/// `f(x, y, w)`: `s0 = x + y`, `n0 = rms_norm(s0)`, `s1 = s0 + n0`, `rms_norm(s1)`: two
/// residual adds, the first read twice.
fn residual() -> IRModule {
    let row = |name: &str, dims: Vec<i64>| {
        let dims = dims.into_iter().map(SymExpr::int).collect();
        Var::new(name, StructInfo::tensor(dims, DType::F32))
    };
    let (x, y, w) = (
        row("x", vec![1, WIDTH]),
        row("y", vec![1, WIDTH]),
        row("w", vec![WIDTH]),
    );
    let mut bindings = Vec::new();
    let mut bind =
        |name: &str, value: Expr| push_binding(&mut bindings, (name, name != "out"), value);
    let weight = Expr::Var(w.clone());
    let norm = |s: &Expr| op::rms_norm(s, &weight, vec![-1], 1e-5).unwrap();
    let s0 = bind(
        "s0",
        op::add(&Expr::Var(x.clone()), &Expr::Var(y.clone())).unwrap(),
    );
    let n0 = bind("n0", norm(&s0));
    let s1 = bind("s1", op::add(&s0, &n0).unwrap());
    let out = bind("out", norm(&s1));
    module_of((vec![x, y, w], 2, None), bindings, out)
}

#[test]
fn a_residual_add_read_only_by_its_norm_is_fused_into_it() {
    let (module, reports) = rewritten(residual());
    // Both adds match; only the one whose sum nothing else reads is extracted fused.
    assert_eq!(reports[4].fired["add-rms-norm"], 2, "{}", reports[4]);
    assert_eq!(calls(&module, "add_rms_norm"), 1);
    assert_eq!((calls(&module, "add"), calls(&module, "rms_norm")), (1, 1));
    check_well_formed_and_text(&module);
}

/// `f(x, w, b)`: a fused projection `y = x @ w^T + b` (`w` of 80 rows) sliced into parts
/// of 40, 16 and 24 features (bounds that are not multiples of the panel width), each
/// part returned.
fn fused_projection(format: Option<&str>) -> IRModule {
    let tensor = |name: &str, dims: &[i64]| {
        let dims = dims.iter().copied().map(SymExpr::int).collect();
        Var::new(name, StructInfo::tensor(dims, DType::F32))
    };
    let (x, w, b) = (
        tensor("x", &[1, 3, WIDTH]),
        tensor("w", &[80, WIDTH]),
        tensor("b", &[80]),
    );
    let mut bindings = Vec::new();
    let returned = |name: &str| ["q", "k", "v"].contains(&name);
    let mut bind =
        |name: &str, value: Expr| push_binding(&mut bindings, (name, !returned(name)), value);
    let wt = bind("wt", op::permute_dims(&Expr::Var(w.clone()), None).unwrap());
    let y = bind("y", op::matmul(&Expr::Var(x.clone()), &wt).unwrap());
    let y = bind("yb", op::add(&y, &Expr::Var(b.clone())).unwrap());
    let parts: Vec<Expr> = [("q", 0, 40), ("k", 40, 56), ("v", 56, 80)]
        .into_iter()
        .map(|(name, begin, end)| {
            let bounds = (vec![SymExpr::int(begin)], vec![SymExpr::int(end)]);
            bind(
                name,
                op::strided_slice(&y, vec![2], bounds.0, bounds.1, None).unwrap(),
            )
        })
        .collect();
    module_of((vec![x, w, b], 1, format), bindings, Expr::Tuple(parts))
}

/// The `strided_slice` calls of the module's function that slice an activation (the
/// function's input `x` or a value computed from it).
fn activation_slices(module: &IRModule) -> usize {
    let function = &module.functions["f"];
    let mut from_input: HashSet<String> = ["x".to_string()].into();
    let mut slices = 0;
    for binding in function.bindings() {
        let mut reads_input = false;
        binding
            .value
            .expr()
            .for_each_var(&mut |v| reads_input |= from_input.contains(&v.name));
        if !reads_input {
            continue;
        }
        from_input.insert(binding.var.name.clone());
        let slice = Callee::Op("strided_slice".into());
        slices += usize::from(matches!(binding.value.expr(), Expr::Call(c) if c.callee == slice));
    }
    slices
}

#[test]
fn a_sliced_fused_projection_becomes_one_projection_per_part() {
    let formats = crate::passes::WEIGHT_FORMATS.map(|f| Some(f.name));
    for format in std::iter::once(None).chain(formats) {
        let label = format.unwrap_or("f32");
        let module = fused_projection(format);
        assert_eq!(activation_slices(&module), 3);
        let (module, reports) = rewritten(module);
        assert_eq!(
            reports[0].fired["split-projection"], 3,
            "{label}: {}",
            reports[0]
        );
        assert_eq!(reports[0].fired["split-bias"], 3, "{label}: {}", reports[0]);
        assert_eq!(activation_slices(&module), 0, "{label}");
        // Each part is its own packed projection, reading its own slice of the weight.
        let projections = ["packed_matmul", "packed_matmul_quant", "packed_matmul_int"]
            .map(|op| calls(&module, op));
        assert_eq!(
            projections.iter().sum::<usize>(),
            3,
            "{label}: {projections:?}"
        );
        assert_eq!(calls(&module, "add"), 3, "{label}: one bias slice per part");
        assert_eq!(calls(&module, "matmul"), 0, "{label}");
        check_well_formed_and_text(&module);
    }
}
