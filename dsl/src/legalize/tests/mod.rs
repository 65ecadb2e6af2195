//! Legalization tests: each legalized op is run by the TIR reference interpreter on small
//! pseudo-random inputs and compared with a direct computation.

mod elementwise;
mod int_quant;
mod layout;
mod matmul;
mod quantize;
mod reduce;
mod select;

use super::*;
use crate::attrs::AttrValue;
use crate::ir::{Call, Callee, Expr, Var};
use crate::sym::SymBindings;
pub(super) use crate::tir::eval::pseudo_random;
use crate::tir::eval::run_with_inputs;
use crate::{DType, StructInfo, SymExpr, SymVar, TensorShape};

/// The symbolic dim `n`.
pub(super) fn n() -> SymExpr {
    SymVar::bounded("n", 64).expr()
}

pub(super) fn c(v: i64) -> SymExpr {
    SymExpr::int(v)
}

/// A tensor variable.
pub(super) fn tensor(name: &str, shape: Vec<SymExpr>, dtype: DType) -> Expr {
    Expr::Var(Var::new(name, StructInfo::tensor(shape, dtype)))
}

/// An op call with a declared result.
pub(super) fn op(
    name: &str,
    args: Vec<Expr>,
    attrs: Vec<(&str, AttrValue)>,
    sinfo: StructInfo,
) -> Call {
    Call {
        callee: Callee::Op(name.to_string()),
        args,
        attrs: attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        sinfo,
    }
}

/// A tensor result.
pub(super) fn out(shape: Vec<SymExpr>, dtype: DType) -> StructInfo {
    StructInfo::tensor(shape, dtype)
}

/// Runs the legalized `call` with `n` bound and returns its outputs.
pub(super) fn run(call: &Call, n: usize, inputs: Vec<Vec<f64>>) -> Vec<Vec<f64>> {
    let legalized = legalize_call(call).unwrap();
    let dims: SymBindings = [("n".to_string(), n as i64)].into_iter().collect();
    run_with_inputs(&legalized.func, &dims, &inputs).unwrap()
}

/// The `op_pattern` attribute.
pub(super) fn pattern(call: &Call) -> String {
    match legalize_call(call).unwrap().func.attrs.get("op_pattern") {
        Some(AttrValue::Str(s)) => s.clone(),
        other => panic!("no op_pattern: {other:?}"),
    }
}

pub(super) fn assert_close(got: &[f64], want: &[f64], tolerance: f64) {
    assert_eq!(got.len(), want.len(), "lengths differ: {got:?} vs {want:?}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let scale = w.abs().max(1.0);
        assert!(
            (g - w).abs() <= tolerance * scale,
            "element {i}: got {g}, want {w}"
        );
    }
}

/// The row-major offset of `index` in `shape`.
pub(super) fn offset(shape: &[usize], index: &[usize]) -> usize {
    shape.iter().zip(index).fold(0, |acc, (d, i)| acc * d + i)
}

/// Every index of `shape`, row-major.
pub(super) fn indices(shape: &[usize]) -> Vec<Vec<usize>> {
    let total: usize = shape.iter().product();
    (0..total)
        .map(|mut flat| {
            let mut index = vec![0; shape.len()];
            for d in (0..shape.len()).rev() {
                index[d] = flat % shape[d];
                flat /= shape[d];
            }
            index
        })
        .collect()
}

pub(super) const SIZES: [usize; 3] = [1, 3, 17];

const ALL_OPS: &[&str] = &[
    "matmul",
    "add",
    "subtract",
    "multiply",
    "divide",
    "maximum",
    "minimum",
    "where",
    "negative",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "sin",
    "cos",
    "tanh",
    "sigmoid",
    "silu",
    "gelu",
    "astype",
    "reshape",
    "permute_dims",
    "expand_dims",
    "squeeze",
    "broadcast_to",
    "concat",
    "split",
    "strided_slice",
    "take",
    "softmax",
    "sum",
    "max",
    "mean",
    "rms_norm",
    "layer_norm",
    "add_rms_norm",
    "full",
    "zeros",
    "ones",
    "triu",
    "pack_weight",
    "packed_matmul",
    "quantize_scales",
    "pack_weight_quant",
    "packed_matmul_quant",
    "take_quant",
    "dequantize_weight",
    "activation_scales",
    "activation_group_scales",
    "quantize_activations",
    "packed_matmul_int",
    "quantize_kv",
    "attention",
    "attention_q8kv",
];

#[test]
fn every_op_of_the_contract_has_a_legalizer() {
    for op in ALL_OPS {
        assert!(has_legalizer(op), "{op}");
    }
    assert!(!has_legalizer("conv2d"));
}

#[test]
fn non_op_and_unknown_callees_are_rejected() {
    let mut call = op("conv2d", vec![], vec![], out(vec![], DType::F32));
    let err = legalize_call(&call).unwrap_err();
    assert_eq!(
        err,
        LegalizeError::NoLegalizer {
            op: "conv2d".to_string()
        }
    );
    call.callee = Callee::Tir("fused_add".to_string());
    assert!(matches!(
        legalize_call(&call),
        Err(LegalizeError::NotAnOp { .. })
    ));
}

#[test]
fn legalized_functions_follow_the_conventions() {
    let a = tensor("lhs", vec![n(), c(4)], DType::F32);
    let b = tensor("rhs", vec![c(4)], DType::F32);
    let call = op(
        "add",
        vec![a.clone(), b.clone()],
        vec![],
        out(vec![n(), c(4)], DType::F32),
    );
    let legalized = legalize_call(&call).unwrap();
    assert_eq!(legalized.name_hint, "add");
    assert_eq!(legalized.args, vec![a, b]);
    let names: Vec<&str> = legalized
        .func
        .params
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(names, ["a", "b", "out"]);
    assert_eq!(legalized.func.num_outputs, 1);
    assert_eq!(legalized.func.dims, vec![SymVar::bounded("n", 64)]);
    assert_eq!(pattern(&call), "broadcast");
}

#[test]
fn bad_arguments_name_the_op_and_the_argument() {
    let unknown = Expr::Var(Var::new(
        "x",
        StructInfo::Tensor(crate::TensorInfo {
            shape: TensorShape::Rank(2),
            dtype: DType::F32,
        }),
    ));
    let call = op("exp", vec![unknown], vec![], out(vec![n()], DType::F32));
    let err = legalize_call(&call).unwrap_err();
    assert!(matches!(err, LegalizeError::BadArg { index: 0, .. }));
    assert!(err.to_string().starts_with("exp: argument 0"), "{err}");
    let call = op(
        "add",
        vec![tensor("x", vec![n()], DType::F32)],
        vec![],
        out(vec![n()], DType::F32),
    );
    let err = legalize_call(&call).unwrap_err();
    assert_eq!(
        err,
        LegalizeError::MissingArg {
            op: "add".to_string(),
            index: 1,
            count: 1,
        }
    );
}

#[test]
fn a_result_of_the_wrong_rank_is_rejected() {
    let x = tensor("x", vec![n(), c(4)], DType::F32);
    let w = tensor("w", vec![c(4)], DType::F32);
    let flat = out(vec![&n() * 4], DType::F32);
    let calls = [
        op("softmax", vec![x.clone()], vec![], flat.clone()),
        op("rms_norm", vec![x.clone(), w.clone()], vec![], flat.clone()),
        op("permute_dims", vec![x.clone()], vec![], flat.clone()),
        op(
            "matmul",
            vec![x.clone(), w],
            vec![],
            out(vec![n(), c(1)], DType::F32),
        ),
        op(
            "sum",
            vec![x],
            vec![("axis", AttrValue::Ints(vec![1]))],
            out(vec![n(), c(1)], DType::F32),
        ),
    ];
    for call in calls {
        let err = legalize_call(&call).unwrap_err();
        assert!(matches!(err, LegalizeError::BadOutput { .. }), "{err}");
    }
}

#[test]
fn strided_slice_needs_its_bounds() {
    let x = tensor("x", vec![n()], DType::F32);
    let attrs = vec![
        ("axes", AttrValue::Ints(vec![0])),
        ("begin", AttrValue::Shape(vec![c(1)])),
    ];
    let call = op(
        "strided_slice",
        vec![x],
        attrs,
        out(vec![n() - 1], DType::F32),
    );
    let err = legalize_call(&call).unwrap_err();
    assert_eq!(err.to_string(), "strided_slice: missing attribute `end`");
}
