//! Vectorizable math: polynomial approximations emitted inline, for `f32` scalars and
//! `f32x4` vectors alike (the lane type is read off the argument).
//!
//! Accuracy, as asserted by `tests::math_accuracy` over dense grids against `f64` (errors
//! are absolute below magnitude 1 and relative above): exp 1e-7 relative on [-80, 80];
//! log 1.5e-7 on [1e-30, 1e9]; tanh and sigmoid 2e-7; erf 7e-7 (Abramowitz & Stegun
//! 7.1.26 evaluated in f32); sin/cos 1.5e-7 for |x| <= 4096; pow = exp(y * log(x)).
//! f32 subnormal inputs to log are treated as zero-mantissa numbers (inaccurate).

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, InstBuilder, MemFlagsData, Type, Value};
use cranelift_frontend::FunctionBuilder;
use oxrelax_dsl::tir::Intrinsic;

/// The float type of `x` and the matching integer type (`i32` or `i32x4`).
fn lane_types(b: &FunctionBuilder, x: Value) -> (Type, Type) {
    let float = b.func.dfg.value_type(x);
    let int = if float.is_vector() {
        types::I32X4
    } else {
        types::I32
    };
    (float, int)
}

fn fconst(b: &mut FunctionBuilder, ty: Type, value: f32) -> Value {
    let scalar = b.ins().f32const(value);
    if ty.is_vector() {
        b.ins().splat(ty, scalar)
    } else {
        scalar
    }
}

fn iconst(b: &mut FunctionBuilder, ty: Type, value: i64) -> Value {
    if ty.is_vector() {
        let scalar = b.ins().iconst(ty.lane_type(), value);
        b.ins().splat(ty, scalar)
    } else {
        b.ins().iconst(ty, value)
    }
}

fn bitcast(b: &mut FunctionBuilder, ty: Type, value: Value) -> Value {
    let flags = MemFlagsData::new().with_endianness(cranelift_codegen::ir::Endianness::Little);
    b.ins().bitcast(ty, flags, value)
}

/// `cond ? x : y` where `cond` comes from a comparison of values shaped like `x`.
pub(crate) fn pick(b: &mut FunctionBuilder, cond: Value, x: Value, y: Value) -> Value {
    let ty = b.func.dfg.value_type(x);
    if ty.is_vector() {
        let mask = bitcast(b, ty, cond);
        b.ins().bitselect(mask, x, y)
    } else {
        b.ins().select(cond, x, y)
    }
}

/// `min(x, bound)` or `max(x, bound)` (`upper`: the minimum) for a `bound` that is neither
/// NaN nor zero: `bound` where `x` is past it, else `x`. That is `fmin` / `fmax` exactly
/// (a NaN `x` stays NaN, and no signed-zero tie can arise), in a compare and a select
/// where x86-64's `fmin` / `fmax` also order zeros and propagate NaNs from both sides.
pub(crate) fn clamp_to(b: &mut FunctionBuilder, x: Value, bound: Value, upper: bool) -> Value {
    let past = if upper {
        FloatCC::GreaterThan
    } else {
        FloatCC::LessThan
    };
    let out = b.ins().fcmp(past, x, bound);
    pick(b, out, bound, x)
}

/// `magnitude` with the sign of `sign`, by bit masks (Cranelift's x64 backend has no
/// `fcopysign` for vectors).
fn copysign(b: &mut FunctionBuilder, magnitude: Value, sign: Value) -> Value {
    let (ty, int) = lane_types(b, magnitude);
    let sign_bit = iconst(b, int, 0x8000_0000);
    let rest = iconst(b, int, 0x7FFF_FFFF);
    let magnitude = bitcast(b, int, magnitude);
    let sign = bitcast(b, int, sign);
    let sign = b.ins().band(sign, sign_bit);
    let magnitude = b.ins().band(magnitude, rest);
    let bits = b.ins().bor(magnitude, sign);
    bitcast(b, ty, bits)
}

/// Horner evaluation of `sum(coeffs[i] * x^i)` with fused multiply-adds.
fn polynomial(b: &mut FunctionBuilder, x: Value, coeffs: &[f32]) -> Value {
    let ty = b.func.dfg.value_type(x);
    let (last, rest) = coeffs.split_last().expect("a polynomial has coefficients");
    let mut acc = fconst(b, ty, *last);
    for c in rest.iter().rev() {
        let c = fconst(b, ty, *c);
        acc = b.ins().fma(acc, x, c);
    }
    acc
}

/// Emits `intrinsic(args)` for f32 scalars or vectors.
pub(crate) fn intrinsic(b: &mut FunctionBuilder, intrinsic: Intrinsic, args: &[Value]) -> Value {
    let x = args[0];
    match intrinsic {
        Intrinsic::Exp => exp(b, x),
        Intrinsic::Log => log(b, x),
        Intrinsic::Sqrt => b.ins().sqrt(x),
        Intrinsic::Rsqrt => {
            let (ty, _) = lane_types(b, x);
            let one = fconst(b, ty, 1.0);
            let root = b.ins().sqrt(x);
            b.ins().fdiv(one, root)
        }
        Intrinsic::Tanh => tanh(b, x),
        Intrinsic::Erf => erf(b, x),
        Intrinsic::Sigmoid => sigmoid(b, x),
        Intrinsic::Sin => sin_cos(b, x, 0),
        Intrinsic::Cos => sin_cos(b, x, 1),
        Intrinsic::Pow => {
            let ln = log(b, x);
            let product = b.ins().fmul(args[1], ln);
            exp(b, product)
        }
        Intrinsic::Fma => b.ins().fma(args[0], args[1], args[2]),
        Intrinsic::Abs => b.ins().fabs(x),
        Intrinsic::Floor => b.ins().floor(x),
    }
}

/// `e^x`: `x = k ln2 + r`, `|r| <= ln2/2`, degree-7 Taylor polynomial, times `2^k`.
fn exp(b: &mut FunctionBuilder, x: Value) -> Value {
    let (ty, int) = lane_types(b, x);
    let (lo, hi) = (fconst(b, ty, -87.0), fconst(b, ty, 88.0));
    let clamped = clamp_to(b, x, lo, false);
    let clamped = clamp_to(b, clamped, hi, true);
    let log2e = fconst(b, ty, std::f32::consts::LOG2_E);
    let scaled = b.ins().fmul(clamped, log2e);
    let k = b.ins().nearest(scaled);
    let neg_k = b.ins().fneg(k);
    let ln2_hi = fconst(b, ty, 0.693_145_75);
    let ln2_lo = fconst(b, ty, 1.428_606_8e-6);
    let r = b.ins().fma(neg_k, ln2_hi, clamped);
    let r = b.ins().fma(neg_k, ln2_lo, r);
    let p = polynomial(
        b,
        r,
        &[
            1.0,
            1.0,
            0.5,
            1.0 / 6.0,
            1.0 / 24.0,
            1.0 / 120.0,
            1.0 / 720.0,
            1.0 / 5040.0,
        ],
    );
    let ki = b.ins().fcvt_to_sint_sat(int, k);
    let bias = iconst(b, int, 127);
    let biased = b.ins().iadd(ki, bias);
    let bits = b.ins().ishl_imm_u(biased, 23);
    let scale = bitcast(b, ty, bits);
    let result = b.ins().fmul(p, scale);
    let underflow = b.ins().fcmp(FloatCC::LessThan, x, lo);
    let zero = fconst(b, ty, 0.0);
    let result = pick(b, underflow, zero, result);
    let overflow = b.ins().fcmp(FloatCC::GreaterThan, x, hi);
    let inf = fconst(b, ty, f32::INFINITY);
    pick(b, overflow, inf, result)
}

/// Natural log: `x = m 2^e` with `m` in `[sqrt(1/2), sqrt(2))`, `log m = 2 atanh(s)`.
fn log(b: &mut FunctionBuilder, x: Value) -> Value {
    let (ty, int) = lane_types(b, x);
    let bits = bitcast(b, int, x);
    let exponent = b.ins().ushr_imm_u(bits, 23);
    let mask = iconst(b, int, 0xFF);
    let exponent = b.ins().band(exponent, mask);
    let mantissa_mask = iconst(b, int, 0x007F_FFFF);
    let mantissa = b.ins().band(bits, mantissa_mask);
    let one_bits = iconst(b, int, 0x3F80_0000);
    let mantissa = b.ins().bor(mantissa, one_bits);
    let m = bitcast(b, ty, mantissa);
    let e = b.ins().fcvt_from_sint(ty, exponent);
    let bias = fconst(b, ty, 127.0);
    let e = b.ins().fsub(e, bias);
    // Fold m into [sqrt(1/2), sqrt(2)).
    let sqrt2 = fconst(b, ty, std::f32::consts::SQRT_2);
    let big = b.ins().fcmp(FloatCC::GreaterThan, m, sqrt2);
    let half = fconst(b, ty, 0.5);
    let halved = b.ins().fmul(m, half);
    let m = pick(b, big, halved, m);
    let one = fconst(b, ty, 1.0);
    let e_plus = b.ins().fadd(e, one);
    let e = pick(b, big, e_plus, e);
    let f = b.ins().fsub(m, one);
    let two = fconst(b, ty, 2.0);
    let denominator = b.ins().fadd(f, two);
    let s = b.ins().fdiv(f, denominator);
    let s2 = b.ins().fmul(s, s);
    let series = polynomial(b, s2, &[2.0, 2.0 / 3.0, 2.0 / 5.0, 2.0 / 7.0, 2.0 / 9.0]);
    let log_m = b.ins().fmul(s, series);
    let ln2 = fconst(b, ty, std::f32::consts::LN_2);
    let result = b.ins().fma(e, ln2, log_m);
    // Special cases: 0 -> -inf, negative -> NaN, +inf -> +inf, NaN -> NaN.
    let zero = fconst(b, ty, 0.0);
    let is_zero = b.ins().fcmp(FloatCC::Equal, x, zero);
    let neg_inf = fconst(b, ty, f32::NEG_INFINITY);
    let result = pick(b, is_zero, neg_inf, result);
    let is_negative = b.ins().fcmp(FloatCC::LessThan, x, zero);
    let nan = fconst(b, ty, f32::NAN);
    let result = pick(b, is_negative, nan, result);
    let inf = fconst(b, ty, f32::INFINITY);
    let is_inf = b.ins().fcmp(FloatCC::Equal, x, inf);
    let result = pick(b, is_inf, inf, result);
    let is_nan = b.ins().fcmp(FloatCC::Unordered, x, x);
    pick(b, is_nan, x, result)
}

/// `tanh(x) = sign(x) (e - 1) / (e + 1)` with `e = exp(2|x|)`, `|x|` clamped to 9.
fn tanh(b: &mut FunctionBuilder, x: Value) -> Value {
    let (ty, _) = lane_types(b, x);
    let ax = b.ins().fabs(x);
    let nine = fconst(b, ty, 9.0);
    let ax = clamp_to(b, ax, nine, true);
    let twice = b.ins().fadd(ax, ax);
    let e = exp(b, twice);
    let one = fconst(b, ty, 1.0);
    let numerator = b.ins().fsub(e, one);
    let denominator = b.ins().fadd(e, one);
    let magnitude = b.ins().fdiv(numerator, denominator);
    copysign(b, magnitude, x)
}

/// `1 / (1 + e^-x)`.
fn sigmoid(b: &mut FunctionBuilder, x: Value) -> Value {
    let (ty, _) = lane_types(b, x);
    let neg = b.ins().fneg(x);
    let e = exp(b, neg);
    let one = fconst(b, ty, 1.0);
    let denominator = b.ins().fadd(one, e);
    b.ins().fdiv(one, denominator)
}

/// Abramowitz & Stegun 7.1.26 (absolute error <= 1.5e-7), odd extension.
fn erf(b: &mut FunctionBuilder, x: Value) -> Value {
    let (ty, _) = lane_types(b, x);
    let ax = b.ins().fabs(x);
    let p = fconst(b, ty, 0.327_591_1);
    let one = fconst(b, ty, 1.0);
    let denominator = b.ins().fma(p, ax, one);
    let t = b.ins().fdiv(one, denominator);
    let poly = polynomial(
        b,
        t,
        &[
            0.0,
            0.254_829_6,
            -0.284_496_74,
            1.421_413_7,
            -1.453_152_1,
            1.061_405_4,
        ],
    );
    let square = b.ins().fmul(ax, ax);
    let neg_square = b.ins().fneg(square);
    let gauss = exp(b, neg_square);
    let tail = b.ins().fmul(poly, gauss);
    let magnitude = b.ins().fsub(one, tail);
    copysign(b, magnitude, x)
}

/// `sin(x)` (`quadrant_shift = 0`) or `cos(x) = sin(x + pi/2)` (`quadrant_shift = 1`):
/// Cody-Waite reduction by pi/2 and polynomials on `[-pi/4, pi/4]`.
fn sin_cos(b: &mut FunctionBuilder, x: Value, quadrant_shift: i64) -> Value {
    let (ty, int) = lane_types(b, x);
    let two_over_pi = fconst(b, ty, std::f32::consts::FRAC_2_PI);
    let scaled = b.ins().fmul(x, two_over_pi);
    let k = b.ins().nearest(scaled);
    let neg_k = b.ins().fneg(k);
    let mut r = x;
    for part in [1.570_312_5_f32, 4.837_513e-4, 7.549_79e-8] {
        let part = fconst(b, ty, part);
        r = b.ins().fma(neg_k, part, r);
    }
    let r2 = b.ins().fmul(r, r);
    let sin_poly = polynomial(
        b,
        r2,
        &[1.0, -1.0 / 6.0, 1.0 / 120.0, -1.0 / 5040.0, 1.0 / 362_880.0],
    );
    let sin_r = b.ins().fmul(r, sin_poly);
    let cos_r = polynomial(
        b,
        r2,
        &[
            1.0,
            -0.5,
            1.0 / 24.0,
            -1.0 / 720.0,
            1.0 / 40320.0,
            -1.0 / 3_628_800.0,
        ],
    );
    let ki = b.ins().fcvt_to_sint_sat(int, k);
    let shift = iconst(b, int, quadrant_shift);
    let quadrant = b.ins().iadd(ki, shift);
    let odd_mask = iconst(b, int, 1);
    let odd = b.ins().band(quadrant, odd_mask);
    let zero = iconst(b, int, 0);
    let use_cos = b.ins().icmp(IntCC::NotEqual, odd, zero);
    let value = pick(b, use_cos, cos_r, sin_r);
    let neg_mask = iconst(b, int, 2);
    let negative = b.ins().band(quadrant, neg_mask);
    let negate = b.ins().icmp(IntCC::NotEqual, negative, zero);
    let negated = b.ins().fneg(value);
    pick(b, negate, negated, value)
}
