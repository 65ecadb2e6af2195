//! Buffer access: flat offsets from strides, and loads/stores that convert between the
//! storage dtype and the compute type (f16/bf16 <-> f32, narrow ints <-> i64, packed u4).

use super::Lowerer;
use crate::convert;
use crate::CodegenError;
use cranelift_codegen::ir::{types, InstBuilder, MemFlagsData, Value};
use oxrelax_dsl::tir::PrimExpr;
use oxrelax_dsl::DType;

impl Lowerer<'_, '_> {
    /// `sum(index_k * stride_k)` in elements.
    fn flat_index(&mut self, buffer: &str, indices: &[PrimExpr]) -> Result<Value, CodegenError> {
        let strides = match self.buffers.get(buffer) {
            Some(slot) => slot.strides.clone(),
            None => return Err(self.undefined("buffer", buffer)),
        };
        if strides.len() != indices.len() {
            return Err(self.unsupported(format!(
                "buffer `{buffer}` has {} dims but is indexed with {}",
                strides.len(),
                indices.len()
            )));
        }
        let mut flat = self.b.ins().iconst(types::I64, 0);
        for (index, stride) in indices.iter().zip(strides) {
            let index = self.expr(index)?;
            let term = self.b.ins().imul(index, stride);
            flat = self.b.ins().iadd(flat, term);
        }
        Ok(flat)
    }

    /// The address of element `flat` of a buffer of `dtype` (for 4-bit elements, of the
    /// byte holding it).
    pub(crate) fn element_address(&mut self, base: Value, flat: Value, dtype: DType) -> Value {
        let offset = if dtype == DType::U4 {
            // Two elements per byte, low nibble first: the byte holding `flat`.
            self.b.ins().sshr_imm_u(flat, 1)
        } else {
            self.b.ins().imul_imm_s(flat, i64::from(dtype.bits() / 8))
        };
        self.b.ins().iadd(base, offset)
    }

    pub(crate) fn slot(&self, buffer: &str) -> Result<(Value, DType), CodegenError> {
        self.buffers
            .get(buffer)
            .map(|s| (s.base, s.decl.dtype))
            .ok_or_else(|| self.undefined("buffer", buffer))
    }

    /// Loads `buffer[indices]` as its compute type.
    pub(crate) fn load(
        &mut self,
        buffer: &str,
        indices: &[PrimExpr],
    ) -> Result<Value, CodegenError> {
        if let Some(var) = self.register(buffer, indices) {
            return Ok(self.b.use_var(var));
        }
        let flat = self.flat_index(buffer, indices)?;
        self.load_flat(buffer, flat)
    }

    /// Loads element `flat` of `buffer` as its compute type.
    pub(crate) fn load_flat(&mut self, buffer: &str, flat: Value) -> Result<Value, CodegenError> {
        let (base, dtype) = self.slot(buffer)?;
        let flags = MemFlagsData::trusted();
        if dtype == DType::U4 {
            let (address, shift) = self.nibble_location(base, flat);
            let byte = self.b.ins().uload8(types::I64, flags, address, 0);
            let shifted = self.b.ins().ushr(byte, shift);
            return Ok(self.b.ins().band_imm_u(shifted, 0xF));
        }
        let address = self.element_address(base, flat, dtype);
        let ins = self.b.ins();
        Ok(match dtype {
            DType::F32 => ins.load(types::F32, flags, address, 0),
            DType::F16 => {
                let bits = ins.uload16(types::I32, flags, address, 0);
                convert::f16_to_f32(self.b, bits)
            }
            DType::BF16 => {
                let bits = ins.uload16(types::I32, flags, address, 0);
                convert::bf16_to_f32(self.b, bits)
            }
            DType::I64 => ins.load(types::I64, flags, address, 0),
            DType::I32 => ins.sload32(flags, address, 0),
            DType::I8 => ins.sload8(types::I64, flags, address, 0),
            DType::U8 => ins.uload8(types::I64, flags, address, 0),
            DType::Bool => ins.load(types::I8, flags, address, 0),
            DType::U4 => unreachable!("handled above"),
        })
    }

    /// Stores a compute-type value into `buffer[indices]`.
    pub(crate) fn store(
        &mut self,
        buffer: &str,
        indices: &[PrimExpr],
        value: Value,
    ) -> Result<(), CodegenError> {
        if let Some(var) = self.register(buffer, indices) {
            self.b.def_var(var, value);
            return Ok(());
        }
        let flat = self.flat_index(buffer, indices)?;
        self.store_flat(buffer, flat, value)
    }

    /// Stores a compute-type value into element `flat` of `buffer`.
    pub(crate) fn store_flat(
        &mut self,
        buffer: &str,
        flat: Value,
        value: Value,
    ) -> Result<(), CodegenError> {
        let (base, dtype) = self.slot(buffer)?;
        let flags = MemFlagsData::trusted();
        if dtype == DType::U4 {
            return {
                self.store_nibble(base, flat, value);
                Ok(())
            };
        }
        let address = self.element_address(base, flat, dtype);
        match dtype {
            DType::F32 | DType::I64 | DType::Bool => {
                self.b.ins().store(flags, value, address, 0);
            }
            DType::F16 | DType::BF16 => {
                let bits = if dtype == DType::F16 {
                    convert::f32_to_f16(self.b, value)
                } else {
                    convert::f32_to_bf16(self.b, value)
                };
                self.b.ins().istore16(flags, bits, address, 0);
            }
            DType::I32 => {
                self.b.ins().istore32(flags, value, address, 0);
            }
            DType::I8 | DType::U8 => {
                self.b.ins().istore8(flags, value, address, 0);
            }
            DType::U4 => unreachable!("handled above"),
        }
        Ok(())
    }

    /// Byte address and bit shift of packed 4-bit element `flat` (low nibble first).
    fn nibble_location(&mut self, base: Value, flat: Value) -> (Value, Value) {
        let address = self.element_address(base, flat, DType::U4);
        let odd = self.b.ins().band_imm_u(flat, 1);
        let shift = self.b.ins().ishl_imm_u(odd, 2);
        (address, shift)
    }

    fn store_nibble(&mut self, base: Value, flat: Value, value: Value) {
        let flags = MemFlagsData::trusted();
        let (address, shift) = self.nibble_location(base, flat);
        let ins = self.b.ins();
        let old = ins.uload8(types::I64, flags, address, 0);
        let fifteen = self.b.ins().iconst(types::I64, 0xF);
        let mask = self.b.ins().ishl(fifteen, shift);
        let kept = self.b.ins().band_not(old, mask);
        let nibble = self.b.ins().band_imm_u(value, 0xF);
        let placed = self.b.ins().ishl(nibble, shift);
        let merged = self.b.ins().bor(kept, placed);
        self.b.ins().istore8(flags, merged, address, 0);
    }
}
