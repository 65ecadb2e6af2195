//! Loop kinds: serial, vectorized, parallel, unrolled; register promotion; the JIT cache.

use super::*;
use half::{bf16, f16};
use oxrelax_dsl::tir::{BinOp, Buffer, ForKind, Intrinsic, PrimExpr, PrimFunc, Stmt, TVar};
use oxrelax_dsl::{Attrs, DType, SymVar};

#[test]
fn symbolic_loop_adds_any_length() {
    let func = elementwise(F32, |x, y| x + y);
    for len in [0usize, 1, 3, 17, 129] {
        let x: Vec<f32> = (0..len).map(|i| i as f32).collect();
        let y: Vec<f32> = (0..len).map(|i| 0.5 * i as f32).collect();
        let expected: Vec<f32> = (0..len).map(|i| 1.5 * i as f32).collect();
        assert_eq!(run_f32(&func, &x, &y), expected);
    }
}

/// The same elementwise function with its loop vectorized.
fn vectorized(func: PrimFunc) -> PrimFunc {
    let Stmt::For {
        var, extent, body, ..
    } = func.body
    else {
        unreachable!("elementwise builds one loop")
    };
    PrimFunc {
        body: Stmt::For {
            var,
            extent,
            kind: ForKind::Vectorized,
            body,
        },
        ..func
    }
}

#[test]
fn vectorized_loops_match_scalar_for_any_length() {
    type Body = fn(PrimExpr, PrimExpr) -> PrimExpr;
    let bodies: Vec<(&str, Body)> = vec![
        ("fma", |x, y| {
            PrimExpr::call(Intrinsic::Fma, vec![x.clone(), y, x])
        }),
        ("silu", |x, _| {
            x.clone() * PrimExpr::call(Intrinsic::Sigmoid, vec![x])
        }),
        ("select", |x, y| {
            let positive = x
                .clone()
                .compare(oxrelax_dsl::tir::PrimCmp::Gt, PrimExpr::f32(0.0));
            PrimExpr::select(positive, x, y)
        }),
        ("index", |x, _| x + index_var().cast(DType::F32)),
        ("max", |x, y| x.binary(BinOp::Max, y)),
    ];
    for (name, body) in bodies {
        let scalar = elementwise(F32, body);
        let vector = vectorized(scalar.clone());
        let clif = crate::clif_text(name, &vector).unwrap();
        assert!(
            clif.contains("load.f32x4") && clif.contains("store"),
            "{name}:\n{clif}"
        );
        for len in [0usize, 1, 3, 4, 17, 64, 129] {
            let x: Vec<f32> = (0..len).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
            let y: Vec<f32> = (0..len).map(|i| (i as f32 * 0.11).cos()).collect();
            assert_eq!(
                run_f32(&vector, &x, &y),
                run_f32(&scalar, &x, &y),
                "{name} len {len}"
            );
        }
    }
}

#[test]
fn vectorized_half_loads_and_stores() {
    for dtype in [DType::F16, DType::BF16] {
        let func = vectorized(elementwise([dtype, dtype, dtype], |x, y| x * y));
        let values: Vec<f32> = (0..19).map(|i| i as f32 * 0.75 - 4.0).collect();
        let to_bits = |v: &f32| match dtype {
            DType::F16 => f16::from_f32(*v).to_bits(),
            _ => bf16::from_f32(*v).to_bits(),
        };
        let mut x: Vec<u16> = values.iter().map(to_bits).collect();
        let mut y = x.clone();
        let mut out = vec![0u16; x.len()];
        run(
            &func,
            &mut [bytes_of(&mut x), bytes_of(&mut y), bytes_of(&mut out)],
            19,
        );
        let expected: Vec<u16> = values.iter().map(|v| to_bits(&(v * v))).collect();
        assert_eq!(out, expected, "{dtype}");
    }
}

/// `out[i] = sum_j x[i, j]` with the reduction loop marked vectorized: every lane would
/// write `out[i]`, so codegen must run it serially and still be right.
#[test]
fn vectorized_reduction_falls_back_to_serial() {
    let (rows, cols) = (SymVar::bounded("r", 64), SymVar::bounded("c", 64));
    let i = PrimExpr::Var(TVar::new("i", DType::I64));
    let j = PrimExpr::Var(TVar::new("j", DType::I64));
    let out_indices = vec![i.clone()];
    let accumulate = Stmt::Store {
        buffer: "out".into(),
        indices: out_indices.clone(),
        value: PrimExpr::Load {
            buffer: "out".into(),
            dtype: DType::F32,
            indices: out_indices.clone(),
        } + PrimExpr::Load {
            buffer: "x".into(),
            dtype: DType::F32,
            indices: vec![i.clone(), j],
        },
    };
    let func = PrimFunc {
        params: vec![
            Buffer::new("x", DType::F32, vec![rows.expr(), cols.expr()]),
            Buffer::new("out", DType::F32, vec![rows.expr()]),
        ],
        num_outputs: 1,
        dims: vec![cols.clone(), rows.clone()],
        body: Stmt::For {
            var: TVar::new("i", DType::I64),
            extent: PrimExpr::from(&rows.expr()),
            kind: ForKind::Serial,
            body: Box::new(Stmt::Seq(vec![
                Stmt::Store {
                    buffer: "out".into(),
                    indices: out_indices,
                    value: PrimExpr::f32(0.0),
                },
                Stmt::For {
                    var: TVar::new("j", DType::I64),
                    extent: PrimExpr::from(&cols.expr()),
                    kind: ForKind::Vectorized,
                    body: Box::new(accumulate),
                },
            ])),
        },
        attrs: Attrs::new(),
    };
    assert!(!crate::clif_text("sum", &func).unwrap().contains("f32x4"));
    let funcs = [("sum".to_string(), func)];
    let library = JitLibrary::compile(funcs.iter().map(|(n, f)| (n, f))).unwrap();
    let kernel = library.kernel("sum").unwrap();
    let (r, c) = (5usize, 7usize);
    let mut x: Vec<f32> = (0..r * c).map(|v| v as f32).collect();
    let mut out = vec![0f32; r];
    let args = [
        bytes_of(&mut x).as_mut_ptr(),
        bytes_of(&mut out).as_mut_ptr(),
    ];
    let dims = [c as i64, r as i64];
    assert_eq!(
        // SAFETY: x is [r, c] f32 and out is [r] f32, matching the dims (c, r).
        unsafe { kernel(args.as_ptr(), dims.as_ptr(), std::ptr::null()) },
        0
    );
    let expected: Vec<f32> = (0..r)
        .map(|i| (0..c).map(|j| (i * c + j) as f32).sum())
        .collect();
    assert_eq!(out, expected);
}

/// rms_norm's legalized kernel accumulates in a one-element local (`acc0`): it lives in a
/// register, so the only stack slot left is the `[1, n]` mean buffer.
#[test]
fn small_constant_local_buffers_live_in_registers() {
    use oxrelax_dsl::{op, Expr, StructInfo, Var};
    let n = SymVar::bounded("n", 64);
    let x = Expr::Var(Var::new(
        "x",
        StructInfo::tensor(vec![n.expr(), 8.into()], DType::F32),
    ));
    let w = Expr::Var(Var::new(
        "w",
        StructInfo::tensor(vec![8.into()], DType::F32),
    ));
    let Expr::Call(call) = op::rms_norm(&x, &w, vec![-1], 1e-5).unwrap() else {
        unreachable!("op constructors build calls")
    };
    let func = oxrelax_dsl::legalize::legalize_call(&call).unwrap().func;
    let clif = crate::clif_text("rms_norm", &func).unwrap();
    assert_eq!(clif.matches("explicit_slot").count(), 1, "{clif}");
    let (rows, cols) = (3usize, 8usize);
    let mut xs: Vec<f32> = (0..rows * cols).map(|i| i as f32 * 0.25 - 2.0).collect();
    let mut ws: Vec<f32> = (0..cols).map(|i| 1.0 + i as f32 * 0.1).collect();
    let mut out = vec![0f32; rows * cols];
    let expected: Vec<f32> = (0..rows * cols)
        .map(|k| {
            let row = &xs[k / cols * cols..][..cols];
            let mean = row.iter().map(|v| v * v).sum::<f32>() / cols as f32;
            xs[k] / (mean + 1e-5).sqrt() * ws[k % cols]
        })
        .collect();
    run(
        &func,
        &mut [bytes_of(&mut xs), bytes_of(&mut ws), bytes_of(&mut out)],
        rows as i64,
    );
    for (got, want) in out.iter().zip(&expected) {
        assert!(
            (got - want).abs() <= 1e-5 * want.abs().max(1.0),
            "{got} vs {want}"
        );
    }
}

/// `out[i, j] = x[i, j] * 2 + i` over `[n, 5]` with the row loop parallel.
fn parallel_rows() -> PrimFunc {
    let rows = n();
    let i = PrimExpr::Var(TVar::new("i", DType::I64));
    let j = PrimExpr::Var(TVar::new("j", DType::I64));
    let at = |buffer: &str| PrimExpr::Load {
        buffer: buffer.into(),
        dtype: DType::F32,
        indices: vec![i.clone(), j.clone()],
    };
    let shape = vec![rows.expr(), 5.into()];
    PrimFunc {
        params: vec![
            Buffer::new("x", DType::F32, shape.clone()),
            Buffer::new("out", DType::F32, shape),
        ],
        num_outputs: 1,
        dims: vec![rows.clone()],
        body: Stmt::For {
            var: TVar::new("i", DType::I64),
            extent: PrimExpr::from(&rows.expr()),
            kind: ForKind::Parallel,
            body: Box::new(Stmt::For {
                var: TVar::new("j", DType::I64),
                extent: PrimExpr::index(5),
                kind: ForKind::Vectorized,
                body: Box::new(Stmt::Store {
                    buffer: "out".into(),
                    indices: vec![i.clone(), j.clone()],
                    value: at("x") * PrimExpr::f32(2.0) + i.clone().cast(DType::F32),
                }),
            }),
        },
        attrs: Attrs::new(),
    }
}

#[test]
fn parallel_loops_run_on_the_pool_and_inline() {
    use oxrelax_runtime::abi::RuntimeEnv;
    use oxrelax_runtime::pool::ThreadPool;
    let func = parallel_rows();
    let clif = crate::clif_text("rows", &func).unwrap();
    assert!(clif.contains("call_indirect"), "{clif}");
    let funcs = [("rows".to_string(), func)];
    let library = JitLibrary::compile(funcs.iter().map(|(n, f)| (n, f))).unwrap();
    let kernel = library.kernel("rows").unwrap();
    let env = RuntimeEnv::new(std::sync::Arc::new(ThreadPool::new(2).unwrap()));
    for env_ptr in [std::ptr::null(), env.as_ptr()] {
        for rows in [0usize, 1, 3, 17, 129] {
            let mut x: Vec<f32> = (0..rows * 5).map(|v| v as f32).collect();
            let mut out = vec![f32::NAN; rows * 5];
            let args = [
                bytes_of(&mut x).as_mut_ptr(),
                bytes_of(&mut out).as_mut_ptr(),
            ];
            let dims = [rows as i64];
            // SAFETY: x and out are [rows, 5] f32; env is null or a live runtime env.
            let status = unsafe { kernel(args.as_ptr(), dims.as_ptr(), env_ptr) };
            assert_eq!(status, 0);
            let expected: Vec<f32> = (0..rows * 5)
                .map(|v| v as f32 * 2.0 + (v / 5) as f32)
                .collect();
            assert_eq!(out, expected, "{rows} rows");
        }
    }
}

/// The output buffer a [`task_by_task`] launch watches, and how many of its values each
/// task had filled in when it returned.
static WATCHED: std::sync::Mutex<(usize, usize, Vec<usize>)> =
    std::sync::Mutex::new((0, 0, Vec::new()));

/// A `parallel_for` that runs the tasks one by one, in order, and after each counts the
/// values of the watched output (address, length) that are no longer NaN.
extern "C" fn task_by_task(
    body: oxrelax_abi::ParallelBody,
    closure: *const u8,
    n_tasks: i64,
    env: *const oxrelax_abi::RtEnv,
) -> i32 {
    let mut watched = WATCHED.lock().unwrap();
    for task in 0..n_tasks {
        let status = body(closure, task, env);
        if status != 0 {
            return status;
        }
        let (at, len) = (watched.0 as *const f32, watched.1);
        // SAFETY: the test lends the watched output for the kernel call.
        let out = unsafe { std::slice::from_raw_parts(at, len) };
        let filled = out.iter().filter(|v| !v.is_nan()).count();
        watched.2.push(filled);
    }
    0
}

#[test]
fn parallel_tasks_split_the_iterations_evenly_longer_ones_first() {
    use oxrelax_runtime::abi::{RtEnv, RuntimeEnv};
    use oxrelax_runtime::pool::ThreadPool;
    let funcs = [("rows".to_string(), parallel_rows())];
    let library = JitLibrary::compile(funcs.iter().map(|(n, f)| (n, f))).unwrap();
    let kernel = library.kernel("rows").unwrap();
    let pool_env = RuntimeEnv::new(std::sync::Arc::new(ThreadPool::new(2).unwrap()));
    // SAFETY: every field of the env is a plain pointer or number, and the copy lives
    // no longer than `pool_env`.
    let mut env: RtEnv = unsafe { std::ptr::read(pool_env.as_ptr()) };
    env.parallel_for = task_by_task;
    // 2 threads: at most 8 tasks; 22 rows are 6 tasks of 3 and 2 of 2 (with chunks of
    // `ceil(22 / 8)` they were 7 of 3 and 1 of 1, and one thread ran 2 rows more).
    for (rows, sizes) in [
        (22usize, vec![3, 3, 3, 3, 3, 3, 2, 2]),
        (5, vec![1; 5]),
        (8, vec![1; 8]),
        (17, vec![3, 2, 2, 2, 2, 2, 2, 2]),
    ] {
        let mut x = vec![0f32; rows * 5];
        let mut out = vec![f32::NAN; rows * 5];
        *WATCHED.lock().unwrap() = (out.as_ptr() as usize, out.len(), Vec::new());
        let args = [
            bytes_of(&mut x).as_mut_ptr(),
            bytes_of(&mut out).as_mut_ptr(),
        ];
        let dims = [rows as i64];
        // SAFETY: x and out are [rows, 5] f32; env is a copy of a live runtime env.
        assert_eq!(unsafe { kernel(args.as_ptr(), dims.as_ptr(), &env) }, 0);
        let filled = std::mem::take(&mut WATCHED.lock().unwrap().2);
        let got: Vec<usize> = filled
            .iter()
            .scan(0, |before, &now| {
                let rows_done = (now - *before) / 5;
                *before = now;
                Some(rows_done)
            })
            .collect();
        assert_eq!(got, sizes, "{rows} rows");
    }
}

#[test]
fn identical_functions_compile_once_per_process() {
    let func = elementwise(F32, |x, y| x * y);
    let funcs = std::collections::BTreeMap::from([("mul".to_string(), func.clone())]);
    let first = JitLibrary::compile_cached(&funcs).unwrap();
    let again = JitLibrary::compile_cached(&funcs).unwrap();
    assert!(std::sync::Arc::ptr_eq(&first, &again));
    let other =
        std::collections::BTreeMap::from([("mul".to_string(), elementwise(F32, |x, y| x + y))]);
    assert!(!std::sync::Arc::ptr_eq(
        &first,
        &JitLibrary::compile_cached(&other).unwrap()
    ));
}

#[test]
fn unrolled_loops_repeat_the_body_and_stay_correct() {
    let unrolled = |extent: PrimExpr| {
        let Stmt::For { var, body, .. } = elementwise(F32, |x, y| x - y).body else {
            unreachable!("elementwise builds one loop")
        };
        PrimFunc {
            body: Stmt::For {
                var,
                extent,
                kind: ForKind::Unrolled,
                body,
            },
            ..elementwise(F32, |x, y| x - y)
        }
    };
    let constant = unrolled(PrimExpr::index(5));
    let clif = crate::clif_text("unrolled", &constant).unwrap();
    assert_eq!(clif.matches("fsub").count(), 5, "{clif}");
    let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let y = [0.5f32; 6];
    assert_eq!(run_f32(&constant, &x, &y)[..5], [0.5, 1.5, 2.5, 3.5, 4.5]);
    // A symbolic trip count cannot be unrolled: it runs as a serial loop.
    let symbolic = unrolled(PrimExpr::from(&n().expr()));
    assert_eq!(run_f32(&symbolic, &x, &y), [0.5, 1.5, 2.5, 3.5, 4.5, 5.5]);
}
