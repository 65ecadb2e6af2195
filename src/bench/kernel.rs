//! A benchmarked kernel: the op call legalized, scheduled by the host target's rules (the
//! matmul and GEMV rules on microkernels, the default schedule for the rest),
//! JIT-compiled, with host buffers for its parameters and `n` bound to the token count.

use super::buffer::HostBuffer;
use super::spec::{dim_i64, ColdGemv, KernelSpec};
use super::BenchError;
use oxrelax_codegen::{JitLibrary, RawKernel};
use oxrelax_dsl::ir::Expr;
use oxrelax_dsl::legalize::legalize_call;
use oxrelax_dsl::sym::SymBindings;
use oxrelax_dsl::tir::{Buffer, PrimFunc};
use oxrelax_dsl::{DType, Target};
use oxrelax_runtime::tensor::storage_bytes;
use oxrelax_runtime::RuntimeEnv;
use oxrelax_schedules::{rules_for, schedule_for};

/// A compiled kernel ready to run on its buffers.
pub struct BenchKernel {
    spec: KernelSpec,
    /// Keeps the code of `kernel` alive.
    _library: JitLibrary,
    kernel: RawKernel,
    /// One buffer per parameter: inputs, then outputs.
    buffers: Vec<HostBuffer>,
    num_inputs: usize,
    /// A cold GEMV's other weight matrices (each its buffers of the weight inputs): run
    /// `i` reads copy `i % (ring.len() + 1)`, copy 0 being the weights in `buffers`.
    ring: Vec<Vec<HostBuffer>>,
    /// Runs so far (picks the ring copy).
    calls: usize,
    /// The values of the function's symbolic dims, in order.
    dims: Vec<i64>,
}

impl BenchKernel {
    /// Builds the op call of `spec`, legalizes it, schedules it for the host, compiles it
    /// and allocates its buffers (inputs random in `[-1, 1)`).
    pub fn build(spec: KernelSpec) -> Result<Self, BenchError> {
        let expr = spec.call()?;
        let Expr::Call(call) = &expr else {
            return Err(unsupported(
                &spec,
                "an op constructor that returns no call".into(),
            ));
        };
        let legalized = legalize_call(call).map_err(|source| BenchError::Legalize {
            kernel: spec.name(),
            shape: spec.shape(),
            source: Box::new(source),
        })?;
        let target = Target::host();
        let func = schedule_for(&legalized.func, &rules_for(&target));
        let codegen_error = |source| BenchError::Codegen {
            kernel: spec.name(),
            shape: spec.shape(),
            source: Box::new(source),
        };
        let name = legalized.name_hint;
        let library =
            JitLibrary::compile(std::iter::once((&name, &func))).map_err(codegen_error)?;
        let kernel = library
            .kernel(&name)
            .ok_or_else(|| unsupported(&spec, format!("a library without kernel `{name}`")))?;
        let bindings: SymBindings = [("n".to_string(), dim_i64(spec.tokens()))].into();
        let dims = bind_dims(&spec, &func, &bindings)?;
        let buffers = allocate(&spec, &func, &bindings)?;
        let ring = match &spec {
            KernelSpec::GemvCold(cold) => weight_ring(&spec, &func, &buffers, cold)?,
            _ => Vec::new(),
        };
        Ok(BenchKernel {
            spec,
            _library: library,
            kernel,
            buffers,
            num_inputs: func.inputs().len(),
            ring,
            calls: 0,
            dims,
        })
    }

    /// What is benchmarked.
    pub fn spec(&self) -> &KernelSpec {
        &self.spec
    }

    /// Runs the kernel once on its buffers, launching parallel loops on `env`'s pool. A
    /// cold GEMV reads the next weight matrix of its ring each time.
    pub fn run(&mut self, env: &RuntimeEnv) -> Result<(), BenchError> {
        let copy = self.calls % (self.ring.len() + 1);
        self.calls = self.calls.wrapping_add(1);
        let mut args: Vec<*mut u8> = self
            .buffers
            .iter_mut()
            .map(HostBuffer::as_mut_ptr)
            .collect();
        if copy > 0 {
            let weights = self.ring[copy - 1].iter_mut();
            for (arg, weight) in args[FIRST_WEIGHT..].iter_mut().zip(weights) {
                *arg = weight.as_mut_ptr();
            }
        }
        // SAFETY: `kernel` was compiled from the function whose parameters `buffers`
        // were allocated for (a ring copy's buffers have the sizes of the weights they
        // stand in for): one dense buffer per parameter, in order, each holding
        // exactly the parameter's shape with `n` bound to the value in `dims`, which has
        // one entry per symbolic dim of the function; `env` is a live RuntimeEnv that
        // outlives the call, and no other reference to the buffers exists during it.
        let code = unsafe { (self.kernel)(args.as_ptr(), self.dims.as_ptr(), env.as_ptr()) };
        if code == 0 {
            Ok(())
        } else {
            Err(BenchError::Failed {
                what: format!("{} {}", self.spec.name(), self.spec.shape()),
                code,
            })
        }
    }

    /// The values of input `index`.
    pub fn input(&self, index: usize) -> Option<&[f32]> {
        self.buffers[..self.num_inputs]
            .get(index)
            .map(HostBuffer::as_slice)
    }

    /// The values of the (first) output.
    pub fn output(&self) -> Option<&[f32]> {
        self.buffers.get(self.num_inputs).map(HostBuffer::as_slice)
    }

    /// Bytes of all inputs and outputs (what one run reads and writes at least once; one
    /// weight matrix of a ring).
    pub fn bytes(&self) -> usize {
        self.buffers.iter().map(HostBuffer::bytes).sum()
    }

    /// Weight matrices a run may read: the ring's size for a cold GEMV, else 1.
    pub fn ring_len(&self) -> usize {
        self.ring.len() + 1
    }

    /// The weight inputs run `call` (counting from 0) reads, for a cold GEMV (as f32
    /// slots; the panels then the scales of quantized weights).
    pub fn ring_weights(&self, call: usize) -> Vec<&[f32]> {
        let weights = match call % self.ring_len() {
            0 => &self.buffers[FIRST_WEIGHT.min(self.num_inputs)..self.num_inputs],
            copy => &self.ring[copy - 1][..],
        };
        weights.iter().map(HostBuffer::as_slice).collect()
    }
}

/// The first input holding the weight of a matmul (`packed_matmul(x, w)`, or the panels
/// then the scales of `packed_matmul_quant(x, packed, scales)`).
const FIRST_WEIGHT: usize = 1;

/// `ring - 1` more weight matrices like the weight inputs of a cold GEMV (all inputs but
/// the first), each filled with its own pseudo-random values (so every one occupies its
/// own memory).
fn weight_ring(
    spec: &KernelSpec,
    func: &PrimFunc,
    buffers: &[HostBuffer],
    cold: &ColdGemv,
) -> Result<Vec<Vec<HostBuffer>>, BenchError> {
    let inputs = func.inputs();
    let weights = &buffers[FIRST_WEIGHT.min(inputs.len())..inputs.len()];
    let stored: usize = weights.iter().map(HostBuffer::bytes).sum();
    if weights.is_empty() || stored != cold.weight_bytes() {
        let what = "a matmul whose inputs after the first are not the stored weight".into();
        return Err(unsupported(spec, what));
    }
    (1..cold.ring.max(1))
        .map(|copy| {
            let params = inputs[FIRST_WEIGHT..].iter().zip(weights);
            params
                .enumerate()
                .map(|(i, (param, weight))| {
                    let seed = 1000 * copy as u64 + i as u64;
                    let name = format!("{} (weight ring copy {copy})", param.name);
                    filled_buffer(spec, &name, weight.bytes(), param.dtype, seed)
                })
                .collect()
        })
        .collect()
}

/// A buffer of `bytes` holding pseudo-random values of `dtype` from `seed`: f32 and f16
/// values in `[-1, 1)`, random bits for the integer codes (all valid weights).
fn filled_buffer(
    spec: &KernelSpec,
    name: &str,
    bytes: usize,
    dtype: DType,
    seed: u64,
) -> Result<HostBuffer, BenchError> {
    let mut buffer = HostBuffer::zeroed_bytes(bytes).map_err(|_| BenchError::Alloc {
        kernel: spec.name(),
        shape: spec.shape(),
        buffer: name.to_string(),
        bytes,
    })?;
    match dtype {
        DType::F16 => buffer.fill_random_f16(seed),
        _ => buffer.fill_random(seed),
    }
    Ok(buffer)
}

fn unsupported(spec: &KernelSpec, what: String) -> BenchError {
    BenchError::Unsupported {
        kernel: spec.name(),
        shape: spec.shape(),
        what,
    }
}

/// The values of `func.dims`; every dim must be bound in `bindings`.
fn bind_dims(
    spec: &KernelSpec,
    func: &PrimFunc,
    bindings: &SymBindings,
) -> Result<Vec<i64>, BenchError> {
    func.dims
        .iter()
        .map(|dim| {
            bindings
                .get(dim.name())
                .copied()
                .ok_or_else(|| unsupported(spec, format!("the symbolic dim `{}`", dim.name())))
        })
        .collect()
}

/// One buffer per parameter of `func`, shaped with `bindings`; inputs filled with
/// pseudo-random values (seeded by position), outputs zeroed.
fn allocate(
    spec: &KernelSpec,
    func: &PrimFunc,
    bindings: &SymBindings,
) -> Result<Vec<HostBuffer>, BenchError> {
    let num_inputs = func.inputs().len();
    func.params
        .iter()
        .enumerate()
        .map(|(index, param)| {
            let bytes = param_bytes(spec, param, bindings)?;
            if index < num_inputs {
                filled_buffer(spec, &param.name, bytes, param.dtype, index as u64 + 1)
            } else {
                HostBuffer::zeroed_bytes(bytes).map_err(|_| BenchError::Alloc {
                    kernel: spec.name(),
                    shape: spec.shape(),
                    buffer: param.name.clone(),
                    bytes,
                })
            }
        })
        .collect()
}

/// The dtypes a parameter may have: f32, and the quantized weights' codes and scales.
const PARAM_DTYPES: [DType; 4] = [DType::F32, DType::F16, DType::I8, DType::U4];

/// The size in bytes of a dense parameter with `bindings`.
fn param_bytes(
    spec: &KernelSpec,
    param: &Buffer,
    bindings: &SymBindings,
) -> Result<usize, BenchError> {
    if !PARAM_DTYPES.contains(&param.dtype) {
        let what = format!(
            "buffer `{}` of dtype {} (only f32, f16, i8 and u4)",
            param.name, param.dtype
        );
        return Err(unsupported(spec, what));
    }
    if param.strides.is_some() {
        return Err(unsupported(
            spec,
            format!("strided buffer `{}`", param.name),
        ));
    }
    let bad_shape = || {
        let shape: Vec<String> = param.shape.iter().map(ToString::to_string).collect();
        unsupported(
            spec,
            format!("buffer `{}` of shape [{}]", param.name, shape.join(", ")),
        )
    };
    let dims = param
        .shape
        .iter()
        .map(|dim| dim.eval(bindings).map_err(|_| bad_shape()))
        .collect::<Result<Vec<i64>, _>>()?;
    storage_bytes(param.dtype, &dims).map_err(|_| bad_shape())
}
