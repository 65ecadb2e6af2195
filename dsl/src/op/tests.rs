use super::*;
use crate::ir::Var;
use crate::{AttrValue, DType, SymExpr, SymVar};
use DType::{Bool, BF16, F16, F32, I32, I64, I8};

fn n() -> SymVar {
    SymVar::bounded("n", 2048)
}

fn m() -> SymVar {
    SymVar::bounded("m", 4096)
}

fn c(v: i64) -> SymExpr {
    SymExpr::int(v)
}

/// Dims from text, e.g. `"1, n, 64"` (dims `n <= 2048`, `m <= 4096`).
fn dims(text: &str) -> Vec<SymExpr> {
    let lookup = |name: &str| [n(), m()].into_iter().find(|v| v.name() == name);
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| SymExpr::parse(s, &lookup).unwrap())
        .collect()
}

/// A tensor variable of shape `shape` (see [`dims`]).
fn t(shape: &str, dtype: DType) -> Expr {
    Var::new("v", StructInfo::tensor(dims(shape), dtype)).into()
}

/// The printed struct info of a successful call.
fn si(result: Result<Expr, InferError>) -> String {
    result.unwrap().sinfo().to_string()
}

/// The message of a failed call.
fn err(result: Result<Expr, InferError>) -> String {
    result.unwrap_err().to_string()
}

fn one_attr(name: &str, value: AttrValue) -> Attrs {
    Attrs::from([(name.to_string(), value)])
}

/// Every op of the contract (the op table shared between helpers), in its order.
const CONTRACT: &str =
    "matmul add subtract multiply divide maximum minimum where negative exp log \
    sqrt rsqrt sin cos tanh sigmoid silu gelu astype reshape permute_dims expand_dims squeeze \
    broadcast_to concat split strided_slice take softmax sum max mean rms_norm layer_norm \
    add_rms_norm full \
    zeros ones triu pack_weight packed_matmul packed_matmul_quant quantize_scales quantize_offsets \
    pack_weight_quant take_quant dequantize_weight activation_scales activation_group_scales \
    quantize_activations quantize_kv packed_matmul_int attention attention_q8kv";

#[test]
fn registry_holds_exactly_the_contract_ops() {
    let mut names: Vec<&str> = all().map(|d| d.name).collect();
    names.sort_unstable();
    let mut expected: Vec<&str> = CONTRACT.split_whitespace().collect();
    expected.sort_unstable();
    assert_eq!(names, expected);
    assert_eq!(lookup("matmul").unwrap().num_args(), 2);
    assert_eq!(lookup("layer_norm").unwrap().args, ["x", "gamma", "beta"]);
    assert!(lookup("conv2d").is_none());
}

#[test]
fn unknown_op_and_wrong_arg_count_are_errors() {
    let x = t("n, 64", F32);
    assert_eq!(
        err(call("conv2d", vec![x.clone()], Attrs::new())),
        "unknown op `conv2d`"
    );
    assert_eq!(
        err(call("add", vec![x], Attrs::new())),
        "add: expected 2 argument(s) (lhs, rhs), got 1"
    );
}

#[test]
fn attrs_are_checked_against_the_spec() {
    let x = t("n, 64", F32);
    let unknown = call(
        "softmax",
        vec![x.clone()],
        one_attr("dim", AttrValue::Int(0)),
    );
    assert_eq!(
        err(unknown),
        "softmax: unknown attribute `dim` (expected one of: axis)"
    );
    let kind = call(
        "softmax",
        vec![x.clone()],
        one_attr("axis", AttrValue::Ints(vec![0])),
    );
    assert_eq!(
        err(kind),
        "softmax: attribute `axis` must be an Int, got Ints([0])"
    );
    let missing = call("astype", vec![x.clone()], Attrs::new());
    assert_eq!(err(missing), "astype: missing required attribute `dtype`");
    let choice = call(
        "gelu",
        vec![x],
        one_attr("approximate", AttrValue::Str("fast".into())),
    );
    assert!(matches!(
        choice,
        Err(InferError::AttrKind {
            attr: "approximate",
            ..
        })
    ));
}

#[test]
fn call_fills_in_default_attrs() {
    let Expr::Call(call) = sum(&t("n, 64", F32), Some(vec![-1]), false).unwrap() else {
        panic!("not a call");
    };
    assert_eq!(call.callee, crate::ir::Callee::Op("sum".into()));
    assert_eq!(call.attrs.get("keepdims"), Some(&AttrValue::Bool(false)));
    let Expr::Call(norm) = rms_norm(&t("n, 64", F32), &t("64", F32), vec![-1], 1e-6).unwrap()
    else {
        panic!("not a call");
    };
    assert_eq!(norm.attrs.get("epsilon"), Some(&AttrValue::Float(1e-6)));
    let sm = infer("softmax", &[t("n, 64", F32)], &Attrs::new()).unwrap();
    assert_eq!(sm.to_string(), "Tensor((n, 64), f32)");
}

#[test]
fn infer_sinfo_works_on_struct_info_alone() {
    let def = lookup("add").unwrap();
    let a = StructInfo::tensor(dims("n, 1"), F32);
    let b = StructInfo::tensor(dims("1, m"), F32);
    let out = def.infer_sinfo(&[a, b], &Attrs::new()).unwrap();
    assert_eq!(out, StructInfo::tensor(vec![n().expr(), m().expr()], F32));
}

#[test]
fn matmul_with_symbolic_rows() {
    assert_eq!(
        si(matmul(&t("1, n, 64", F32), &t("64, 128", F32))),
        "Tensor((1, n, 128), f32)"
    );
}

#[test]
fn matmul_batched_and_broadcast_batch() {
    let q = t("1, 32, n, 128", F32);
    let k = t("1, 32, 128, m", F32);
    assert_eq!(si(matmul(&q, &k)), "Tensor((1, 32, n, m), f32)");
    let shared = t("128, m", F32);
    assert_eq!(si(matmul(&q, &shared)), "Tensor((1, 32, n, m), f32)");
    let a = t("32, 1, n, 128", F32);
    let b = t("4, 128, m", F32);
    assert_eq!(si(matmul(&a, &b)), "Tensor((32, 4, n, m), f32)");
}

#[test]
fn matmul_vector_operands_drop_their_dim() {
    let v = t("64", F32);
    assert_eq!(si(matmul(&v, &t("64, 128", F32))), "Tensor((128,), f32)");
    assert_eq!(si(matmul(&t("n, 64", F32), &v)), "Tensor((n,), f32)");
    assert_eq!(si(matmul(&v, &v)), "Tensor((), f32)");
}

#[test]
fn matmul_reduction_mismatch_names_both_shapes() {
    assert_eq!(
        err(matmul(&t("1, n, 64", F32), &t("32, 128", F32))),
        "matmul: reduction dims differ: lhs (1, n, 64) has K = 64, rhs (32, 128) has K = 32"
    );
    let scalar = err(matmul(&t("", F32), &t("32, 128", F32)));
    assert_eq!(scalar, "matmul: lhs () has rank 0, expected at least 1");
}

#[test]
fn matmul_dtype_mismatch_names_both_dtypes() {
    assert_eq!(
        err(matmul(&t("n, 64", F16), &t("64, 128", F32))),
        "matmul: dtypes differ: lhs is f16, rhs is f32"
    );
    // f32 activations times f16 weights compute in f32.
    assert_eq!(
        si(matmul(&t("n, 64", F32), &t("64, 128", F16))),
        "Tensor((n, 128), f32)"
    );
}

#[test]
fn binary_ops_broadcast_symbolic_shapes() {
    assert_eq!(
        si(add(&t("n, 1, 64", F32), &t("1, m, 64", F32))),
        "Tensor((n, m, 64), f32)"
    );
    assert_eq!(
        si(multiply(&t("64", F32), &t("1, n, 64", F32))),
        "Tensor((1, n, 64), f32)"
    );
    let sum_dims = maximum(&t("n + m, 8", F32), &t("m + n, 1", F32)).unwrap();
    assert_eq!(
        sum_dims.sinfo(),
        StructInfo::tensor(vec![n().expr() + m().expr(), c(8)], F32)
    );
    for op in [subtract, divide, minimum] {
        assert_eq!(
            si(op(&t("n, 64", F32), &t("n, 64", F32))),
            "Tensor((n, 64), f32)"
        );
    }
}

#[test]
fn broadcast_mismatch_names_both_shapes() {
    assert_eq!(
        err(add(&t("1, n, 64", F32), &t("1, m, 64", F32))),
        "add: cannot broadcast lhs (1, n, 64) with rhs (1, m, 64): dims n and m differ"
    );
}

#[test]
fn binary_dtype_mismatch_names_both_dtypes() {
    let e = multiply(&t("n", F32), &t("n", F16)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "multiply: dtypes differ: lhs is f32, rhs is f16"
    );
    assert!(matches!(
        e,
        InferError::DTypeMismatch {
            lhs_dtype: F32,
            rhs_dtype: F16,
            ..
        }
    ));
}

#[test]
fn where_broadcasts_three_operands() {
    let cond = t("1, 1, n, m", Bool);
    let scores = t("1, 32, n, m", F32);
    let fill = t("1", F32);
    assert_eq!(
        si(r#where(&cond, &scores, &fill)),
        "Tensor((1, 32, n, m), f32)"
    );
    assert_eq!(
        err(r#where(&scores, &scores, &fill)),
        "where: cond has dtype f32, expected bool"
    );
    assert_eq!(
        err(r#where(&t("n, 1", Bool), &t("1, m", F32), &t("n, 8", F32))),
        "where: cannot broadcast lhs (1, m) with rhs (n, 8): dims m and 8 differ"
    );
}

#[test]
fn unary_ops_keep_struct_info_and_check_dtypes() {
    let x = t("1, n, 64", F32);
    for op in [
        exp, log, sqrt, rsqrt, sin, cos, tanh, sigmoid, silu, negative,
    ] {
        assert_eq!(op(&x).unwrap().sinfo(), x.sinfo());
    }
    assert_eq!(si(negative(&t("n", I32))), "Tensor((n,), i32)");
    assert_eq!(
        err(exp(&t("n", I32))),
        "exp: x has dtype i32, expected a float dtype"
    );
    assert_eq!(si(gelu(&x, true)), "Tensor((1, n, 64), f32)");
    let shape_arg = call("exp", vec![Expr::Shape(dims("n"))], Attrs::new());
    assert_eq!(
        err(shape_arg),
        "exp: argument 0 (x) must be a tensor, got Shape((n,))"
    );
}

#[test]
fn astype_changes_only_the_dtype() {
    assert_eq!(si(astype(&t("1, n", I32), F16)), "Tensor((1, n), f16)");
}

#[test]
fn reshape_infers_minus_one_over_symbolic_dims() {
    let x = t("1, n, 4, 16", F32);
    assert_eq!(
        si(reshape(&x, vec![c(1), n().expr(), c(-1)])),
        "Tensor((1, n, 64), f32)"
    );
    let hidden = t("1, n, 4096", F32);
    let heads = reshape(&hidden, vec![c(1), n().expr(), c(32), c(-1)]);
    assert_eq!(si(heads), "Tensor((1, n, 32, 128), f32)");
    assert_eq!(
        si(reshape(&hidden, vec![c(-1), c(4096)])),
        "Tensor((n, 4096), f32)"
    );
}

#[test]
fn reshape_without_minus_one_proves_sizes_equal() {
    let x = t("1, n, 64", F32);
    assert_eq!(si(reshape(&x, dims("n, 4, 16"))), "Tensor((n, 4, 16), f32)");
    assert_eq!(si(reshape(&x, dims("64 * n"))), "Tensor((64 * n,), f32)");
}

#[test]
fn reshape_size_mismatch_names_both_sizes() {
    assert_eq!(
        err(reshape(&t("1, n, 64", F32), dims("n, 32"))),
        "reshape: cannot reshape (1, n, 64) (size 64 * n) to (n, 32) (size 32 * n)"
    );
}

#[test]
fn reshape_rejects_inexact_or_repeated_minus_one() {
    let x = t("n, 3", F32);
    assert_eq!(
        err(reshape(&x, vec![c(2), c(-1)])),
        "reshape: cannot infer the -1 dim of (2, -1) from (n, 3): size 3 * n is not provably a multiple of 2"
    );
    assert_eq!(
        err(reshape(&x, vec![c(-1), c(-1)])),
        "reshape: invalid shape: (-1, -1) has more than one -1"
    );
    assert!(matches!(
        reshape(&x, vec![c(-3), n().expr()]),
        Err(InferError::InvalidArg { .. })
    ));
}

#[test]
fn permute_dims_default_and_negative_axes() {
    let x = t("1, n, 32, 128", F32);
    assert_eq!(si(permute_dims(&x, None)), "Tensor((128, 32, n, 1), f32)");
    let swapped = permute_dims(&x, Some(vec![0, -2, 1, -1]));
    assert_eq!(si(swapped), "Tensor((1, 32, n, 128), f32)");
    assert!(matches!(
        permute_dims(&x, Some(vec![0, 1])),
        Err(InferError::InvalidAttr { attr: "axes", .. })
    ));
    assert!(matches!(
        permute_dims(&x, Some(vec![0, 1, 1, 2])),
        Err(InferError::DuplicateAxis { axis: 1, .. })
    ));
}

#[test]
fn expand_dims_and_squeeze() {
    let x = t("n, 64", F32);
    assert_eq!(
        si(expand_dims(&x, vec![0, -1])),
        "Tensor((1, n, 64, 1), f32)"
    );
    let y = t("1, n, 1, 64", F32);
    assert_eq!(si(squeeze(&y, None)), "Tensor((n, 64), f32)");
    assert_eq!(si(squeeze(&y, Some(vec![-2]))), "Tensor((1, n, 64), f32)");
    assert_eq!(
        err(squeeze(&y, Some(vec![1]))),
        "squeeze: cannot squeeze axis 1 of x (1, n, 1, 64): dim n is not provably 1"
    );
}

#[test]
fn broadcast_to_target_shape() {
    let x = t("1, 64", F32);
    assert_eq!(
        si(broadcast_to(&x, dims("m, n, 64"))),
        "Tensor((m, n, 64), f32)"
    );
    assert_eq!(
        err(broadcast_to(&t("n, 64", F32), dims("m, 64"))),
        "broadcast_to: cannot broadcast x (n, 64) with shape (m, 64): dims n and m differ"
    );
}

#[test]
fn concat_adds_symbolic_lengths() {
    let past = t("1, m, 64", F32);
    let new = t("1, n, 64", F32);
    let out = concat(&[past, new], 1).unwrap();
    assert_eq!(
        out.sinfo(),
        StructInfo::tensor(vec![c(1), m().expr() + n().expr(), c(64)], F32)
    );
    assert_eq!(
        si(concat(&[t("n, 8", F32), t("n, 24", F32)], -1)),
        "Tensor((n, 32), f32)"
    );
}

#[test]
fn concat_mismatches_name_the_tuple_fields() {
    assert_eq!(
        err(concat(&[t("n, 8", F32), t("m, 8", F32)], 1)),
        "concat: dims off axis 1 differ: tensors[0] (n, 8) vs tensors[1] (m, 8)"
    );
    assert_eq!(
        err(concat(&[t("n, 8", F32), t("n, 8", F16)], 0)),
        "concat: dtypes differ: tensors[0] is f32, tensors[1] is f16"
    );
    assert!(matches!(concat(&[], 0), Err(InferError::InvalidArg { .. })));
}

#[test]
fn split_into_sections_and_at_indices() {
    let qkv = t("n, 96", F32);
    assert_eq!(
        si(split_sections(&qkv, 3, 1)),
        "Tuple(Tensor((n, 32), f32), Tensor((n, 32), f32), Tensor((n, 32), f32))"
    );
    assert_eq!(
        si(split_indices(&qkv, vec![64, 80], -1)),
        "Tuple(Tensor((n, 64), f32), Tensor((n, 16), f32), Tensor((n, 16), f32))"
    );
    let by_rows = split_indices(&qkv, vec![1], 0).unwrap().sinfo();
    assert_eq!(
        by_rows,
        StructInfo::Tuple(vec![
            StructInfo::tensor(vec![c(1).minimum(&n().expr()), c(96)], F32),
            StructInfo::tensor(vec![n().expr() - c(1).minimum(&n().expr()), c(96)], F32),
        ])
    );
}

#[test]
fn split_errors() {
    let x = t("n, 96", F32);
    assert_eq!(
        err(split_sections(&x, 2, 0)),
        "split: x (n, 96) has n on axis 0, not provably divisible into 2 sections"
    );
    assert!(matches!(
        split_sections(&x, 5, 1),
        Err(InferError::SplitNotDivisible {
            sections: 5,
            axis: 1,
            ..
        })
    ));
    let neither = call("split", vec![x.clone()], Attrs::new());
    assert!(matches!(
        neither,
        Err(InferError::InvalidAttr {
            attr: "sections",
            ..
        })
    ));
    assert!(matches!(
        split_indices(&x, vec![50, 10], 1),
        Err(InferError::InvalidAttr {
            attr: "indices",
            ..
        })
    ));
}

#[test]
fn strided_slice_clamps_symbolic_ends() {
    let cache = t("1, m, 64", F32);
    let out = strided_slice(&cache, vec![1], vec![c(0)], vec![n().expr()], None).unwrap();
    assert_eq!(
        out.sinfo(),
        StructInfo::tensor(vec![c(1), n().expr().minimum(&m().expr()), c(64)], F32)
    );
    let hidden = t("1, n, 4096", F32);
    let last = strided_slice(&hidden, vec![-2], dims("n - 1"), dims("n"), None);
    assert_eq!(si(last), "Tensor((1, 1, 4096), f32)");
}

#[test]
fn strided_slice_with_strides_and_negative_bounds() {
    let x = t("10, n", F32);
    let every_other = strided_slice(&x, vec![0], vec![c(1)], vec![c(100)], Some(vec![2]));
    assert_eq!(si(every_other), "Tensor((5, n), f32)");
    let tail = strided_slice(&x, vec![0], vec![c(-3)], vec![c(10)], None);
    assert_eq!(si(tail), "Tensor((3, n), f32)");
    assert!(matches!(
        strided_slice(&x, vec![0], vec![c(0)], vec![c(4)], Some(vec![0])),
        Err(InferError::InvalidAttr {
            attr: "strides",
            ..
        })
    ));
    assert!(matches!(
        strided_slice(&x, vec![0, 1], vec![c(0)], vec![c(4)], None),
        Err(InferError::InvalidAttr { attr: "begin", .. })
    ));
}

#[test]
fn take_embeds_index_shape() {
    let table = t("1024, 64", F32);
    let ids = t("1, n", I32);
    assert_eq!(si(take(&table, &ids, 0)), "Tensor((1, n, 64), f32)");
    assert_eq!(si(take(&table, &t("m", I64), 1)), "Tensor((1024, m), f32)");
    assert_eq!(
        err(take(&table, &t("1, n", F32), 0)),
        "take: indices has dtype f32, expected i32 or i64"
    );
}

#[test]
fn reductions_drop_or_keep_axes() {
    let x = t("1, n, 64", F32);
    assert_eq!(si(sum(&x, Some(vec![-1]), true)), "Tensor((1, n, 1), f32)");
    assert_eq!(si(max(&x, Some(vec![1]), false)), "Tensor((1, 64), f32)");
    assert_eq!(si(mean(&x, None, false)), "Tensor((), f32)");
    assert_eq!(si(mean(&x, None, true)), "Tensor((1, 1, 1), f32)");
    assert_eq!(
        err(sum(&x, Some(vec![2, -1]), false)),
        "sum: axis 2 appears more than once in `axis`"
    );
    assert_eq!(
        err(mean(&t("n", I32), None, false)),
        "mean: x has dtype i32, expected a float dtype"
    );
}

#[test]
fn axis_out_of_range_is_an_error() {
    let x = t("1, n, 64", F32);
    assert_eq!(
        err(softmax(&x, 3)),
        "softmax: axis 3 in `axis` is out of range for rank 3"
    );
    assert!(matches!(
        sum(&x, Some(vec![-4]), false),
        Err(InferError::AxisOutOfRange {
            axis: -4,
            ndim: 3,
            ..
        })
    ));
    assert_eq!(si(softmax(&x, -1)), "Tensor((1, n, 64), f32)");
}

#[test]
fn norms_check_parameter_shapes() {
    let x = t("1, n, 4096", F32);
    assert_eq!(
        si(rms_norm(&x, &t("4096", F32), vec![-1], 1e-5)),
        "Tensor((1, n, 4096), f32)"
    );
    assert_eq!(
        err(rms_norm(&x, &t("2048", F32), vec![-1], 1e-5)),
        "rms_norm: weight must have the dims of x on axes [2]: x (1, n, 4096) vs weight (2048,)"
    );
    let w = t("4096", F32);
    assert_eq!(
        si(add_rms_norm((&x, &x), &w, vec![-1], 1e-5)),
        "Tensor((1, n, 4096), f32)"
    );
    assert_eq!(
        err(add_rms_norm(
            (&x, &t("1, n, 2048", F32)),
            &w,
            vec![-1],
            1e-5
        )),
        "add_rms_norm: a and b must have the same shape: a (1, n, 4096) vs b (1, n, 2048)"
    );
    let (g, b) = (t("4096", F32), t("4096", F32));
    assert_eq!(
        si(layer_norm(&x, &g, &b, vec![2], 1e-5)),
        "Tensor((1, n, 4096), f32)"
    );
    assert!(matches!(
        layer_norm(&x, &g, &t("4096", F16), vec![-1], 1e-5),
        Err(InferError::DTypeMismatch { rhs_dtype: F16, .. })
    ));
    assert!(matches!(
        rms_norm(&x, &g, vec![-1], f64::NAN),
        Err(InferError::InvalidAttr {
            attr: "epsilon",
            ..
        })
    ));
}

#[test]
fn creation_ops_use_the_dtype_attr() {
    assert_eq!(si(full(dims("1, n"), 0.5, F32)), "Tensor((1, n), f32)");
    assert_eq!(si(full(dims("n, m"), -3.0, I32)), "Tensor((n, m), i32)");
    assert_eq!(
        err(full(dims("n"), 0.5, I32)),
        "full: invalid fill: 0.5 is not a value of i32"
    );
    assert_eq!(si(zeros(dims("n, 64"), F16)), "Tensor((n, 64), f16)");
    assert_eq!(si(ones(dims("m"), Bool)), "Tensor((m,), bool)");
    assert!(matches!(
        zeros(vec![c(-2)], F32),
        Err(InferError::InvalidArg { .. })
    ));
}

#[test]
fn triu_needs_rank_two() {
    assert_eq!(
        si(triu(&t("1, 1, n, m", F32), 1)),
        "Tensor((1, 1, n, m), f32)"
    );
    assert_eq!(
        err(triu(&t("n", F32), 0)),
        "triu: x (n,) has rank 1, expected at least 2"
    );
}

#[test]
fn shape_arguments_must_be_shape_values() {
    let x = t("n, 64", F32);
    let bad = call("reshape", vec![x.clone(), x], Attrs::new());
    assert_eq!(
        err(bad),
        "reshape: argument 1 (shape) must be a shape value, got Tensor((n, 64), f32)"
    );
}

#[test]
fn errors_stay_small() {
    assert!(
        std::mem::size_of::<InferError>() <= 128,
        "{}",
        std::mem::size_of::<InferError>()
    );
}

#[test]
fn attention_groups_heads_and_checks_its_operands() {
    let q = t("n, 4, 16", F32);
    let kv = t("m + n, 2, 16", F32);
    assert_eq!(
        si(attention(&q, &kv, &kv, 0.25, true)),
        "Tensor((n, 4, 16), f32)"
    );
    let three = t("m + n, 3, 16", F32);
    assert!(err(attention(&q, &three, &three, 0.25, true)).contains("kv heads must divide"));
    let other_dim = t("m + n, 2, 8", F32);
    assert!(err(attention(&q, &other_dim, &other_dim, 0.25, true)).contains("head dims"));
    let shorter = t("m, 2, 16", F32);
    assert!(err(attention(&q, &kv, &shorter, 0.25, true)).contains("positions must agree"));
    assert!(err(attention(&t("n, 64", F32), &kv, &kv, 0.25, true)).contains("[n, heads, head_dim]"));
    assert!(err(attention(&t("n, 4, 16", F16), &kv, &kv, 0.25, true)).contains("dtype"));
}

#[test]
fn a_sliding_window_is_a_positive_causal_attribute_of_both_attention_ops() {
    let q = t("n, 4, 16", F32);
    let kv = t("m + n, 2, 16", F32);
    let windowed = attention(&q, &kv, &kv, 0.25, Mask::Window(4)).unwrap();
    assert_eq!(si(Ok(windowed.clone())), "Tensor((n, 4, 16), f32)");
    let Expr::Call(windowed) = &windowed else {
        unreachable!("op constructors build calls")
    };
    assert_eq!(Mask::of(&windowed.attrs), Mask::Window(4));
    for mask in [Mask::None, Mask::Causal] {
        let Ok(Expr::Call(call)) = attention(&q, &kv, &kv, 0.25, mask) else {
            unreachable!("a valid call")
        };
        assert_eq!(Mask::of(&call.attrs), mask);
    }
    assert!(err(attention(&q, &kv, &kv, 0.25, Mask::Window(0))).contains("window"));
    let (codes, scales) = (t("m + n, 2, 16", I8), t("m + n, 2", F32));
    let q8 = attention_q8kv(
        &q,
        (&codes, &scales),
        (&codes, &scales),
        0.25,
        Mask::Window(-1),
    );
    assert!(err(q8).contains("must be positive and causal"));
    let mut attrs = windowed.attrs.clone();
    attrs.insert("causal".to_string(), AttrValue::Bool(false));
    let acausal = call("attention", vec![q.clone(), kv.clone(), kv], attrs);
    assert!(err(acausal).contains("must be positive and causal"));
}

#[test]
fn attention_reads_f16_keys_and_values_into_f32() {
    let q = t("n, 4, 16", F32);
    let kv16 = t("m + n, 2, 16", F16);
    assert_eq!(
        si(attention(&q, &kv16, &kv16, 0.25, true)),
        "Tensor((n, 4, 16), f32)"
    );
    let kv32 = t("m + n, 2, 16", F32);
    assert!(err(attention(&q, &kv16, &kv32, 0.25, true)).contains("dtype"));
    let bf16 = t("m + n, 2, 16", BF16);
    assert!(err(attention(&q, &bf16, &bf16, 0.25, true))
        .contains("has dtype bf16, expected f32 or f16"));
}

#[test]
fn attention_q8kv_reads_int8_keys_and_values_with_their_row_scales() {
    let q = t("n, 4, 16", F32);
    let codes = t("m + n, 2, 16", I8);
    let scales = t("m + n, 2", F32);
    assert_eq!(
        si(attention_q8kv(
            &q,
            (&codes, &scales),
            (&codes, &scales),
            0.25,
            true
        )),
        "Tensor((n, 4, 16), f32)"
    );
    let f32_kv = t("m + n, 2, 16", F32);
    let message = err(attention_q8kv(
        &q,
        (&f32_kv, &scales),
        (&f32_kv, &scales),
        0.25,
        true,
    ));
    assert!(message.contains("has dtype f32, expected i8"), "{message}");
    let per_position = t("m + n", F32);
    let message = err(attention_q8kv(
        &q,
        (&codes, &per_position),
        (&codes, &scales),
        0.25,
        true,
    ));
    assert!(message.contains("f32 scales [t, kv_heads]"), "{message}");
    let f16_scales = t("m + n, 2", F16);
    let message = err(attention_q8kv(
        &q,
        (&codes, &scales),
        (&codes, &f16_scales),
        0.25,
        true,
    ));
    assert!(message.contains("v_scales"), "{message}");
}

#[test]
fn quantize_kv_gives_int8_codes_of_the_rows_shape() {
    let x = t("n, 2, 16", F32);
    let scales = activation_scales(&x).unwrap();
    assert_eq!(scales.sinfo().to_string(), "Tensor((n, 2), f32)");
    assert_eq!(si(quantize_kv(&x, &scales)), "Tensor((n, 2, 16), i8)");
    assert!(err(quantize_kv(&x, &t("n", F32))).contains("one f32 scale per row"));
    assert!(err(quantize_kv(&t("n, 2, 16", F16), &scales)).contains("must be f32"));
}
