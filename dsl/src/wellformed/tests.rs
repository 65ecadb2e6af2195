use super::*;
use crate::ir::{Binding, BindingBlock, BindingValue, Callee, Expr, Var};
use crate::test_util::{bind, call, exp, t, var};
use crate::tir::{Buffer, PrimFunc, Stmt};
use crate::{BlockBuilder, DType, StructInfo, SymExpr, SymVar, TensorInfo, TensorShape};

fn function(params: Vec<Var>, blocks: Vec<(bool, Vec<Binding>)>, ret: Expr) -> Function {
    Function {
        params,
        blocks: blocks
            .into_iter()
            .map(|(dataflow, bindings)| BindingBlock { dataflow, bindings })
            .collect(),
        ret,
        exported: true,
        attrs: Default::default(),
    }
}

fn problem(f: &Function) -> Problem {
    *check_function(&IRModule::new(), "f", f)
        .unwrap_err()
        .problem
}

/// `f(x: [4]) { dataflow { lv = exp(x); out = exp(lv) } return out }` built by the builder.
fn built() -> IRModule {
    let x = Var::new("x", t(&[4]));
    let mut bb = BlockBuilder::new();
    bb.begin_function("f", vec![x.clone()], true).unwrap();
    let out = bb
        .dataflow(|bb| {
            let lv = bb.emit(exp(&x))?;
            bb.emit_output(exp(&lv))
        })
        .unwrap();
    bb.end_function(out.into()).unwrap();
    bb.finish().unwrap()
}

#[test]
fn builder_output_is_well_formed() {
    assert_eq!(check_module(&built()), Ok(()));
}

#[test]
fn dataflow_var_used_after_its_block_is_rejected() {
    let mut module = built();
    let f = module.functions.get_mut("f").unwrap();
    let lv = f.blocks[0].bindings[0].var.clone();
    let y = var("y", t(&[4]), false);
    f.blocks.push(BindingBlock {
        dataflow: false,
        bindings: vec![bind(&y, exp(&lv))],
    });
    let err = check_module(&module).unwrap_err();
    assert_eq!(
        *err.problem,
        Problem::DataflowVarEscapes {
            site: Site::Binding("y".into()),
            var: "lv".into()
        }
    );
    assert_eq!(
        err.to_string(),
        "function `f`: binding `y` uses dataflow variable `lv` outside its dataflow block"
    );
}

#[test]
fn returning_a_dataflow_var_is_rejected() {
    let mut module = built();
    let f = module.functions.get_mut("f").unwrap();
    f.ret = Expr::Var(f.blocks[0].bindings[0].var.clone());
    assert_eq!(
        *check_module(&module).unwrap_err().problem,
        Problem::DataflowVarEscapes {
            site: Site::Result,
            var: "lv".into()
        }
    );
}

#[test]
fn dataflow_var_in_a_plain_block_is_rejected() {
    let x = var("x", t(&[4]), false);
    let lv = var("lv", t(&[4]), true);
    let f = function(
        vec![x.clone()],
        vec![(false, vec![bind(&lv, exp(&x))])],
        x.into(),
    );
    assert_eq!(
        problem(&f),
        Problem::DataflowVarInPlainBlock { var: "lv".into() }
    );
}

#[test]
fn use_before_definition_is_rejected() {
    let x = var("x", t(&[4]), false);
    let a = var("a", t(&[4]), false);
    let b = var("b", t(&[4]), false);
    let f = function(
        vec![x.clone()],
        vec![(false, vec![bind(&a, exp(&b)), bind(&b, exp(&x))])],
        a.into(),
    );
    assert_eq!(
        problem(&f),
        Problem::UndefinedVar {
            site: Site::Binding("a".into()),
            var: "b".into()
        }
    );
}

#[test]
fn duplicate_names_are_rejected() {
    let x = var("x", t(&[4]), false);
    let f = function(
        vec![x.clone()],
        vec![(false, vec![bind(&x, exp(&x))])],
        x.into(),
    );
    assert_eq!(
        problem(&f),
        Problem::DuplicateName {
            site: Site::Binding("x".into()),
            name: "x".into()
        }
    );
}

#[test]
fn struct_info_mismatch_is_rejected_and_less_specific_is_accepted() {
    let x = var("x", t(&[2, 3]), false);
    let wrong = var("y", t(&[3, 2]), false);
    let f = function(
        vec![x.clone()],
        vec![(false, vec![bind(&wrong, exp(&x))])],
        x.clone().into(),
    );
    assert!(matches!(problem(&f), Problem::StructInfoMismatch { var, .. } if var == "y"));
    let rank_only = StructInfo::Tensor(TensorInfo {
        shape: TensorShape::Rank(2),
        dtype: DType::F32,
    });
    let loose = var("y", rank_only, false);
    let f = function(
        vec![x.clone()],
        vec![(false, vec![bind(&loose, exp(&x))])],
        loose.into(),
    );
    assert_eq!(check_function(&IRModule::new(), "f", &f), Ok(()));
}

#[test]
fn stale_reference_is_rejected() {
    let x = var("x", t(&[2]), false);
    let stale = var("x", t(&[3]), false);
    let y = var("y", t(&[3]), false);
    let f = function(
        vec![x],
        vec![(false, vec![bind(&y, exp(&stale))])],
        y.into(),
    );
    assert!(matches!(problem(&f), Problem::StaleReference { var, .. } if var == "x"));
}

#[test]
fn call_tir_needs_an_existing_callee_with_matching_inputs() {
    let x = var("x", t(&[4]), false);
    let y = var("y", t(&[4]), false);
    let tir = call(
        Callee::Tir("k".into()),
        vec![x.clone().into(), x.clone().into()],
        t(&[4]),
    );
    let f = function(vec![x], vec![(false, vec![bind(&y, tir)])], y.into());
    let mut module = IRModule::new();
    module.functions.insert("main".into(), f);
    let err = check_module(&module).unwrap_err();
    assert_eq!(err.function, "main");
    assert_eq!(
        *err.problem,
        Problem::UnknownPrimFunc {
            site: Site::Binding("y".into()),
            callee: "k".into()
        }
    );
    let buffer = Buffer::new("A", DType::F32, vec![SymExpr::int(4)]);
    module.prim_funcs.insert(
        "k".into(),
        PrimFunc {
            params: vec![buffer.clone(), buffer],
            num_outputs: 1,
            dims: vec![],
            body: Stmt::Seq(vec![]),
            attrs: Default::default(),
        },
    );
    assert!(matches!(
        *check_module(&module).unwrap_err().problem,
        Problem::CallTirArity {
            expected: 1,
            got: 2,
            ..
        }
    ));
}

#[test]
fn symbolic_dims_must_be_bound_before_use() {
    let n = SymVar::bounded("n", 64);
    let unknown = StructInfo::Tensor(TensorInfo {
        shape: TensorShape::Rank(1),
        dtype: DType::F32,
    });
    let x = var("x", unknown, false);
    let shaped = StructInfo::tensor(vec![n.expr()], DType::F32);
    let y = var("y", shaped.clone(), false);
    let z = var("z", shaped.clone(), false);
    let use_n = bind(&z, exp(&y));
    let packed = call(
        Callee::Packed("make".into()),
        vec![x.clone().into()],
        shaped.clone(),
    );
    let f = function(
        vec![x.clone()],
        vec![(false, vec![bind(&y, packed), use_n.clone()])],
        z.clone().into(),
    );
    // A builtin claims to return shape [n] without anything binding `n`.
    assert!(matches!(problem(&f), Problem::UnboundDim { dim, .. } if dim == "n"));
    let cast = Binding {
        var: y.clone(),
        value: BindingValue::MatchCast(x.into(), shaped),
    };
    let f = function(
        vec![f.params[0].clone()],
        vec![(false, vec![cast, use_n])],
        z.into(),
    );
    assert_eq!(check_function(&IRModule::new(), "f", &f), Ok(()));
}

#[test]
fn dims_in_shape_values_must_be_bound() {
    let m = SymVar::new("m");
    let x = var("x", t(&[4]), false);
    let s = var("s", StructInfo::Shape(Some(vec![m.expr()])), false);
    let f = function(
        vec![x],
        vec![(false, vec![bind(&s, Expr::Shape(vec![m.expr()]))])],
        s.into(),
    );
    assert_eq!(
        problem(&f),
        Problem::UnboundDim {
            site: Site::Binding("s".into()),
            dim: "m".into()
        }
    );
}

#[test]
fn nested_calls_are_rejected() {
    let x = var("x", t(&[4]), false);
    let y = var("y", t(&[4]), false);
    let nested = call(Callee::Op("exp".into()), vec![exp(&x)], t(&[4]));
    let f = function(
        vec![x.clone()],
        vec![(false, vec![bind(&y, nested)])],
        y.into(),
    );
    assert_eq!(
        problem(&f),
        Problem::NotNormalized {
            site: Site::Binding("y".into())
        }
    );
    let f = function(vec![x.clone()], vec![], exp(&x));
    assert_eq!(problem(&f), Problem::NotNormalized { site: Site::Result });
}

#[test]
fn projection_out_of_range_is_rejected() {
    let x = var("x", t(&[4]), false);
    let y = var("y", StructInfo::Object, false);
    let project = Expr::TupleGetItem(Box::new(Expr::Tuple(vec![x.clone().into()])), 1);
    let f = function(vec![x], vec![(false, vec![bind(&y, project)])], y.into());
    assert!(matches!(
        problem(&f),
        Problem::BadProjection { index: 1, .. }
    ));
}

#[test]
fn op_struct_info_must_match_inference() {
    let x = var("x", t(&[4]), false);
    let y = var("y", t(&[5]), false);
    let wrong = call(Callee::Op("exp".into()), vec![x.clone().into()], t(&[5]));
    let f = function(
        vec![x.clone()],
        vec![(false, vec![bind(&y, wrong)])],
        y.into(),
    );
    let Problem::OpStructInfo {
        op,
        recorded,
        inferred,
        ..
    } = problem(&f)
    else {
        panic!("expected an op struct info mismatch")
    };
    assert_eq!((op.as_str(), recorded, inferred), ("exp", t(&[5]), t(&[4])));
    let z = var("z", t(&[4]), false);
    let unknown = call(
        Callee::Op("frobnicate".into()),
        vec![x.clone().into()],
        t(&[4]),
    );
    let f = function(vec![x], vec![(false, vec![bind(&z, unknown)])], z.into());
    assert!(matches!(problem(&f), Problem::OpInference { .. }));
}

#[test]
fn only_whole_dims_of_parameters_bind() {
    let n = SymVar::new("n");
    let doubled = StructInfo::tensor(vec![&n.expr() * 2], DType::F32);
    let x = var("x", doubled.clone(), false);
    let f = function(vec![x.clone()], vec![], x.into());
    assert_eq!(
        problem(&f),
        Problem::UnboundDim {
            site: Site::Param("x".into()),
            dim: "n".into()
        }
    );
    // A later parameter that mentions `n` as a whole dim binds it for every parameter.
    let x = var("x", doubled, false);
    let y = var("y", StructInfo::tensor(vec![n.expr()], DType::F32), false);
    let f = function(vec![x.clone(), y], vec![], x.into());
    assert_eq!(check_function(&IRModule::new(), "f", &f), Ok(()));
}
