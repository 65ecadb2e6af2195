//! Hand-written kernels with the compiled-kernel ABI.

use crate::abi::RtEnv;
use std::slice;
use std::sync::atomic::{AtomicUsize, Ordering};

/// `c[i] = a[i] + b[i]` over `[n]` f32; args `(a, b, c)`, dims `(n)`.
pub(super) unsafe extern "C" fn add(
    args: *const *mut u8,
    dims: *const i64,
    _env: *const RtEnv,
) -> i32 {
    // SAFETY: the VM passes three distinct f32 buffers of `dims[0]` elements.
    unsafe {
        let n = *dims as usize;
        let a = slice::from_raw_parts(*args as *const f32, n);
        let b = slice::from_raw_parts(*args.add(1) as *const f32, n);
        let c = slice::from_raw_parts_mut(*args.add(2) as *mut f32, n);
        for ((c, a), b) in c.iter_mut().zip(a).zip(b) {
            *c = a + b;
        }
    }
    0
}

/// What each row task of `matmul` reads.
struct MatmulClosure {
    x: *const f32,
    w: *const f32,
    out: *mut f32,
    k: usize,
    m: usize,
}

extern "C" fn matmul_row(closure: *const u8, row: i64, _env: *const RtEnv) -> i32 {
    // SAFETY: `matmul` passes a live MatmulClosure; row tasks write disjoint output rows.
    unsafe {
        let c = &*closure.cast::<MatmulClosure>();
        let row = row as usize;
        for j in 0..c.m {
            let mut acc = 0.0f32;
            for p in 0..c.k {
                acc += *c.x.add(row * c.k + p) * *c.w.add(p * c.m + j);
            }
            *c.out.add(row * c.m + j) = acc;
        }
    }
    0
}

/// `out = x @ w` for `x: [n, k]`, `w: [k, m]`, `out: [n, m]` f32, one parallel task per
/// row through the env; dims `(n, k, m)`.
pub(super) unsafe extern "C" fn matmul(
    args: *const *mut u8,
    dims: *const i64,
    env: *const RtEnv,
) -> i32 {
    // SAFETY: the VM passes three f32 buffers of the shapes above and a live env.
    unsafe {
        let closure = MatmulClosure {
            x: *args as *const f32,
            w: *args.add(1) as *const f32,
            out: *args.add(2) as *mut f32,
            k: *dims.add(1) as usize,
            m: *dims.add(2) as usize,
        };
        ((*env).parallel_for)(
            matmul_row,
            (&closure as *const MatmulClosure).cast(),
            *dims,
            env,
        )
    }
}

/// Always fails with status 3.
pub(super) unsafe extern "C" fn fail(
    _args: *const *mut u8,
    _dims: *const i64,
    _env: *const RtEnv,
) -> i32 {
    3
}

/// The address of the last buffer `record_ptr` saw.
pub(super) static RECORDED: AtomicUsize = AtomicUsize::new(0);

/// Records its buffer's address and fills its `[n]` f32 elements with `n`; dims `(n)`.
pub(super) unsafe extern "C" fn record_ptr(
    args: *const *mut u8,
    dims: *const i64,
    _env: *const RtEnv,
) -> i32 {
    // SAFETY: the VM passes one f32 buffer of `dims[0]` elements.
    unsafe {
        let n = *dims;
        RECORDED.store(*args as usize, Ordering::SeqCst);
        slice::from_raw_parts_mut(*args as *mut f32, n as usize).fill(n as f32);
    }
    0
}
