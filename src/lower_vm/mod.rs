//! `LowerToVm`: a legalized, scheduled and memory-planned module to the runtime's
//! [`Executable`]: one bytecode function per graph function, one kernel declaration per
//! primitive function it calls.

mod dims;
mod function;
#[cfg(test)]
mod tests;

use function::FunctionLowering;
use oxrelax_dsl::tir::PrimFunc;
use oxrelax_dsl::IRModule;
use oxrelax_runtime::vm::{BufferSig, Executable, KernelDecl};
use std::collections::BTreeMap;

/// Why a module cannot be lowered to bytecode.
#[derive(Debug, thiserror::Error)]
pub enum LowerError {
    /// The module has a construct the VM cannot run yet.
    #[error("cannot lower `{function}`, binding `{var}`: {reason}")]
    Unsupported {
        /// The graph function.
        function: String,
        /// The variable being bound (or `return`).
        var: String,
        /// What is not supported.
        reason: String,
    },
    /// A symbolic expression uses something the VM's shape arithmetic cannot compute.
    #[error("cannot compute `{expr}` in `{function}`: {reason}")]
    Shape {
        /// The graph function or kernel.
        function: String,
        /// The expression.
        expr: String,
        /// Why.
        reason: String,
    },
    /// A `call_tir` names a primitive function the module does not have.
    #[error("`{function}` calls unknown primitive function `{callee}`")]
    UnknownPrimFunc {
        /// The graph function.
        function: String,
        /// The missing callee.
        callee: String,
    },
}

/// The kernels an executable declares, in first-use order.
#[derive(Default)]
pub(crate) struct KernelTable {
    decls: Vec<KernelDecl>,
    index: BTreeMap<String, u32>,
}

impl KernelTable {
    /// The id of kernel `name`, declaring it on first use.
    fn id(&mut self, name: &str, func: &PrimFunc) -> Result<u32, LowerError> {
        if let Some(&id) = self.index.get(name) {
            return Ok(id);
        }
        let decl = kernel_decl(name, func)?;
        let id = self.decls.len() as u32;
        self.decls.push(decl);
        self.index.insert(name.to_string(), id);
        Ok(id)
    }
}

/// The signature the VM checks before calling the kernel compiled from `func`.
fn kernel_decl(name: &str, func: &PrimFunc) -> Result<KernelDecl, LowerError> {
    let dims = dims::DimTable::for_kernel(name, func);
    let params = func
        .params
        .iter()
        .map(|buffer| {
            Ok(BufferSig {
                dtype: buffer.dtype,
                shape: buffer
                    .shape
                    .iter()
                    .map(|d| dims.shape_expr(d))
                    .collect::<Result<_, _>>()?,
            })
        })
        .collect::<Result<_, LowerError>>()?;
    Ok(KernelDecl {
        name: name.to_string(),
        dims: func.dims.iter().map(|d| d.name().to_string()).collect(),
        params,
    })
}

/// Lowers every graph function of `module` (after legalization, scheduling and memory
/// planning) to bytecode.
pub fn lower_to_vm(module: &IRModule) -> Result<Executable, LowerError> {
    let mut kernels = KernelTable::default();
    let mut functions = BTreeMap::new();
    for (name, function) in &module.functions {
        let lowered = FunctionLowering::new(name, function, module, &mut kernels).lower()?;
        functions.insert(name.clone(), lowered);
    }
    Ok(Executable::new(kernels.decls, functions))
}
