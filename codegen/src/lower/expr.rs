//! Scalar expressions: immediates, variables, loads, arithmetic, comparisons, casts,
//! selects and math intrinsics.

use super::vector::is_clamp_bound;
use super::{compute_type, Lowerer};
use crate::{convert, math, CodegenError};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, InstBuilder, Value};
use oxrelax_dsl::tir::{BinOp, PrimCmp, PrimExpr};
use oxrelax_dsl::DType;

impl Lowerer<'_, '_> {
    /// Lowers an expression to a value of its compute type.
    pub(crate) fn expr(&mut self, expr: &PrimExpr) -> Result<Value, CodegenError> {
        match expr {
            PrimExpr::Int(value, dtype) => Ok(self.constant(*value as f64, *dtype)),
            PrimExpr::Float(value, dtype) => Ok(self.constant(*value, *dtype)),
            PrimExpr::Var(var) => match self.vars.get(&var.name) {
                Some((v, _)) => Ok(self.b.use_var(*v)),
                None => Err(self.undefined("variable", &var.name)),
            },
            PrimExpr::Load {
                buffer, indices, ..
            } => self.load(buffer, indices),
            PrimExpr::Binary(op, a, b) => {
                let dtype = a.dtype();
                let (x, y) = (self.expr(a)?, self.expr(b)?);
                self.binary(*op, dtype, x, y, b)
            }
            PrimExpr::Cmp(cmp, a, b) => {
                let float = a.dtype().is_float();
                let (x, y) = (self.expr(a)?, self.expr(b)?);
                Ok(self.compare(*cmp, float, x, y))
            }
            PrimExpr::Not(a) => {
                let x = self.expr(a)?;
                Ok(self.b.ins().icmp_imm_u(IntCC::Equal, x, 0))
            }
            PrimExpr::Cast(dtype, a) => {
                let x = self.expr(a)?;
                Ok(self.cast(x, a.dtype(), *dtype))
            }
            PrimExpr::Select(c, a, b) => {
                let (c, x, y) = (self.expr(c)?, self.expr(a)?, self.expr(b)?);
                Ok(self.b.ins().select(c, x, y))
            }
            PrimExpr::Call(intrinsic, args) => {
                if args.len() != intrinsic.arity() {
                    return Err(self.unsupported(format!(
                        "{} takes {} arguments, got {}",
                        intrinsic.name(),
                        intrinsic.arity(),
                        args.len()
                    )));
                }
                if !args.iter().all(|a| a.dtype().is_float()) {
                    return Err(
                        self.unsupported(format!("{} on non-float arguments", intrinsic.name()))
                    );
                }
                let values = args
                    .iter()
                    .map(|a| self.expr(a))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(math::intrinsic(self.b, *intrinsic, &values))
            }
        }
    }

    fn constant(&mut self, value: f64, dtype: DType) -> Value {
        match compute_type(dtype) {
            types::F32 => self.b.ins().f32const(value as f32),
            ty => self.b.ins().iconst(ty, value as i64),
        }
    }

    pub(crate) fn binary(
        &mut self,
        op: BinOp,
        dtype: DType,
        x: Value,
        y: Value,
        rhs: &PrimExpr,
    ) -> Result<Value, CodegenError> {
        let bound = matches!(op, BinOp::Min | BinOp::Max) && is_clamp_bound(rhs);
        if dtype.is_float() && bound {
            return Ok(math::clamp_to(self.b, x, y, op == BinOp::Min));
        }
        let ins = self.b.ins();
        if dtype.is_float() {
            return Ok(match op {
                BinOp::Add => ins.fadd(x, y),
                BinOp::Sub => ins.fsub(x, y),
                BinOp::Mul => ins.fmul(x, y),
                BinOp::Div => ins.fdiv(x, y),
                BinOp::Min => ins.fmin(x, y),
                BinOp::Max => ins.fmax(x, y),
                BinOp::FloorDiv => {
                    let q = ins.fdiv(x, y);
                    self.b.ins().floor(q)
                }
                BinOp::FloorMod => {
                    let q = ins.fdiv(x, y);
                    let q = self.b.ins().floor(q);
                    let neg_q = self.b.ins().fneg(q);
                    self.b.ins().fma(neg_q, y, x)
                }
                BinOp::And | BinOp::Or | BinOp::Shl | BinOp::Shr => {
                    return Err(self.unsupported(format!("`{}` on {dtype}", op.name())))
                }
            });
        }
        Ok(match op {
            BinOp::Add => ins.iadd(x, y),
            BinOp::Sub => ins.isub(x, y),
            BinOp::Mul => ins.imul(x, y),
            BinOp::Min => ins.smin(x, y),
            BinOp::Max => ins.smax(x, y),
            BinOp::And => ins.band(x, y),
            BinOp::Or => ins.bor(x, y),
            BinOp::Shl => ins.ishl(x, y),
            BinOp::Shr => ins.sshr(x, y),
            BinOp::Div => {
                let y = self.nonzero_divisor(y, rhs);
                self.b.ins().sdiv(x, y)
            }
            BinOp::FloorDiv => {
                let y = self.nonzero_divisor(y, rhs);
                self.floor_div_mod(x, y).0
            }
            BinOp::FloorMod => {
                let y = self.nonzero_divisor(y, rhs);
                self.floor_div_mod(x, y).1
            }
        })
    }

    /// Integer division traps on zero; a divisor that is not a non-zero constant is
    /// replaced by 1 when it is 0 (the VM's shape checks keep real divisors non-zero).
    fn nonzero_divisor(&mut self, y: Value, rhs: &PrimExpr) -> Value {
        if matches!(rhs, PrimExpr::Int(c, _) if *c != 0) {
            return y;
        }
        let is_zero = self.b.ins().icmp_imm_u(IntCC::Equal, y, 0);
        let one = self.b.ins().iconst(types::I64, 1);
        self.b.ins().select(is_zero, one, y)
    }

    /// Floor division and modulo from truncating `sdiv`/`srem`.
    fn floor_div_mod(&mut self, x: Value, y: Value) -> (Value, Value) {
        let q = self.b.ins().sdiv(x, y);
        let r = self.b.ins().srem(x, y);
        let signs_differ = self.b.ins().bxor(r, y);
        let signs_differ = self
            .b
            .ins()
            .icmp_imm_s(IntCC::SignedLessThan, signs_differ, 0);
        let remainder = self.b.ins().icmp_imm_u(IntCC::NotEqual, r, 0);
        let adjust = self.b.ins().band(signs_differ, remainder);
        let q_minus = self.b.ins().iadd_imm_s(q, -1);
        let r_plus = self.b.ins().iadd(r, y);
        (
            self.b.ins().select(adjust, q_minus, q),
            self.b.ins().select(adjust, r_plus, r),
        )
    }

    pub(crate) fn compare(&mut self, cmp: PrimCmp, float: bool, x: Value, y: Value) -> Value {
        if float {
            self.b.ins().fcmp(float_cc(cmp), x, y)
        } else {
            let cc = match cmp {
                PrimCmp::Lt => IntCC::SignedLessThan,
                PrimCmp::Le => IntCC::SignedLessThanOrEqual,
                PrimCmp::Gt => IntCC::SignedGreaterThan,
                PrimCmp::Ge => IntCC::SignedGreaterThanOrEqual,
                PrimCmp::Eq => IntCC::Equal,
                PrimCmp::Ne => IntCC::NotEqual,
            };
            self.b.ins().icmp(cc, x, y)
        }
    }

    /// Converts a compute-type value of `from` to the compute type of `to`, with the
    /// rounding/wrapping of `to`'s storage type (a cast to f16 rounds to f16 precision,
    /// a cast to i8 wraps).
    pub(crate) fn cast(&mut self, x: Value, from: DType, to: DType) -> Value {
        let ins = self.b.ins();
        let widened = match (compute_type(from), compute_type(to)) {
            (types::F32, types::F32) => x,
            (types::F32, types::I64) => ins.fcvt_to_sint_sat(types::I64, x),
            (types::F32, _) => {
                let zero = ins.f32const(0.0);
                return self.b.ins().fcmp(FloatCC::NotEqual, x, zero);
            }
            (types::I64, types::F32) => ins.fcvt_from_sint(types::F32, x),
            (types::I8, types::F32) => {
                let wide = ins.uextend(types::I32, x);
                self.b.ins().fcvt_from_uint(types::F32, wide)
            }
            (types::I8, types::I64) => ins.uextend(types::I64, x),
            (types::I64, types::I8) => return ins.icmp_imm_u(IntCC::NotEqual, x, 0),
            _ => x,
        };
        self.narrow(widened, to)
    }

    /// Applies the precision of `dtype`'s storage to a compute-type value.
    pub(crate) fn narrow(&mut self, x: Value, dtype: DType) -> Value {
        let ins = self.b.ins();
        match dtype {
            DType::F16 => {
                let bits = convert::f32_to_f16(self.b, x);
                convert::f16_to_f32(self.b, bits)
            }
            DType::BF16 => {
                let bits = convert::f32_to_bf16(self.b, x);
                convert::bf16_to_f32(self.b, bits)
            }
            DType::I32 => {
                let narrow = ins.ireduce(types::I32, x);
                self.b.ins().sextend(types::I64, narrow)
            }
            DType::I8 => {
                let narrow = ins.ireduce(types::I8, x);
                self.b.ins().sextend(types::I64, narrow)
            }
            DType::U8 => {
                let narrow = ins.ireduce(types::I8, x);
                self.b.ins().uextend(types::I64, narrow)
            }
            DType::U4 => ins.band_imm_u(x, 0xF),
            DType::F32 | DType::I64 | DType::Bool => x,
        }
    }
}

/// The float condition code of a comparison (ordered, except `Ne`).
pub(crate) fn float_cc(cmp: PrimCmp) -> FloatCC {
    match cmp {
        PrimCmp::Lt => FloatCC::LessThan,
        PrimCmp::Le => FloatCC::LessThanOrEqual,
        PrimCmp::Gt => FloatCC::GreaterThan,
        PrimCmp::Ge => FloatCC::GreaterThanOrEqual,
        PrimCmp::Eq => FloatCC::Equal,
        PrimCmp::Ne => FloatCC::NotEqual,
    }
}
