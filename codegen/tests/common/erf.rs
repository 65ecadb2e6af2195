//! A reference erf in f64, shared by the codegen unit and integration tests.

/// erf in f64: its Taylor series for |x| <= 3, the continued fraction of erfc beyond.
pub fn erf64(x: f64) -> f64 {
    let a = x.abs();
    if a > 3.0 {
        let fraction = (1..80).rev().fold(a, |acc, k| a + f64::from(k) / 2.0 / acc);
        let erfc = (-a * a).exp() / (std::f64::consts::PI.sqrt() * fraction);
        return x.signum() * (1.0 - erfc);
    }
    let (mut term, mut sum, mut k) = (x, x, 0.0);
    while term.abs() > 1e-17 * sum.abs().max(1e-300) {
        k += 1.0;
        term *= -x * x / k;
        sum += term / (2.0 * k + 1.0);
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}
