use super::*;
use crate::ir::{Binding, Callee};
use crate::test_util::{exp, op, t};
use crate::tir::{Buffer, Stmt};
use crate::{DType, SymExpr, SymVar, TensorInfo, TensorShape};

fn names(function: &Function) -> Vec<(String, bool)> {
    function
        .bindings()
        .map(|b: &Binding| (b.var.name.clone(), b.var.dataflow))
        .collect()
}

fn prim_func(len: i64) -> PrimFunc {
    PrimFunc {
        params: vec![Buffer::new("A", DType::F32, vec![SymExpr::int(len)])],
        num_outputs: 1,
        dims: vec![],
        body: Stmt::Seq(vec![]),
        attrs: Default::default(),
    }
}

#[test]
fn emitted_vars_get_readable_fresh_names() {
    let x = Var::new("x", t(&[4]));
    let mut bb = BlockBuilder::new();
    bb.begin_function("main", vec![x.clone()], true).unwrap();
    bb.begin_dataflow().unwrap();
    let lv = bb.emit(exp(&x)).unwrap();
    let lv1 = bb.emit(exp(&lv)).unwrap();
    let out = bb.emit_output(exp(&lv1)).unwrap();
    bb.end_dataflow().unwrap();
    let gv = bb.emit(exp(&out)).unwrap();
    let named = bb.emit_named(exp(&gv), "x").unwrap();
    assert_eq!(named.name, "x1");
    bb.end_function(named.into()).unwrap();
    let module = bb.finish().unwrap();
    let f = &module.functions["main"];
    let expected = [
        ("lv", true),
        ("lv1", true),
        ("gv", false),
        ("gv1", false),
        ("x1", false),
    ];
    let expected: Vec<(String, bool)> = expected.iter().map(|(n, d)| (n.to_string(), *d)).collect();
    assert_eq!(names(f), expected);
    assert_eq!(
        f.blocks.iter().map(|b| b.dataflow).collect::<Vec<_>>(),
        [true, false]
    );
    assert!(f.exported);
    assert_eq!(f.ret_sinfo(), t(&[4]));
}

#[test]
fn emit_normalizes_nested_calls_into_the_open_block() {
    let x = Var::new("x", t(&[2]));
    let mut bb = BlockBuilder::new();
    bb.begin_function("f", vec![x.clone()], false).unwrap();
    let lv = bb
        .dataflow(|bb| {
            let nested = op("sqrt", vec![exp(&x)], t(&[2]));
            bb.emit_named(nested, "root")
        })
        .unwrap();
    assert_eq!(lv.name, "root");
    assert!(lv.dataflow);
    assert_eq!(bb.end_function(Expr::Tuple(vec![])).unwrap(), "f");
    let module = bb.finish().unwrap();
    let f = &module.functions["f"];
    assert_eq!(
        names(f),
        [("lv".to_string(), true), ("root".to_string(), true)]
    );
    let Some(crate::ir::BindingValue::Expr(Expr::Call(call))) =
        f.bindings().nth(1).map(|b| b.value.clone())
    else {
        panic!("expected a call")
    };
    assert_eq!(call.args[0].as_var().map(|v| v.name.as_str()), Some("lv"));
}

#[test]
fn result_expression_is_normalized_into_a_plain_block() {
    let x = Var::new("x", t(&[3]));
    let mut bb = BlockBuilder::new();
    let name = bb
        .function("f", vec![x.clone()], false, |_| {
            Ok::<_, BuildError>(exp(&x))
        })
        .unwrap();
    let module = bb.finish().unwrap();
    let f = &module.functions[&name];
    assert_eq!(names(f), [("gv".to_string(), false)]);
    assert_eq!(f.ret.as_var().map(|v| v.name.as_str()), Some("gv"));
}

#[test]
fn hints_avoid_parameter_names_and_are_sanitized() {
    let x = Var::new("lv", t(&[1]));
    let mut bb = BlockBuilder::new();
    bb.begin_function("f", vec![x.clone()], false).unwrap();
    bb.begin_dataflow().unwrap();
    assert_eq!(bb.emit(exp(&x)).unwrap().name, "lv1");
    assert_eq!(bb.emit_named(exp(&x), "q.proj").unwrap().name, "q_proj");
    assert_eq!(bb.emit_named(exp(&x), "0").unwrap().name, "_0");
}

#[test]
fn match_cast_binds_the_target_struct_info() {
    let n = SymVar::new("n");
    let unknown = StructInfo::Tensor(TensorInfo {
        shape: TensorShape::Rank(2),
        dtype: DType::F32,
    });
    let x = Var::new("x", unknown);
    let mut bb = BlockBuilder::new();
    bb.begin_function("f", vec![x.clone()], false).unwrap();
    let target = StructInfo::tensor(vec![n.expr(), SymExpr::int(4)], DType::F32);
    let cast = bb
        .emit_match_cast(x.clone().into(), target.clone())
        .unwrap();
    assert_eq!(cast.sinfo, target);
    let wrong = StructInfo::tensor(vec![n.expr()], DType::F32);
    let err = bb.emit_match_cast(x.clone().into(), wrong).unwrap_err();
    assert!(matches!(err, BuildError::IncompatibleCast { .. }), "{err}");
    let wrong_dtype = StructInfo::tensor(vec![n.expr(), n.expr()], DType::I32);
    assert!(bb.emit_match_cast(x.into(), wrong_dtype).is_err());
}

#[test]
fn emitting_outside_a_function_is_an_error() {
    let x = Var::new("x", t(&[1]));
    let mut bb = BlockBuilder::new();
    let err = bb.emit(exp(&x)).unwrap_err();
    assert_eq!(
        err,
        BuildError::NoFunction {
            action: "emit a binding"
        }
    );
    assert_eq!(
        err.to_string(),
        "cannot emit a binding outside a function (call begin_function first)"
    );
    assert!(matches!(
        bb.begin_dataflow(),
        Err(BuildError::NoFunction { .. })
    ));
    assert!(matches!(
        bb.end_function(Expr::Tuple(vec![])),
        Err(BuildError::NoFunction { .. })
    ));
}

#[test]
fn dataflow_scope_misuse_is_an_error() {
    let x = Var::new("x", t(&[1]));
    let mut bb = BlockBuilder::new();
    bb.begin_function("f", vec![x.clone()], false).unwrap();
    let err = bb.end_dataflow().unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot end a dataflow block in function `f`: no dataflow block is open"
    );
    assert!(matches!(
        bb.emit_output(exp(&x)),
        Err(BuildError::DataflowNotOpen { .. })
    ));
    bb.begin_dataflow().unwrap();
    assert!(matches!(
        bb.begin_dataflow(),
        Err(BuildError::DataflowAlreadyOpen { .. })
    ));
    assert!(bb.in_dataflow());
    let err = bb.end_function(x.clone().into()).unwrap_err();
    assert!(matches!(err, BuildError::DataflowStillOpen { .. }));
    // The function is still open after the failed end.
    bb.end_dataflow().unwrap();
    assert_eq!(bb.end_function(x.into()).unwrap(), "f");
}

#[test]
fn dataflow_vars_are_invisible_after_their_block() {
    let x = Var::new("x", t(&[1]));
    let mut bb = BlockBuilder::new();
    bb.begin_function("f", vec![x.clone()], false).unwrap();
    let lv = bb.dataflow(|bb| bb.emit(exp(&x))).unwrap();
    let err = bb.emit(exp(&lv)).unwrap_err();
    assert_eq!(
        err,
        BuildError::UndefinedVar {
            function: "f".into(),
            var: "lv".into()
        }
    );
    assert!(matches!(
        bb.end_function(lv.into()),
        Err(BuildError::UndefinedVar { .. })
    ));
}

#[test]
fn function_misuse_is_an_error() {
    let x = Var::new("x", t(&[1]));
    let mut bb = BlockBuilder::new();
    let err = bb
        .begin_function("f", vec![x.clone(), x.clone()], false)
        .unwrap_err();
    assert_eq!(err.to_string(), "function `f` has two parameters named `x`");
    bb.begin_function("f", vec![x.clone()], false).unwrap();
    assert!(matches!(
        bb.begin_function("g", vec![], false),
        Err(BuildError::FunctionAlreadyOpen { .. })
    ));
    bb.end_function(x.clone().into()).unwrap();
    assert_eq!(
        bb.begin_function("f", vec![], false).unwrap_err(),
        BuildError::DuplicateFunction { name: "f".into() }
    );
    bb.begin_function("g", vec![x.clone()], false).unwrap();
    assert_eq!(
        bb.finish().unwrap_err(),
        BuildError::FunctionStillOpen {
            function: "g".into()
        }
    );
}

#[test]
fn prim_funcs_get_unique_names_and_identical_ones_are_shared() {
    let mut bb = BlockBuilder::new();
    assert_eq!(bb.add_prim_func("exp", prim_func(4)), "exp");
    assert_eq!(bb.add_prim_func("exp", prim_func(8)), "exp1");
    assert_eq!(bb.add_prim_func("other", prim_func(4)), "exp");
    let empty = Function {
        params: vec![],
        blocks: vec![],
        ret: Expr::Tuple(vec![]),
        exported: false,
        attrs: Default::default(),
    };
    assert_eq!(bb.add_func("exp", empty.clone()), "exp2");
    assert_eq!(bb.add_func("main", empty), "main");
    let module = bb.finish().unwrap();
    assert_eq!(module.prim_funcs.len(), 2);
    assert_eq!(module.functions.len(), 2);
}

#[test]
fn builder_on_an_existing_module_avoids_its_names() {
    let mut module = IRModule::new();
    module.prim_funcs.insert("k".into(), prim_func(1));
    let mut bb = BlockBuilder::with_module(module);
    assert_eq!(bb.add_prim_func("k", prim_func(2)), "k1");
    assert!(matches!(
        bb.begin_function("k", vec![], false),
        Err(BuildError::DuplicateFunction { .. })
    ));
    assert_eq!(bb.module().prim_funcs.len(), 2);
}

#[test]
fn inference_errors_name_the_function_and_op() {
    let x = Var::new("x", t(&[2, 3]));
    let mut bb = BlockBuilder::new();
    bb.begin_function("main", vec![x.clone()], false).unwrap();
    let bad = op("matmul", vec![x.clone().into(), x.into()], t(&[2, 3]));
    let err = bb.emit_named(bad, "prod").unwrap_err();
    assert!(matches!(&err, BuildError::Normalize { function, .. } if function == "main"));
    assert!(err.to_string().starts_with(
        "function `main`: cannot infer the struct info of op `matmul` (in the binding of `prod`)"
    ));
}

mod te_tests {
    use super::*;
    use crate::te;
    use crate::tir::run_with_inputs;
    use crate::wellformed::check_module;

    fn n() -> SymVar {
        SymVar::bounded("n", 64)
    }

    fn affine(x: &te::Tensor) -> te::Tensor {
        te::compute("y", x.shape().to_vec(), |i| x.at(i) * 2.0 + 1.0)
    }

    #[test]
    fn emit_te_lowers_adds_and_calls_a_prim_func() {
        let x = Var::new("x", StructInfo::tensor(vec![n().expr()], DType::F32));
        let mut bb = BlockBuilder::new();
        bb.begin_function("f", vec![x.clone()], true).unwrap();
        bb.begin_dataflow().unwrap();
        let y = bb
            .emit_te("affine", &[x.clone().into()], |t| affine(&t[0]))
            .unwrap();
        let z = bb
            .emit_te("affine", &[y.clone().into()], |t| affine(&t[0]))
            .unwrap();
        let out = bb.emit_output(z.into()).unwrap();
        bb.end_dataflow().unwrap();
        bb.end_function(out.into()).unwrap();
        let module = bb.finish().unwrap();
        check_module(&module).unwrap();
        assert_eq!(module.prim_funcs.keys().collect::<Vec<_>>(), ["affine"]);
        assert_eq!((y.name.as_str(), y.dataflow), ("affine", true));
        assert_eq!(y.sinfo, x.sinfo);
        let f = &module.functions["f"];
        let Expr::Call(call) = f.bindings().nth(1).unwrap().value.expr() else {
            panic!("expected a call")
        };
        assert_eq!(call.callee, Callee::Tir("affine".into()));
        assert_eq!(call.args, vec![Expr::Var(y)]);
        let func = &module.prim_funcs["affine"];
        assert_eq!(func.params[0].name, "A");
        let dims = [("n".to_string(), 3)].into_iter().collect();
        let out = run_with_inputs(func, &dims, &[vec![0.0, 1.0, -2.0]]).unwrap();
        assert_eq!(out, [vec![1.0, 3.0, -3.0]]);
    }

    #[test]
    fn emit_te_with_several_outputs_yields_a_tuple() {
        let x = Var::new(
            "x",
            StructInfo::tensor(vec![n().expr(), SymExpr::int(2)], DType::F32),
        );
        let mut bb = BlockBuilder::new();
        bb.begin_function("f", vec![x.clone()], false).unwrap();
        let pair = bb
            .emit_te("pair", &[x.clone().into(), x.clone().into()], |t| {
                let sum = te::compute("sum", t[0].shape().to_vec(), |i| t[0].at(i) + t[1].at(i));
                let rows = vec![t[0].shape()[0].clone()];
                let k = te::reduce_axis("k", SymExpr::int(2));
                let total = te::compute("total", rows, |i| {
                    te::sum(t[0].at(&[i[0].clone(), k.var()]), std::slice::from_ref(&k))
                });
                vec![sum, total]
            })
            .unwrap();
        let expected = StructInfo::Tuple(vec![
            x.sinfo.clone(),
            StructInfo::tensor(vec![n().expr()], DType::F32),
        ]);
        assert_eq!(pair.sinfo, expected);
        let func = &bb.module().prim_funcs["pair"];
        let names: Vec<&str> = func.params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["A", "B", "sum", "total"]);
        bb.end_function(pair.into()).unwrap();
        check_module(&bb.finish().unwrap()).unwrap();
    }

    #[test]
    fn emit_te_normalizes_call_arguments_first() {
        let x = Var::new("x", StructInfo::tensor(vec![SymExpr::int(3)], DType::F32));
        let mut bb = BlockBuilder::new();
        bb.begin_function("f", vec![x.clone()], false).unwrap();
        let nested = op("exp", vec![x.into()], StructInfo::Object);
        let y = bb.emit_te("affine", &[nested], |t| affine(&t[0])).unwrap();
        bb.end_function(y.into()).unwrap();
        let module = bb.finish().unwrap();
        check_module(&module).unwrap();
        assert_eq!(
            names(&module.functions["f"]),
            [("gv".to_string(), false), ("affine".to_string(), false)]
        );
    }

    #[test]
    fn emit_te_passes_extra_dims_to_the_kernel() {
        let m = SymVar::bounded("m", 100);
        let x = Var::new("x", StructInfo::tensor(vec![n().expr()], DType::F32));
        let offset = Var::new("offset", StructInfo::Shape(Some(vec![m.expr()])));
        let mut bb = BlockBuilder::new();
        bb.begin_function("f", vec![x.clone(), offset], false)
            .unwrap();
        let shifted = bb
            .emit_te_with_dims(
                "shift",
                &[x.clone().into()],
                std::slice::from_ref(&m),
                |t| {
                    te::compute("y", t[0].shape().to_vec(), |i| {
                        t[0].at(i) + (te::Expr::from(m.expr()) + &i[0]).cast(DType::F32)
                    })
                },
            )
            .unwrap();
        bb.end_function(shifted.into()).unwrap();
        let module = bb.finish().unwrap();
        check_module(&module).unwrap();
        let func = &module.prim_funcs["shift"];
        assert_eq!(func.params.len(), 2);
        assert_eq!(func.dims, [m.clone(), n()]);
        let dims = [("n".to_string(), 2), ("m".to_string(), 10)]
            .into_iter()
            .collect();
        let out = run_with_inputs(func, &dims, &[vec![0.5, 0.5]]).unwrap();
        assert_eq!(out, [vec![10.5, 11.5]]);
    }

    #[test]
    fn emit_te_errors_name_the_computation() {
        let s = Var::new("s", StructInfo::Shape(None));
        let x = Var::new("x", StructInfo::tensor(vec![SymExpr::int(2)], DType::F32));
        let mut bb = BlockBuilder::new();
        bb.begin_function("f", vec![s.clone(), x.clone()], false)
            .unwrap();
        let err = bb
            .emit_te("bad", &[s.into()], |t| affine(&t[0]))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "emit_te `bad`: argument 0 is Shape(?), not a tensor of known shape"
        );
        let m = SymVar::new("m");
        let err = bb
            .emit_te("unbound", &[x.into()], |t| {
                te::compute("y", t[0].shape().to_vec(), |_| {
                    te::Expr::from(m.expr()).cast(DType::F32)
                })
            })
            .unwrap_err();
        assert!(
            matches!(&err, BuildError::TeLower { name, .. } if name == "unbound"),
            "{err}"
        );
        assert!(bb.module().prim_funcs.is_empty());
    }
}
