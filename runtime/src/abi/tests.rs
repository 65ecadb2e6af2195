use super::*;
use crate::microkernel::{GemmFn, Microkernel, MicrokernelSet};
use crate::pool::ThreadPool;
use std::mem::{offset_of, size_of};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

fn runtime_env(threads: usize) -> RuntimeEnv {
    RuntimeEnv::new(Arc::new(ThreadPool::new(threads).unwrap()))
}

#[test]
fn field_offsets_are_pointer_slots_in_declared_order() {
    let ptr = size_of::<usize>();
    let offsets = [
        offset_of!(RtEnv, parallel_for),
        offset_of!(RtEnv, f16_to_f32),
        offset_of!(RtEnv, f32_to_f16),
        offset_of!(RtEnv, bf16_to_f32),
        offset_of!(RtEnv, f32_to_bf16),
        offset_of!(RtEnv, expf),
        offset_of!(RtEnv, logf),
        offset_of!(RtEnv, tanhf),
        offset_of!(RtEnv, erff),
        offset_of!(RtEnv, powf),
        offset_of!(RtEnv, sinf),
        offset_of!(RtEnv, cosf),
        offset_of!(RtEnv, num_threads),
        offset_of!(RtEnv, context),
        offset_of!(RtEnv, microkernels),
    ];
    let expected: Vec<usize> = RtEnvField::ALL.iter().map(|f| f.offset(ptr)).collect();
    assert_eq!(offsets.to_vec(), expected);
    let slots = RtEnvField::ALL.len() - 1 + Microkernel::COUNT;
    assert_eq!(size_of::<RtEnv>(), slots * ptr);
    assert_eq!(RtEnvField::Erff.offset(8), 64);
    assert_eq!(RtEnvField::Microkernels.offset(8), 14 * 8);
}

#[test]
fn microkernel_offsets_are_the_slots_of_the_table() {
    let ptr = size_of::<usize>();
    let table = offset_of!(RtEnv, microkernels);
    for kernel in Microkernel::ALL {
        let slot = table + kernel as usize * size_of::<*const ()>();
        assert_eq!(RtEnvField::microkernel_offset(kernel, ptr), slot);
    }
    assert_eq!(
        RtEnvField::microkernel_offset(Microkernel::Sgemv1x64, 4),
        15 * 4
    );
}

/// `c = a * b` for one row and one full panel of 16 columns with `kc = 2`, through the
/// env's table.
fn gemv_through_env(rt: &RuntimeEnv) -> [f32; 16] {
    let a = [2.0f32, -1.0];
    let b: Vec<f32> = (0..32).map(|v| v as f32).collect();
    let mut c = [f32::NAN; 16];
    let entry = rt.env().microkernels[Microkernel::Sgemv1x64 as usize];
    // SAFETY: slot Sgemv1x64 holds a block GEMM's entry point.
    let kernel: GemmFn = unsafe { std::mem::transmute(entry) };
    // SAFETY: a holds one row of kc = 2 floats, b one panel of kc * 16 = 32 (all 16 columns
    // are in it), c one row of 16.
    unsafe { kernel(a.as_ptr(), b.as_ptr(), c.as_mut_ptr(), 2, 2, 16, 1, 16, 0) };
    c
}

#[test]
fn runtime_env_carries_the_microkernel_table() {
    let pool = Arc::new(ThreadPool::new(1).unwrap());
    let want: Vec<f32> = (0..16).map(|j| 2.0 * j as f32 - (16 + j) as f32).collect();
    let detected = RuntimeEnv::new(pool.clone());
    assert_eq!(gemv_through_env(&detected).to_vec(), want);
    let scalar = RuntimeEnv::with_microkernels(pool, MicrokernelSet::scalar());
    assert_eq!(gemv_through_env(&scalar).to_vec(), want);
}

#[test]
fn conversion_services_match_ieee_bit_patterns() {
    let rt = runtime_env(1);
    let env = rt.env();
    assert_eq!((env.f16_to_f32)(0x3E00), 1.5);
    assert_eq!((env.f32_to_f16)(65504.0), 0x7BFF);
    assert_eq!((env.f32_to_f16)(-2.0), 0xC000);
    assert_eq!((env.bf16_to_f32)(0x3F80), 1.0);
    assert_eq!((env.f32_to_bf16)(-0.5), 0xBF00);
    assert_eq!((env.bf16_to_f32)((env.f32_to_bf16)(3.0)), 3.0);
}

#[test]
fn math_services_match_reference_values() {
    let rt = runtime_env(1);
    let env = rt.env();
    let close = |got: f32, want: f64| (f64::from(got) - want).abs() <= 1e-6 * want.abs().max(1.0);
    assert!(close((env.expf)(1.0), std::f64::consts::E));
    assert!(close((env.logf)(10.0), std::f64::consts::LN_10));
    assert!(close((env.tanhf)(0.5), 0.46211715726000974));
    assert!(close((env.erff)(0.5), 0.5204998778130465));
    assert!(close((env.erff)(-2.0), -0.9953222650189527));
    assert!(close((env.powf)(2.0, 10.0), 1024.0));
    assert!(close((env.sinf)(1.0), 0.8414709848078965));
    assert!(close((env.cosf)(1.0), 0.5403023058681398));
}

/// The captured state of `sum_body`: per-task slots and a task that fails.
struct SumClosure {
    slots: Vec<AtomicI64>,
    fail_at: i64,
}

extern "C" fn sum_body(closure: *const u8, task: i64, _env: *const RtEnv) -> i32 {
    // SAFETY: the tests pass a pointer to a live SumClosure.
    let state = unsafe { &*closure.cast::<SumClosure>() };
    if task == state.fail_at {
        return 42;
    }
    state.slots[task as usize].fetch_add(task * task, Ordering::Relaxed);
    0
}

#[test]
fn parallel_for_runs_outlined_bodies_on_the_pool() {
    let rt = runtime_env(2);
    assert_eq!(rt.env().num_threads, 2);
    let state = SumClosure {
        slots: (0..100).map(|_| AtomicI64::new(0)).collect(),
        fail_at: -1,
    };
    let closure = (&state as *const SumClosure).cast::<u8>();
    let code = (rt.env().parallel_for)(sum_body, closure, 100, rt.as_ptr());
    assert_eq!(code, 0);
    let total: i64 = state.slots.iter().map(|s| s.load(Ordering::Relaxed)).sum();
    assert_eq!(total, (0..100).map(|i| i * i).sum::<i64>());
    let failing = SumClosure {
        slots: (0..10).map(|_| AtomicI64::new(0)).collect(),
        fail_at: 6,
    };
    let closure = (&failing as *const SumClosure).cast::<u8>();
    assert_eq!(
        (rt.env().parallel_for)(sum_body, closure, 10, rt.as_ptr()),
        42
    );
    let parallel_for = rt.env().parallel_for;
    assert_eq!(
        parallel_for(sum_body, closure, -1, rt.as_ptr()),
        INVALID_ARGUMENT
    );
    assert_eq!(
        parallel_for(sum_body, closure, 1, std::ptr::null()),
        INVALID_ARGUMENT
    );
}

/// What `scale_kernel` hands each task: the data pointer, the length, the factor.
struct ScaleClosure {
    data: *mut f32,
    n: i64,
    factor: f32,
}

const SCALE_BLOCK: i64 = 16;

extern "C" fn scale_block(closure: *const u8, task: i64, _env: *const RtEnv) -> i32 {
    // SAFETY: `scale_kernel` passes a live ScaleClosure; blocks of different tasks are
    // disjoint ranges of its `n` elements.
    unsafe {
        let c = &*closure.cast::<ScaleClosure>();
        for i in task * SCALE_BLOCK..((task + 1) * SCALE_BLOCK).min(c.n) {
            *c.data.add(i as usize) *= c.factor;
        }
    }
    0
}

/// `x[i] *= 3` over `[n]` f32, in parallel blocks through the env, as codegen would emit.
unsafe extern "C" fn scale_kernel(
    args: *const *mut u8,
    dims: *const i64,
    env: *const RtEnv,
) -> i32 {
    // SAFETY: the caller passes one f32 buffer of `dims[0]` elements and a live env.
    unsafe {
        let closure = ScaleClosure {
            data: (*args).cast::<f32>(),
            n: *dims,
            factor: 3.0,
        };
        let blocks = (closure.n + SCALE_BLOCK - 1) / SCALE_BLOCK;
        ((*env).parallel_for)(
            scale_block,
            (&closure as *const ScaleClosure).cast(),
            blocks,
            env,
        )
    }
}

#[test]
fn kernel_tables_resolve_kernels_that_call_back_into_the_env() {
    // SAFETY: `scale_kernel` reads and writes only its one `[n]` f32 buffer.
    let table = unsafe { KernelTable::new().with("scale", scale_kernel) };
    assert!(table.lookup("missing").is_none());
    let kernel = table.lookup("scale").unwrap();
    let rt = runtime_env(2);
    let mut data: Vec<f32> = (0..100).map(|i| i as f32).collect();
    let args = [data.as_mut_ptr().cast::<u8>()];
    let dims = [data.len() as i64];
    // SAFETY: one f32 buffer of dims[0] elements and a live env, as the kernel expects.
    let code = unsafe { kernel(args.as_ptr(), dims.as_ptr(), rt.as_ptr()) };
    assert_eq!(code, 0);
    assert!(data.iter().enumerate().all(|(i, &x)| x == 3.0 * i as f32));
}
