//! Modules built with the DSL run through the whole compiler (passes, schedules, memory
//! plan, bytecode, JIT) in the VM, compared with ndarray references.

mod common;
use common::{output, tensor};

use ndarray::{Array, ArrayD, Ix2, IxDyn};
use oxrelax::model::transform_weights;
use oxrelax::passes::{arena_size, planned_bytes, Instrument, ARENA_OFFSETS};
use oxrelax::{build, Built};
use oxrelax_dsl::ir::BindingValue;
use oxrelax_dsl::{AttrValue, Expr};
use rand::{rngs::StdRng, Rng, SeedableRng};

fn random(rng: &mut StdRng, shape: &[usize], scale: f32) -> ArrayD<f32> {
    Array::from_shape_fn(IxDyn(shape), |_| rng.gen_range(-scale..scale))
}

fn max_abs_diff(a: &ArrayD<f32>, b: &ArrayD<f32>) -> f32 {
    assert_eq!(a.shape(), b.shape());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

fn built_mlp() -> Built {
    build(common::mlp_module(), Instrument::from_env()).expect("the MLP builds")
}

#[test]
fn mlp_matches_ndarray_for_several_token_counts() {
    let mut built = built_mlp();
    let mut rng = StdRng::seed_from_u64(1);
    let up = random(&mut rng, &[256, 64], 0.1);
    let down = random(&mut rng, &[64, 256], 0.1);
    let bias = random(&mut rng, &[64], 0.1);
    let raw = vec![tensor(&up), tensor(&down), tensor(&bias)];
    let weights = transform_weights(&mut built, raw).unwrap();
    for n in [1usize, 3, 17, 129] {
        let x = random(&mut rng, &[1, n, 64], 1.0);
        let args: Vec<_> = std::iter::once(tensor(&x))
            .chain(weights.iter().cloned())
            .collect();
        let got = built.vm.call("forward", &args).unwrap();
        let x2 = x
            .clone()
            .into_shape_with_order((n, 64))
            .unwrap()
            .into_dimensionality::<Ix2>()
            .unwrap();
        let up2 = up.view().into_dimensionality::<Ix2>().unwrap();
        let down2 = down.view().into_dimensionality::<Ix2>().unwrap();
        let hidden = x2.dot(&up2.t()).mapv(silu);
        let bias1 = bias.view().into_dimensionality::<ndarray::Ix1>().unwrap();
        let want = (hidden.dot(&down2.t()) + bias1)
            .into_shape_with_order((1, n, 64))
            .unwrap()
            .into_dyn();
        let diff = max_abs_diff(&output(got), &want);
        assert!(diff < 1e-5, "n = {n}: max |diff| = {diff}");
    }
}

#[test]
fn memory_plan_is_sized_from_bounds_and_never_overlaps_live_tensors() {
    let built = build(common::attention_module(), Instrument::from_env())
        .expect("the attention block builds");
    let forward = &built.module.functions["forward"];
    // (offset, size, def, last use) of every planned tensor.
    let bindings: Vec<_> = forward.bindings().collect();
    let mut planned = Vec::new();
    for (index, binding) in bindings.iter().enumerate() {
        let BindingValue::Expr(Expr::Call(call)) = &binding.value else {
            continue;
        };
        let Some(AttrValue::Ints(offsets)) = call.attrs.get(ARENA_OFFSETS) else {
            continue;
        };
        let size = planned_bytes(&call.sinfo).unwrap();
        let last_use = bindings
            .iter()
            .rposition(|b| {
                let mut uses = false;
                b.value
                    .expr()
                    .for_each_var(&mut |v| uses |= v.name == binding.var.name);
                uses
            })
            .unwrap_or(usize::MAX);
        planned.push((offsets[0], size, index, last_use, binding.var.name.clone()));
    }
    assert!(!planned.is_empty());
    // Every intermediate is at most the scores, [1, 4, n, n] with n <= 2048, f32.
    let largest = 4 * 2048 * 2048 * 4;
    assert!(planned.iter().all(|p| p.1 <= largest));
    assert!(planned.iter().any(|p| p.1 == largest));
    for (i, a) in planned.iter().enumerate() {
        for b in &planned[i + 1..] {
            let live_together = a.2 <= b.3 && b.2 <= a.3;
            let overlap = a.0 < b.0 + b.1 && b.0 < a.0 + a.1;
            assert!(
                !(live_together && overlap),
                "{} and {} share memory while both live",
                a.4,
                b.4
            );
        }
    }
    let vm_function = &built.executable.functions["forward"];
    assert_eq!(vm_function.arena_size as i64, arena_size(forward));
    // Reuse: the arena is smaller than the sum of all planned tensors.
    let total: i64 = planned.iter().map(|p| p.1).sum();
    assert!(
        arena_size(forward) < total,
        "arena {} vs total {total}",
        arena_size(forward)
    );
}

#[test]
fn wrong_argument_shape_is_a_clear_error() {
    let mut built = built_mlp();
    let mut rng = StdRng::seed_from_u64(2);
    let x = random(&mut rng, &[1, 3, 32], 1.0);
    let w = random(&mut rng, &[256, 64], 1.0);
    let down = random(&mut rng, &[64, 256], 1.0);
    let b = random(&mut rng, &[64], 1.0);
    let err = built
        .vm
        .call(
            "forward",
            &[tensor(&x), tensor(&w), tensor(&down), tensor(&b)],
        )
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("forward") && err.contains("[1, 3, 32]"),
        "{err}"
    );
    let too_long = random(&mut rng, &[1, 2049, 64], 1.0);
    let err = built
        .vm
        .call(
            "forward",
            &[tensor(&too_long), tensor(&w), tensor(&down), tensor(&b)],
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("2048") && err.contains("2049"), "{err}");
}

/// A linear layer with f16 weights: packed as f16 panels once, run on the f16-weight
/// microkernels (widened as loaded), equal to `x @ w^T` in f64 on the same f16 values.
#[test]
fn f16_linear_weights_stay_f16_and_match_ndarray() {
    use oxrelax_dsl::nn::{Linear, Prefix, Spec};
    use oxrelax_dsl::{DType, StructInfo, Var};
    let linear = Linear::new(&Prefix::new("proj"), 64, 37, false, DType::F16);
    let x = Var::new(
        "x",
        StructInfo::tensor(vec![1.into(), common::n().expr(), 64.into()], DType::F32),
    );
    let module = Spec::new()
        .function("forward", vec![x], |m: &Linear, bb, xs| {
            m.forward(bb, &xs[0])
        })
        .export(&linear)
        .unwrap();
    let mut built = build(module, Instrument::from_env()).unwrap();
    let text = oxrelax_dsl::text::print_module(&built.module);
    let host_gemm = oxrelax_dsl::Target::host().matmul_tiles().gemm_kernel;
    let f16_gemm =
        oxrelax_dsl::tir::MicrokernelSpec::gemm_over(host_gemm, (DType::F16, None)).unwrap();
    let call = format!("microkernel {}(", f16_gemm.name);
    assert!(text.contains(&call), "{call} in {text}");
    let mut rng = StdRng::seed_from_u64(3);
    let w = random(&mut rng, &[37, 64], 1.0).mapv(|v| half::f16::from_f32(v).to_f32());
    let w16 = w.mapv(half::f16::from_f32);
    let raw = oxrelax_runtime::Value::Tensor(oxrelax_runtime::Tensor::from_ndarray(&w16).unwrap());
    let weights = transform_weights(&mut built, vec![raw]).unwrap();
    let packed = weights[0].as_tensor().unwrap();
    assert_eq!(packed.dtype(), oxrelax_runtime::DType::F16);
    for n in [1usize, 7, 13] {
        let xs = random(&mut rng, &[1, n, 64], 1.0);
        let args = vec![tensor(&xs), weights[0].clone()];
        let got = output(built.vm.call("forward", &args).unwrap());
        let x2 = xs.mapv(f64::from).into_shape_with_order((n, 64)).unwrap();
        let x2 = x2.into_dimensionality::<Ix2>().unwrap();
        let w2 = w.mapv(f64::from).into_dimensionality::<Ix2>().unwrap();
        let want = x2.dot(&w2.t());
        for (g, e) in got.iter().zip(want.iter()) {
            assert!(
                (f64::from(*g) - e).abs() <= 1e-4 * (1.0 + e.abs()),
                "n {n}: {g} vs {e}"
            );
        }
    }
}
