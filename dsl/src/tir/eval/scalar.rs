//! Scalar values of the TIR interpreter and the arithmetic on them, per dtype: floats in
//! f64 rounded to the dtype's precision, integers wrapped to the dtype's width.

use super::EvalError;
use crate::tir::{BinOp, Intrinsic, PrimCmp};
use crate::DType;

/// A value: integers and bools are `Int` (bools are 0 or 1), floats are `Float`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Scalar {
    Int(i64),
    Float(f64),
}

impl Scalar {
    pub(super) fn as_f64(self) -> f64 {
        match self {
            Scalar::Int(v) => v as f64,
            Scalar::Float(v) => v,
        }
    }

    /// The integer value, truncating a float toward zero.
    pub(super) fn as_i64(self) -> i64 {
        match self {
            Scalar::Int(v) => v,
            Scalar::Float(v) => v as i64,
        }
    }

    pub(super) fn truthy(self) -> bool {
        self.as_f64() != 0.0
    }

    /// A value read from a buffer element of `dtype`.
    pub(super) fn from_element(value: f64, dtype: DType) -> Scalar {
        if dtype.is_float() {
            Scalar::Float(value)
        } else {
            Scalar::Int(value as i64)
        }
    }
}

/// `value` converted to `dtype`: rounded for floats, truncated and wrapped for integers.
pub(super) fn cast(value: Scalar, dtype: DType) -> Scalar {
    match dtype {
        d if d.is_float() => Scalar::Float(round_to(value.as_f64(), d)),
        DType::Bool => Scalar::Int(i64::from(value.truthy())),
        d => Scalar::Int(wrap(value.as_i64(), d)),
    }
}

/// `value` rounded to the nearest value of a float dtype (ties to even).
pub(super) fn round_to(value: f64, dtype: DType) -> f64 {
    match dtype {
        DType::F16 => round_mantissa(value, 10, -14, 65504.0),
        DType::BF16 => round_mantissa(value, 7, -126, 3.389_531_389_251_535_5e38),
        _ => value as f32 as f64,
    }
}

/// Rounds to `mantissa_bits` explicit bits, with subnormals below `2^min_exp` and
/// overflow to infinity past `max_finite`.
fn round_mantissa(value: f64, mantissa_bits: i32, min_exp: i32, max_finite: f64) -> f64 {
    if !value.is_finite() || value == 0.0 {
        return value;
    }
    let biased = ((value.to_bits() >> 52) & 0x7ff) as i32;
    let exponent = (biased - 1023).max(min_exp);
    let quantum = 2f64.powi(exponent - mantissa_bits);
    let rounded = (value / quantum).round_ties_even() * quantum;
    if rounded.abs() > max_finite {
        f64::INFINITY.copysign(value)
    } else {
        rounded
    }
}

/// `value` wrapped to the width of an integer dtype.
fn wrap(value: i64, dtype: DType) -> i64 {
    match dtype {
        DType::I32 => i64::from(value as i32),
        DType::I8 => i64::from(value as i8),
        DType::U8 => i64::from(value as u8),
        DType::U4 => value & 0xf,
        DType::Bool => i64::from(value != 0),
        _ => value,
    }
}

/// `op(a, b)` for operands of `dtype`.
pub(super) fn binary(op: BinOp, a: Scalar, b: Scalar, dtype: DType) -> Result<Scalar, EvalError> {
    if dtype.is_float() {
        let (x, y) = (a.as_f64(), b.as_f64());
        let value = match op {
            BinOp::Add => x + y,
            BinOp::Sub => x - y,
            BinOp::Mul => x * y,
            BinOp::Div => x / y,
            BinOp::FloorDiv => (x / y).floor(),
            BinOp::FloorMod => x - y * (x / y).floor(),
            BinOp::Min => x.min(y),
            BinOp::Max => x.max(y),
            BinOp::And | BinOp::Or | BinOp::Shl | BinOp::Shr => {
                return Err(EvalError::BadOperand {
                    op: op.name(),
                    dtype,
                })
            }
        };
        return Ok(Scalar::Float(round_to(value, dtype)));
    }
    let (x, y) = (a.as_i64(), b.as_i64());
    let value = match op {
        BinOp::Add => x.wrapping_add(y),
        BinOp::Sub => x.wrapping_sub(y),
        BinOp::Mul => x.wrapping_mul(y),
        BinOp::Div | BinOp::FloorDiv => floor_div(x, y, op)?,
        BinOp::FloorMod => x.wrapping_sub(y.wrapping_mul(floor_div(x, y, op)?)),
        BinOp::Min => x.min(y),
        BinOp::Max => x.max(y),
        BinOp::And => x & y,
        BinOp::Or => x | y,
        BinOp::Shl => x.wrapping_shl(y as u32),
        BinOp::Shr => x.wrapping_shr(y as u32),
    };
    Ok(Scalar::Int(wrap(value, dtype)))
}

fn floor_div(x: i64, y: i64, op: BinOp) -> Result<i64, EvalError> {
    if y == 0 {
        return Err(EvalError::DivisionByZero { op: op.name() });
    }
    let quotient = x.wrapping_div(y);
    Ok(if x % y != 0 && ((x < 0) != (y < 0)) {
        quotient - 1
    } else {
        quotient
    })
}

/// `a cmp b`.
pub(super) fn compare(cmp: PrimCmp, a: Scalar, b: Scalar) -> bool {
    let ordering = match (a, b) {
        (Scalar::Int(x), Scalar::Int(y)) => Some(x.cmp(&y)),
        _ => a.as_f64().partial_cmp(&b.as_f64()),
    };
    use std::cmp::Ordering::{Equal, Greater, Less};
    match cmp {
        PrimCmp::Lt => ordering == Some(Less),
        PrimCmp::Le => matches!(ordering, Some(Less | Equal)),
        PrimCmp::Gt => ordering == Some(Greater),
        PrimCmp::Ge => matches!(ordering, Some(Greater | Equal)),
        PrimCmp::Eq => ordering == Some(Equal),
        PrimCmp::Ne => ordering != Some(Equal),
    }
}

/// `intrinsic(args)` for arguments of `dtype`.
pub(super) fn intrinsic(intrinsic: Intrinsic, args: &[Scalar], dtype: DType) -> Scalar {
    if let ([Scalar::Int(x)], Intrinsic::Abs) = (args, intrinsic) {
        return Scalar::Int(wrap(x.wrapping_abs(), dtype));
    }
    let arg = |i: usize| args.get(i).map_or(f64::NAN, |a| a.as_f64());
    let x = arg(0);
    let value = match intrinsic {
        Intrinsic::Exp => x.exp(),
        Intrinsic::Log => x.ln(),
        Intrinsic::Sqrt => x.sqrt(),
        Intrinsic::Rsqrt => 1.0 / x.sqrt(),
        Intrinsic::Tanh => x.tanh(),
        Intrinsic::Erf => erf(x),
        Intrinsic::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        Intrinsic::Sin => x.sin(),
        Intrinsic::Cos => x.cos(),
        Intrinsic::Pow => x.powf(arg(1)),
        Intrinsic::Fma => x.mul_add(arg(1), arg(2)),
        Intrinsic::Abs => x.abs(),
        Intrinsic::Floor => x.floor(),
    };
    cast(Scalar::Float(value), dtype)
}

/// The error function: its Taylor series near 0, a continued fraction of `erfc` in the
/// tails (both accurate to ~1e-12).
pub(super) fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    let value = if a < 3.0 {
        let (mut term, mut total, mut n) = (a, a, 0.0);
        while term.abs() > 1e-17 * total.abs() {
            n += 1.0;
            term *= -a * a / n;
            total += term / (2.0 * n + 1.0);
        }
        total * std::f64::consts::FRAC_2_SQRT_PI
    } else {
        let mut t = a;
        for k in (1..=80).rev() {
            t = a + f64::from(k) * 0.5 / t;
        }
        1.0 - (-a * a).exp() / (std::f64::consts::PI.sqrt() * t)
    };
    value.copysign(x)
}
