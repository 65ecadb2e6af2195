//! Kernel test harness: legalize an op call with symbolic shapes, apply the default
//! schedule, JIT it, bind `n`, run it on host buffers and read the outputs back as f32.
//!
//! References are written in the test files with ndarray in f64, on the very values the
//! kernel reads (inputs are generated already rounded to their storage dtype).

// Each test binary compiles this module and uses a different subset of it.
#![allow(dead_code)]

pub mod erf;

use half::{bf16, f16};
use ndarray::{ArrayD, Dimension, IxDyn};
use oxrelax_codegen::{clif_text, JitLibrary};
use oxrelax_dsl::ir::{Expr, Var};
use oxrelax_dsl::legalize::legalize_call;
use oxrelax_dsl::sym::SymBindings;
use oxrelax_dsl::tir::PrimFunc;
use oxrelax_dsl::{DType, StructInfo, SymExpr, SymVar, Target};
use oxrelax_runtime::microkernel::MicrokernelSet;
use oxrelax_runtime::{RuntimeEnv, ThreadPool};
use oxrelax_schedules::{default_schedule, rules_for, schedule_for, ScheduleConfig};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;

/// The upper bound of the symbolic dim `n`.
pub const N_MAX: i64 = 256;

/// The values `n` is bound to in the tests.
pub const NS: [i64; 4] = [1, 3, 17, 129];

/// The float storage dtypes a kernel is tested with.
pub const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// The symbolic dim `n` (`n <= N_MAX`).
pub fn n() -> SymExpr {
    SymVar::bounded("n", N_MAX).expr()
}

/// A constant dim.
pub fn c(value: i64) -> SymExpr {
    SymExpr::int(value)
}

/// A tensor variable `name: Tensor(shape, dtype)`.
pub fn var(name: &str, shape: Vec<SymExpr>, dtype: DType) -> Expr {
    Expr::Var(Var::new(name, StructInfo::tensor(shape, dtype)))
}

/// `shape` with `n` bound to `n`.
pub fn dims(shape: &[SymExpr], n: i64) -> Vec<usize> {
    let bindings: SymBindings = [("n".to_string(), n)].into_iter().collect();
    shape
        .iter()
        .map(|d| usize::try_from(d.eval(&bindings).unwrap()).unwrap())
        .collect()
}

/// The numpy broadcast of two shapes.
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Vec<usize> {
    let rank = a.len().max(b.len());
    let dim = |s: &[usize], i: usize| (i + s.len()).checked_sub(rank).map_or(1, |j| s[j]);
    (0..rank)
        .map(|i| match (dim(a, i), dim(b, i)) {
            (1, d) | (d, 1) => d,
            (x, y) if x == y => x,
            (x, y) => panic!("{x} and {y} do not broadcast"),
        })
        .collect()
}

/// A seeded RNG (every test is deterministic).
pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// `value` as the `dtype` storage holds it (floats rounded to nearest even, integers
/// truncated toward zero, bools as 0/1), widened back to f32.
pub fn round_to(dtype: DType, value: f32) -> f32 {
    match dtype {
        DType::F32 => value,
        DType::F16 => f16::from_f32(value).to_f32(),
        DType::BF16 => bf16::from_f32(value).to_f32(),
        DType::Bool => f32::from(u8::from(value != 0.0)),
        _ => value.trunc(),
    }
}

/// Uniform random values in `[lo, hi)` of `shape`, representable in `dtype` (integer
/// dtypes get integers in `[lo, hi)`).
pub fn random(rng: &mut StdRng, shape: &[usize], dtype: DType, lo: f32, hi: f32) -> ArrayD<f32> {
    ArrayD::from_shape_simple_fn(IxDyn(shape), || {
        let value = rng.gen_range(lo..hi);
        if dtype.is_float() {
            round_to(dtype, value)
        } else {
            round_to(dtype, value.floor())
        }
    })
}

/// `array` widened to f64 for a reference computation.
pub fn f64s(array: &ArrayD<f32>) -> ArrayD<f64> {
    array.mapv(f64::from)
}

/// `array` as the `dtype` storage would hold it (what a kernel writing `dtype` yields).
pub fn rounded(dtype: DType, array: &ArrayD<f64>) -> ArrayD<f64> {
    array.mapv(|v| f64::from(round_to(dtype, v as f32)))
}

/// A legalized, scheduled and compiled op call.
pub struct Kernel {
    name: String,
    /// The scheduled primitive function.
    pub func: PrimFunc,
    library: JitLibrary,
    /// The runtime services it runs with (none: a null env).
    env: Option<RuntimeEnv>,
}

/// Legalizes the op call `call`, applies the default schedule and JIT-compiles it.
pub fn compile(call: &Expr) -> Kernel {
    let Expr::Call(call) = call else {
        panic!("not a call: {call:?}")
    };
    let legalized = legalize_call(call).unwrap();
    let func = default_schedule(&legalized.func, &ScheduleConfig::default());
    let name = legalized.name_hint;
    let library = JitLibrary::compile(std::iter::once((&name, &func))).unwrap();
    Kernel {
        name,
        func,
        library,
        env: None,
    }
}

/// Legalizes the op call `call`, schedules it with `target`'s rules and JIT-compiles it;
/// it runs with a two-thread pool and the microkernels of `target`'s features.
pub fn compile_for(call: &Expr, target: &Target) -> Kernel {
    let Expr::Call(call) = call else {
        panic!("not a call: {call:?}")
    };
    let legalized = legalize_call(call).unwrap();
    let func = schedule_for(&legalized.func, &rules_for(target));
    let name = legalized.name_hint;
    let library = JitLibrary::compile(std::iter::once((&name, &func))).unwrap();
    let features: Vec<&str> = target.features.iter().map(String::as_str).collect();
    let pool = Arc::new(ThreadPool::new(2).unwrap());
    let env = RuntimeEnv::with_microkernels(pool, MicrokernelSet::for_features(&features));
    Kernel {
        name,
        func,
        library,
        env: Some(env),
    }
}

/// A host buffer of one kernel parameter: its dims and its bytes, 8-byte aligned.
struct HostBuffer {
    dtype: DType,
    shape: Vec<usize>,
    words: Vec<u64>,
}

impl HostBuffer {
    fn from_bytes(dtype: DType, shape: Vec<usize>, bytes: &[u8]) -> Self {
        let mut words = vec![0u64; bytes.len().div_ceil(8).max(1)];
        for (word, chunk) in words.iter_mut().zip(bytes.chunks(8)) {
            let mut padded = [0u8; 8];
            padded[..chunk.len()].copy_from_slice(chunk);
            *word = u64::from_ne_bytes(padded);
        }
        HostBuffer {
            dtype,
            shape,
            words,
        }
    }

    /// `values` encoded as `dtype` storage.
    fn encode(dtype: DType, values: &ArrayD<f32>) -> Self {
        if dtype == DType::U4 {
            let nibbles: Vec<u8> = values.iter().map(|&v| v as u8 & 0xF).collect();
            let bytes: Vec<u8> = nibbles
                .chunks(2)
                .map(|pair| pair[0] | pair.get(1).map_or(0, |high| high << 4))
                .collect();
            return Self::from_bytes(dtype, values.shape().to_vec(), &bytes);
        }
        let bytes: Vec<u8> = values
            .iter()
            .flat_map(|&v| -> Vec<u8> {
                match dtype {
                    DType::F32 => v.to_ne_bytes().to_vec(),
                    DType::F16 => f16::from_f32(v).to_ne_bytes().to_vec(),
                    DType::BF16 => bf16::from_f32(v).to_ne_bytes().to_vec(),
                    DType::I64 => (v as i64).to_ne_bytes().to_vec(),
                    DType::I32 => (v as i32).to_ne_bytes().to_vec(),
                    DType::I8 => (v as i8).to_ne_bytes().to_vec(),
                    DType::U8 => (v as u8).to_ne_bytes().to_vec(),
                    DType::Bool => vec![u8::from(v != 0.0)],
                    DType::U4 => unreachable!("packed above"),
                }
            })
            .collect();
        Self::from_bytes(dtype, values.shape().to_vec(), &bytes)
    }

    /// An output buffer filled with 0xFF bytes (NaN for floats), so that an element the
    /// kernel does not write fails the comparison.
    fn poisoned(dtype: DType, shape: Vec<usize>) -> Self {
        let bits = shape.iter().product::<usize>() * dtype.bits() as usize;
        Self::from_bytes(dtype, shape, &vec![0xFF; bits.div_ceil(8)])
    }

    fn decode(&self) -> ArrayD<f32> {
        let bytes: Vec<u8> = self.words.iter().flat_map(|w| w.to_ne_bytes()).collect();
        if self.dtype == DType::U4 {
            let values = (0..self.shape.iter().product::<usize>())
                .map(|i| f32::from((bytes[i / 2] >> (4 * (i % 2))) & 0xF))
                .collect();
            return ArrayD::from_shape_vec(IxDyn(&self.shape), values).unwrap();
        }
        let width = self.dtype.bits() as usize / 8;
        let len = self.shape.iter().product::<usize>();
        let values = bytes
            .chunks(width)
            .take(len)
            .map(|b| match self.dtype {
                DType::F32 => f32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
                DType::F16 => f16::from_ne_bytes([b[0], b[1]]).to_f32(),
                DType::BF16 => bf16::from_ne_bytes([b[0], b[1]]).to_f32(),
                DType::I64 => i64::from_ne_bytes(b.try_into().unwrap()) as f32,
                DType::I32 => i32::from_ne_bytes(b.try_into().unwrap()) as f32,
                DType::I8 => f32::from(b[0] as i8),
                DType::U8 | DType::Bool => f32::from(b[0]),
                DType::U4 => unreachable!("unpacked above"),
            })
            .collect();
        ArrayD::from_shape_vec(IxDyn(&self.shape), values).unwrap()
    }
}

impl Kernel {
    /// The Cranelift IR codegen builds for the scheduled function.
    pub fn clif(&self) -> String {
        clif_text(&self.name, &self.func).unwrap()
    }

    /// Runs the kernel with `n` bound to `n` on `inputs` (the function's inputs in
    /// order, values converted to each parameter's storage dtype) and returns every
    /// output converted to f32.
    pub fn run(&self, n: i64, inputs: &[&ArrayD<f32>]) -> Vec<ArrayD<f32>> {
        let dims_abi: Vec<i64> = self
            .func
            .dims
            .iter()
            .map(|d| {
                assert_eq!(d.name(), "n", "{}: the harness binds only `n`", self.name);
                n
            })
            .collect();
        let params = self.func.inputs();
        assert_eq!(params.len(), inputs.len(), "{}: input count", self.name);
        let mut buffers: Vec<HostBuffer> = params
            .iter()
            .zip(inputs)
            .map(|(param, values)| {
                let shape = dims(&param.shape, n);
                assert_eq!(
                    values.shape(),
                    shape,
                    "{}: input `{}`",
                    self.name,
                    param.name
                );
                HostBuffer::encode(param.dtype, values)
            })
            .collect();
        for param in self.func.outputs() {
            buffers.push(HostBuffer::poisoned(param.dtype, dims(&param.shape, n)));
        }
        let args: Vec<*mut u8> = buffers
            .iter_mut()
            .map(|b| b.words.as_mut_ptr().cast())
            .collect();
        let kernel = self.library.kernel(&self.name).unwrap();
        let env = self
            .env
            .as_ref()
            .map_or(std::ptr::null(), RuntimeEnv::as_ptr);
        // SAFETY: `kernel` was compiled from `self.func`; `args` holds one pointer per
        // parameter, in order, to an 8-byte aligned buffer holding the parameter's shape
        // (evaluated with `n`) in its storage dtype; `dims_abi` holds one value per
        // `func.dims` entry; `env` is null or a live runtime env.
        let code = unsafe { kernel(args.as_ptr(), dims_abi.as_ptr(), env) };
        assert_eq!(code, 0, "{}: kernel returned an error", self.name);
        let num_inputs = inputs.len();
        buffers[num_inputs..]
            .iter()
            .map(HostBuffer::decode)
            .collect()
    }

    /// Runs a kernel that has exactly one output.
    pub fn run1(&self, n: i64, inputs: &[&ArrayD<f32>]) -> ArrayD<f32> {
        let mut outputs = self.run(n, inputs);
        assert_eq!(outputs.len(), 1, "{}: output count", self.name);
        outputs.remove(0)
    }
}

/// One unit in the last place of `dtype` at the magnitude of `value` (0 for f32,
/// whose accuracy the relative tolerance states).
pub fn ulp(dtype: DType, value: f64) -> f64 {
    let magnitude = value.abs() as f32;
    let (here, next) = match dtype {
        DType::F16 => {
            let h = f16::from_f32(magnitude);
            (h.to_f64(), f16::from_bits(h.to_bits() + 1).to_f64())
        }
        DType::BF16 => {
            let h = bf16::from_f32(magnitude);
            (h.to_f64(), bf16::from_bits(h.to_bits() + 1).to_f64())
        }
        _ => return 0.0,
    };
    next - here
}

/// Asserts `got` matches `want` elementwise: `|got - want| <= tol * max(1, |want|)` plus
/// one ulp of `dtype` at `want` for 16-bit storage; infinities must match exactly and a
/// NaN is only accepted where the reference is NaN.
pub fn assert_close(got: &ArrayD<f32>, want: &ArrayD<f64>, dtype: DType, tol: f64, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}: shapes differ");
    for ((index, &g), &w) in got.indexed_iter().zip(want.iter()) {
        let g = f64::from(g);
        let ok = if w.is_nan() || g.is_nan() {
            w.is_nan() && g.is_nan()
        } else if w.is_infinite() || g.is_infinite() {
            g == w
        } else {
            (g - w).abs() <= tol * w.abs().max(1.0) + ulp(dtype, w)
        };
        assert!(
            ok,
            "{what}: at {:?} got {g}, want {w} (tol {tol}, {dtype})",
            index.slice()
        );
    }
}

/// Asserts exact equality (for data movement and exactly rounded conversions).
pub fn assert_exact(got: &ArrayD<f32>, want: &ArrayD<f64>, what: &str) {
    assert_close(got, want, DType::F32, 0.0, what);
}
