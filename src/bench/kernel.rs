//! A benchmarked kernel: the op call legalized, scheduled by the host target's rules (the
//! matmul and GEMV rules on microkernels, the default schedule for the rest),
//! JIT-compiled, with host buffers for its parameters and `n` bound to the token count.

use super::buffer::HostBuffer;
use super::spec::{dim_i64, KernelSpec};
use super::BenchError;
use oxrelax_codegen::{JitLibrary, RawKernel};
use oxrelax_dsl::ir::Expr;
use oxrelax_dsl::legalize::legalize_call;
use oxrelax_dsl::sym::SymBindings;
use oxrelax_dsl::tir::{Buffer, PrimFunc};
use oxrelax_dsl::{DataType, Target};
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
    /// A cold GEMV's other weight matrices: run `i` reads copy `i % (ring.len() + 1)`,
    /// copy 0 being the weight in `buffers`.
    ring: Vec<HostBuffer>,
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
        let func = schedule_for(&legalized.func, &target, &rules_for(&target));
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
        let ring = match spec {
            KernelSpec::GemvCold(cold) => weight_ring(&spec, &func, &buffers, cold.ring)?,
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
            args[WEIGHT_INPUT] = self.ring[copy - 1].as_mut_ptr();
        }
        // SAFETY: `kernel` was compiled from the function whose parameters `buffers`
        // were allocated for (a ring copy has the size of the weight it stands in for):
        // one dense f32 buffer per parameter, in order, each holding
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

    /// The weight matrix run `call` (counting from 0) reads, for a cold GEMV.
    pub fn ring_weight(&self, call: usize) -> Option<&[f32]> {
        match call % self.ring_len() {
            0 => self.input(WEIGHT_INPUT),
            copy => self.ring.get(copy - 1).map(HostBuffer::as_slice),
        }
    }
}

/// The input that holds the (packed) weight of a matmul (`packed_matmul(x, w)`).
const WEIGHT_INPUT: usize = 1;

/// `ring - 1` more weight matrices like the weight input of a cold GEMV, each filled
/// with its own pseudo-random values (so every one occupies its own memory).
fn weight_ring(
    spec: &KernelSpec,
    func: &PrimFunc,
    buffers: &[HostBuffer],
    ring: usize,
) -> Result<Vec<HostBuffer>, BenchError> {
    let shape = spec.matmul_shape();
    let weight = buffers
        .get(WEIGHT_INPUT)
        .filter(|_| func.inputs().len() == 2)
        .filter(|w| shape.is_some_and(|s| w.bytes() == s.weight_bytes()))
        .ok_or_else(|| {
            unsupported(
                spec,
                "a matmul whose second input is not the packed weight".into(),
            )
        })?;
    let elements = weight.as_slice().len();
    (1..ring.max(1))
        .map(|copy| {
            let mut buffer = HostBuffer::zeroed(elements).map_err(|_| BenchError::Alloc {
                kernel: spec.name(),
                shape: spec.shape(),
                buffer: format!("weight ring copy {copy}"),
                elements,
            })?;
            buffer.fill_random(1000 + copy as u64);
            Ok(buffer)
        })
        .collect()
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
            let len = elements(spec, param, bindings)?;
            let mut buffer = HostBuffer::zeroed(len).map_err(|_| BenchError::Alloc {
                kernel: spec.name(),
                shape: spec.shape(),
                buffer: param.name.clone(),
                elements: len,
            })?;
            if index < num_inputs {
                buffer.fill_random(index as u64 + 1);
            }
            Ok(buffer)
        })
        .collect()
}

/// The element count of a dense f32 parameter with `bindings`.
fn elements(
    spec: &KernelSpec,
    param: &Buffer,
    bindings: &SymBindings,
) -> Result<usize, BenchError> {
    if param.dtype != DataType::F32 {
        let what = format!(
            "buffer `{}` of dtype {} (only f32)",
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
    param.shape.iter().try_fold(1usize, |count, dim| {
        let value = dim.eval(bindings).map_err(|_| bad_shape())?;
        let value = usize::try_from(value).map_err(|_| bad_shape())?;
        count.checked_mul(value).ok_or_else(bad_shape)
    })
}
