//! A fused function computes what its producer and consumer compute one after the other
//! (checked with the TIR evaluator on symbolic and odd sizes), and pairs that cannot fuse
//! are refused.

use super::{fuse_elementwise, fuse_windowed, fused_ops, split_epilogue, MAX_FUSED_OPS};
use crate::legalize::{legalize_call, OP_ATTR};
use crate::nn::{RotaryEmbedding, Spec};
use crate::sym::SymBindings;
use crate::tir::eval::pseudo_random;
use crate::tir::{run_with_inputs, PrimFunc};
use crate::{op, AttrValue, DType, Expr, StructInfo, SymExpr, SymVar, Var};

fn tensor(name: &str, shape: Vec<SymExpr>) -> Expr {
    Expr::Var(Var::new(name, StructInfo::tensor(shape, DType::F32)))
}

fn legalized(expr: Expr) -> PrimFunc {
    let Expr::Call(call) = expr else {
        unreachable!("op constructors build calls")
    };
    legalize_call(&call).unwrap().func
}

fn rows() -> SymExpr {
    SymVar::bounded("n", 16).expr()
}

/// `[1, n, 37]`-shaped placeholders and a packed matmul producing that shape.
fn matmul() -> PrimFunc {
    matmul_to(37)
}

/// A packed matmul producing `[1, n, features]`.
fn matmul_to(features: i64) -> PrimFunc {
    let x = tensor("x", vec![1.into(), rows(), 19.into()]);
    let panels = (features + 15) / 16;
    let packed = tensor("w", vec![panels.into(), 19.into(), 16.into()]);
    legalized(op::packed_matmul(&x, &packed, features).unwrap())
}

fn activation() -> Expr {
    activation_of(37)
}

fn activation_of(features: i64) -> Expr {
    tensor("t", vec![1.into(), rows(), features.into()])
}

/// The rotation the nn module emits for `[1, n, heads, dim]`.
fn rotary(heads: i64, dim: i64) -> PrimFunc {
    let x = tensor("x", vec![1.into(), rows(), heads.into(), dim.into()]);
    let table = tensor("table", vec![rows(), dim.into()]);
    let vars = [x, table].map(|e| match e {
        Expr::Var(v) => v,
        _ => unreachable!("tensor() builds variables"),
    });
    let spec = Spec::new().function("rope", vars.to_vec(), |rope: &RotaryEmbedding, bb, t| {
        rope.apply(bb, &t[0], &t[1])
    });
    let rope = RotaryEmbedding::new(dim, 10000.0).unwrap();
    spec.export(&rope).unwrap().prim_funcs["rotary"].clone()
}

/// Inputs of the producer, then of the consumer without the operand; the outputs of the
/// two run one after the other and of the fused function.
fn compare(producer: &PrimFunc, consumer: &PrimFunc, operand: usize, fused: &PrimFunc) {
    for n in [1, 5, 16] {
        let dims = SymBindings::from([("n".to_string(), n)]);
        let random = |b: &crate::tir::Buffer, seed| {
            let len = SymExpr::product(&b.shape).eval(&dims).unwrap() as usize;
            pseudo_random(seed, len)
        };
        let first: Vec<_> = (producer.inputs().iter().enumerate())
            .map(|(i, b)| random(b, i as u64))
            .collect();
        let rest: Vec<_> = (consumer.inputs().iter().enumerate())
            .filter(|(i, _)| *i != operand)
            .map(|(i, b)| random(b, 100 + i as u64))
            .collect();
        let produced = run_with_inputs(producer, &dims, &first).unwrap().remove(0);
        let mut consumer_inputs = rest.clone();
        consumer_inputs.insert(operand, produced);
        let expected = run_with_inputs(consumer, &dims, &consumer_inputs).unwrap();
        let inputs: Vec<_> = first.into_iter().chain(rest).collect();
        let got = run_with_inputs(fused, &dims, &inputs).unwrap();
        assert_eq!(got.len(), 1);
        for (g, e) in got[0].iter().zip(&expected[0]) {
            assert!(
                (g - e).abs() <= 1e-12 * (1.0 + e.abs()),
                "n {n}: {g} vs {e}"
            );
        }
    }
}

#[test]
fn a_residual_add_becomes_a_matmul_epilogue() {
    let (producer, residual) = (matmul(), tensor("r", vec![1.into(), rows(), 37.into()]));
    for operand in [0, 1] {
        let sum = if operand == 0 {
            op::add(&activation(), &residual)
        } else {
            op::add(&residual, &activation())
        };
        let consumer = legalized(sum.unwrap());
        let fused = fuse_elementwise(&producer, &consumer, operand).unwrap();
        assert!(split_epilogue(&fused).is_some());
        assert_eq!(fused_ops(&fused), ["packed_matmul", "add"]);
        let op = fused.attrs.get(OP_ATTR);
        assert_eq!(op, Some(&AttrValue::Str("packed_matmul".into())));
        compare(&producer, &consumer, operand, &fused);
    }
}

#[test]
fn a_bias_broadcast_over_rows_becomes_a_matmul_epilogue() {
    let bias = tensor("bias", vec![37.into()]);
    let consumer = legalized(op::add(&activation(), &bias).unwrap());
    let fused = fuse_elementwise(&matmul(), &consumer, 0).unwrap();
    compare(&matmul(), &consumer, 0, &fused);
}

#[test]
fn silu_times_up_chains_into_one_epilogue_and_inlines_into_elementwise() {
    let silu = legalized(op::silu(&activation()).unwrap());
    let up = tensor("up", vec![1.into(), rows(), 37.into()]);
    let product = legalized(op::multiply(&activation(), &up).unwrap());
    // silu inlined into multiply: one element-wise function.
    let inlined = fuse_elementwise(&silu, &product, 0).unwrap();
    assert!(split_epilogue(&inlined).is_none());
    assert_eq!(fused_ops(&inlined), ["silu", "multiply"]);
    compare(&silu, &product, 0, &inlined);
    // matmul, then silu, then multiply: the second epilogue composes with the first.
    let with_silu = fuse_elementwise(&matmul(), &silu, 0).unwrap();
    let both = fuse_elementwise(&with_silu, &product, 0).unwrap();
    assert_eq!(fused_ops(&both), ["packed_matmul", "silu", "multiply"]);
    compare(&with_silu, &product, 0, &both);
    // The up projection's result multiplied into the gate's: the operand is the second.
    let other = legalized(op::multiply(&up, &activation()).unwrap());
    let into_up = fuse_elementwise(&matmul(), &other, 1).unwrap();
    compare(&matmul(), &other, 1, &into_up);
}

#[test]
fn pairs_that_cannot_fuse_are_refused() {
    // The consumer broadcasts the operand to a bigger shape: not the same elements.
    let small = tensor("t", vec![1.into(), 1.into(), 37.into()]);
    let wide = tensor("r", vec![1.into(), rows(), 37.into()]);
    let small_producer = legalized(op::silu(&small).unwrap());
    let broadcast = legalized(op::add(&small, &wide).unwrap());
    assert!(fuse_elementwise(&small_producer, &broadcast, 0).is_none());
    // A reduction is neither an element-wise producer nor consumer.
    let sum = legalized(op::sum(&activation(), Some(vec![-1]), true).unwrap());
    let silu = legalized(op::silu(&activation()).unwrap());
    assert!(fuse_elementwise(&silu, &sum, 0).is_none());
    assert!(fuse_elementwise(&sum, &silu, 0).is_none());
    // A permutation reads other elements than it writes.
    let square = tensor("t", vec![37.into(), 37.into()]);
    let transpose = legalized(op::permute_dims(&square, None).unwrap());
    let square_silu = legalized(op::silu(&square).unwrap());
    assert!(fuse_elementwise(&square_silu, &transpose, 0).is_none());
}

#[test]
fn rope_after_a_head_split_becomes_a_windowed_matmul_epilogue() {
    for (heads, dim) in [(3, 16), (2, 8)] {
        let features = heads * dim;
        let producer = matmul_to(features);
        let consumer = rotary(heads, dim);
        let fused = fuse_windowed(&producer, &consumer, 0).unwrap();
        let (_, epilogue) = split_epilogue(&fused).unwrap();
        assert_eq!(epilogue.window, dim);
        assert_eq!(fused_ops(&fused), ["packed_matmul", "rotary"]);
        compare(&producer, &consumer, 0, &fused);
        // After a bias epilogue (Qwen2's q and k projections).
        let bias = tensor("bias", vec![features.into()]);
        let add_bias = legalized(op::add(&activation_of(features), &bias).unwrap());
        let biased = fuse_elementwise(&producer, &add_bias, 0).unwrap();
        let both = fuse_windowed(&biased, &consumer, 0).unwrap();
        assert_eq!(fused_ops(&both), ["packed_matmul", "add", "rotary"]);
        compare(&biased, &consumer, 0, &both);
        // An element-wise consumer after it keeps the window.
        let silu = legalized(op::silu(&activation_of(features)).unwrap());
        let then_silu = fuse_elementwise(&both, &silu, 0).unwrap();
        assert_eq!(split_epilogue(&then_silu).unwrap().1.window, dim);
        compare(&both, &silu, 0, &then_silu);
        // One windowed epilogue per function.
        assert!(fuse_windowed(&both, &consumer, 0).is_none());
    }
}

#[test]
fn windowed_fusion_needs_a_matmul_and_a_split_of_its_last_axis() {
    let consumer = rotary(3, 16);
    // Not a matmul.
    let silu = legalized(op::silu(&activation_of(48)).unwrap());
    assert!(fuse_windowed(&silu, &consumer, 0).is_none());
    // Not the producer's shape split.
    assert!(fuse_windowed(&matmul_to(64), &consumer, 0).is_none());
    // An element-wise consumer of the same shape is no window.
    let add = legalized(op::add(&activation(), &activation()).unwrap());
    assert!(fuse_windowed(&matmul(), &add, 0).is_none());
}

#[test]
fn a_chain_of_elementwise_ops_fuses_up_to_the_cap() {
    let add = legalized(op::add(&activation(), &activation()).unwrap());
    let mut chain = legalized(op::silu(&activation()).unwrap());
    for ops in 1..MAX_FUSED_OPS {
        assert_eq!(fused_ops(&chain).len(), ops);
        chain = fuse_elementwise(&chain, &add, 0).unwrap();
    }
    assert_eq!(fused_ops(&chain).len(), MAX_FUSED_OPS);
    assert!(fuse_elementwise(&chain, &add, 0).is_none());
    let rope = rotary(3, 16);
    let mut matmul_chain = matmul_to(48);
    let add48 = legalized(op::add(&activation_of(48), &activation_of(48)).unwrap());
    for _ in 2..MAX_FUSED_OPS {
        matmul_chain = fuse_elementwise(&matmul_chain, &add48, 0).unwrap();
    }
    assert_eq!(fused_ops(&matmul_chain).len(), MAX_FUSED_OPS - 1);
    let full = fuse_windowed(&matmul_chain, &rope, 0).unwrap();
    assert!(fuse_windowed(
        &fuse_elementwise(&matmul_chain, &add48, 0).unwrap(),
        &rope,
        0
    )
    .is_none());
    assert_eq!(fused_ops(&full).len(), MAX_FUSED_OPS);
}
