//! Single ops in Integer mode against Spec mode, and saturation.

use super::builder::Builder;
use super::model::{self, Params, Ranges, C, H, T};
use super::{calibrate, SimContext, SimMode};
use crate::qnn::codes::tensor_type::{APP_READ, APP_WRITE};
use crate::qnn::codes::QnnDataType;
use crate::qnn::net::{NetFile, QuantParams};
use half::f16;
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::collections::BTreeMap;

type Net = (NetFile, BTreeMap<String, Vec<u8>>);

/// The net `build` makes with encodings from a Float-mode run of its f32 version.
fn quantized(build: impl Fn(Option<&Ranges>) -> Net, inputs: &[&[f32]]) -> (SimContext, Ranges) {
    let (net, bin) = build(None);
    let ranges = calibrate(&SimContext::from_parts(net, bin).unwrap(), "g", inputs);
    let (net, bin) = build(Some(&ranges));
    (SimContext::from_parts(net, bin).unwrap(), ranges)
}

fn conv_net(p: &Params, ranges: Option<&Ranges>) -> Net {
    let mut b = Builder::default();
    let enc = |name: &str| ranges.map(|r| model::a16(r[name]));
    b.activation("x", APP_WRITE, &[1, 1, T, C], enc("x"));
    b.activation("y", APP_READ, &[1, 1, T, H], enc("y"));
    model::conv_constants(&mut b, "up", &p.w1, &p.b1, C, enc("x").map(|so| so.scale));
    let params = model::conv_params(1);
    b.node(
        "up",
        "Conv2d",
        &["x", "up.weight", "up.bias"],
        "y",
        &params,
        &[],
    );
    b.finish("g")
}

fn binary_net(op: &str, b_dims: &[usize], ranges: Option<&Ranges>) -> Net {
    let mut b = Builder::default();
    let enc = |name: &str| ranges.map(|r| model::a16(r[name]));
    b.activation("a", APP_WRITE, &[1, 1, T, C], enc("a"));
    b.activation("b", APP_WRITE, b_dims, enc("b"));
    b.activation("y", APP_READ, &[1, 1, T, C], enc("y"));
    b.node("op", op, &["a", "b"], "y", &[], &[]);
    b.finish("g")
}

/// The largest gap between Spec and Integer outputs, in output steps.
fn integer_gap(ctx: &SimContext, ranges: &Ranges, inputs: &[&[f32]]) -> f64 {
    let spec = ctx.run("g", inputs, SimMode::Spec).unwrap();
    let integer = ctx.run("g", inputs, SimMode::Integer).unwrap();
    super::max_abs(&spec[0], &integer[0]) / model::a16(ranges["y"]).scale as f64
}

#[test]
fn integer_ops_are_within_a_step_of_spec() {
    let mut rng = StdRng::seed_from_u64(3);
    let params = Params::random(&mut rng);
    let x = model::uniform(&mut rng, T * C, -2.0, 2.0);
    let (ctx, ranges) = quantized(|r| conv_net(&params, r), &[&x]);
    let conv = integer_gap(&ctx, &ranges, &[&x]);
    let a = model::uniform(&mut rng, T * C, -2.0, 2.0);
    let b = model::uniform(&mut rng, T * C, -0.5, 3.0);
    let (ctx, ranges) = quantized(
        |r| binary_net("ElementWiseAdd", &[1, 1, T, C], r),
        &[&a, &b],
    );
    let add = integer_gap(&ctx, &ranges, &[&a, &b]);
    let b = &b[..C];
    let (ctx, ranges) = quantized(|r| binary_net("ElementWiseMultiply", &[C], r), &[&a, b]);
    let mul = integer_gap(&ctx, &ranges, &[&a, b]);
    println!("Integer vs Spec, output steps: conv {conv}, add {add}, multiply {mul}");
    for gap in [conv, add, mul] {
        assert!(gap <= 1.001, "{conv} {add} {mul}");
    }
}

#[test]
fn outputs_and_inputs_saturate() {
    let narrow = Ranges::from([
        ("a".to_string(), (0.0, 1.0)),
        ("b".to_string(), (0.0, 1.0)),
        ("y".to_string(), (0.0, 1.5)),
    ]);
    let (net, bin) = binary_net("ElementWiseAdd", &[1, 1, T, C], Some(&narrow));
    let ctx = SimContext::from_parts(net, bin).unwrap();
    let a = vec![5.0; T * C];
    let b = vec![0.75; T * C];
    let top = |r| {
        let so = model::a16(r);
        so.scale * (65535 + so.offset) as f32
    };
    for mode in [SimMode::Spec, SimMode::Integer] {
        let mut seen = Vec::new();
        let y = ctx
            .run_observed("g", &[&a, &b], mode, &mut |name, v| {
                seen.push((name.to_string(), v[0]))
            })
            .unwrap();
        assert_eq!(seen[0], ("a".to_string(), top((0.0, 1.0))), "{mode:?}");
        assert!(
            y[0].iter().all(|&v| v == top((0.0, 1.5))),
            "{mode:?} {:?}",
            y[0]
        );
    }
}

#[test]
fn f16_tensors_round_through_half_precision() {
    let mut b = Builder::default();
    b.activation("x", APP_WRITE, &[T, C], None);
    let f16_quant = QuantParams::none();
    b.tensor("y", APP_READ, QnnDataType::Float16, f16_quant, &[T, C]);
    b.node("op", "Sigmoid", &["x"], "y", &[], &[]);
    let (net, bin) = b.finish("g");
    let ctx = SimContext::from_parts(net, bin).unwrap();
    let x = model::uniform(&mut StdRng::seed_from_u64(2), T * C, -4.0, 4.0);
    let float = ctx.run("g", &[&x], SimMode::Float).unwrap().remove(0);
    let spec = ctx.run("g", &[&x], SimMode::Spec).unwrap().remove(0);
    let rounded: Vec<f32> = float.iter().map(|&v| f16::from_f32(v).to_f32()).collect();
    assert_eq!(spec, rounded);
    assert_ne!(spec, float);
}
