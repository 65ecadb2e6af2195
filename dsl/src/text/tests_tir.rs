//! Tests of the primitive-function text form and of serde on TIR.

use super::tests::{assert_round_trip, attrs, c, m, module, n, t};
use super::*;
use crate::attrs::AttrValue;
use crate::tir::{BinOp, Buffer, ForKind, Intrinsic, PrimCmp, PrimExpr, PrimFunc, Stmt, TVar};
use crate::{DType, SymVar};

const F32: DType = DType::F32;
const I64: DType = DType::I64;

fn v(name: &str) -> PrimExpr {
    PrimExpr::Var(TVar::new(name, I64))
}

fn load(buffer: &str, dtype: DType, indices: Vec<PrimExpr>) -> PrimExpr {
    PrimExpr::Load {
        buffer: buffer.into(),
        dtype,
        indices,
    }
}

fn store(buffer: &str, indices: Vec<PrimExpr>, value: PrimExpr) -> Stmt {
    Stmt::Store {
        buffer: buffer.into(),
        indices,
        value,
    }
}

fn for_loop(var: &str, extent: PrimExpr, kind: ForKind, body: Stmt) -> Stmt {
    Stmt::For {
        var: TVar::new(var, I64),
        extent,
        kind,
        body: Box::new(body),
    }
}

fn prim(params: Vec<Buffer>, dims: Vec<SymVar>, body: Stmt) -> PrimFunc {
    PrimFunc {
        params,
        num_outputs: 1,
        dims,
        body,
        attrs: attrs(&[("op_pattern", AttrValue::Str("elemwise".into()))]),
    }
}

fn prim_module(name: &str, f: PrimFunc) -> IRModule {
    module(vec![], vec![(name, f)])
}

/// `out[i0, i1] = x[i0, i1] * sigmoid(x[i0, i1])` over `(n, 128)`.
fn silu() -> PrimFunc {
    let shape = vec![n(), c(128)];
    let x = load("x", F32, vec![v("i0"), v("i1")]);
    let value = x.clone() * PrimExpr::call(Intrinsic::Sigmoid, vec![x]);
    let inner = for_loop(
        "i1",
        PrimExpr::index(128),
        ForKind::Vectorized,
        store("out", vec![v("i0"), v("i1")], value),
    );
    let params = vec![
        Buffer::new("x", F32, shape.clone()),
        Buffer::new("out", F32, shape),
    ];
    prim(
        params,
        vec![SymVar::bounded("n", 2048)],
        for_loop("i0", v("n"), ForKind::Parallel, inner),
    )
}

#[test]
fn silu_prints_exactly() {
    let text = assert_round_trip(&prim_module("silu", silu()));
    let expected = "\
prim @silu(x: Buffer((n, 128), f32), out: Buffer((n, 128), f32))
  outputs 1 dims(n <= 2048) attrs(op_pattern=\"elemwise\")
{
  for i0 in parallel(n) {
    for i1 in vectorized(128) {
      out[i0, i1] = x[i0, i1] * sigmoid(x[i0, i1])
    }
  }
}
";
    assert_eq!(text, expected);
}

#[test]
fn every_statement_kind_round_trips() {
    let acc = TVar::new("acc", F32);
    let j = TVar::new("j", DType::I32);
    let tmp = Buffer {
        strides: Some(vec![c(1)]),
        ..Buffer::new("tmp", F32, vec![c(64)])
    };
    let cond = v("i").compare(PrimCmp::Lt, v("n") - PrimExpr::index(1));
    let let_body = Stmt::Seq(vec![
        store("tmp", vec![v("i")], PrimExpr::Var(acc.clone())),
        Stmt::Evaluate(PrimExpr::call(
            Intrinsic::Exp,
            vec![PrimExpr::Var(acc.clone())],
        )),
    ]);
    let body = Stmt::Seq(vec![
        Stmt::Let {
            var: acc,
            value: load("x", F32, vec![v("i")]),
            body: Box::new(let_body),
        },
        Stmt::If {
            cond: cond.clone(),
            then: Box::new(store("out", vec![v("i")], PrimExpr::f32(0.0))),
            otherwise: None,
        },
        Stmt::If {
            cond: PrimExpr::Not(Box::new(cond)),
            then: Box::new(Stmt::Seq(vec![])),
            otherwise: Some(Box::new(store(
                "out",
                vec![v("i")],
                load("tmp", F32, vec![v("i")]),
            ))),
        },
        Stmt::For {
            var: j.clone(),
            extent: PrimExpr::Int(4, DType::I32),
            kind: ForKind::Unrolled,
            body: Box::new(Stmt::Evaluate(PrimExpr::Var(j))),
        },
    ]);
    let alloc = Stmt::Allocate {
        buffer: tmp,
        body: Box::new(body),
    };
    let func = PrimFunc {
        params: vec![
            Buffer::new("x", F32, vec![n()]),
            Buffer::new("out", F32, vec![n()]),
        ],
        num_outputs: 1,
        dims: vec![SymVar::bounded("n", 2048)],
        body: for_loop("i", v("n"), ForKind::Serial, alloc),
        attrs: Default::default(),
    };
    let text = assert_round_trip(&prim_module("stmts", func));
    for line in [
        "  outputs 1 dims(n <= 2048)\n{\n",
        "    alloc tmp: Buffer((64,), f32, strides=(1,)) {\n",
        "      let acc: f32 = x[i] {\n        tmp[i] = acc\n        evaluate exp(acc)\n      }\n",
        "      if i < (n - 1) {\n        out[i] = 0.0\n      }\n",
        "      if not(i < (n - 1)) {\n      } else {\n        out[i] = tmp[i]\n      }\n",
        "      for j: i32 in unrolled(i32(4)) {\n        evaluate j\n      }\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
}

#[test]
fn nested_sequences_keep_their_shape() {
    let e = |i| Stmt::Evaluate(PrimExpr::index(i));
    let bodies = [
        Stmt::Seq(vec![]),
        Stmt::Seq(vec![e(1)]),
        Stmt::Seq(vec![Stmt::Seq(vec![e(1), e(2)]), e(3), Stmt::Seq(vec![])]),
        Stmt::Seq(vec![Stmt::Seq(vec![Stmt::Seq(vec![e(1)])])]),
        e(4),
    ];
    for body in bodies {
        let func = PrimFunc {
            params: vec![],
            num_outputs: 0,
            dims: vec![],
            body,
            attrs: Default::default(),
        };
        assert_round_trip(&prim_module("seqs", func));
    }
}

#[test]
fn every_expression_kind_round_trips() {
    let a = load("a", F32, vec![v("i")]);
    let idx = v("i");
    let mut exprs = vec![
        PrimExpr::Int(-3, I64),
        PrimExpr::Int(i64::MIN, I64),
        PrimExpr::Int(7, DType::I32),
        PrimExpr::Int(1, DType::Bool),
        PrimExpr::Float(f64::NEG_INFINITY, F32),
        PrimExpr::Float(0.5, DType::F16),
        PrimExpr::Float(2.0, DType::I32),
        PrimExpr::Int(2, F32),
        (a.clone() + a.clone()) * (a.clone() - PrimExpr::f32(-1.5)),
        a.clone() - (a.clone() - a.clone()),
        (a.clone() / a.clone()) / a.clone(),
        idx.clone() - PrimExpr::index(-3),
        PrimExpr::index(-2) * idx.clone(),
        PrimExpr::Cast(DType::F16, Box::new(a.clone())),
        PrimExpr::select(
            idx.clone().compare(PrimCmp::Ge, PrimExpr::index(0)),
            a.clone(),
            PrimExpr::f32(0.0),
        ),
        PrimExpr::Not(Box::new(idx.clone().compare(PrimCmp::Eq, v("n")))),
        idx.clone()
            .compare(PrimCmp::Lt, PrimExpr::index(1))
            .compare(PrimCmp::Ne, PrimExpr::Int(0, DType::Bool)),
        PrimExpr::Var(TVar::new("free", DType::I32)),
        PrimExpr::Var(TVar::new("i", DType::I32)),
        load("a", DType::F16, vec![idx.clone()]),
        load("elsewhere", DType::U8, vec![]),
        PrimExpr::Call(Intrinsic::Exp, vec![]),
    ];
    let ops = BinOp::ALL;
    exprs.extend(ops.map(|op| idx.clone().binary(op, v("n"))));
    let cmps = [
        PrimCmp::Lt,
        PrimCmp::Le,
        PrimCmp::Gt,
        PrimCmp::Ge,
        PrimCmp::Eq,
        PrimCmp::Ne,
    ];
    exprs.extend(cmps.map(|cmp| (idx.clone() + PrimExpr::index(1)).compare(cmp, v("n"))));
    exprs.extend(Intrinsic::ALL.map(|i| PrimExpr::call(i, vec![a.clone(); i.arity()])));
    let body = Stmt::Seq(exprs.into_iter().map(Stmt::Evaluate).collect());
    let params = vec![Buffer::new("a", F32, vec![n()])];
    let func = prim(
        params,
        vec![SymVar::bounded("n", 2048)],
        for_loop("i", v("n"), ForKind::Serial, body),
    );
    let text = assert_round_trip(&prim_module("exprs", func));
    for line in [
        "evaluate -3\n",
        "evaluate -9223372036854775808\n",
        "evaluate i32(7)\n",
        "evaluate bool(1)\n",
        "evaluate -inf\n",
        "evaluate f16(0.5)\n",
        "evaluate i32(2.0)\n",
        "evaluate f32(2)\n",
        "evaluate (a[i] + a[i]) * (a[i] - -1.5)\n",
        "evaluate a[i] - (a[i] - a[i])\n",
        "evaluate (a[i] / a[i]) / a[i]\n",
        "evaluate i - -3\n",
        "evaluate -2 * i\n",
        "evaluate cast(f16, a[i])\n",
        "evaluate select(i >= 0, a[i], 0.0)\n",
        "evaluate not(i == n)\n",
        "evaluate (i < 1) != bool(0)\n",
        "evaluate (free: i32)\n",
        "evaluate (i: i32)\n",
        "evaluate (a[i]: f16)\n",
        "evaluate (elsewhere[]: u8)\n",
        "evaluate exp()\n",
        "evaluate floordiv(i, n)\n",
        "evaluate shr(i, n)\n",
        "evaluate (i + 1) <= n\n",
        "evaluate fma(a[i], a[i], a[i])\n",
        "evaluate pow(a[i], a[i])\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
}

#[test]
fn strides_and_undeclared_dims_round_trip() {
    let k = SymVar::bounded("k", 8);
    let strided = Buffer {
        strides: Some(vec![m() * 2, c(1)]),
        ..Buffer::new("x", F32, vec![n(), m()])
    };
    let scratch = Buffer {
        strides: Some(vec![]),
        ..Buffer::new("s", F32, vec![k.expr()])
    };
    let body = Stmt::Allocate {
        buffer: scratch,
        body: Box::new(Stmt::Evaluate(v("k"))),
    };
    let mut func = prim(
        vec![strided, Buffer::new("out", F32, vec![n()])],
        vec![SymVar::bounded("n", 2048)],
        body,
    );
    func.attrs.insert(
        "tile".into(),
        AttrValue::Shape(vec![SymVar::new("t").expr()]),
    );
    func.num_outputs = 2;
    let text = assert_round_trip(&prim_module("strided", func));
    assert!(text.contains("x: Buffer((n, m), f32, strides=(2 * m, 1))"));
    assert!(text.contains("  outputs 2 dims(n <= 2048) where k <= 8, m <= 4096, t attrs(op_pattern=\"elemwise\", tile=shape(t))\n"));
    assert!(text.contains("  alloc s: Buffer((k,), f32, strides=()) {\n    evaluate k\n"));
}

#[test]
fn graph_and_prim_functions_share_a_module() {
    let mut both = prim_module("silu", silu());
    let x = crate::Var::new("x", t(&[n(), c(128)], F32));
    let f = crate::Function {
        params: vec![x.clone()],
        blocks: vec![],
        ret: crate::Expr::from(&x),
        exported: true,
        attrs: Default::default(),
    };
    both.functions.insert("main".into(), f);
    both.prim_funcs.insert("silu2".into(), silu());
    let text = assert_round_trip(&both);
    assert!(text.contains("\n}\n\nprim @silu(") && text.contains("\n}\n\nprim @silu2("));
}

#[test]
fn handwritten_tir_follows_precedence() {
    let text = "prim @f(a: Buffer((4,), f32)) outputs 0 {
        for i in serial(4) {
          a[i] = a[i] + a[i] * 2.0 - 1.0   // left-associative, * binds tighter
          evaluate i + 1 < 3 * i
        }
      }";
    let parsed = parse_module(text).unwrap();
    let Stmt::For { body, .. } = &parsed.prim_funcs["f"].body else {
        panic!()
    };
    let Stmt::Seq(items) = body.as_ref() else {
        panic!()
    };
    let x = load("a", F32, vec![v("i")]);
    let expected = (x.clone() + x * PrimExpr::f32(2.0)) - PrimExpr::f32(1.0);
    assert_eq!(items[0], store("a", vec![v("i")], expected));
    let cmp = (v("i") + PrimExpr::index(1)).compare(PrimCmp::Lt, PrimExpr::index(3) * v("i"));
    assert_eq!(items[1], Stmt::Evaluate(cmp));
}

#[test]
fn serde_json_keeps_non_finite_floats() {
    let mut module = prim_module("silu", silu());
    let ninf = Stmt::Evaluate(PrimExpr::Float(f64::NEG_INFINITY, F32));
    module.prim_funcs.get_mut("silu").unwrap().body = ninf;
    let json = serde_json::to_string(&module).unwrap();
    assert!(json.contains("\"Float\":[\"-inf\",\"f32\"]"), "{json}");
    assert_eq!(serde_json::from_str::<IRModule>(&json).unwrap(), module);
    let attr: AttrValue = serde_json::from_str("{\"Float\":\"nan\"}").unwrap();
    assert!(matches!(attr, AttrValue::Float(f) if f.is_nan()));
    let attr: AttrValue = serde_json::from_str("{\"Float\":3}").unwrap();
    assert_eq!(attr, AttrValue::Float(3.0));
    assert!(serde_json::from_str::<AttrValue>("{\"Float\":\"infinity\"}").is_err());
}
