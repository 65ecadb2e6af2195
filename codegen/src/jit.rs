//! JIT compilation of a module's primitive functions for the host.

use crate::lower::{kernel_signature, lower_prim_func};
use crate::{isa, CodegenError};
use cranelift_codegen::ir::UserFuncName;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, Linkage, Module};
use oxrelax_dsl::tir::PrimFunc;
use std::collections::BTreeMap;

/// The Cranelift IR of one primitive function as codegen builds it (before Cranelift's
/// own optimizations), for debugging and tests.
pub fn clif_text(name: &str, func: &PrimFunc) -> Result<String, CodegenError> {
    let isa = isa::host_isa(false)?;
    let ptr = isa.pointer_type();
    let mut function = cranelift_codegen::ir::Function::with_name_signature(
        UserFuncName::user(0, 0),
        kernel_signature(ptr, isa.default_call_conv()),
    );
    let mut builder_ctx = FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(&mut function, &mut builder_ctx);
    lower_prim_func(name, func, &mut b, ptr)?;
    b.finalize(isa.frontend_config());
    Ok(function.display().to_string())
}

/// A compiled kernel with the kernel ABI of DESIGN.md.
pub type RawKernel = unsafe extern "C" fn(*const *mut u8, *const i64, *const u8) -> i32;

/// Native code for a set of primitive functions, compiled once and kept for the
/// library's lifetime.
pub struct JitLibrary {
    module: Option<JITModule>,
    kernels: BTreeMap<String, RawKernel>,
}

impl JitLibrary {
    /// Compiles every primitive function (by name) for the host CPU.
    pub fn compile<'a>(
        funcs: impl IntoIterator<Item = (&'a String, &'a PrimFunc)>,
    ) -> Result<Self, CodegenError> {
        let isa = isa::host_isa(false)?;
        let builder = JITBuilder::with_isa(isa, default_libcall_names());
        let mut module = JITModule::new(builder);
        let ptr = module.target_config().pointer_type();
        let sig = kernel_signature(ptr, module.target_config().default_call_conv);
        let mut ctx = module.make_context();
        let mut builder_ctx = FunctionBuilderContext::new();
        let mut ids = Vec::new();
        for (name, func) in funcs {
            let cranelift = |e: &dyn std::fmt::Display| CodegenError::Cranelift {
                func: name.clone(),
                message: e.to_string(),
            };
            let id = module
                .declare_function(name, Linkage::Local, &sig)
                .map_err(|e| cranelift(&e))?;
            ctx.func.signature = sig.clone();
            ctx.func.name = UserFuncName::user(0, id.as_u32());
            let mut b = FunctionBuilder::new(&mut ctx.func, &mut builder_ctx);
            lower_prim_func(name, func, &mut b, ptr)?;
            b.finalize(module.target_config());
            module
                .define_function(id, &mut ctx)
                .map_err(|e| cranelift(&format!("{e:?}")))?;
            module.clear_context(&mut ctx);
            ids.push((name.clone(), id));
        }
        module
            .finalize_definitions()
            .map_err(|e| CodegenError::Cranelift {
                func: "<module>".into(),
                message: e.to_string(),
            })?;
        let kernels = ids
            .into_iter()
            .map(|(name, id)| {
                let code = module.get_finalized_function(id);
                // SAFETY: `code` was compiled with `kernel_signature`, which is the C ABI
                // of `RawKernel`, and stays valid while `module` lives (owned by `self`).
                let kernel = unsafe { std::mem::transmute::<*const u8, RawKernel>(code) };
                (name, kernel)
            })
            .collect();
        Ok(JitLibrary {
            module: Some(module),
            kernels,
        })
    }

    /// The kernel compiled from the primitive function `name`.
    pub fn kernel(&self, name: &str) -> Option<RawKernel> {
        self.kernels.get(name).copied()
    }
}

impl Drop for JitLibrary {
    fn drop(&mut self) {
        if let Some(module) = self.module.take() {
            // SAFETY: the kernels pointing into this memory are owned by `self` and
            // dropped with it; callers only get copies while borrowing the library.
            unsafe { module.free_memory() };
        }
    }
}
