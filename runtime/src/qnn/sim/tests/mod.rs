//! Tests of the host reference backend: the block of [`model`] against a scalar
//! reference in f32, the quantized modes against each other, single integer ops against
//! Spec mode, the fixed-point arithmetic against f64, and malformed inputs.

mod builder;
mod errors;
mod fixed;
mod model;
mod ops;

use super::{max_abs, sqnr_db, SimContext, SimMode};
use model::{Params, Ranges};
use rand::rngs::StdRng;
use rand::SeedableRng;

/// Each non-static tensor's min and max in a Float-mode run of `graph`.
fn calibrate(ctx: &SimContext, graph: &str, inputs: &[&[f32]]) -> Ranges {
    let mut ranges = Ranges::new();
    let mut observe = |name: &str, values: &[f32]| {
        ranges.insert(name.to_string(), model::min_max(values));
    };
    ctx.run_observed(graph, inputs, SimMode::Float, &mut observe)
        .unwrap();
    ranges
}

#[test]
fn float_mode_matches_the_scalar_reference() {
    let mut rng = StdRng::seed_from_u64(7);
    let params = Params::random(&mut rng);
    let (net, bin) = model::block(&params, None);
    let ctx = SimContext::from_parts(net, bin).unwrap();
    for _ in 0..3 {
        let x = model::input(&mut rng);
        let expected = model::reference(&params, &x);
        let float = ctx.run("block", &[&x], SimMode::Float).unwrap();
        let err = max_abs(&expected, &float[0]);
        println!(
            "float vs reference: max abs {err:.2e}, SQNR {:.1} dB",
            sqnr_db(&expected, &float[0])
        );
        assert!(err < 1e-4, "{err}");
        // With f32 tensors every mode computes the same thing.
        assert_eq!(ctx.run("block", &[&x], SimMode::Spec).unwrap(), float);
        assert_eq!(ctx.run("block", &[&x], SimMode::Integer).unwrap(), float);
    }
}

#[test]
fn quantized_modes_track_float() {
    let mut rng = StdRng::seed_from_u64(11);
    let params = Params::random(&mut rng);
    let (net, bin) = model::block(&params, None);
    let float_ctx = SimContext::from_parts(net, bin).unwrap();
    let x = model::input(&mut rng);
    // Calibrate with the quantized weights: their outputs' ranges differ from f32's.
    let first = calibrate(&float_ctx, "block", &[&x]);
    let (net, bin) = model::block(&params, Some(&first));
    let ranges = calibrate(&SimContext::from_parts(net, bin).unwrap(), "block", &[&x]);
    let (net, bin) = model::block(&params, Some(&ranges));
    let step = model::a16(ranges["out"]).scale as f64;
    let ctx = SimContext::from_parts(net, bin).unwrap();
    let run = |mode| ctx.run("block", &[&x], mode).unwrap().remove(0);
    let (float, spec, integer) = (
        run(SimMode::Float),
        run(SimMode::Spec),
        run(SimMode::Integer),
    );
    let w4 = sqnr_db(&model::reference(&params, &x), &float);
    let spec_sqnr = sqnr_db(&float, &spec);
    let int_sqnr = sqnr_db(&float, &integer);
    let spec_steps = max_abs(&float, &spec) / step;
    let int_steps = max_abs(&spec, &integer) / step;
    println!("W4 LPBQ weights vs f32: SQNR {w4:.1} dB");
    println!("Spec vs Float: SQNR {spec_sqnr:.1} dB, max {spec_steps:.2} output steps");
    println!("Integer vs Float: SQNR {int_sqnr:.1} dB; vs Spec: max {int_steps:.2} output steps");
    for gap in ctx
        .gaps("block", &[&x], SimMode::Float, SimMode::Spec)
        .unwrap()
    {
        println!("  {gap:?}");
    }
    assert!(w4 > 15.0, "{w4}");
    assert!(
        spec_sqnr > 40.0 && int_sqnr > 40.0,
        "{spec_sqnr} {int_sqnr}"
    );
    assert!(spec_steps <= 4.0, "{spec_steps}");
    assert!(int_steps <= 2.0, "{int_steps}");
}
