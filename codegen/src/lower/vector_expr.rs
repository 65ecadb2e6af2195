//! Expressions inside a vectorized loop body. Each value is tracked by how it varies
//! across the 4 lanes, so index arithmetic stays scalar and only data becomes vectors:
//! uniform (same in every lane), affine integer (`base + lane * stride`), an `f32x4`
//! vector, an `i32x4` lane mask, an `i32x4` of small integers (a float converted to an
//! integer dtype), or 4 independent scalars (gathers, other integer data).

use super::expr::float_cc;
use super::vector::{int_const, is_clamp_bound, LANES};
use super::Lowerer;
use crate::{math, CodegenError};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, MemFlagsData, Value};
use oxrelax_dsl::tir::{BinOp, PrimExpr};
use oxrelax_dsl::DType;

/// How a value varies across the lanes of a vectorized loop.
#[derive(Clone, Copy)]
pub(crate) enum Lane {
    /// The same scalar in every lane.
    Uniform(Value),
    /// The `i64` value `base + lane * stride`.
    Affine(Value, i64),
    /// An `f32x4` vector.
    Vector(Value),
    /// An `i32x4` mask (all ones where true).
    Mask(Value),
    /// An `i32x4` of integer values already wrapped to their dtype (8-bit, 4-bit or
    /// 32-bit), each lane the `i64` value it sign-extends to.
    Words(Value),
    /// One scalar per lane.
    Lanes([Value; LANES as usize]),
}

impl Lowerer<'_, '_> {
    pub(crate) fn vector_expr(&mut self, expr: &PrimExpr) -> Result<Lane, CodegenError> {
        let scope = self.lanes.as_ref().expect("inside a vectorized loop");
        match expr {
            PrimExpr::Var(v) if v.name == scope.var => Ok(Lane::Affine(scope.base, 1)),
            PrimExpr::Var(v) if scope.lets.contains_key(&v.name) => Ok(scope.lets[&v.name]),
            PrimExpr::Int(..) | PrimExpr::Float(..) | PrimExpr::Var(_) => {
                Ok(Lane::Uniform(self.expr(expr)?))
            }
            PrimExpr::Load {
                buffer, indices, ..
            } => self.vector_load(buffer, indices),
            PrimExpr::Binary(op, a, b) => {
                let (x, y) = (self.vector_expr(a)?, self.vector_expr(b)?);
                self.vector_binary(*op, a.dtype(), (x, y), (int_const(a), int_const(b)), b)
            }
            PrimExpr::Cmp(cmp, a, b) => {
                let float = a.dtype().is_float();
                let (x, y) = (self.vector_expr(a)?, self.vector_expr(b)?);
                // Only float operands may become f32x4 (an integer one would be splat
                // into f32 lanes, which the verifier rejects).
                if float {
                    if let (Some(x), Some(y)) = (self.as_vector(x), self.as_vector(y)) {
                        let cc = float_cc(*cmp);
                        return Ok(Lane::Mask(self.b.ins().fcmp(cc, x, y)));
                    }
                }
                self.per_lane(&[x, y], DType::Bool, |l, v| {
                    Ok(l.compare(*cmp, float, v[0], v[1]))
                })
            }
            PrimExpr::Not(a) => match self.vector_expr(a)? {
                Lane::Mask(m) => Ok(Lane::Mask(self.b.ins().bnot(m))),
                x => self.per_lane(&[x], DType::Bool, |l, v| {
                    Ok(l.b.ins().icmp_imm_u(IntCC::Equal, v[0], 0))
                }),
            },
            PrimExpr::Cast(to, a) => {
                let from = a.dtype();
                let x = self.vector_expr(a)?;
                if from.is_float() && *to == DType::F32 {
                    return Ok(x);
                }
                if let (Lane::Vector(v), true) = (x, from.is_float()) {
                    if let Some(words) = self.vector_float_to_int(v, *to) {
                        return Ok(words);
                    }
                }
                self.per_lane(&[x], *to, |l, v| Ok(l.cast(v[0], from, *to)))
            }
            PrimExpr::Select(c, a, b) => {
                let dtype = a.dtype();
                let (c, x, y) = (
                    self.vector_expr(c)?,
                    self.vector_expr(a)?,
                    self.vector_expr(b)?,
                );
                if dtype.is_float() && !all_uniform(&[c, x, y]) {
                    let mask = self.mask_of(c);
                    let (x, y) = (self.vector_of(x), self.vector_of(y));
                    return Ok(Lane::Vector(math::pick(self.b, mask, x, y)));
                }
                let lanes_c = self.lanes_of(c);
                let (lx, ly) = (self.lanes_of(x), self.lanes_of(y));
                let picked = std::array::from_fn(|k| self.b.ins().select(lanes_c[k], lx[k], ly[k]));
                Ok(self.collect_lanes(picked, dtype))
            }
            PrimExpr::Call(intrinsic, args) => {
                let lanes = args
                    .iter()
                    .map(|a| self.vector_expr(a))
                    .collect::<Result<Vec<_>, _>>()?;
                if all_uniform(&lanes) {
                    let scalars: Vec<Value> = lanes.iter().map(|l| self.lanes_of(*l)[0]).collect();
                    return Ok(Lane::Uniform(math::intrinsic(self.b, *intrinsic, &scalars)));
                }
                let vectors: Vec<Value> = lanes.into_iter().map(|l| self.vector_of(l)).collect();
                Ok(Lane::Vector(math::intrinsic(self.b, *intrinsic, &vectors)))
            }
        }
    }

    fn vector_binary(
        &mut self,
        op: BinOp,
        dtype: DType,
        (x, y): (Lane, Lane),
        (cx, cy): (Option<i64>, Option<i64>),
        rhs: &PrimExpr,
    ) -> Result<Lane, CodegenError> {
        if let (Lane::Uniform(a), Lane::Uniform(b)) = (x, y) {
            return Ok(Lane::Uniform(self.binary(op, dtype, a, b, rhs)?));
        }
        if dtype.is_float() {
            if matches!(
                op,
                BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Min | BinOp::Max
            ) {
                let (a, b) = (self.vector_of(x), self.vector_of(y));
                if matches!(op, BinOp::Min | BinOp::Max) && is_clamp_bound(rhs) {
                    return Ok(Lane::Vector(math::clamp_to(self.b, a, b, op == BinOp::Min)));
                }
                let ins = self.b.ins();
                return Ok(Lane::Vector(match op {
                    BinOp::Add => ins.fadd(a, b),
                    BinOp::Sub => ins.fsub(a, b),
                    BinOp::Mul => ins.fmul(a, b),
                    BinOp::Div => ins.fdiv(a, b),
                    BinOp::Min => ins.fmin(a, b),
                    _ => ins.fmax(a, b),
                }));
            }
        } else if let Some(affine) = self.affine_binary(op, (x, y), (cx, cy)) {
            return Ok(affine);
        }
        self.per_lane(&[x, y], dtype, |l, v| l.binary(op, dtype, v[0], v[1], rhs))
    }

    /// Integer `+`, `-` and `*` by a constant keep affine values affine.
    fn affine_binary(
        &mut self,
        op: BinOp,
        (x, y): (Lane, Lane),
        (cx, cy): (Option<i64>, Option<i64>),
    ) -> Option<Lane> {
        let ins = self.b.ins();
        Some(match (op, x, y) {
            (BinOp::Add, Lane::Affine(b, s), Lane::Uniform(u))
            | (BinOp::Add, Lane::Uniform(u), Lane::Affine(b, s)) => Lane::Affine(ins.iadd(b, u), s),
            (BinOp::Add, Lane::Affine(b1, s1), Lane::Affine(b2, s2)) => {
                Lane::Affine(ins.iadd(b1, b2), s1 + s2)
            }
            (BinOp::Sub, Lane::Affine(b, s), Lane::Uniform(u)) => Lane::Affine(ins.isub(b, u), s),
            (BinOp::Sub, Lane::Uniform(u), Lane::Affine(b, s)) => Lane::Affine(ins.isub(u, b), -s),
            (BinOp::Sub, Lane::Affine(b1, s1), Lane::Affine(b2, s2)) => {
                Lane::Affine(ins.isub(b1, b2), s1 - s2)
            }
            (BinOp::Mul, Lane::Affine(b, s), Lane::Uniform(_)) if cy.is_some() => {
                let c = cy?;
                Lane::Affine(ins.imul_imm_s(b, c), s * c)
            }
            (BinOp::Mul, Lane::Uniform(_), Lane::Affine(b, s)) if cx.is_some() => {
                let c = cx?;
                Lane::Affine(ins.imul_imm_s(b, c), s * c)
            }
            _ => return None,
        })
    }

    /// An `f32x4` converted to `to` (an integer dtype of at most 32 bits): truncated
    /// toward zero, saturating at `i32`'s bounds (NaN gives 0), then wrapped to `to`'s
    /// width as a scalar cast wraps; `None` for other dtypes.
    fn vector_float_to_int(&mut self, v: Value, to: DType) -> Option<Lane> {
        let ints = self.b.ins().fcvt_to_sint_sat(types::I32X4, v);
        let wrapped = match to {
            DType::I32 => ints,
            DType::U8 | DType::U4 => {
                let mask = if to == DType::U8 { 0xFF } else { 0xF };
                let mask = self.b.ins().iconst(types::I32, mask);
                let mask = self.b.ins().splat(types::I32X4, mask);
                self.b.ins().band(ints, mask)
            }
            DType::I8 => {
                let high = self.b.ins().ishl_imm_u(ints, 24);
                self.b.ins().sshr_imm_u(high, 24)
            }
            _ => return None,
        };
        Some(Lane::Words(wrapped))
    }

    /// Applies a scalar lowering lane by lane.
    fn per_lane(
        &mut self,
        args: &[Lane],
        to: DType,
        mut scalar: impl FnMut(&mut Self, &[Value]) -> Result<Value, CodegenError>,
    ) -> Result<Lane, CodegenError> {
        if all_uniform(args) {
            let values: Vec<Value> = args.iter().map(|a| self.lanes_of(*a)[0]).collect();
            return Ok(Lane::Uniform(scalar(self, &values)?));
        }
        let lanes: Vec<[Value; LANES as usize]> = args.iter().map(|a| self.lanes_of(*a)).collect();
        let mut out = Vec::with_capacity(LANES as usize);
        for k in 0..LANES as usize {
            let values: Vec<Value> = lanes.iter().map(|l| l[k]).collect();
            out.push(scalar(self, &values)?);
        }
        let out: [Value; LANES as usize] = out.try_into().expect("one value per lane");
        Ok(self.collect_lanes(out, to))
    }

    /// Per-lane scalars of type `dtype` as the best lane kind (floats become vectors).
    fn collect_lanes(&mut self, lanes: [Value; LANES as usize], dtype: DType) -> Lane {
        if dtype.is_float() {
            Lane::Vector(self.build_vector(types::F32X4, lanes))
        } else {
            Lane::Lanes(lanes)
        }
    }

    fn build_vector(&mut self, ty: types::Type, lanes: [Value; LANES as usize]) -> Value {
        let mut vector = self.b.ins().splat(ty, lanes[0]);
        for (k, lane) in lanes.iter().enumerate().skip(1) {
            vector = self.b.ins().insertlane(vector, *lane, k as u8);
        }
        vector
    }

    fn as_vector(&mut self, lane: Lane) -> Option<Value> {
        match lane {
            Lane::Uniform(_) | Lane::Vector(_) | Lane::Lanes(_) => Some(self.vector_of(lane)),
            _ => None,
        }
    }

    /// An `f32x4` of a float-valued lane.
    pub(crate) fn vector_of(&mut self, lane: Lane) -> Value {
        match lane {
            Lane::Vector(v) => v,
            Lane::Uniform(v) => self.b.ins().splat(types::F32X4, v),
            Lane::Lanes(lanes) => self.build_vector(types::F32X4, lanes),
            Lane::Words(words) => self.b.ins().fcvt_from_sint(types::F32X4, words),
            Lane::Affine(..) | Lane::Mask(_) => {
                let lanes = self.lanes_of(lane);
                let floats = lanes.map(|v| self.b.ins().fcvt_from_sint(types::F32, v));
                self.build_vector(types::F32X4, floats)
            }
        }
    }

    /// An `i32x4` mask of a bool-valued lane.
    fn mask_of(&mut self, lane: Lane) -> Value {
        match lane {
            Lane::Mask(m) => m,
            other => {
                let bools = self.lanes_of(other);
                let words = bools.map(|b| {
                    let wide = self.b.ins().uextend(types::I32, b);
                    self.b.ins().ineg(wide)
                });
                self.build_vector(types::I32X4, words)
            }
        }
    }

    /// The 4 scalars of a lane value (masks become `i8` bools).
    pub(crate) fn lanes_of(&mut self, lane: Lane) -> [Value; LANES as usize] {
        match lane {
            Lane::Uniform(v) => [v; LANES as usize],
            Lane::Lanes(lanes) => lanes,
            Lane::Affine(base, stride) => {
                std::array::from_fn(|k| self.b.ins().iadd_imm_s(base, stride * k as i64))
            }
            Lane::Vector(v) => std::array::from_fn(|k| self.b.ins().extractlane(v, k as u8)),
            Lane::Words(words) => std::array::from_fn(|k| {
                let word = self.b.ins().extractlane(words, k as u8);
                self.b.ins().sextend(types::I64, word)
            }),
            Lane::Mask(m) => std::array::from_fn(|k| {
                let word = self.b.ins().extractlane(m, k as u8);
                self.b.ins().icmp_imm_u(IntCC::NotEqual, word, 0)
            }),
        }
    }

    /// The flat element index of `buffer[indices]` as a lane value.
    fn vector_flat(&mut self, buffer: &str, indices: &[PrimExpr]) -> Result<Lane, CodegenError> {
        let (strides, const_strides) = match self.buffers.get(buffer) {
            Some(slot) => (slot.strides.clone(), slot.const_strides.clone()),
            None => return Err(self.undefined("buffer", buffer)),
        };
        let zero = self.b.ins().iconst(types::I64, 0);
        let mut flat = Lane::Uniform(zero);
        for ((index, stride), konst) in indices.iter().zip(strides).zip(const_strides) {
            let term = match (self.vector_expr(index)?, konst) {
                (Lane::Uniform(v), _) => Lane::Uniform(self.b.ins().imul(v, stride)),
                (Lane::Affine(b, s), Some(c)) => Lane::Affine(self.b.ins().imul(b, stride), s * c),
                (other, _) => {
                    let lanes = self.lanes_of(other);
                    Lane::Lanes(lanes.map(|v| self.b.ins().imul(v, stride)))
                }
            };
            flat = match self.affine_binary(BinOp::Add, (flat, term), (None, None)) {
                Some(sum) => sum,
                None => match (flat, term) {
                    (Lane::Uniform(a), Lane::Uniform(b)) => Lane::Uniform(self.b.ins().iadd(a, b)),
                    (a, b) => {
                        let (la, lb) = (self.lanes_of(a), self.lanes_of(b));
                        Lane::Lanes(std::array::from_fn(|k| self.b.ins().iadd(la[k], lb[k])))
                    }
                },
            };
        }
        Ok(flat)
    }

    fn vector_load(&mut self, buffer: &str, indices: &[PrimExpr]) -> Result<Lane, CodegenError> {
        if let Some(var) = self.register(buffer, indices) {
            return Ok(Lane::Uniform(self.b.use_var(var)));
        }
        let (base, dtype) = self.slot(buffer)?;
        let flags = MemFlagsData::new().with_notrap();
        match (self.vector_flat(buffer, indices)?, dtype) {
            (Lane::Uniform(flat), _) => Ok(Lane::Uniform(self.load_flat(buffer, flat)?)),
            (Lane::Affine(flat, 1), DType::F32) => {
                let address = self.element_address(base, flat, dtype);
                Ok(Lane::Vector(self.b.ins().load(
                    types::F32X4,
                    flags,
                    address,
                    0,
                )))
            }
            (Lane::Affine(flat, 1), DType::BF16) => {
                let address = self.element_address(base, flat, dtype);
                let words = self.b.ins().uload16x4(flags, address, 0);
                let shifted = self.b.ins().ishl_imm_u(words, 16);
                let little =
                    MemFlagsData::new().with_endianness(cranelift_codegen::ir::Endianness::Little);
                Ok(Lane::Vector(self.b.ins().bitcast(
                    types::F32X4,
                    little,
                    shifted,
                )))
            }
            (flat, _) => {
                let flats = self.lanes_of(flat);
                let mut values = Vec::with_capacity(LANES as usize);
                for f in flats {
                    values.push(self.load_flat(buffer, f)?);
                }
                let values: [Value; LANES as usize] = values.try_into().expect("one per lane");
                Ok(self.collect_lanes(values, dtype))
            }
        }
    }

    pub(crate) fn vector_store(
        &mut self,
        buffer: &str,
        indices: &[PrimExpr],
        value: Lane,
    ) -> Result<(), CodegenError> {
        let (base, dtype) = self.slot(buffer)?;
        match (self.vector_flat(buffer, indices)?, dtype, value) {
            (Lane::Affine(flat, 1), DType::F32, _) => {
                let vector = self.vector_of(value);
                let address = self.element_address(base, flat, dtype);
                self.b
                    .ins()
                    .store(MemFlagsData::new().with_notrap(), vector, address, 0);
                Ok(())
            }
            (Lane::Affine(flat, 1), DType::U8 | DType::I8, Lane::Words(words)) => {
                let bytes = self.narrow_words_to_bytes(words, dtype);
                let address = self.element_address(base, flat, dtype);
                self.b
                    .ins()
                    .store(MemFlagsData::new().with_notrap(), bytes, address, 0);
                Ok(())
            }
            (flat, _, _) => {
                let flats = self.lanes_of(flat);
                let values = self.lanes_of(value);
                for (f, v) in flats.into_iter().zip(values) {
                    self.store_flat(buffer, f, v)?;
                }
                Ok(())
            }
        }
    }
}

impl Lowerer<'_, '_> {
    /// The 4 bytes of an `i32x4` of 8-bit values (wrapped to `dtype`, `U8` or `I8`) as one
    /// `i32`: two saturating narrows, exact on values already in range.
    fn narrow_words_to_bytes(&mut self, words: Value, dtype: DType) -> Value {
        let ins = self.b.ins();
        let halves = ins.snarrow(words, words);
        let bytes = if dtype == DType::U8 {
            self.b.ins().unarrow(halves, halves)
        } else {
            self.b.ins().snarrow(halves, halves)
        };
        let little = MemFlagsData::new().with_endianness(cranelift_codegen::ir::Endianness::Little);
        let quads = self.b.ins().bitcast(types::I32X4, little, bytes);
        self.b.ins().extractlane(quads, 0)
    }
}

fn all_uniform(lanes: &[Lane]) -> bool {
    lanes.iter().all(|l| matches!(l, Lane::Uniform(_)))
}
