//! [`RtEnv`]: the table of runtime services compiled kernels call, at fixed offsets.

use crate::Microkernel;
use std::ffi::c_void;

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
    /// called with its kernel's signature (the runtime's `MicrokernelFn`).
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
