//! `build`: a module in, a runnable VM out — the compile pipeline, lowering to bytecode,
//! and JIT compilation of every kernel for the host.

use crate::lower_vm::{lower_to_vm, LowerError};
use crate::passes::{compile_pipeline_for, Instrument, PassError};
use oxrelax_codegen::{CodegenError, JitLibrary};
use oxrelax_dsl::{IRModule, Target};
use oxrelax_runtime::memory::MemoryError;
use oxrelax_runtime::vm::{Executable, VirtualMachine, VmError};
use oxrelax_runtime::{KernelLibrary, Registry};
use std::sync::Arc;

/// Why a module could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A compiler pass failed.
    #[error(transparent)]
    Pass(#[from] PassError),
    /// The module could not be lowered to bytecode.
    #[error(transparent)]
    Lower(#[from] LowerError),
    /// A kernel could not be compiled.
    #[error(transparent)]
    Codegen(#[from] CodegenError),
    /// The VM rejected the executable.
    #[error(transparent)]
    Vm(#[from] VmError),
    /// The compiled module would not fit in memory.
    #[error(transparent)]
    Memory(#[from] MemoryError),
}

/// A compiled module: the optimized IR, its bytecode and a VM ready to call it.
pub struct Built {
    /// The module after the compile pipeline (what the bytecode was lowered from).
    pub module: IRModule,
    /// The bytecode and kernel signatures.
    pub executable: Executable,
    /// The VM running the exported functions, with kernels compiled for the host.
    pub vm: VirtualMachine,
}

/// Compiles `module` for the host: runs the compile pipeline (with `instrument`), lowers
/// every graph function to bytecode, then loads it with its kernels ([`load_with`]).
pub fn build(module: IRModule, instrument: Instrument) -> Result<Built, BuildError> {
    build_for(module, instrument, &Target::host())
}

/// [`build`] with the passes and schedules of `target` (its tile table and microkernels);
/// the kernels are still JIT-compiled for the host, which runs `transform_params` when an
/// artifact for `target` is written.
pub fn build_for(
    module: IRModule,
    instrument: Instrument,
    target: &Target,
) -> Result<Built, BuildError> {
    build_with_builtins(module, instrument, target, &Registry::with_builtins())
}

/// [`build_for`] with the packed functions of `builtins` (the runtime's, and any a caller
/// adds, such as a partitioned model's NPU graphs).
pub fn build_with_builtins(
    module: IRModule,
    instrument: Instrument,
    target: &Target,
    builtins: &Registry,
) -> Result<Built, BuildError> {
    build_checked(module, instrument, target, builtins, |_, _| Ok(()))
}

/// [`build_with_builtins`], calling `check` with the compiled module and its bytecode
/// (whose memory plan sizes the arenas) before the kernels are compiled and the arenas
/// allocated: an error from it ends the build.
pub fn build_checked(
    module: IRModule,
    instrument: Instrument,
    target: &Target,
    builtins: &Registry,
    check: impl FnOnce(&IRModule, &Executable) -> Result<(), MemoryError>,
) -> Result<Built, BuildError> {
    let (module, _) = compile_pipeline_for(target)
        .instrumented(instrument)
        .run(module)?;
    let executable = lower_to_vm(&module)?;
    check(&module, &executable)?;
    let library = JitLibrary::compile_cached(&module.prim_funcs)?;
    load_with(module, executable, library, builtins)
}

/// Loads `executable` into a VM with the kernels of `library` (compiled from `module`)
/// and the packed functions of `builtins`.
pub fn load_with(
    module: IRModule,
    executable: Executable,
    library: Arc<dyn KernelLibrary>,
    builtins: &Registry,
) -> Result<Built, BuildError> {
    let vm = VirtualMachine::new(executable.clone(), library, builtins)?;
    Ok(Built {
        module,
        executable,
        vm,
    })
}
