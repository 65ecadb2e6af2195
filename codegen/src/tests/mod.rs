//! Codegen unit tests: shared helpers building and running small kernels.

mod dtypes;
mod loops;
mod math;

use crate::JitLibrary;

use oxrelax_dsl::tir::{Buffer, ForKind, PrimExpr, PrimFunc, Stmt, TVar};
use oxrelax_dsl::{Attrs, DType, SymVar};

pub(crate) fn n() -> SymVar {
    SymVar::bounded("n", 1 << 20)
}

pub(crate) fn index_var() -> PrimExpr {
    PrimExpr::Var(TVar::new("i", DType::I64))
}

pub(crate) fn load(buffer: &str, dtype: DType) -> PrimExpr {
    PrimExpr::Load {
        buffer: buffer.into(),
        dtype,
        indices: vec![index_var()],
    }
}

/// `out[i] = body(x[i], y[i])` for `i < n`, over buffers of the given dtypes.
pub(crate) fn elementwise(
    dtypes: [DType; 3],
    body: impl Fn(PrimExpr, PrimExpr) -> PrimExpr,
) -> PrimFunc {
    let shape = vec![n().expr()];
    let names = ["x", "y", "out"];
    let params = names
        .iter()
        .zip(dtypes)
        .map(|(name, dtype)| Buffer::new(name, dtype, shape.clone()))
        .collect();
    PrimFunc {
        params,
        num_outputs: 1,
        dims: vec![n()],
        body: Stmt::For {
            var: TVar::new("i", DType::I64),
            extent: PrimExpr::from(&n().expr()),
            kind: ForKind::Serial,
            body: Box::new(Stmt::Store {
                buffer: "out".into(),
                indices: vec![index_var()],
                value: body(load("x", dtypes[0]), load("y", dtypes[1])),
            }),
        },
        attrs: Attrs::new(),
    }
}

/// Compiles `func` and runs it over byte buffers with `n = len`.
pub(crate) fn run(func: &PrimFunc, buffers: &mut [&mut [u8]], len: i64) {
    let funcs = [("k".to_string(), func.clone())];
    let library = JitLibrary::compile(funcs.iter().map(|(n, f)| (n, f))).unwrap();
    let kernel = library.kernel("k").unwrap();
    let args: Vec<*mut u8> = buffers.iter_mut().map(|b| b.as_mut_ptr()).collect();
    let dims = [len];
    // SAFETY: the buffers hold `len` elements of each parameter's dtype.
    let code = unsafe { kernel(args.as_ptr(), dims.as_ptr(), std::ptr::null()) };
    assert_eq!(code, 0);
}

pub(crate) fn bytes_of<T: Copy>(values: &mut [T]) -> &mut [u8] {
    // SAFETY: plain-old-data numeric slices viewed as bytes.
    unsafe {
        std::slice::from_raw_parts_mut(values.as_mut_ptr().cast(), std::mem::size_of_val(values))
    }
}

pub(crate) fn run_f32(func: &PrimFunc, x: &[f32], y: &[f32]) -> Vec<f32> {
    let (mut x, mut y) = (x.to_vec(), y.to_vec());
    let mut out = vec![0f32; x.len()];
    let len = x.len() as i64;
    run(
        func,
        &mut [bytes_of(&mut x), bytes_of(&mut y), bytes_of(&mut out)],
        len,
    );
    out
}

pub(crate) const F32: [DType; 3] = [DType::F32; 3];
