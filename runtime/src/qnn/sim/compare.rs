//! How far apart two runs' values are: SQNR, largest absolute difference, cosine. Each
//! measure of slices of different lengths is NaN.

/// How far one tensor's values in one run are from another run's.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorGap {
    /// The tensor.
    pub name: String,
    /// [`sqnr_db`] of the second run against the first.
    pub sqnr_db: f64,
    /// [`max_abs`] of the difference.
    pub max_abs: f64,
    /// [`cosine`] of the two.
    pub cosine: f64,
}

impl TensorGap {
    /// The gap between `reference` and `test` values of tensor `name`.
    pub fn between(name: &str, reference: &[f32], test: &[f32]) -> TensorGap {
        TensorGap {
            name: name.to_string(),
            sqnr_db: sqnr_db(reference, test),
            max_abs: max_abs(reference, test),
            cosine: cosine(reference, test),
        }
    }
}

/// Signal-to-quantization-noise ratio in dB: `10 log10(sum r^2 / sum (r - t)^2)`;
/// infinite when the two are equal.
pub fn sqnr_db(reference: &[f32], test: &[f32]) -> f64 {
    if reference.len() != test.len() {
        return f64::NAN;
    }
    let signal: f64 = reference.iter().map(|&r| (r as f64).powi(2)).sum();
    let noise: f64 = (reference.iter().zip(test))
        .map(|(&r, &t)| (r as f64 - t as f64).powi(2))
        .sum();
    if noise == 0.0 {
        return f64::INFINITY;
    }
    10.0 * (signal / noise).log10()
}

/// The largest absolute difference (0 for empty slices).
pub fn max_abs(reference: &[f32], test: &[f32]) -> f64 {
    if reference.len() != test.len() {
        return f64::NAN;
    }
    (reference.iter().zip(test))
        .map(|(&r, &t)| (r as f64 - t as f64).abs())
        .fold(0.0, f64::max)
}

/// The cosine of the angle between the two as vectors (1 when both are zero, 0 when
/// one is).
pub fn cosine(reference: &[f32], test: &[f32]) -> f64 {
    if reference.len() != test.len() {
        return f64::NAN;
    }
    let dot =
        |a: &[f32], b: &[f32]| -> f64 { a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum() };
    let (a, b) = (dot(reference, reference), dot(test, test));
    match (a == 0.0, b == 0.0) {
        (true, true) => 1.0,
        (false, false) => dot(reference, test) / (a * b).sqrt(),
        _ => 0.0,
    }
}
