//! Ahead-of-time compilation: primitive functions into a relocatable object file for a
//! target ISA (position-independent), each kernel exported under [`kernel_symbol`], for
//! the target's linker to turn into a shared library that the runtime opens.

use crate::jit::define_prim_func;
use crate::CodegenError;
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_module::{default_libcall_names, DataDescription, Linkage, Module};
use cranelift_object::{ObjectBuilder, ObjectModule};
use oxrelax_dsl::tir::PrimFunc;

pub use oxrelax_abi::kernel_symbol;

/// The object file (ELF, Mach-O or COFF, as `isa`'s triple says) holding every primitive
/// function of `funcs`, compiled for `isa` (which must be position-independent), each
/// exported as [`kernel_symbol`] of its name, and each `(symbol, bytes)` of `tables` as
/// read-only data exported as `symbol`: the length as a little-endian `u64`, then the
/// bytes (see `oxrelax_runtime::abi::SharedKernelLibrary`).
pub fn compile_object<'a>(
    funcs: impl IntoIterator<Item = (&'a String, &'a PrimFunc)>,
    isa: OwnedTargetIsa,
    tables: &[(&str, &[u8])],
) -> Result<Vec<u8>, CodegenError> {
    let failed = |e: &dyn std::fmt::Display| CodegenError::Isa(e.to_string());
    let builder = ObjectBuilder::new(isa, "oxrelax_kernels", default_libcall_names())
        .map_err(|e| failed(&e))?;
    let mut module = ObjectModule::new(builder);
    for (name, func) in funcs {
        let symbol = kernel_symbol(name);
        define_prim_func(&mut module, &symbol, func, Linkage::Export, None)?;
    }
    for (symbol, bytes) in tables {
        let id = module
            .declare_data(symbol, Linkage::Export, false, false)
            .map_err(|e| failed(&e))?;
        let mut contents = (bytes.len() as u64).to_le_bytes().to_vec();
        contents.extend_from_slice(bytes);
        let mut data = DataDescription::new();
        data.define(contents.into_boxed_slice());
        data.set_align(8);
        module.define_data(id, &data).map_err(|e| failed(&e))?;
    }
    module.finish().emit().map_err(|e| failed(&e))
}
