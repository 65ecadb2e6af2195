//! [`RuntimeEnv`]: an [`RtEnv`] filled with the runtime's services, owned together with the
//! thread pool it launches on.

use super::{ParallelBody, RtEnv, INVALID_ARGUMENT};
use crate::microkernel::MicrokernelSet;
use crate::pool::ThreadPool;
use half::{bf16, f16};
use std::sync::Arc;

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
