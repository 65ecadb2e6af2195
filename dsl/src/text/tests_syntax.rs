//! Tests of the graph syntax in detail: every struct info, attribute and value form,
//! names, flags, block boundaries and annotations.

use super::tests::*;
use super::*;
use crate::attrs::{AttrValue, Attrs};
use crate::ir::{BindingValue, Callee, Constant, PrimValue};
use crate::struct_info::TensorShape;
use crate::{DType, Expr, StructInfo, SymVar, TensorInfo, Var};

#[test]
fn every_struct_info_round_trips() {
    let sinfos = [
        t(&[], F32),
        t(&[n() * 2 + 1, (n() + 31).floordiv(&c(32))], DType::BF16),
        StructInfo::Tensor(TensorInfo {
            shape: TensorShape::Rank(3),
            dtype: DType::I32,
        }),
        StructInfo::Tensor(TensorInfo {
            shape: TensorShape::Unknown,
            dtype: DType::U4,
        }),
        StructInfo::Tuple(vec![]),
        StructInfo::Tuple(vec![
            t(&[c(4)], DType::I8),
            StructInfo::Tuple(vec![StructInfo::Object]),
        ]),
        StructInfo::Shape(None),
        StructInfo::Shape(Some(vec![])),
        StructInfo::Shape(Some(vec![n(), m().minimum(&c(64))])),
        StructInfo::Scalar(DType::Bool),
        StructInfo::Object,
    ];
    let params: Vec<Var> = sinfos
        .iter()
        .enumerate()
        .map(|(i, s)| var(&format!("p{i}"), s.clone()))
        .collect();
    let refs: Vec<&Var> = params.iter().collect();
    let ret = Expr::Tuple(params.iter().map(Expr::from).collect());
    let text = assert_round_trip(&graph_module("types", func(&refs, vec![], ret)));
    for param in [
        "  p0: Tensor((), f32),\n",
        "  p1: Tensor((2 * n + 1, floordiv(n + 31, 32)), bf16),\n",
        "  p2: Tensor(ndim=3, i32),\n  p3: Tensor(?, u4),\n  p4: Tuple(),\n",
        "  p5: Tuple(Tensor((4,), i8), Tuple(Object)),\n",
        "  p6: Shape(?),\n  p7: Shape(()),\n  p8: Shape((n, min(64, m))),\n",
        "  p9: Scalar(bool),\n  p10: Object,\n) -> Tuple(",
    ] {
        assert!(text.contains(param), "missing {param:?} in\n{text}");
    }
}

#[test]
fn every_attr_value_round_trips_exactly() {
    let parsed = parse_module(&assert_round_trip(&super::tests::module_with_attrs())).unwrap();
    let Some(BindingValue::Expr(Expr::Call(call))) = parsed.functions["with_attrs"]
        .bindings()
        .next()
        .map(|b| &b.value)
    else {
        panic!("expected a call");
    };
    let AttrValue::Float(zero) = call.attrs["neg_zero"] else {
        panic!()
    };
    assert!(zero == 0.0 && zero.is_sign_negative());
    let text = print_function("f", &parsed.functions["with_attrs"]);
    let expected = "custom(x, big=1e300, dtype=bf16, empty=shape(), eps=1e-5, flag=true, inf=inf, \
        int=-1, ints=[0, -2], max=9223372036854775807, min=-9223372036854775808, \
        mode=\"tan\\\"h\\\\\\n\\t\\u{1}é\", neg_zero=-0.0, ninf=-inf, none=[], `odd key`=0, \
        one=1.0, shape=shape(n, 2 * n + 1), third=0.3333333333333333, tiny=-5e-324)\n";
    assert!(text.contains(expected), "{text}");
}

#[test]
fn nan_values_read_back_as_nan() {
    let x = var("x", t(&[c(2)], F32));
    let y = var("y", x.sinfo.clone());
    let nan_const = Expr::Constant(Constant {
        dtype: F32,
        shape: vec![2],
        values: vec![f64::NAN, 2.5],
    });
    let value = call(
        Callee::Op("add".into()),
        vec![Expr::from(&x), nan_const],
        attrs(&[("fill", AttrValue::Float(f64::NAN))]),
        y.sinfo.clone(),
    );
    let f = func(
        &[&x],
        vec![plain(vec![bind(&y, value)])],
        Expr::Prim(PrimValue::Float(f64::NAN, DType::F16)),
    );
    let text = print_module(&graph_module("f", f));
    assert!(text.contains("add(x, const((2,), f32, [nan, 2.5]), fill=nan)"));
    assert!(text.contains("return f16(nan)"));
    let parsed = parse_module(&text).unwrap();
    assert_eq!(print_module(&parsed), text);
    let Expr::Prim(PrimValue::Float(ret, DType::F16)) = parsed.functions["f"].ret else {
        panic!()
    };
    assert!(ret.is_nan());
}

#[test]
fn reserved_and_odd_names_are_quoted() {
    let x = var("return", t(&[c(2)], F32));
    let y = var("a b`c", x.sinfo.clone());
    let z = var("output", x.sinfo.clone());
    let w = var("f32", x.sinfo.clone());
    let bindings = vec![
        bind_op(&y, "call_tir", &[&x], Attrs::new()),
        bind_op(&z, "f32", &[&y], Attrs::new()),
        bind_op(&w, "my.op-v2", &[&z], Attrs::new()),
    ];
    let f = func(&[&x], vec![plain(bindings)], Expr::from(&w));
    let text = assert_round_trip(&graph_module("odd-name", f));
    assert!(text.starts_with("graph @`odd-name`(`return`: Tensor((2,), f32))"));
    assert!(text.contains("  `a b\\`c`: Tensor((2,), f32) = `call_tir`(`return`)\n"));
    assert!(text.contains("  `output`: Tensor((2,), f32) = `f32`(`a b\\`c`)\n"));
    assert!(text.contains("  f32: Tensor((2,), f32) = `my.op-v2`(`output`)\n"));
}

#[test]
fn dataflow_flags_round_trip() {
    let x = dvar("x", t(&[c(2)], F32));
    let (a, b) = (dvar("a", x.sinfo.clone()), var("b", x.sinfo.clone()));
    let (d, e) = (dvar("d", x.sinfo.clone()), var("e", x.sinfo.clone()));
    let blocks = vec![
        dataflow(vec![
            bind_op(&a, "exp", &[&x], Attrs::new()),
            bind_op(&b, "exp", &[&a], Attrs::new()),
        ]),
        plain(vec![
            bind_op(&d, "exp", &[&b], Attrs::new()),
            bind_op(&e, "exp", &[&d], Attrs::new()),
        ]),
    ];
    let text = assert_round_trip(&graph_module("flags", func(&[&x], blocks, Expr::from(&e))));
    assert!(text.contains("(dataflow x: Tensor((2,), f32))"));
    assert!(text.contains("    a: Tensor((2,), f32) = exp(x)\n    output b: "));
    assert!(text.contains("  dataflow d: Tensor((2,), f32) = exp(b)\n  e: "));
}

#[test]
fn adjacent_and_empty_blocks_keep_their_boundaries() {
    let x = var("x", t(&[c(2)], F32));
    let (a, b, d) = (
        var("a", x.sinfo.clone()),
        var("b", x.sinfo.clone()),
        var("d", x.sinfo.clone()),
    );
    let blocks = vec![
        plain(vec![bind_op(&a, "exp", &[&x], Attrs::new())]),
        plain(vec![bind_op(&b, "exp", &[&a], Attrs::new())]),
        dataflow(vec![]),
        plain(vec![]),
        plain(vec![bind_op(&d, "exp", &[&b], Attrs::new())]),
    ];
    let text = assert_round_trip(&graph_module("blocks", func(&[&x], blocks, Expr::from(&d))));
    assert!(text.contains("{\n  a: Tensor((2,), f32) = exp(x)\n  block {\n    b: "));
    assert!(text.contains("  }\n  dataflow {\n  }\n  block {\n  }\n  block {\n    d: "));
    let empty = func(&[&x], vec![], Expr::from(&x));
    assert_round_trip(&graph_module("empty", empty));
}

#[test]
fn call_struct_info_is_written_when_not_implied() {
    let x = var("x", t(&[c(2), n()], F32));
    let pair = StructInfo::Tuple(vec![t(&[c(1), n()], F32), t(&[c(1), n()], F32)]);
    let rank = StructInfo::Tensor(TensorInfo {
        shape: TensorShape::Rank(2),
        dtype: F32,
    });
    let y = var("y", x.sinfo.clone());
    let first = Expr::TupleGetItem(
        Box::new(op(
            "split",
            &[&x],
            attrs(&[("sections", AttrValue::Int(2))]),
            pair,
        )),
        0,
    );
    let bindings = vec![bind(&y, op("exp", &[&x], Attrs::new(), rank))];
    let ret = Expr::Tuple(vec![
        first,
        op("add", &[&x, &y], Attrs::new(), x.sinfo.clone()),
    ]);
    let text = assert_round_trip(&graph_module(
        "nested",
        func(&[&x], vec![plain(bindings)], ret),
    ));
    assert!(text.contains("  y: Tensor((2, n), f32) = exp(x) -> Tensor(ndim=2, f32)\n"));
    assert!(text.contains("  return (split(x, sections=2) -> Tuple(Tensor((1, n), f32), Tensor((1, n), f32))[0], add(x, y) -> Tensor((2, n), f32))\n"));
}

#[test]
fn references_unlike_their_definition_carry_struct_info() {
    let x = var("x", t(&[c(2)], F32));
    let stale = var("x", t(&[c(3)], F32));
    let free = dvar("ghost", StructInfo::Object);
    let ret = Expr::Tuple(vec![Expr::from(&stale), Expr::from(&free), Expr::from(&x)]);
    let text = assert_round_trip(&graph_module("refs", func(&[&x], vec![], ret)));
    assert!(text.contains("  return ((x: Tensor((3,), f32)), (dataflow ghost: Object), x)\n"));
}

#[test]
fn prim_values_strings_and_shapes_round_trip() {
    let x = var("x", t(&[n()], F32));
    let values = vec![
        Expr::Prim(PrimValue::Int(n().floordiv(&c(4)) - 1, DType::I64)),
        Expr::Prim(PrimValue::Int(c(-7), DType::I32)),
        Expr::Prim(PrimValue::Float(0.5, DType::F16)),
        Expr::Prim(PrimValue::Float(-1e-7, F32)),
        Expr::Str("line\nbreak \"quoted\"".into()),
        Expr::Shape(vec![]),
        Expr::Shape(vec![c(1), n() * m()]),
    ];
    let text = assert_round_trip(&graph_module(
        "values",
        func(&[&x], vec![], Expr::Tuple(values)),
    ));
    let expected = "return (i64(floordiv(n, 4) - 1), i32(-7), f16(0.5), f32(-1e-7), \"line\\nbreak \\\"quoted\\\"\", shape(), shape(1, m * n))";
    assert!(text.contains(expected), "{text}");
}

#[test]
fn handwritten_text_with_comments_and_trailing_commas_parses() {
    let text = "
        // an MLP block, written by hand
        graph @f(
          x: Tensor((2, n), f32),  // the input
          y: Tensor((2, n), f32),
        )
          where n <= 16
        {
          z: Tensor((2, n), f32) = add(x, y,)
          return (z)
        }";
    let parsed = parse_module(text).unwrap();
    let f = &parsed.functions["f"];
    assert_eq!(
        f.params[0].sinfo,
        t(&[c(2), SymVar::bounded("n", 16).expr()], F32)
    );
    assert_eq!(
        f.ret_sinfo(),
        StructInfo::Tuple(vec![f.params[0].sinfo.clone()])
    );
    assert!(!f.exported && f.blocks.len() == 1 && !f.blocks[0].dataflow);
}

/// Pseudo-random `f64` bit patterns (xorshift), finite ones only.
fn random_floats(count: usize) -> Vec<f64> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let value = f64::from_bits(state);
        if value.is_finite() {
            out.push(value);
        }
    }
    out
}

#[test]
fn floats_keep_their_bits_through_text_and_json() {
    let mut values = random_floats(5000);
    values.extend([
        0.1,
        -0.0,
        5e-324,
        f64::MAX,
        f64::MIN_POSITIVE,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ]);
    let ints = vec![-0.0, 3.0, -7.0, 1e20, 0.5, 4503599627370497.0];
    let constant = |dtype, values: &Vec<f64>| {
        let shape = vec![values.len() as i64];
        Expr::Constant(Constant {
            dtype,
            shape,
            values: values.clone(),
        })
    };
    let ret = Expr::Tuple(vec![constant(F32, &values), constant(DType::I32, &ints)]);
    let m = graph_module("floats", func(&[], vec![], ret));
    let text = assert_round_trip(&m);
    assert!(text.contains("const((6,), i32, [-0.0, 3, -7, 1e20, 0.5, 4503599627370497.0])"));
    let bits = |m: &IRModule| {
        let Expr::Tuple(items) = &m.functions["floats"].ret else {
            panic!()
        };
        let values = items.iter().flat_map(|e| match e {
            Expr::Constant(c) => c.values.clone(),
            _ => vec![],
        });
        values.map(f64::to_bits).collect::<Vec<_>>()
    };
    assert_eq!(bits(&parse_module(&text).unwrap()), bits(&m));
    let json = serde_json::to_string(&m).unwrap();
    assert_eq!(bits(&serde_json::from_str(&json).unwrap()), bits(&m));
}
