//! [`RtEnv`]: the table of runtime services compiled kernels call, and [`RuntimeEnv`], which
//! owns one together with the thread pool it launches on.

use super::INVALID_ARGUMENT;
use crate::microkernel::{Microkernel, MicrokernelSet};
use crate::pool::ThreadPool;
use half::{bf16, f16};
use std::ffi::c_void;
use std::sync::Arc;

/// The outlined body of a parallel loop: runs iteration block `task` with the loop's
/// captured state `closure`.
pub type ParallelBody = extern "C" fn(closure: *const u8, task: i64, env: *const RtEnv) -> i32;

/// [`RtEnv::parallel_for`]: runs `body(closure, task, env)` for `task` in `0..n_tasks` on
/// the pool; returns 0 or the first nonzero code.
pub type ParallelForFn =
    extern "C" fn(body: ParallelBody, closure: *const u8, n_tasks: i64, env: *const RtEnv) -> i32;

/// Widens the bits of an f16 or a bf16 to f32.
pub type HalfToF32Fn = extern "C" fn(u16) -> f32;

/// Narrows an f32 to the bits of an f16 or a bf16 (round to nearest even).
pub type F32ToHalfFn = extern "C" fn(f32) -> u16;

/// A scalar f32 math function.
pub type UnaryF32Fn = extern "C" fn(f32) -> f32;

/// A scalar f32 math function of two arguments.
pub type BinaryF32Fn = extern "C" fn(f32, f32) -> f32;

/// Runtime services for compiled kernels, passed to every kernel as `env`.
///
/// Layout (`repr(C)`): every field is pointer-sized (the last, [`RtEnv::microkernels`], an
/// array of pointers), so field `i` of [`RtEnvField::ALL`] is at byte offset
/// `i * pointer_bytes` ([`RtEnvField::offset`], [`RtEnvField::microkernel_offset`]); codegen
/// loads the function pointers at these fixed offsets. New fields are only ever appended.
#[repr(C)]
#[derive(Debug)]
pub struct RtEnv {
    /// 0: parallel launch on the runtime's pool.
    pub parallel_for: ParallelForFn,
    /// 1: f16 bits to f32.
    pub f16_to_f32: HalfToF32Fn,
    /// 2: f32 to f16 bits.
    pub f32_to_f16: F32ToHalfFn,
    /// 3: bf16 bits to f32.
    pub bf16_to_f32: HalfToF32Fn,
    /// 4: f32 to bf16 bits.
    pub f32_to_bf16: F32ToHalfFn,
    /// 5: `e^x`.
    pub expf: UnaryF32Fn,
    /// 6: natural logarithm.
    pub logf: UnaryF32Fn,
    /// 7: hyperbolic tangent.
    pub tanhf: UnaryF32Fn,
    /// 8: error function.
    pub erff: UnaryF32Fn,
    /// 9: `x^y`.
    pub powf: BinaryF32Fn,
    /// 10: sine.
    pub sinf: UnaryF32Fn,
    /// 11: cosine.
    pub cosf: UnaryF32Fn,
    /// 12: participants of a parallel launch (to size `n_tasks`).
    pub num_threads: usize,
    /// 13: the runtime's private context (the pool); opaque to kernels.
    pub context: *const c_void,
    /// 14: the microkernels' entry points, indexed by `Microkernel as usize`, chosen at
    /// load by CPU feature detection (scalar twins where the CPU lacks an ISA); each is
    /// called with its kernel's signature ([`crate::microkernel::MicrokernelFn`]).
    pub microkernels: [*const (); Microkernel::COUNT],
}

/// The fields of [`RtEnv`] in layout order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RtEnvField {
    /// [`RtEnv::parallel_for`].
    ParallelFor,
    /// [`RtEnv::f16_to_f32`].
    F16ToF32,
    /// [`RtEnv::f32_to_f16`].
    F32ToF16,
    /// [`RtEnv::bf16_to_f32`].
    Bf16ToF32,
    /// [`RtEnv::f32_to_bf16`].
    F32ToBf16,
    /// [`RtEnv::expf`].
    Expf,
    /// [`RtEnv::logf`].
    Logf,
    /// [`RtEnv::tanhf`].
    Tanhf,
    /// [`RtEnv::erff`].
    Erff,
    /// [`RtEnv::powf`].
    Powf,
    /// [`RtEnv::sinf`].
    Sinf,
    /// [`RtEnv::cosf`].
    Cosf,
    /// [`RtEnv::num_threads`].
    NumThreads,
    /// [`RtEnv::context`].
    Context,
    /// [`RtEnv::microkernels`] (the start of the array).
    Microkernels,
}

impl RtEnvField {
    /// Every field, in layout order.
    pub const ALL: [RtEnvField; 15] = [
        RtEnvField::ParallelFor,
        RtEnvField::F16ToF32,
        RtEnvField::F32ToF16,
        RtEnvField::Bf16ToF32,
        RtEnvField::F32ToBf16,
        RtEnvField::Expf,
        RtEnvField::Logf,
        RtEnvField::Tanhf,
        RtEnvField::Erff,
        RtEnvField::Powf,
        RtEnvField::Sinf,
        RtEnvField::Cosf,
        RtEnvField::NumThreads,
        RtEnvField::Context,
        RtEnvField::Microkernels,
    ];

    /// Byte offset of the field in an [`RtEnv`] on a target with `pointer_bytes`-wide
    /// pointers (8 on 64-bit targets).
    pub fn offset(self, pointer_bytes: usize) -> usize {
        self as usize * pointer_bytes
    }

    /// Byte offset of `kernel`'s function pointer in an [`RtEnv`] (in the
    /// [`RtEnv::microkernels`] array) on a target with `pointer_bytes`-wide pointers.
    pub fn microkernel_offset(kernel: Microkernel, pointer_bytes: usize) -> usize {
        RtEnvField::Microkernels.offset(pointer_bytes) + kernel as usize * pointer_bytes
    }
}

extern "C" {
    /// The C library's `erff` (Rust's `f32::erf` is not stable yet).
    #[link_name = "erff"]
    fn libm_erff(x: f32) -> f32;
}

macro_rules! scalar_services {
    ($($name:ident($($arg:ident),+) => $body:expr;)*) => {$(
        extern "C" fn $name($($arg: f32),+) -> f32 {
            $body
        }
    )*};
}

scalar_services! {
    rt_expf(x) => x.exp();
    rt_logf(x) => x.ln();
    rt_tanhf(x) => x.tanh();
    // SAFETY: `erff` is a pure C function of one float, defined for every input.
    rt_erff(x) => unsafe { libm_erff(x) };
    rt_powf(x, y) => x.powf(y);
    rt_sinf(x) => x.sin();
    rt_cosf(x) => x.cos();
}

extern "C" fn rt_f16_to_f32(bits: u16) -> f32 {
    f16::from_bits(bits).to_f32()
}

extern "C" fn rt_f32_to_f16(x: f32) -> u16 {
    f16::from_f32(x).to_bits()
}

extern "C" fn rt_bf16_to_f32(bits: u16) -> f32 {
    bf16::from_bits(bits).to_f32()
}

extern "C" fn rt_f32_to_bf16(x: f32) -> u16 {
    bf16::from_f32(x).to_bits()
}

/// The raw arguments of a parallel body, shared by the pool's threads.
struct BodyCall {
    body: ParallelBody,
    closure: *const u8,
    env: *const RtEnv,
}

// SAFETY: the ABI requires `closure` and `env` to be readable from any thread for the
// duration of `parallel_for`, which is as long as a `BodyCall` is shared.
unsafe impl Sync for BodyCall {}

impl BodyCall {
    fn run(&self, task: i64) -> i32 {
        (self.body)(self.closure, task, self.env)
    }
}

extern "C" fn rt_parallel_for(
    body: ParallelBody,
    closure: *const u8,
    n_tasks: i64,
    env: *const RtEnv,
) -> i32 {
    if env.is_null() || n_tasks < 0 {
        return INVALID_ARGUMENT;
    }
    // SAFETY: a kernel passes on the env it was given: a live RtEnv made by RuntimeEnv,
    // whose context points to the pool that RuntimeEnv keeps alive.
    let pool = unsafe { &*(*env).context.cast::<ThreadPool>() };
    let call = BodyCall { body, closure, env };
    pool.parallel_for(n_tasks, &|task| call.run(task))
}

/// An [`RtEnv`] bound to a thread pool, at a stable address for as long as it lives.
#[derive(Debug)]
pub struct RuntimeEnv {
    env: Box<RtEnv>,
    /// The pool that `env.context` points to (kept alive here).
    pool: Arc<ThreadPool>,
    /// The microkernels of `env.microkernels`.
    microkernels: MicrokernelSet,
}

// SAFETY: the raw `context` pointer refers to the pool this value keeps alive, and
// ThreadPool is Send + Sync; everything else in RtEnv is plain function pointers (and a
// count).
unsafe impl Send for RuntimeEnv {}
// SAFETY: as above; the env is never mutated after construction.
unsafe impl Sync for RuntimeEnv {}

impl RuntimeEnv {
    /// Services that launch parallel loops on `pool`, with the best microkernels for this
    /// CPU ([`MicrokernelSet::detect`]).
    pub fn new(pool: Arc<ThreadPool>) -> RuntimeEnv {
        RuntimeEnv::with_microkernels(pool, MicrokernelSet::detect())
    }

    /// Services that launch parallel loops on `pool`, with the microkernels of `set` (e.g.
    /// [`MicrokernelSet::scalar`] to force the scalar twins).
    pub fn with_microkernels(pool: Arc<ThreadPool>, set: MicrokernelSet) -> RuntimeEnv {
        let env = Box::new(RtEnv {
            parallel_for: rt_parallel_for,
            f16_to_f32: rt_f16_to_f32,
            f32_to_f16: rt_f32_to_f16,
            bf16_to_f32: rt_bf16_to_f32,
            f32_to_bf16: rt_f32_to_bf16,
            expf: rt_expf,
            logf: rt_logf,
            tanhf: rt_tanhf,
            erff: rt_erff,
            powf: rt_powf,
            sinf: rt_sinf,
            cosf: rt_cosf,
            num_threads: pool.threads(),
            context: Arc::as_ptr(&pool).cast(),
            microkernels: set.table(),
        });
        RuntimeEnv {
            env,
            pool,
            microkernels: set,
        }
    }

    /// The pool kernels launch their parallel loops on.
    pub fn pool(&self) -> &Arc<ThreadPool> {
        &self.pool
    }

    /// The microkernels kernels call.
    pub fn microkernels(&self) -> &MicrokernelSet {
        &self.microkernels
    }

    /// The env to pass to kernels.
    pub fn as_ptr(&self) -> *const RtEnv {
        &*self.env
    }

    /// The env's services.
    pub fn env(&self) -> &RtEnv {
        &self.env
    }
}
