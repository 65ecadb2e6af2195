//! Compiling primitive functions into a Cranelift module (the JIT for the host here; the
//! same driver serves object files), and the JIT kernel library.

use crate::lower::parallel::{count_parallel, lower_outlined, outlined_signature};
use crate::lower::{kernel_signature, lower_prim_func};
use crate::{isa, CodegenError};
use cranelift_codegen::ir::{Signature, UserFuncName};
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{ArenaMemoryProvider, JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, FuncId, Linkage, Module};
use oxrelax_abi::{KernelFn, KernelLibrary};
use oxrelax_dsl::tir::PrimFunc;
use std::collections::BTreeMap;

/// A compiled kernel with the runtime's kernel ABI ([`KernelFn`]: tensor data pointers,
/// symbolic dim values and the runtime environment in, 0 or an error code out).
pub type RawKernel = KernelFn;

fn cranelift_error(func: &str, message: impl std::fmt::Display) -> CodegenError {
    CodegenError::Cranelift {
        func: func.to_string(),
        message: message.to_string(),
    }
}

/// Lowers `func` and its outlined parallel bodies into `module`; returns the kernel's id.
/// When `clif` is given, the Cranelift IR of every function is appended to it.
pub(crate) fn define_prim_func<M: Module>(
    module: &mut M,
    name: &str,
    func: &PrimFunc,
    linkage: Linkage,
    mut clif: Option<&mut String>,
) -> Result<FuncId, CodegenError> {
    let config = module.target_config();
    let (ptr, call_conv) = (config.pointer_type(), config.default_call_conv);
    let outlined_sig = outlined_signature(ptr, call_conv);
    let id = module
        .declare_function(name, linkage, &kernel_signature(ptr, call_conv))
        .map_err(|e| cranelift_error(name, e))?;
    let outlined_ids = (0..count_parallel(&func.body))
        .map(|k| {
            module
                .declare_function(&format!("{name}__par{k}"), Linkage::Local, &outlined_sig)
                .map_err(|e| cranelift_error(name, e))
        })
        .collect::<Result<Vec<_>, _>>()?;

    let mut ctx = new_context(module, id, kernel_signature(ptr, call_conv));
    let refs = outlined_ids
        .iter()
        .map(|oid| module.declare_func_in_func(*oid, &mut ctx.func))
        .collect();
    let mut builder_ctx = FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(&mut ctx.func, &mut builder_ctx);
    let bodies = lower_prim_func(name, func, &mut b, ptr, refs)?;
    b.finalize(module.target_config());
    finish(module, id, &mut ctx, name, clif.as_deref_mut())?;

    for body in bodies {
        let oid = outlined_ids[body.index];
        let mut ctx = new_context(module, oid, outlined_sig.clone());
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut builder_ctx);
        lower_outlined(name, &body, &mut b, ptr)?;
        b.finalize(module.target_config());
        finish(module, oid, &mut ctx, name, clif.as_deref_mut())?;
    }
    Ok(id)
}

fn new_context<M: Module>(module: &M, id: FuncId, sig: Signature) -> Context {
    let mut ctx = module.make_context();
    ctx.func.signature = sig;
    ctx.func.name = UserFuncName::user(0, id.as_u32());
    ctx
}

fn finish<M: Module>(
    module: &mut M,
    id: FuncId,
    ctx: &mut Context,
    name: &str,
    clif: Option<&mut String>,
) -> Result<(), CodegenError> {
    if let Some(out) = clif {
        out.push_str(&ctx.func.display().to_string());
    }
    module
        .define_function(id, ctx)
        .map_err(|e| cranelift_error(name, format!("{e:?}")))?;
    module.clear_context(ctx);
    Ok(())
}

/// Address space reserved for one library's code (reserved, not committed: only the
/// pages code is written to are). One contiguous region keeps every call between a
/// kernel and its outlined parallel bodies within the ±2 GiB of x86-64's PC-relative
/// calls, wherever the weights' gigabytes of mappings put the allocations around it.
const CODE_ARENA_BYTES: usize = 1 << 30;

fn host_module() -> Result<JITModule, CodegenError> {
    let isa = isa::host_isa(false)?;
    let arena = ArenaMemoryProvider::new_with_size(CODE_ARENA_BYTES)
        .map_err(|e| cranelift_error("<module>", format!("reserving code memory: {e}")))?;
    let mut builder = JITBuilder::with_isa(isa, default_libcall_names());
    builder.memory_provider(Box::new(arena));
    Ok(JITModule::new(builder))
}

/// The Cranelift IR of one primitive function (and its outlined parallel bodies) as
/// codegen builds it, before Cranelift's own optimizations; for debugging and tests.
pub fn clif_text(name: &str, func: &PrimFunc) -> Result<String, CodegenError> {
    let mut module = host_module()?;
    let mut text = String::new();
    define_prim_func(&mut module, name, func, Linkage::Local, Some(&mut text))?;
    Ok(text)
}

/// Native code for a set of primitive functions, compiled once and kept for the
/// library's lifetime.
pub struct JitLibrary {
    /// Owns the code; only touched again to free it (the mutex makes the library `Sync`).
    module: std::sync::Mutex<Option<JITModule>>,
    kernels: BTreeMap<String, RawKernel>,
}

impl JitLibrary {
    /// Compiles every primitive function (by name) for the host CPU.
    pub fn compile<'a>(
        funcs: impl IntoIterator<Item = (&'a String, &'a PrimFunc)>,
    ) -> Result<Self, CodegenError> {
        let mut module = host_module()?;
        let mut ids = Vec::new();
        for (name, func) in funcs {
            ids.push((
                name.clone(),
                define_prim_func(&mut module, name, func, Linkage::Local, None)?,
            ));
        }
        module
            .finalize_definitions()
            .map_err(|e| cranelift_error("<module>", e))?;
        let kernels = ids
            .into_iter()
            .map(|(name, id)| {
                let code = module.get_finalized_function(id);
                // SAFETY: `code` was compiled with `kernel_signature`, which is the C ABI
                // of `KernelFn`, and stays valid while `module` lives (owned by `self`).
                let kernel = unsafe { std::mem::transmute::<*const u8, RawKernel>(code) };
                (name, kernel)
            })
            .collect();
        Ok(JitLibrary {
            module: std::sync::Mutex::new(Some(module)),
            kernels,
        })
    }

    /// The kernel compiled from the primitive function `name`.
    pub fn kernel(&self, name: &str) -> Option<RawKernel> {
        self.kernels.get(name).copied()
    }
}

// SAFETY: every kernel was compiled from a primitive function with the kernel ABI; it
// reads and writes only the buffers passed to it within the shapes of its buffer
// parameters, which the VM checks before each call.
unsafe impl KernelLibrary for JitLibrary {
    fn lookup(&self, name: &str) -> Option<KernelFn> {
        self.kernel(name)
    }
}

impl Drop for JitLibrary {
    fn drop(&mut self) {
        let module = match self.module.get_mut() {
            Ok(module) => module.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(module) = module {
            // SAFETY: the kernels pointing into this memory are owned by `self` and
            // dropped with it; the VM holds the library in an `Arc` while calling them.
            unsafe { module.free_memory() };
        }
    }
}
