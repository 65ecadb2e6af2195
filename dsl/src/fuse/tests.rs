//! A fused function computes what its producer and consumer compute one after the other
//! (checked with the TIR evaluator on symbolic and odd sizes), and pairs that cannot fuse
//! are refused.

use super::{fuse_elementwise, fused_ops, split_epilogue};
use crate::legalize::{legalize_call, OP_ATTR};
use crate::sym::SymBindings;
use crate::tir::eval::pseudo_random;
use crate::tir::{run_with_inputs, PrimFunc};
use crate::{op, AttrValue, DataType, Expr, StructInfo, SymExpr, SymVar, Var};

fn tensor(name: &str, shape: Vec<SymExpr>) -> Expr {
    Expr::Var(Var::new(name, StructInfo::tensor(shape, DataType::F32)))
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
    let x = tensor("x", vec![1.into(), rows(), 19.into()]);
    let packed = tensor("w", vec![3.into(), 19.into(), 16.into()]);
    legalized(op::packed_matmul(&x, &packed, 37).unwrap())
}

fn activation() -> Expr {
    tensor("t", vec![1.into(), rows(), 37.into()])
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
