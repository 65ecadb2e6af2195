use super::*;
use crate::ir::Constant;
use crate::test_util::{bind, op, t, var};
use crate::{AttrValue, DType, SymExpr, SymVar};

fn block(dataflow: bool, bindings: Vec<Binding>) -> BindingBlock {
    BindingBlock { dataflow, bindings }
}

/// `fn(x: [2, 3]) { dataflow { y = exp(negative(x)) } out = y; return out }`
fn nested_function() -> Function {
    let x = var("x", t(&[2, 3]), false);
    let y = var("y", t(&[2, 3]), true);
    let out = var("out", t(&[2, 3]), false);
    let inner = op("negative", vec![x.clone().into()], t(&[2, 3]));
    Function {
        params: vec![x],
        blocks: vec![
            block(true, vec![bind(&y, op("exp", vec![inner], t(&[2, 3])))]),
            block(false, vec![bind(&out, y.into())]),
        ],
        ret: out.into(),
        exported: true,
        attrs: Default::default(),
    }
}

#[test]
fn nested_call_in_dataflow_block_is_bound_to_a_dataflow_var() {
    let f = normalize_function(&nested_function()).unwrap();
    let first = &f.blocks[0];
    assert!(first.dataflow);
    assert_eq!(first.bindings.len(), 2);
    let lv = &first.bindings[0];
    assert_eq!(lv.var.name, "lv");
    assert!(lv.var.dataflow);
    assert_eq!(lv.var.sinfo, t(&[2, 3]));
    let BindingValue::Expr(Expr::Call(outer)) = &first.bindings[1].value else {
        panic!("expected a call")
    };
    assert_eq!(outer.args, vec![Expr::Var(lv.var.clone())]);
    assert!(f.bindings().all(|b| match &b.value {
        BindingValue::Expr(Expr::Call(c)) => c.args.iter().all(Expr::is_leaf),
        _ => true,
    }));
}

#[test]
fn nested_call_in_plain_block_is_bound_to_a_plain_var() {
    let x = var("x", t(&[4]), false);
    let y = var("y", t(&[4]), false);
    let inner = op("exp", vec![x.clone().into()], t(&[4]));
    let f = Function {
        params: vec![x],
        blocks: vec![block(
            false,
            vec![bind(&y, op("sqrt", vec![inner], t(&[4])))],
        )],
        ret: y.into(),
        exported: false,
        attrs: Default::default(),
    };
    let f = normalize_function(&f).unwrap();
    let fresh = &f.blocks[0].bindings[0].var;
    assert_eq!(fresh.name, "gv");
    assert!(!fresh.dataflow);
}

#[test]
fn fresh_names_avoid_existing_ones() {
    let mut f = nested_function();
    f.blocks[1].bindings[0].var.name = "lv".into();
    f.ret = Expr::Var(f.blocks[1].bindings[0].var.clone());
    let f = normalize_function(&f).unwrap();
    assert_eq!(f.blocks[0].bindings[0].var.name, "lv1");
    let names: Vec<&str> = f.bindings().map(|b| b.var.name.as_str()).collect();
    assert_eq!(names, ["lv1", "y", "lv"]);
}

#[test]
fn normalizing_twice_changes_nothing() {
    let once = normalize_function(&nested_function()).unwrap();
    let twice = normalize_function(&once).unwrap();
    assert_eq!(once, twice);
}

#[test]
fn non_leaf_result_is_bound_in_a_trailing_plain_block() {
    let x = var("x", t(&[3]), false);
    let y = var("y", t(&[3]), true);
    let f = Function {
        params: vec![x.clone()],
        blocks: vec![block(true, vec![bind(&y, x.clone().into())])],
        ret: op("exp", vec![x.into()], t(&[3])),
        exported: false,
        attrs: Default::default(),
    };
    let f = normalize_function(&f).unwrap();
    assert_eq!(f.blocks.len(), 2);
    assert!(!f.blocks[1].dataflow);
    let gv = &f.blocks[1].bindings[0].var;
    assert_eq!((gv.name.as_str(), gv.dataflow), ("gv", false));
    assert_eq!(f.ret, Expr::Var(gv.clone()));
}

#[test]
fn struct_info_flows_forward_to_references() {
    let n = SymVar::bounded("n", 128);
    let x_info = StructInfo::tensor(vec![n.expr()], DType::F32);
    let x = var("x", x_info.clone(), false);
    // `y` is declared as an opaque object and referenced with that stale struct info.
    let y = var("y", StructInfo::Object, false);
    let z = var("z", StructInfo::Object, false);
    let f = Function {
        params: vec![x.clone()],
        blocks: vec![block(
            false,
            vec![
                bind(&y, op("exp", vec![x.into()], x_info.clone())),
                bind(&z, Expr::Tuple(vec![y.clone().into(), y.into()])),
            ],
        )],
        ret: z.into(),
        exported: false,
        attrs: Default::default(),
    };
    let f = normalize_function(&f).unwrap();
    let bindings: Vec<&Binding> = f.bindings().collect();
    assert_eq!(bindings[0].var.sinfo, x_info);
    let tuple_info = StructInfo::Tuple(vec![x_info.clone(), x_info]);
    assert_eq!(bindings[1].var.sinfo, tuple_info);
    assert_eq!(f.ret_sinfo(), tuple_info);
}

#[test]
fn calls_inside_tuples_and_projections_are_bound() {
    let x = var("x", t(&[2]), false);
    let y = var("y", StructInfo::Object, false);
    let z = var("z", StructInfo::Object, false);
    let pair = StructInfo::Tuple(vec![t(&[1]), t(&[1])]);
    let mut split = op("split", vec![x.clone().into()], pair);
    if let Expr::Call(call) = &mut split {
        call.attrs.insert("sections".into(), AttrValue::Int(2));
    }
    let f = Function {
        params: vec![x.clone()],
        blocks: vec![block(
            false,
            vec![
                bind(&y, Expr::TupleGetItem(Box::new(split), 1)),
                bind(&z, Expr::Tuple(vec![op("exp", vec![x.into()], t(&[2]))])),
            ],
        )],
        ret: z.into(),
        exported: false,
        attrs: Default::default(),
    };
    let f = normalize_function(&f).unwrap();
    let names: Vec<&str> = f.bindings().map(|b| b.var.name.as_str()).collect();
    assert_eq!(names, ["gv", "y", "gv1", "z"]);
    let y = &f.blocks[0].bindings[1];
    assert_eq!(y.var.sinfo, t(&[1]));
    assert_eq!(
        y.value,
        BindingValue::Expr(Expr::TupleGetItem(
            Box::new(Expr::Var(f.blocks[0].bindings[0].var.clone())),
            1
        ))
    );
    assert_eq!(f.ret_sinfo(), StructInfo::Tuple(vec![t(&[2])]));
}

#[test]
fn match_cast_value_becomes_a_leaf_and_the_var_takes_the_target() {
    let n = SymVar::new("n");
    let x = var(
        "x",
        StructInfo::Tensor(crate::TensorInfo {
            shape: crate::TensorShape::Rank(1),
            dtype: DType::F32,
        }),
        false,
    );
    let target = StructInfo::tensor(vec![n.expr()], DType::F32);
    let y = var("y", StructInfo::Object, false);
    let f = Function {
        params: vec![x.clone()],
        blocks: vec![block(
            false,
            vec![Binding {
                var: y.clone(),
                value: BindingValue::MatchCast(
                    op("exp", vec![x.clone().into()], x.sinfo),
                    target.clone(),
                ),
            }],
        )],
        ret: y.into(),
        exported: false,
        attrs: Default::default(),
    };
    let f = normalize_function(&f).unwrap();
    let cast = &f.blocks[0].bindings[1];
    assert_eq!(cast.var.sinfo, target);
    let BindingValue::MatchCast(value, _) = &cast.value else {
        panic!("expected a cast")
    };
    assert_eq!(value.as_var().map(|v| v.name.as_str()), Some("gv"));
}

#[test]
fn module_normalization_covers_every_function() {
    let mut module = IRModule::new();
    module.functions.insert("main".into(), nested_function());
    let constant = Expr::Constant(Constant {
        dtype: DType::F32,
        shape: vec![1],
        values: vec![1.0],
    });
    let mut other = nested_function();
    other.ret = constant.clone();
    module.functions.insert("other".into(), other);
    let normalized = normalize_module(&module).unwrap();
    assert_eq!(
        normalized.functions["main"],
        normalize_function(&nested_function()).unwrap()
    );
    assert_eq!(normalized.functions["other"].ret, constant);
    assert_eq!(normalized.prim_funcs, module.prim_funcs);
}

#[test]
fn op_struct_info_is_reinferred_and_flows_to_later_bindings() {
    let n = SymVar::bounded("n", 16);
    let x = var(
        "x",
        StructInfo::tensor(vec![n.expr(), SymExpr::int(8)], DType::F32),
        false,
    );
    let w = var("w", t(&[8, 4]), false);
    // Recorded struct info is stale (a wrong shape); the consumer carries it too.
    let y = var("y", t(&[1, 1]), false);
    let z = var("z", t(&[1, 1]), false);
    let f = Function {
        params: vec![x.clone(), w.clone()],
        blocks: vec![block(
            false,
            vec![
                bind(&y, op("matmul", vec![x.into(), w.into()], t(&[1, 1]))),
                bind(&z, op("exp", vec![y.into()], t(&[1, 1]))),
            ],
        )],
        ret: z.into(),
        exported: false,
        attrs: Default::default(),
    };
    let f = normalize_function(&f).unwrap();
    let expected = StructInfo::tensor(vec![n.expr(), SymExpr::int(4)], DType::F32);
    assert!(f.bindings().all(|b| b.var.sinfo == expected));
    let Some(BindingValue::Expr(Expr::Call(exp))) = f.bindings().nth(1).map(|b| b.value.clone())
    else {
        panic!("expected a call")
    };
    assert_eq!(exp.args[0].sinfo(), expected);
    assert_eq!(f.ret_sinfo(), expected);
}

#[test]
fn inference_failure_names_the_op_and_the_binding() {
    let a = var("a", t(&[2, 3]), false);
    let b = var("b", t(&[4, 5]), false);
    let y = var("y", t(&[2, 5]), true);
    let product = op(
        "matmul",
        vec![a.clone().into(), b.clone().into()],
        t(&[2, 5]),
    );
    let f = Function {
        params: vec![a.clone(), b],
        blocks: vec![block(
            true,
            vec![bind(&y, op("exp", vec![product], t(&[2, 5])))],
        )],
        ret: a.into(),
        exported: false,
        attrs: Default::default(),
    };
    let err = normalize_function(&f).unwrap_err();
    assert!(
        matches!(&err, NormalizeError::Infer { op, binding, .. } if op == "matmul" && binding == "y"),
        "{err}"
    );
    let mut module = IRModule::new();
    module.functions.insert("main".into(), f);
    let err = normalize_module(&module).unwrap_err();
    assert!(err.to_string().starts_with(
        "in function `main`: cannot infer the struct info of op `matmul` (in the binding of `y`)"
    ));
}
