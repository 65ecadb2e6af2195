//! Bit-exact conversions between f32 and the 16-bit float storage types, emitted as
//! integer instructions (Cranelift has no f16 arithmetic or conversion on x64).
//! Inputs and outputs are `i32` values holding the 16-bit pattern in the low bits.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, MemFlagsData, Value};
use cranelift_frontend::FunctionBuilder;

fn to_f32(b: &mut FunctionBuilder, bits: Value) -> Value {
    b.ins().bitcast(types::F32, MemFlagsData::new(), bits)
}

fn to_i32(b: &mut FunctionBuilder, value: Value) -> Value {
    b.ins().bitcast(types::I32, MemFlagsData::new(), value)
}

/// bf16 bits -> f32: the bf16 pattern is the top half of the f32 pattern.
pub(crate) fn bf16_to_f32(b: &mut FunctionBuilder, bits: Value) -> Value {
    let wide = b.ins().ishl_imm_u(bits, 16);
    to_f32(b, wide)
}

/// f32 -> bf16 bits, rounding to nearest even; NaNs stay (quiet) NaNs.
pub(crate) fn f32_to_bf16(b: &mut FunctionBuilder, value: Value) -> Value {
    let f = to_i32(b, value);
    let upper = b.ins().ushr_imm_u(f, 16);
    let lsb = b.ins().band_imm_u(upper, 1);
    let bias = b.ins().iadd_imm_s(lsb, 0x7FFF);
    let rounded = b.ins().iadd(f, bias);
    let rounded = b.ins().ushr_imm_u(rounded, 16);
    let magnitude = b.ins().band_imm_u(f, 0x7FFF_FFFF);
    let is_nan = b
        .ins()
        .icmp_imm_u(IntCC::UnsignedGreaterThan, magnitude, 0x7F80_0000);
    let quiet = b.ins().bor_imm_u(upper, 0x40);
    b.ins().select(is_nan, quiet, rounded)
}

/// f16 bits -> f32, exact for normals, subnormals, infinities and NaNs.
pub(crate) fn f16_to_f32(b: &mut FunctionBuilder, bits: Value) -> Value {
    let sign = b.ins().band_imm_u(bits, 0x8000);
    let sign = b.ins().ishl_imm_u(sign, 16);
    let magnitude = b.ins().band_imm_u(bits, 0x7FFF);
    let shifted = b.ins().ishl_imm_u(magnitude, 13);
    // Reinterpreting the shifted pattern as f32 divides by 2^112; scaling back restores
    // normals and turns f16 subnormals into the right f32 normals.
    let as_float = to_f32(b, shifted);
    let scale = b.ins().f32const(f32::from_bits(0x7780_0000)); // 2^112
    let scaled = b.ins().fmul(as_float, scale);
    let scaled = to_i32(b, scaled);
    let exponent = b.ins().band_imm_u(bits, 0x7C00);
    let is_special = b.ins().icmp_imm_u(IntCC::Equal, exponent, 0x7C00);
    let special = b.ins().bor_imm_u(shifted, 0x7F80_0000);
    let magnitude = b.ins().select(is_special, special, scaled);
    let result = b.ins().bor(magnitude, sign);
    to_f32(b, result)
}

/// f32 -> f16 bits, rounding to nearest even; overflow gives infinity, NaNs stay NaNs.
pub(crate) fn f32_to_f16(b: &mut FunctionBuilder, value: Value) -> Value {
    let f = to_i32(b, value);
    let sign = b.ins().band_imm_u(f, 0x8000_0000_u32 as i64);
    let a = b.ins().bxor(f, sign);
    // Too large for f16 (or inf/NaN).
    let is_nan = b
        .ins()
        .icmp_imm_u(IntCC::UnsignedGreaterThan, a, 0x7F80_0000);
    let nan = b.ins().iconst(types::I32, 0x7E00);
    let inf = b.ins().iconst(types::I32, 0x7C00);
    let big = b.ins().select(is_nan, nan, inf);
    // Subnormal results: let the FPU round by adding 0.5 (the "denormal magic").
    let a_float = to_f32(b, a);
    let magic = b.ins().f32const(0.5);
    let sum = b.ins().fadd(a_float, magic);
    let sum = to_i32(b, sum);
    let subnormal = b.ins().iadd_imm_s(sum, -0x3F00_0000);
    // Normal results: rebias the exponent and round to nearest even on bit 13.
    let mantissa_odd = b.ins().ushr_imm_u(a, 13);
    let mantissa_odd = b.ins().band_imm_u(mantissa_odd, 1);
    let rebiased = b.ins().iadd_imm_s(a, (-112_i64 << 23) + 0xFFF);
    let rounded = b.ins().iadd(rebiased, mantissa_odd);
    let normal = b.ins().ushr_imm_u(rounded, 13);
    let is_small = b.ins().icmp_imm_u(IntCC::UnsignedLessThan, a, 113 << 23);
    let finite = b.ins().select(is_small, subnormal, normal);
    let is_big = b
        .ins()
        .icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, a, 143 << 23);
    let magnitude = b.ins().select(is_big, big, finite);
    let sign16 = b.ins().ushr_imm_u(sign, 16);
    b.ins().bor(magnitude, sign16)
}
