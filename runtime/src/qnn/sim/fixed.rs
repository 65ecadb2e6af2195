//! Fixed-point requantization as integer-only accelerators do it: a real multiplier
//! `M` is stored as a Q31 integer `m` in `[2^30, 2^31)` and a power-of-two `shift`, so that
//! `M ~= m * 2^(shift - 31)`; an accumulator `x` is requantized as
//! `rounding_divide_by_pot(rounding_doubling_high_mul(x << left, m), right)` with
//! `left = max(shift, 0)`, `right = max(-shift, 0)` (the arithmetic gemmlowp and TFLite
//! publish; written here for 64-bit accumulators). Both roundings are to nearest, ties
//! away from zero (the high multiply's too, where gemmlowp's rounds negative ties up);
//! as in those libraries, rounding twice can differ from one rounding of the exact
//! product by one unit when the right shift is small (rarely).

/// The smallest shift kept: multipliers below `2^-62` become 0.
const MIN_SHIFT: i32 = -62;
/// The largest shift kept: multipliers of `2^31` or more saturate.
const MAX_SHIFT: i32 = 31;

/// The Q31 multiplier and shift of `real`: `real ~= multiplier * 2^(shift - 31)`, the
/// multiplier in `[2^30, 2^31)`. Non-positive, non-finite or tiny (< 2^-62) reals give
/// `(0, 0)`; reals of `2^31` or more saturate to `(i32::MAX, 31)`.
pub fn quantize_multiplier(real: f64) -> (i32, i32) {
    if !(real.is_finite() && real >= 2f64.powi(MIN_SHIFT)) {
        return (0, 0);
    }
    if real >= 2f64.powi(MAX_SHIFT) {
        return (i32::MAX, MAX_SHIFT);
    }
    let mut shift = real.log2().floor() as i32 + 1;
    let mut q = (real * 2f64.powi(31 - shift)).round() as i64;
    // `log2` may land one off near powers of two, and rounding may reach 2^31.
    while q >= 1 << 31 {
        shift += 1;
        q = (real * 2f64.powi(31 - shift)).round() as i64;
    }
    while q < 1 << 30 {
        shift -= 1;
        q = (real * 2f64.powi(31 - shift)).round() as i64;
    }
    if shift > MAX_SHIFT {
        (i32::MAX, MAX_SHIFT)
    } else {
        (q as i32, shift)
    }
}

/// `round(a * b / 2^31)`, ties away from zero (exact: the product is taken in 128 bits).
pub fn rounding_doubling_high_mul(a: i64, b: i32) -> i64 {
    let product = a as i128 * b as i128;
    let nudge: i128 = if product >= 0 { 1 << 30 } else { -(1 << 30) };
    ((product + nudge) / (1i128 << 31)) as i64
}

/// `round(x / 2^exponent)`, ties away from zero; `exponent` at most 62.
pub fn rounding_divide_by_pot(x: i64, exponent: u32) -> i64 {
    let exponent = exponent.min(62);
    let mask = (1i64 << exponent) - 1;
    let remainder = x & mask;
    let threshold = (mask >> 1) + i64::from(x < 0);
    (x >> exponent) + i64::from(remainder > threshold)
}

/// `x` times the real multiplier that `(multiplier, shift)` stands for, rounded: the left
/// shift saturates, the shift is clamped to the range [`quantize_multiplier`] produces.
pub fn multiply_by_quantized_multiplier(x: i64, multiplier: i32, shift: i32) -> i64 {
    let shift = shift.clamp(MIN_SHIFT, MAX_SHIFT);
    let left = shift.max(0) as u32;
    let right = (-shift).max(0) as u32;
    let shifted = x.saturating_mul(1i64 << left);
    rounding_divide_by_pot(rounding_doubling_high_mul(shifted, multiplier), right)
}

/// `value` clamped to `range`.
pub fn saturate(value: i64, range: (i64, i64)) -> i64 {
    value.clamp(range.0, range.1)
}
