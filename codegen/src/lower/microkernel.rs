//! Microkernel calls: a tensorized block becomes an indirect call through the runtime's
//! microkernel table in `RtEnv` (the implementation the runtime picked for this CPU).

use super::Lowerer;
use crate::CodegenError;
use cranelift_codegen::ir::{types, AbiParam, InstBuilder, MemFlagsData, Signature};
use oxrelax_abi::Microkernel;
use oxrelax_abi::RtEnvField;
use oxrelax_dsl::tir::{MicrokernelCall, MicrokernelSpec};
use oxrelax_dsl::DType;

impl Lowerer<'_, '_> {
    /// `kernel(&a[offset], ...)(scalars...)`: buffer regions as pointers, scalars as `i64`
    /// or `f32` as the kernel declares them.
    pub(crate) fn microkernel(&mut self, call: &MicrokernelCall) -> Result<(), CodegenError> {
        let kernel = Microkernel::from_name(&call.kernel)
            .ok_or_else(|| self.unsupported(format!("unknown microkernel `{}`", call.kernel)))?;
        let spec = MicrokernelSpec::lookup(&call.kernel)
            .ok_or_else(|| self.unsupported(format!("unknown microkernel `{}`", call.kernel)))?;
        let declared = spec.kind.scalars();
        let scalars_match = declared.len() == call.scalars.len()
            && declared
                .iter()
                .zip(&call.scalars)
                .all(|(&(_, d), s)| s.dtype() == d);
        if spec.kind.operands().len() != call.operands.len() || !scalars_match {
            return Err(self.unsupported(format!(
                "microkernel `{}` takes buffers {:?} and scalars {:?}",
                call.kernel,
                spec.kind.operands(),
                declared
            )));
        }
        let mut args = Vec::with_capacity(call.operands.len() + call.scalars.len());
        for (operand, wanted) in call.operands.iter().zip(spec.kind.operand_dtypes()) {
            let (base, dtype) = self.slot(&operand.buffer)?;
            if dtype != wanted || self.registers.contains_key(&operand.buffer) {
                return Err(self.unsupported(format!(
                    "microkernel `{}` needs a {wanted} buffer in memory, `{}` is not",
                    call.kernel, operand.buffer
                )));
            }
            let offset = self.expr(&operand.offset)?;
            // (A u4 region starts at an even element: a whole byte.)
            args.push(self.element_address(base, offset, dtype));
        }
        for scalar in &call.scalars {
            args.push(self.expr(scalar)?);
        }
        let mut sig = Signature::new(self.b.func.signature.call_conv);
        sig.params
            .extend(call.operands.iter().map(|_| AbiParam::new(self.ptr)));
        sig.params.extend(declared.iter().map(|&(_, dtype)| {
            AbiParam::new(if dtype == DType::F32 {
                types::F32
            } else {
                types::I64
            })
        }));
        let sig = self.b.import_signature(sig);
        let offset = RtEnvField::microkernel_offset(kernel, self.ptr.bytes() as usize) as i32;
        let env = self.env;
        let function = self
            .b
            .ins()
            .load(self.ptr, MemFlagsData::trusted(), env, offset);
        self.b.ins().call_indirect(sig, function, &args);
        Ok(())
    }
}
