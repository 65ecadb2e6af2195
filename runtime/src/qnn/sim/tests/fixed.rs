//! The Q31 requantization against f64.

use crate::qnn::sim::fixed::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[test]
fn quantize_multiplier_represents_reals() {
    let mut rng = StdRng::seed_from_u64(5);
    for _ in 0..10_000 {
        let real = 2f64.powf(rng.gen_range(-60.0..30.0));
        let (m, shift) = quantize_multiplier(real);
        assert!((1 << 30..=i32::MAX).contains(&m), "{real} -> {m}");
        let back = m as f64 * 2f64.powi(shift - 31);
        assert!(
            (back - real).abs() <= real * 2f64.powi(-30),
            "{real} -> {m} {shift}"
        );
    }
    assert_eq!(quantize_multiplier(0.5), (1 << 30, 0));
    assert_eq!(quantize_multiplier(1.0), (1 << 30, 1));
    assert_eq!(quantize_multiplier(0.0), (0, 0));
    assert_eq!(quantize_multiplier(-1.0), (0, 0));
    assert_eq!(quantize_multiplier(f64::NAN), (0, 0));
    assert_eq!(quantize_multiplier(1e-30), (0, 0));
    assert_eq!(quantize_multiplier(1e12), (i32::MAX, 31));
}

#[test]
fn requantization_matches_f64_rounding() {
    let mut rng = StdRng::seed_from_u64(9);
    let mut exact = 0;
    for i in 0..20_000 {
        // Tiny, ordinary and > 1 multipliers.
        let real = 2f64.powf(rng.gen_range(-40.0..8.0));
        let acc: i64 = rng.gen_range(-(1i64 << 40)..(1i64 << 40)) >> (i % 40);
        let (m, shift) = quantize_multiplier(real);
        let got = multiply_by_quantized_multiplier(acc, m, shift);
        let want = (acc as f64 * real).round();
        // The Q31 multiplier's own error (2^-31 relative) plus the two roundings.
        let tolerance = 1.0 + (acc as f64 * real).abs() * 2f64.powi(-30);
        assert!(
            (got as f64 - want).abs() <= tolerance,
            "{acc} x {real}: {got} vs {want}"
        );
        // While the multiplier's error stays far below a unit the result is f64's, but
        // for the rare values the two roundings (high multiply, then shift) both
        // push up.
        let ulp_safe = (acc as f64 * real).abs() < (1 << 20) as f64;
        exact += i32::from(!ulp_safe || got as f64 == want);
    }
    println!(
        "requantization equal to f64 rounding in {exact} of 20000 cases (or too large to tell)"
    );
    assert!(exact > 19_800, "{exact}");
}

#[test]
fn roundings_go_away_from_zero_on_ties() {
    assert_eq!(rounding_divide_by_pot(5, 1), 3);
    assert_eq!(rounding_divide_by_pot(-5, 1), -3);
    assert_eq!(rounding_divide_by_pot(-6, 2), -2);
    assert_eq!(rounding_divide_by_pot(-7, 2), -2);
    assert_eq!(rounding_divide_by_pot(7, 0), 7);
    assert_eq!(rounding_doubling_high_mul(3, 1 << 30), 2);
    assert_eq!(rounding_doubling_high_mul(-3, 1 << 30), -2);
    assert_eq!(rounding_doubling_high_mul(-1, i32::MIN), 1);
    let (m, shift) = quantize_multiplier(0.5);
    assert_eq!(multiply_by_quantized_multiplier(-7, m, shift), -4);
    assert!(multiply_by_quantized_multiplier(i64::MAX, i32::MAX, 31) > 1 << 62);
}

#[test]
fn saturation_clamps_to_the_range() {
    assert_eq!(saturate(70_000, (0, 65535)), 65535);
    assert_eq!(saturate(-3, (0, 65535)), 0);
    assert_eq!(saturate(-9, (-8, 7)), -8);
    assert_eq!(saturate(5, (-8, 7)), 5);
}
