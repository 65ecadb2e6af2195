//! [`VirtualMachine`]: loads an executable, resolves its kernels and builtins, allocates
//! each function's arena once, and runs functions by name.

use super::bytecode::{Instr, Reg};
use super::error::VmError;
use super::exec::{Executable, VmFunction};
use super::profile::{KernelProfile, KernelStat};
use super::run::Ctx;
use crate::abi::{KernelFn, KernelLibrary, RuntimeEnv};
use crate::microkernel::MicrokernelSet;
use crate::packed::{PackedFunc, Registry};
use crate::pool::ThreadPool;
use crate::tensor::{Arena, TensorError};
use crate::value::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Per-function state kept across calls.
pub(super) struct Frame {
    /// The function's arena, allocated once.
    pub(super) arena: Arena,
    /// Value registers (cleared after each call).
    pub(super) regs: Vec<Option<Value>>,
    /// Dim registers (unbound at the start of each call).
    pub(super) dims: Vec<Option<i64>>,
    /// Per instruction, the registers it mentions last: dropped right after it runs, so
    /// an argument or intermediate is freed as soon as the code is done with it.
    pub(super) last_uses: Vec<Vec<Reg>>,
    /// Time per kernel, indexed by kernel id.
    pub(super) profile: Vec<KernelStat>,
}

impl Frame {
    fn new(func: &VmFunction, kernels: usize) -> Result<Frame, TensorError> {
        let arena_size = usize::try_from(func.arena_size).unwrap_or(usize::MAX);
        Ok(Frame {
            arena: Arena::new(arena_size)?,
            regs: vec![None; func.num_regs as usize],
            dims: vec![None; func.dims.len()],
            last_uses: last_uses(&func.instrs),
            profile: vec![KernelStat::default(); kernels],
        })
    }

    /// Drops every register's value and unbinds every dim.
    fn clear(&mut self) {
        self.regs.iter_mut().for_each(|r| *r = None);
        self.dims.iter_mut().for_each(|d| *d = None);
    }
}

/// Per instruction of straight-line `instrs`, the registers no later instruction mentions
/// (those `ret` mentions are never dropped: it ends the call).
pub(super) fn last_uses(instrs: &[Instr]) -> Vec<Vec<Reg>> {
    let mut last = HashMap::new();
    for (at, instr) in instrs.iter().enumerate() {
        for reg in instr.regs() {
            last.insert(reg, at);
        }
    }
    let mut uses = vec![Vec::new(); instrs.len()];
    for (reg, at) in last {
        uses[at].push(reg);
    }
    uses
}

/// Runs the functions of an [`Executable`].
pub struct VirtualMachine {
    exec: Executable,
    /// Keeps the kernels' code alive (e.g. a JIT module or a loaded library).
    _library: Arc<dyn KernelLibrary>,
    kernels: Vec<KernelFn>,
    builtins: HashMap<String, PackedFunc>,
    env: RuntimeEnv,
    frames: BTreeMap<String, Frame>,
    profiling: bool,
}

impl VirtualMachine {
    /// Validates `exec`, resolves its kernels in `library` and the builtins it calls in
    /// `builtins`, and allocates every function's arena. Kernels launch parallel loops on
    /// [`ThreadPool::global`] (see [`VirtualMachine::with_thread_pool`]).
    pub fn new(
        exec: Executable,
        library: Arc<dyn KernelLibrary>,
        builtins: &Registry,
    ) -> Result<VirtualMachine, VmError> {
        exec.validate()?;
        let kernels = exec
            .kernels
            .iter()
            .map(|decl| {
                library
                    .lookup(&decl.name)
                    .ok_or_else(|| VmError::MissingKernel {
                        name: decl.name.clone(),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut used = HashMap::new();
        let mut frames = BTreeMap::new();
        for (func, f) in &exec.functions {
            for instr in &f.instrs {
                if let Instr::CallBuiltin { name, .. } = instr {
                    let packed = builtins.get(name).map_err(|_| VmError::MissingBuiltin {
                        func: func.clone(),
                        name: name.clone(),
                    })?;
                    used.insert(name.clone(), packed.clone());
                }
            }
            let frame = Frame::new(f, kernels.len()).map_err(|source| VmError::Tensor {
                func: func.clone(),
                source,
            })?;
            frames.insert(func.clone(), frame);
        }
        Ok(VirtualMachine {
            exec,
            _library: library,
            kernels,
            builtins: used,
            env: RuntimeEnv::new(ThreadPool::global()),
            frames,
            profiling: false,
        })
    }

    /// A second machine over the same executable, kernels, builtins, pool and
    /// microkernels, with its own arenas for `functions` only (the others cannot be
    /// called on it): e.g. to prefill two chunks at once.
    pub fn fork(&self, functions: &[&str]) -> Result<VirtualMachine, VmError> {
        let mut frames = BTreeMap::new();
        for &name in functions {
            let func =
                (self.exec.functions.get(name)).ok_or_else(|| Self::unknown(&self.exec, name))?;
            let frame = Frame::new(func, self.kernels.len()).map_err(|source| VmError::Tensor {
                func: name.to_string(),
                source,
            })?;
            frames.insert(name.to_string(), frame);
        }
        Ok(VirtualMachine {
            exec: self.exec.clone(),
            _library: self._library.clone(),
            kernels: self.kernels.clone(),
            builtins: self.builtins.clone(),
            env: RuntimeEnv::with_microkernels(self.env.pool().clone(), *self.env.microkernels()),
            frames,
            profiling: self.profiling,
        })
    }

    /// Launches kernels' parallel loops on `pool` instead of the global pool.
    pub fn with_thread_pool(mut self, pool: Arc<ThreadPool>) -> VirtualMachine {
        self.set_thread_pool(pool);
        self
    }

    /// Launches kernels' parallel loops on `pool` from now on.
    pub fn set_thread_pool(&mut self, pool: Arc<ThreadPool>) {
        self.env = RuntimeEnv::with_microkernels(pool, *self.env.microkernels());
    }

    /// The pool kernels launch their parallel loops on.
    pub fn thread_pool(&self) -> &Arc<ThreadPool> {
        self.env.pool()
    }

    /// Calls the microkernels of `set` (e.g. only those an artifact's CPU features allow)
    /// instead of the best for this CPU.
    pub fn with_microkernels(mut self, set: MicrokernelSet) -> VirtualMachine {
        self.env = RuntimeEnv::with_microkernels(self.env.pool().clone(), set);
        self
    }

    /// The microkernels the kernels call.
    pub fn microkernels(&self) -> &MicrokernelSet {
        self.env.microkernels()
    }

    /// The loaded executable.
    pub fn executable(&self) -> &Executable {
        &self.exec
    }

    /// Frees function `name`'s arena and registers: for a function run once, as the
    /// weight transform while weights load. Calling it afterwards is an
    /// [`VmError::UnknownFunction`] error. Whether it had them.
    pub fn retire(&mut self, name: &str) -> bool {
        self.frames.remove(name).is_some()
    }

    /// The arena of function `name`.
    pub fn arena(&self, name: &str) -> Option<&Arena> {
        self.frames.get(name).map(|f| &f.arena)
    }

    /// Turns timing of kernel calls on or off.
    pub fn set_profiling(&mut self, on: bool) {
        self.profiling = on;
    }

    /// Time per kernel spent in calls of function `name` while profiling was on, slowest
    /// first (kernels it never called are left out).
    pub fn profile(&self, name: &str) -> Option<Vec<KernelProfile>> {
        let frame = self.frames.get(name)?;
        Some(KernelProfile::report(&frame.profile, &self.exec.kernels))
    }

    /// Zeroes every function's profile.
    pub fn reset_profile(&mut self) {
        for frame in self.frames.values_mut() {
            frame.profile.fill(KernelStat::default());
        }
    }

    /// The error for calling `name`, which `exec` does not export.
    fn unknown(exec: &Executable, name: &str) -> VmError {
        let available: Vec<&str> = exec.functions.keys().map(String::as_str).collect();
        VmError::UnknownFunction {
            name: name.to_string(),
            available: available.join(", "),
        }
    }

    /// Calls function `name` with `args`. Tensors in the result never alias the arena.
    pub fn call(&mut self, name: &str, args: &[Value]) -> Result<Value, VmError> {
        self.call_owned(name, args.to_vec())
    }

    /// Calls function `name` with `args`, taking them: each argument is dropped as soon
    /// as the function no longer needs it (e.g. a raw weight right after it is packed),
    /// unless the caller keeps another handle to it.
    pub fn call_owned(&mut self, name: &str, args: Vec<Value>) -> Result<Value, VmError> {
        let unknown = || Self::unknown(&self.exec, name);
        let (name, func) = self
            .exec
            .functions
            .get_key_value(name)
            .ok_or_else(unknown)?;
        let frame = self.frames.get_mut(name).ok_or_else(unknown)?;
        if args.len() != func.params.len() {
            return Err(VmError::ArgCount {
                func: name.clone(),
                expected: func.params.len(),
                params: func.params.join(", "),
                got: args.len(),
            });
        }
        for (reg, arg) in frame.regs.iter_mut().zip(args) {
            *reg = Some(arg);
        }
        let ctx = Ctx {
            name,
            func,
            decls: &self.exec.kernels,
            kernels: &self.kernels,
            builtins: &self.builtins,
            env: &self.env,
            profiling: self.profiling,
            dim_names: func.dim_names(),
        };
        let result = ctx.run(frame);
        frame.clear();
        result
    }
}
