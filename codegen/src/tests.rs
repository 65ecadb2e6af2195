use crate::JitLibrary;
use half::{bf16, f16};
use oxrelax_dsl::tir::{BinOp, Buffer, ForKind, Intrinsic, PrimExpr, PrimFunc, Stmt, TVar};
use oxrelax_dsl::{Attrs, DataType, SymVar};

fn n() -> SymVar {
    SymVar::bounded("n", 1 << 20)
}

fn index_var() -> PrimExpr {
    PrimExpr::Var(TVar::new("i", DataType::I64))
}

fn load(buffer: &str, dtype: DataType) -> PrimExpr {
    PrimExpr::Load {
        buffer: buffer.into(),
        dtype,
        indices: vec![index_var()],
    }
}

/// `out[i] = body(x[i], y[i])` for `i < n`, over buffers of the given dtypes.
fn elementwise(dtypes: [DataType; 3], body: impl Fn(PrimExpr, PrimExpr) -> PrimExpr) -> PrimFunc {
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
            var: TVar::new("i", DataType::I64),
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
fn run(func: &PrimFunc, buffers: &mut [&mut [u8]], len: i64) {
    let funcs = [("k".to_string(), func.clone())];
    let library = JitLibrary::compile(funcs.iter().map(|(n, f)| (n, f))).unwrap();
    let kernel = library.kernel("k").unwrap();
    let args: Vec<*mut u8> = buffers.iter_mut().map(|b| b.as_mut_ptr()).collect();
    let dims = [len];
    // SAFETY: the buffers hold `len` elements of each parameter's dtype.
    let code = unsafe { kernel(args.as_ptr(), dims.as_ptr(), std::ptr::null()) };
    assert_eq!(code, 0);
}

fn bytes_of<T: Copy>(values: &mut [T]) -> &mut [u8] {
    // SAFETY: plain-old-data numeric slices viewed as bytes.
    unsafe {
        std::slice::from_raw_parts_mut(values.as_mut_ptr().cast(), std::mem::size_of_val(values))
    }
}

fn run_f32(func: &PrimFunc, x: &[f32], y: &[f32]) -> Vec<f32> {
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

const F32: [DataType; 3] = [DataType::F32; 3];

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

/// Max abs or relative error of an intrinsic over `xs` against an f64 reference.
fn intrinsic_error(
    intrinsic: Intrinsic,
    xs: &[f32],
    reference: fn(f64) -> f64,
    relative: bool,
) -> f64 {
    let func = elementwise(F32, |x, _| PrimExpr::call(intrinsic, vec![x]));
    let out = run_f32(&func, xs, xs);
    xs.iter()
        .zip(out)
        .map(|(&x, got)| {
            let want = reference(f64::from(x));
            let err = (f64::from(got) - want).abs();
            if relative {
                err / want.abs().max(1e-30)
            } else {
                // Absolute error, but relative above magnitude 1 (f32 resolution).
                err / want.abs().max(1.0)
            }
        })
        .fold(0.0, f64::max)
}

fn grid(lo: f32, hi: f32, steps: usize) -> Vec<f32> {
    (0..=steps)
        .map(|i| lo + (hi - lo) * i as f32 / steps as f32)
        .collect()
}

/// erf in f64: Taylor series for |x| <= 3, the continued fraction of erfc beyond.
fn erf64(x: f64) -> f64 {
    if x.abs() > 3.0 {
        let a = x.abs();
        let fraction = (1..80)
            .rev()
            .fold(a, |acc, k| a + (f64::from(k) / 2.0) / acc);
        let erfc = (-a * a).exp() / (std::f64::consts::PI.sqrt() * fraction);
        return x.signum() * (1.0 - erfc);
    }
    let (mut term, mut sum, mut k) = (x, x, 0.0);
    while term.abs() > 1e-17 * sum.abs().max(1e-300) {
        k += 1.0;
        term *= -x * x / k;
        sum += term / (2.0 * k + 1.0);
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

#[test]
fn math_accuracy() {
    let wide = grid(-80.0, 80.0, 20_000);
    assert!(intrinsic_error(Intrinsic::Exp, &wide, f64::exp, true) < 1e-7);
    let positive: Vec<f32> = (0..20_000)
        .map(|i| 1e-30_f32 * 1.0045_f32.powi(i))
        .collect();
    assert!(intrinsic_error(Intrinsic::Log, &positive, f64::ln, false) < 1.5e-7);
    let log_near_one = grid(0.01, 100.0, 20_000);
    assert!(intrinsic_error(Intrinsic::Log, &log_near_one, f64::ln, false) < 1.5e-7);
    let moderate = grid(-12.0, 12.0, 20_000);
    assert!(intrinsic_error(Intrinsic::Tanh, &moderate, f64::tanh, false) < 2e-7);
    let sigmoid = |x: f64| 1.0 / (1.0 + (-x).exp());
    assert!(intrinsic_error(Intrinsic::Sigmoid, &moderate, sigmoid, false) < 2e-7);
    assert!(intrinsic_error(Intrinsic::Erf, &grid(-7.0, 7.0, 20_000), erf64, false) < 7e-7);
    let angles = grid(-4096.0, 4096.0, 40_000);
    assert!(intrinsic_error(Intrinsic::Sin, &angles, f64::sin, false) < 1.5e-7);
    assert!(intrinsic_error(Intrinsic::Cos, &angles, f64::cos, false) < 1.5e-7);
    assert!(intrinsic_error(Intrinsic::Sqrt, &log_near_one, f64::sqrt, true) < 1e-7);
}

#[test]
fn math_special_values() {
    let func = elementwise(F32, |x, _| PrimExpr::call(Intrinsic::Exp, vec![x]));
    let out = run_f32(&func, &[f32::NEG_INFINITY, -100.0, 0.0, 100.0], &[0.0; 4]);
    assert_eq!(out, [0.0, 0.0, 1.0, f32::INFINITY]);
    let func = elementwise(F32, |x, _| PrimExpr::call(Intrinsic::Log, vec![x]));
    let out = run_f32(&func, &[0.0, -1.0, f32::INFINITY, 1.0], &[0.0; 4]);
    assert_eq!(out[0], f32::NEG_INFINITY);
    assert!(out[1].is_nan());
    assert_eq!(out[2..], [f32::INFINITY, 0.0]);
    let func = elementwise(F32, |x, y| PrimExpr::call(Intrinsic::Pow, vec![x, y]));
    let out = run_f32(&func, &[2.0, 10.0, 0.0], &[10.0, -2.0, 3.0]);
    assert!((out[0] - 1024.0).abs() < 1e-3 && (out[1] - 0.01).abs() < 1e-8 && out[2] == 0.0);
}

#[test]
fn half_precision_conversions_are_exact() {
    for (dtype, decode, encode) in [
        (
            DataType::F16,
            (|b| f16::from_bits(b).to_f32()) as fn(u16) -> f32,
            (|x| f16::from_f32(x).to_bits()) as fn(f32) -> u16,
        ),
        (
            DataType::BF16,
            |b| bf16::from_bits(b).to_f32(),
            |x| bf16::from_f32(x).to_bits(),
        ),
    ] {
        // Load every 16-bit pattern, widen to f32.
        let func = elementwise([dtype, dtype, DataType::F32], |x, _| x);
        let mut bits: Vec<u16> = (0..=u16::MAX).collect();
        let mut out = vec![0f32; bits.len()];
        let mut unused = bits.clone();
        run(
            &func,
            &mut [
                bytes_of(&mut bits),
                bytes_of(&mut unused),
                bytes_of(&mut out),
            ],
            65536,
        );
        for (b, got) in bits.iter().zip(&out) {
            let want = decode(*b);
            assert!(
                want.to_bits() == got.to_bits() || (want.is_nan() && got.is_nan()),
                "{dtype} {b:#x}"
            );
        }
        // Narrow f32 values (incl. ties, subnormals, overflow) to 16 bits.
        let func = elementwise([DataType::F32, DataType::F32, dtype], |x, _| x);
        let mut values: Vec<f32> = (0..200_000u32)
            .map(|i| f32::from_bits(i.wrapping_mul(2_654_435_761)))
            .chain([
                65504.0,
                65520.0,
                1e-8,
                5.96e-8,
                2.98e-8,
                1.0 + 1.0 / 2048.0,
                f32::INFINITY,
            ])
            .collect();
        let mut unused = values.clone();
        let mut out = vec![0u16; values.len()];
        let len = values.len() as i64;
        run(
            &func,
            &mut [
                bytes_of(&mut values),
                bytes_of(&mut unused),
                bytes_of(&mut out),
            ],
            len,
        );
        for (x, got) in values.iter().zip(&out) {
            let want = encode(*x);
            let both_nan = decode(want).is_nan() && decode(*got).is_nan();
            assert!(
                want == *got || both_nan,
                "{dtype} {x:e}: want {want:#x} got {got:#x}"
            );
        }
    }
}

#[test]
fn integer_floor_division_and_casts() {
    let i64s = [DataType::I64; 3];
    let xs: Vec<i64> = vec![7, -7, 7, -7, 0, 5];
    let ys: Vec<i64> = vec![2, 2, -2, -2, 3, 0];
    for (op, expected) in [
        (BinOp::FloorDiv, [3i64, -4, -4, 3, 0, 5]),
        (BinOp::FloorMod, [1, 1, -1, -1, 0, 0]),
    ] {
        let func = elementwise(i64s, |x, y| x.binary(op, y));
        let (mut x, mut y, mut out) = (xs.clone(), ys.clone(), vec![0i64; 6]);
        run(
            &func,
            &mut [bytes_of(&mut x), bytes_of(&mut y), bytes_of(&mut out)],
            6,
        );
        assert_eq!(out, expected, "{op:?}");
    }
    // f32 -> i8 wraps after truncation toward zero; i32 ids widen to f32.
    let func = elementwise([DataType::F32, DataType::F32, DataType::I8], |x, _| {
        x.cast(DataType::I8)
    });
    let (mut x, mut y, mut out) = (vec![1.9f32, -1.9, 300.0], vec![0f32; 3], vec![0i8; 3]);
    run(
        &func,
        &mut [bytes_of(&mut x), bytes_of(&mut y), bytes_of(&mut out)],
        3,
    );
    assert_eq!(out, [1, -1, 44]);
}

#[test]
fn packed_u4_round_trip() {
    // out(u4)[i] = x(u8)[i] + 1, then read back through a u4 -> u8 kernel.
    let pack = elementwise([DataType::U8, DataType::U8, DataType::U4], |x, _| {
        x + PrimExpr::Int(1, DataType::U8)
    });
    let (mut x, mut y, mut packed) = ((0u8..15).collect::<Vec<_>>(), vec![0u8; 15], vec![0u8; 8]);
    run(
        &pack,
        &mut [bytes_of(&mut x), bytes_of(&mut y), bytes_of(&mut packed)],
        15,
    );
    assert_eq!(packed[0], 0x21);
    assert_eq!(packed[7], 0x0F);
    let unpack = elementwise([DataType::U4, DataType::U4, DataType::U8], |x, _| x);
    let mut out = vec![0u8; 15];
    let mut unused = packed.clone();
    run(
        &unpack,
        &mut [
            bytes_of(&mut packed),
            bytes_of(&mut unused),
            bytes_of(&mut out),
        ],
        15,
    );
    assert_eq!(out, (1u8..16).collect::<Vec<_>>());
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
        ("index", |x, _| x + index_var().cast(DataType::F32)),
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
    for dtype in [DataType::F16, DataType::BF16] {
        let func = vectorized(elementwise([dtype, dtype, dtype], |x, y| x * y));
        let values: Vec<f32> = (0..19).map(|i| i as f32 * 0.75 - 4.0).collect();
        let to_bits = |v: &f32| match dtype {
            DataType::F16 => f16::from_f32(*v).to_bits(),
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
    let i = PrimExpr::Var(TVar::new("i", DataType::I64));
    let j = PrimExpr::Var(TVar::new("j", DataType::I64));
    let out_indices = vec![i.clone()];
    let accumulate = Stmt::Store {
        buffer: "out".into(),
        indices: out_indices.clone(),
        value: PrimExpr::Load {
            buffer: "out".into(),
            dtype: DataType::F32,
            indices: out_indices.clone(),
        } + PrimExpr::Load {
            buffer: "x".into(),
            dtype: DataType::F32,
            indices: vec![i.clone(), j],
        },
    };
    let func = PrimFunc {
        params: vec![
            Buffer::new("x", DataType::F32, vec![rows.expr(), cols.expr()]),
            Buffer::new("out", DataType::F32, vec![rows.expr()]),
        ],
        num_outputs: 1,
        dims: vec![cols.clone(), rows.clone()],
        body: Stmt::For {
            var: TVar::new("i", DataType::I64),
            extent: PrimExpr::from(&rows.expr()),
            kind: ForKind::Serial,
            body: Box::new(Stmt::Seq(vec![
                Stmt::Store {
                    buffer: "out".into(),
                    indices: out_indices,
                    value: PrimExpr::f32(0.0),
                },
                Stmt::For {
                    var: TVar::new("j", DataType::I64),
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
    // SAFETY: x is [r, c] f32 and out is [r] f32, matching the dims (c, r).
    assert_eq!(
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
        StructInfo::tensor(vec![n.expr(), 8.into()], DataType::F32),
    ));
    let w = Expr::Var(Var::new(
        "w",
        StructInfo::tensor(vec![8.into()], DataType::F32),
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
    let i = PrimExpr::Var(TVar::new("i", DataType::I64));
    let j = PrimExpr::Var(TVar::new("j", DataType::I64));
    let at = |buffer: &str| PrimExpr::Load {
        buffer: buffer.into(),
        dtype: DataType::F32,
        indices: vec![i.clone(), j.clone()],
    };
    let shape = vec![rows.expr(), 5.into()];
    PrimFunc {
        params: vec![
            Buffer::new("x", DataType::F32, shape.clone()),
            Buffer::new("out", DataType::F32, shape),
        ],
        num_outputs: 1,
        dims: vec![rows.clone()],
        body: Stmt::For {
            var: TVar::new("i", DataType::I64),
            extent: PrimExpr::from(&rows.expr()),
            kind: ForKind::Parallel,
            body: Box::new(Stmt::For {
                var: TVar::new("j", DataType::I64),
                extent: PrimExpr::index(5),
                kind: ForKind::Vectorized,
                body: Box::new(Stmt::Store {
                    buffer: "out".into(),
                    indices: vec![i.clone(), j.clone()],
                    value: at("x") * PrimExpr::f32(2.0) + i.clone().cast(DataType::F32),
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
