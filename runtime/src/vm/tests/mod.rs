//! VM tests: hand-built executables calling hand-written `extern "C"` kernels.

mod errors;
mod kernels;
mod programs;
mod run;
mod serde_io;

use super::*;
use crate::abi::KernelTable;
use crate::pool::ThreadPool;
use crate::{Registry, Tensor, Value};
use std::sync::Arc;

fn dim(r: DimReg) -> ShapeExpr {
    ShapeExpr::Dim(r)
}

fn c(v: i64) -> ShapeExpr {
    ShapeExpr::Const(v)
}

fn f32_sig(shape: Vec<ShapeExpr>) -> BufferSig {
    BufferSig {
        dtype: crate::DType::F32,
        shape,
    }
}

fn kernel(name: &str, dims: &[&str], params: Vec<BufferSig>) -> KernelDecl {
    KernelDecl {
        name: name.into(),
        dims: dims.iter().map(|d| d.to_string()).collect(),
        params,
    }
}

/// A function whose arena is exactly as large as its `(offset, size)` slots need.
fn function(
    params: &[&str],
    dims: &[(&str, Option<i64>)],
    num_regs: u32,
    instrs: Vec<Instr>,
    slots: &[(u64, u64)],
) -> VmFunction {
    let slots: Vec<Slot> = slots
        .iter()
        .map(|&(offset, size)| Slot { offset, size })
        .collect();
    VmFunction {
        params: params.iter().map(|p| p.to_string()).collect(),
        dims: dims
            .iter()
            .map(|&(name, upper_bound)| DimDecl {
                name: name.into(),
                upper_bound,
            })
            .collect(),
        num_regs,
        instrs,
        arena_size: slots.iter().map(|s| s.offset + s.size).max().unwrap_or(0),
        slots,
    }
}

/// Every test kernel, by the name the executables use.
fn library() -> KernelTable {
    // SAFETY: each test kernel touches only its buffers, within the extents of the
    // signature `programs::kernels` declares for it, and writes only its last buffer.
    unsafe {
        KernelTable::new()
            .with("add", kernels::add)
            .with("matmul", kernels::matmul)
            .with("fail", kernels::fail)
            .with("record_ptr", kernels::record_ptr)
    }
}

fn vm(exec: Executable) -> VirtualMachine {
    VirtualMachine::new(exec, Arc::new(library()), &Registry::with_builtins())
        .unwrap()
        .with_thread_pool(Arc::new(ThreadPool::new(2).unwrap()))
}

fn f32s(values: &[f32], shape: &[i64]) -> Value {
    Tensor::from_slice(values, shape).unwrap().into()
}

fn values_of(v: &Value) -> Vec<f32> {
    v.as_tensor().unwrap().as_slice::<f32>().unwrap().to_vec()
}
