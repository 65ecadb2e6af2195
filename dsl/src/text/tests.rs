//! Shared test helpers and tests of whole graph functions (an MLP, attention, KV-cache
//! calls); the syntax in detail is in `tests_syntax`, TIR in `tests_tir`, errors in
//! `tests_errors`.

use super::*;
use crate::attrs::{AttrValue, Attrs};
use crate::ir::{Binding, BindingBlock, BindingValue, Call, Callee, Constant, PrimValue};
use crate::tir::PrimFunc;
use crate::{DType, Expr, Function, StructInfo, SymExpr, SymVar, Var};

pub(super) const F32: DType = DType::F32;

pub(super) fn n() -> SymExpr {
    SymVar::bounded("n", 2048).expr()
}

pub(super) fn m() -> SymExpr {
    SymVar::bounded("m", 4096).expr()
}

pub(super) fn c(v: i64) -> SymExpr {
    SymExpr::int(v)
}

pub(super) fn t(shape: &[SymExpr], dtype: DType) -> StructInfo {
    StructInfo::tensor(shape.to_vec(), dtype)
}

pub(super) fn var(name: &str, sinfo: StructInfo) -> Var {
    Var::new(name, sinfo)
}

pub(super) fn dvar(name: &str, sinfo: StructInfo) -> Var {
    Var {
        dataflow: true,
        ..Var::new(name, sinfo)
    }
}

pub(super) fn call(callee: Callee, args: Vec<Expr>, attrs: Attrs, sinfo: StructInfo) -> Expr {
    Expr::Call(Box::new(Call {
        callee,
        args,
        attrs,
        sinfo,
    }))
}

pub(super) fn op(name: &str, args: &[&Var], attrs: Attrs, sinfo: StructInfo) -> Expr {
    let args = args.iter().map(|v| Expr::from(*v)).collect();
    call(Callee::Op(name.into()), args, attrs, sinfo)
}

/// `var = op(args)` with the call's struct info equal to the variable's.
pub(super) fn bind_op(var: &Var, name: &str, args: &[&Var], attrs: Attrs) -> Binding {
    bind(var, op(name, args, attrs, var.sinfo.clone()))
}

pub(super) fn bind(var: &Var, value: Expr) -> Binding {
    Binding {
        var: var.clone(),
        value: BindingValue::Expr(value),
    }
}

pub(super) fn attrs(items: &[(&str, AttrValue)]) -> Attrs {
    items
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

pub(super) fn dataflow(bindings: Vec<Binding>) -> BindingBlock {
    BindingBlock {
        dataflow: true,
        bindings,
    }
}

pub(super) fn plain(bindings: Vec<Binding>) -> BindingBlock {
    BindingBlock {
        dataflow: false,
        bindings,
    }
}

pub(super) fn func(params: &[&Var], blocks: Vec<BindingBlock>, ret: Expr) -> Function {
    Function {
        params: params.iter().map(|v| (*v).clone()).collect(),
        blocks,
        ret,
        exported: false,
        attrs: Default::default(),
    }
}

pub(super) fn module(graphs: Vec<(&str, Function)>, prims: Vec<(&str, PrimFunc)>) -> IRModule {
    IRModule {
        functions: graphs
            .into_iter()
            .map(|(k, f)| (k.to_string(), f))
            .collect(),
        prim_funcs: prims.into_iter().map(|(k, f)| (k.to_string(), f)).collect(),
    }
}

/// Prints, parses, compares, and checks that printing again gives the same text.
pub(super) fn assert_round_trip(m: &IRModule) -> String {
    let text = print_module(m);
    let parsed = parse_module(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(&parsed, m, "{text}");
    assert_eq!(print_module(&parsed), text);
    text
}

pub(super) fn graph_module(name: &str, f: Function) -> IRModule {
    module(vec![(name, f)], vec![])
}

fn mlp() -> IRModule {
    let x = var("x", t(&[c(1), n(), c(64)], F32));
    let w1 = var(
        "model.layers.0.mlp.up_proj.weight",
        t(&[c(64), c(256)], F32),
    );
    let w2 = var(
        "model.layers.0.mlp.down_proj.weight",
        t(&[c(256), c(64)], F32),
    );
    let hidden = t(&[c(1), n(), c(256)], F32);
    let (lv, lv1) = (dvar("lv", hidden.clone()), dvar("lv1", hidden));
    let lv2 = dvar("lv2", x.sinfo.clone());
    let gv = var("gv", x.sinfo.clone());
    let block = dataflow(vec![
        bind_op(&lv, "matmul", &[&x, &w1], Attrs::new()),
        bind_op(&lv1, "silu", &[&lv], Attrs::new()),
        bind_op(&lv2, "matmul", &[&lv1, &w2], Attrs::new()),
        bind_op(&gv, "add", &[&lv2, &x], Attrs::new()),
    ]);
    let mut f = func(&[&x, &w1, &w2], vec![block], Expr::from(&gv));
    f.exported = true;
    graph_module("mlp", f)
}

#[test]
fn mlp_round_trips_with_dotted_names() {
    let text = assert_round_trip(&mlp());
    assert!(text.starts_with("export graph @mlp(\n  x: Tensor((1, n, 64), f32),\n"));
    assert!(text.contains("  where n <= 2048\n"));
    assert!(text.contains("matmul(x, model.layers.0.mlp.up_proj.weight)"));
    assert!(text.contains("    output gv: Tensor((1, n, 64), f32) = add(lv2, x)\n"));
}

fn attention() -> IRModule {
    let head = |len: SymExpr| t(&[c(1), c(8), len, c(64)], F32);
    let (q, k, v) = (
        var("q", head(n())),
        var("k", head(m())),
        var("v", head(m())),
    );
    let scores = t(&[c(1), c(8), n(), m()], F32);
    let kt = dvar("kt", t(&[c(1), c(8), c(64), m()], F32));
    let (s, scaled, masked, p) = (
        dvar("s", scores.clone()),
        dvar("scaled", scores.clone()),
        dvar("masked", scores.clone()),
        dvar("p", scores.clone()),
    );
    let mask_sinfo = t(&[n(), m()], F32);
    let (full, mask) = (
        dvar("full", mask_sinfo.clone()),
        dvar("mask", mask_sinfo.clone()),
    );
    let (keep, out) = (dvar("keep", scores.clone()), var("out", head(n())));
    let scale = Expr::Constant(Constant {
        dtype: F32,
        shape: vec![],
        values: vec![0.125],
    });
    let causal = Expr::Constant(Constant {
        dtype: F32,
        shape: vec![2, 2],
        values: vec![0.0, f64::NEG_INFINITY, 0.0, 0.0],
    });
    let bool_mask = Expr::Constant(Constant {
        dtype: DType::Bool,
        shape: vec![1, 1],
        values: vec![1.0],
    });
    let fill = Expr::Prim(PrimValue::Float(f64::NEG_INFINITY, F32));
    let bindings = vec![
        bind_op(
            &kt,
            "permute_dims",
            &[&k],
            attrs(&[("axes", AttrValue::Ints(vec![0, 1, 3, 2]))]),
        ),
        bind_op(&s, "matmul", &[&q, &kt], Attrs::new()),
        bind(
            &scaled,
            call(
                Callee::Op("multiply".into()),
                vec![Expr::from(&s), scale],
                Attrs::new(),
                scores.clone(),
            ),
        ),
        bind(
            &full,
            call(
                Callee::Op("full".into()),
                vec![Expr::Shape(vec![n(), m()]), fill],
                attrs(&[("dtype", AttrValue::DType(F32))]),
                mask_sinfo,
            ),
        ),
        bind_op(&mask, "triu", &[&full], attrs(&[("k", AttrValue::Int(1))])),
        bind_op(&masked, "add", &[&scaled, &mask], Attrs::new()),
        bind(
            &keep,
            call(
                Callee::Op("where".into()),
                vec![bool_mask, Expr::from(&masked), causal],
                Attrs::new(),
                scores,
            ),
        ),
        bind_op(
            &p,
            "softmax",
            &[&keep],
            attrs(&[("axis", AttrValue::Int(-1))]),
        ),
        bind_op(&out, "matmul", &[&p, &v], Attrs::new()),
    ];
    graph_module(
        "attention",
        func(&[&q, &k, &v], vec![dataflow(bindings)], Expr::from(&out)),
    )
}

#[test]
fn attention_with_causal_mask_round_trips() {
    let text = assert_round_trip(&attention());
    assert!(text.contains("  where m <= 4096, n <= 2048\n"));
    assert!(text.contains("= full(shape(n, m), f32(-inf), dtype=f32)\n"));
    assert!(text.contains(
        "= where(const((1, 1), bool, [1]), masked, const((2, 2), f32, [0.0, -inf, 0.0, 0.0]))\n"
    ));
    assert!(text.contains("= multiply(s, const((), f32, [0.125]))\n"));
    assert!(text.contains("= triu(full, k=1)\n"));
}

#[test]
fn match_cast_declares_its_new_dims() {
    let cache = var("cache", StructInfo::Object);
    let kv = var("kv", t(&[c(1), m(), c(64)], F32));
    let cast = Binding {
        var: kv.clone(),
        value: BindingValue::MatchCast(Expr::from(&cache), kv.sinfo.clone()),
    };
    let f = func(&[&cache], vec![plain(vec![cast])], Expr::from(&kv));
    let text = assert_round_trip(&graph_module("view", f));
    assert!(text.contains("  where m <= 4096\n"));
    assert!(text
        .contains("  kv: Tensor((1, m, 64), f32) = match_cast(cache, Tensor((1, m, 64), f32))\n"));
}

#[test]
fn tuples_and_projections_round_trip() {
    let x = var("x", t(&[c(2), n()], F32));
    let half = t(&[c(1), n()], F32);
    let pair = StructInfo::Tuple(vec![half.clone(), half.clone()]);
    let tup = var("tup", pair.clone());
    let (a, b) = (var("a", half.clone()), var("b", half.clone()));
    let cat = var("cat", x.sinfo.clone());
    let get = |i| Expr::TupleGetItem(Box::new(Expr::from(&tup)), i);
    let both = Expr::Tuple(vec![Expr::from(&a), Expr::from(&b)]);
    let bindings = vec![
        bind_op(
            &tup,
            "split",
            &[&x],
            attrs(&[("sections", AttrValue::Int(2))]),
        ),
        bind(&a, get(0)),
        bind(&b, get(1)),
        bind(
            &cat,
            call(
                Callee::Op("concat".into()),
                vec![both],
                attrs(&[("axis", AttrValue::Int(0))]),
                x.sinfo.clone(),
            ),
        ),
    ];
    let nested = Expr::Tuple(vec![
        Expr::from(&cat),
        Expr::Tuple(vec![Expr::from(&a)]),
        Expr::Tuple(vec![]),
    ]);
    let text = assert_round_trip(&graph_module(
        "tuples",
        func(&[&x], vec![plain(bindings)], nested),
    ));
    assert!(text.contains("  a: Tensor((1, n), f32) = tup[0]\n"));
    assert!(text.contains("= concat((a, b), axis=0)\n"));
    assert!(text.contains("  return (cat, (a,), ())\n"));
}

#[test]
fn call_packed_and_call_tir_state_their_struct_info() {
    let x = var("x", t(&[c(1), n(), c(64)], F32));
    let cache = var("cache", StructInfo::Object);
    let appended = var("appended", StructInfo::Object);
    let view = var("view", t(&[c(1), m(), c(64)], F32));
    let y = var("y", x.sinfo.clone());
    let packed =
        |name: &str, args, sinfo| call(Callee::Packed(name.into()), args, Attrs::new(), sinfo);
    let len = Expr::Prim(PrimValue::Int(n() + 1, DType::I64));
    let bindings = vec![
        bind(
            &appended,
            packed(
                "kv_cache.append",
                vec![Expr::from(&cache), Expr::from(&x), len],
                StructInfo::Object,
            ),
        ),
        bind(
            &view,
            packed(
                "kv_cache.view",
                vec![Expr::from(&appended), Expr::Str("k".into())],
                view.sinfo.clone(),
            ),
        ),
        bind(
            &y,
            call(
                Callee::Tir("silu".into()),
                vec![Expr::from(&x)],
                attrs(&[("inplace", AttrValue::Bool(false))]),
                x.sinfo.clone(),
            ),
        ),
    ];
    let f = func(
        &[&x, &cache],
        vec![plain(bindings)],
        Expr::Tuple(vec![Expr::from(&y), Expr::from(&view)]),
    );
    let text = assert_round_trip(&graph_module("step", f));
    assert!(text.contains("= call_packed(\"kv_cache.append\", [cache, x, i64(n + 1)], Object)\n"));
    assert!(text.contains(
        "= call_packed(\"kv_cache.view\", [appended, \"k\"], Tensor((1, m, 64), f32))\n"
    ));
    assert!(text.contains("= call_tir(@silu, [x], Tensor((1, n, 64), f32), inplace=false)\n"));
}

pub(super) fn every_attr_value() -> Attrs {
    attrs(&[
        ("int", AttrValue::Int(-1)),
        ("min", AttrValue::Int(i64::MIN)),
        ("max", AttrValue::Int(i64::MAX)),
        ("none", AttrValue::Ints(vec![])),
        ("ints", AttrValue::Ints(vec![0, -2])),
        ("eps", AttrValue::Float(1e-5)),
        ("one", AttrValue::Float(1.0)),
        ("big", AttrValue::Float(1e300)),
        ("tiny", AttrValue::Float(-5e-324)),
        ("third", AttrValue::Float(1.0 / 3.0)),
        ("neg_zero", AttrValue::Float(-0.0)),
        ("ninf", AttrValue::Float(f64::NEG_INFINITY)),
        ("inf", AttrValue::Float(f64::INFINITY)),
        ("flag", AttrValue::Bool(true)),
        ("mode", AttrValue::Str("tan\"h\\\n\t\u{1}é".into())),
        ("dtype", AttrValue::DType(DType::BF16)),
        ("empty", AttrValue::Shape(vec![])),
        ("shape", AttrValue::Shape(vec![n(), n() * 2 + 1])),
        ("odd key", AttrValue::Int(0)),
    ])
}

#[test]
fn small_module_prints_exactly() {
    let x = var("x", t(&[c(1), n()], F32));
    let (lv, gv) = (dvar("lv", x.sinfo.clone()), var("gv", x.sinfo.clone()));
    let block = dataflow(vec![
        bind_op(&lv, "exp", &[&x], Attrs::new()),
        bind_op(
            &gv,
            "sum",
            &[&lv],
            attrs(&[
                ("axis", AttrValue::Ints(vec![1])),
                ("keepdims", AttrValue::Bool(true)),
            ]),
        ),
    ]);
    let mut f = func(&[&x], vec![block], Expr::from(&gv));
    f.exported = true;
    let text = assert_round_trip(&graph_module("main", f));
    let expected = "\
export graph @main(x: Tensor((1, n), f32)) -> Tensor((1, n), f32)
  where n <= 2048
{
  dataflow {
    lv: Tensor((1, n), f32) = exp(x)
    output gv: Tensor((1, n), f32) = sum(lv, axis=[1], keepdims=true)
  }
  return gv
}
";
    assert_eq!(text, expected);
}

#[test]
fn printing_is_deterministic() {
    let (a, b) = (attention(), attention());
    assert_eq!(print_module(&a), print_module(&b));
    let mut both = mlp();
    both.functions.extend(attention().functions);
    let text = assert_round_trip(&both);
    let attention_at = text.find("graph @attention").unwrap();
    assert!(attention_at < text.find("graph @mlp").unwrap());
    assert_eq!(print_module(&IRModule::new()), "");
    assert_eq!(
        parse_module("  // nothing here\n").unwrap(),
        IRModule::new()
    );
}

#[test]
fn module_survives_serde_json_with_infinite_values() {
    let mut module = attention();
    module.functions.extend(module_with_attrs().functions);
    let json = serde_json::to_string(&module).unwrap();
    assert!(json.contains("\"-inf\""));
    let back: IRModule = serde_json::from_str(&json).unwrap();
    assert_eq!(back, module);
}

pub(super) fn module_with_attrs() -> IRModule {
    let x = var("x", t(&[n()], F32));
    let y = var("y", x.sinfo.clone());
    let f = func(
        &[&x],
        vec![plain(vec![bind_op(
            &y,
            "custom",
            &[&x],
            every_attr_value(),
        )])],
        Expr::from(&y),
    );
    graph_module("with_attrs", f)
}

#[test]
fn examples_in_the_module_docs_parse() {
    let docs: Vec<&str> = include_str!("mod.rs")
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| l.strip_prefix(' ').unwrap_or(l))
        .collect();
    let docs = docs.join("\n");
    let examples: Vec<&str> = docs.split("```").skip(1).step_by(2).collect();
    let text: String = examples
        .iter()
        .map(|e| e.trim_start_matches("text"))
        .collect();
    let parsed = parse_module(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(parsed.functions.len() + parsed.prim_funcs.len(), 2);
    assert!(parsed.functions["main"].exported);
    assert_eq!(
        parsed.prim_funcs["silu"].dims,
        vec![SymVar::bounded("n", 2048)]
    );
    assert_round_trip(&parsed);
}
