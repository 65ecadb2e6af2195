//! A slow, plain reference interpreter of TIR, for tests: it runs a primitive function
//! on `f64` buffers (one per parameter, row-major), with f64 arithmetic rounded to each
//! float dtype and integer semantics (wrapping, floor division) for integer dtypes.
//! Every access is bounds-checked; both branches of a `select` are evaluated, as
//! branch-free code would; local allocations start as NaN so a missing init shows.

mod microkernel;
mod scalar;
#[cfg(test)]
mod tests;

use super::{Buffer, PrimExpr, PrimFunc, Stmt};
use crate::sym::SymBindings;
use crate::DType;
use scalar::Scalar;
use std::collections::HashMap;

/// Why a primitive function could not be run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EvalError {
    /// The number of buffers differs from the number of parameters.
    #[error("expected {expected} buffers (one per parameter), got {got}")]
    BufferCount {
        /// Parameters.
        expected: usize,
        /// Buffers given.
        got: usize,
    },
    /// A dim of the function has no value.
    #[error("symbolic dim `{dim}` has no value")]
    UnboundDim {
        /// The dim.
        dim: String,
    },
    /// A buffer's shape could not be evaluated.
    #[error("shape of buffer `{buffer}`: {message}")]
    Shape {
        /// The buffer.
        buffer: String,
        /// What went wrong.
        message: String,
    },
    /// A parameter buffer has the wrong number of elements.
    #[error("buffer `{buffer}` needs {expected} elements, got {got}")]
    BufferLength {
        /// The buffer.
        buffer: String,
        /// Its size from the shape.
        expected: usize,
        /// The length given.
        got: usize,
    },
    /// A variable that is not in scope.
    #[error("variable `{name}` is not in scope")]
    UnboundVar {
        /// The variable.
        name: String,
    },
    /// A buffer that is neither a parameter nor allocated in scope.
    #[error("buffer `{name}` is not in scope")]
    UnknownBuffer {
        /// The buffer.
        name: String,
    },
    /// An access with the wrong number of indices.
    #[error("buffer `{buffer}` has rank {expected}, accessed with {got} indices")]
    IndexRank {
        /// The buffer.
        buffer: String,
        /// Its rank.
        expected: usize,
        /// Indices given.
        got: usize,
    },
    /// An index outside the buffer.
    #[error("buffer `{buffer}` of shape {shape:?} accessed at {indices:?}")]
    OutOfBounds {
        /// The buffer.
        buffer: String,
        /// The indices.
        indices: Vec<i64>,
        /// Its shape.
        shape: Vec<i64>,
    },
    /// An integer division or remainder by zero.
    #[error("integer `{op}` by zero")]
    DivisionByZero {
        /// The operation.
        op: &'static str,
    },
    /// A microkernel call that is unknown, malformed, or reaches outside its buffers.
    #[error("microkernel `{kernel}`: {message}")]
    Microkernel {
        /// The kernel's name.
        kernel: String,
        /// What went wrong.
        message: String,
    },
    /// An operation that does not apply to a dtype.
    #[error("`{op}` is not defined on {dtype}")]
    BadOperand {
        /// The operation.
        op: &'static str,
        /// The operands' dtype.
        dtype: DType,
    },
}

/// Runs `func` with its symbolic dims bound by `dims` on `buffers` (one per parameter,
/// in order; each holds the row-major elements as `f64`). Outputs are written in place.
pub fn run_prim_func(
    func: &PrimFunc,
    dims: &SymBindings,
    buffers: &mut [Vec<f64>],
) -> Result<(), EvalError> {
    if buffers.len() != func.params.len() {
        return Err(EvalError::BufferCount {
            expected: func.params.len(),
            got: buffers.len(),
        });
    }
    let mut machine = Machine {
        dims,
        vars: HashMap::new(),
        buffers: HashMap::new(),
    };
    for dim in &func.dims {
        let value = dims.get(dim.name()).ok_or_else(|| EvalError::UnboundDim {
            dim: dim.name().to_string(),
        })?;
        machine
            .vars
            .insert(dim.name().to_string(), Scalar::Int(*value));
    }
    let mut states = Vec::new();
    for (param, data) in func.params.iter().zip(buffers.iter()) {
        let state = machine.layout(param, Vec::new())?;
        if data.len() != state.size {
            return Err(EvalError::BufferLength {
                buffer: param.name.clone(),
                expected: state.size,
                got: data.len(),
            });
        }
        states.push(state);
    }
    for ((param, data), mut state) in func.params.iter().zip(buffers.iter_mut()).zip(states) {
        state.data = std::mem::take(data);
        machine.buffers.insert(param.name.clone(), state);
    }
    let result = machine.exec(&func.body);
    for (param, data) in func.params.iter().zip(buffers.iter_mut()) {
        if let Some(state) = machine.buffers.remove(&param.name) {
            *data = state.data;
        }
    }
    result
}

/// Runs `func` on `inputs` (one per input parameter) and returns its outputs, allocated
/// from their shapes under `dims` (float outputs start as NaN, so an element the function
/// never writes shows).
pub fn run_with_inputs(
    func: &PrimFunc,
    dims: &SymBindings,
    inputs: &[Vec<f64>],
) -> Result<Vec<Vec<f64>>, EvalError> {
    let mut buffers = inputs.to_vec();
    for output in func.outputs() {
        let size = output
            .shape
            .iter()
            .map(|d| d.eval(dims))
            .product::<Result<i64, _>>()
            .map_err(|e| EvalError::Shape {
                buffer: output.name.clone(),
                message: e.to_string(),
            })?;
        let fill = if output.dtype.is_float() {
            f64::NAN
        } else {
            0.0
        };
        buffers.push(vec![fill; usize::try_from(size).unwrap_or(0)]);
    }
    run_prim_func(func, dims, &mut buffers)?;
    Ok(buffers.split_off(inputs.len()))
}

/// Deterministic pseudo-random values in `[-2, 2)`, exact in f32, for tests.
#[cfg(test)]
pub(crate) fn pseudo_random(seed: u64, len: usize) -> Vec<f64> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0) as f32 as f64
        })
        .collect()
}

/// A buffer in scope: its elements and evaluated layout.
struct BufferState {
    data: Vec<f64>,
    dtype: DType,
    shape: Vec<i64>,
    strides: Vec<i64>,
    size: usize,
}

struct Machine<'a> {
    dims: &'a SymBindings,
    vars: HashMap<String, Scalar>,
    buffers: HashMap<String, BufferState>,
}

impl Machine<'_> {
    fn layout(&self, buffer: &Buffer, data: Vec<f64>) -> Result<BufferState, EvalError> {
        let eval = |dims: &[crate::SymExpr]| {
            dims.iter()
                .map(|d| d.eval(self.dims))
                .collect::<Result<Vec<i64>, _>>()
                .map_err(|e| EvalError::Shape {
                    buffer: buffer.name.clone(),
                    message: e.to_string(),
                })
        };
        let shape = eval(&buffer.shape)?;
        let strides = eval(&buffer.effective_strides())?;
        let size = shape
            .iter()
            .zip(&strides)
            .map(|(d, s)| (d - 1) * s)
            .sum::<i64>()
            + 1;
        let size = if shape.contains(&0) { 0 } else { size };
        Ok(BufferState {
            data,
            dtype: buffer.dtype,
            shape,
            strides,
            size: usize::try_from(size).unwrap_or(0),
        })
    }

    fn exec(&mut self, stmt: &Stmt) -> Result<(), EvalError> {
        match stmt {
            Stmt::Seq(stmts) => stmts.iter().try_for_each(|s| self.exec(s)),
            Stmt::For {
                var, extent, body, ..
            } => {
                let extent = self.eval(extent)?.as_i64();
                let saved = self.vars.get(&var.name).copied();
                let result = (0..extent).try_for_each(|i| {
                    self.vars.insert(var.name.clone(), Scalar::Int(i));
                    self.exec(body)
                });
                self.restore_var(&var.name, saved);
                result
            }
            Stmt::Store {
                buffer,
                indices,
                value,
            } => {
                let value = self.eval(value)?;
                let offset = self.offset(buffer, indices)?;
                let state = self.buffer_mut(buffer)?;
                state.data[offset] = scalar::cast(value, state.dtype).as_f64();
                Ok(())
            }
            Stmt::Let { var, value, body } => {
                let value = scalar::cast(self.eval(value)?, var.dtype);
                let saved = self.vars.insert(var.name.clone(), value);
                let result = self.exec(body);
                self.restore_var(&var.name, saved);
                result
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } => match (self.eval(cond)?.truthy(), otherwise) {
                (true, _) => self.exec(then),
                (false, Some(otherwise)) => self.exec(otherwise),
                (false, None) => Ok(()),
            },
            Stmt::Allocate { buffer, body } => {
                let mut state = self.layout(buffer, Vec::new())?;
                let fill = if buffer.dtype.is_float() {
                    f64::NAN
                } else {
                    0.0
                };
                state.data = vec![fill; state.size];
                let saved = self.buffers.insert(buffer.name.clone(), state);
                let result = self.exec(body);
                match saved {
                    Some(saved) => self.buffers.insert(buffer.name.clone(), saved),
                    None => self.buffers.remove(&buffer.name),
                };
                result
            }
            Stmt::Evaluate(expr) => self.eval(expr).map(drop),
            Stmt::Microkernel(call) => self.microkernel(call),
        }
    }

    fn restore_var(&mut self, name: &str, saved: Option<Scalar>) {
        match saved {
            Some(value) => self.vars.insert(name.to_string(), value),
            None => self.vars.remove(name),
        };
    }

    fn eval(&mut self, expr: &PrimExpr) -> Result<Scalar, EvalError> {
        Ok(match expr {
            PrimExpr::Int(v, d) => scalar::cast(Scalar::Int(*v), *d),
            PrimExpr::Float(v, d) => scalar::cast(Scalar::Float(*v), *d),
            PrimExpr::Var(var) => {
                *self
                    .vars
                    .get(&var.name)
                    .ok_or_else(|| EvalError::UnboundVar {
                        name: var.name.clone(),
                    })?
            }
            PrimExpr::Load {
                buffer, indices, ..
            } => {
                let offset = self.offset(buffer, indices)?;
                let state = self.buffer_mut(buffer)?;
                Scalar::from_element(state.data[offset], state.dtype)
            }
            PrimExpr::Binary(op, a, b) => {
                let (x, y) = (self.eval(a)?, self.eval(b)?);
                scalar::binary(*op, x, y, a.dtype())?
            }
            PrimExpr::Cmp(cmp, a, b) => {
                let (x, y) = (self.eval(a)?, self.eval(b)?);
                Scalar::Int(i64::from(scalar::compare(*cmp, x, y)))
            }
            PrimExpr::Not(a) => Scalar::Int(i64::from(!self.eval(a)?.truthy())),
            PrimExpr::Cast(d, a) => scalar::cast(self.eval(a)?, *d),
            PrimExpr::Select(c, a, b) => {
                let (c, x, y) = (self.eval(c)?, self.eval(a)?, self.eval(b)?);
                if c.truthy() {
                    x
                } else {
                    y
                }
            }
            PrimExpr::Call(intrinsic, args) => {
                let values = args
                    .iter()
                    .map(|a| self.eval(a))
                    .collect::<Result<Vec<_>, _>>()?;
                scalar::intrinsic(*intrinsic, &values, expr.dtype())
            }
        })
    }

    fn buffer_mut(&mut self, name: &str) -> Result<&mut BufferState, EvalError> {
        self.buffers
            .get_mut(name)
            .ok_or_else(|| EvalError::UnknownBuffer {
                name: name.to_string(),
            })
    }

    /// The element offset of `buffer[indices]`, bounds-checked.
    fn offset(&mut self, buffer: &str, indices: &[PrimExpr]) -> Result<usize, EvalError> {
        let values = indices
            .iter()
            .map(|i| self.eval(i).map(Scalar::as_i64))
            .collect::<Result<Vec<_>, _>>()?;
        let state = self.buffer_mut(buffer)?;
        if values.len() != state.shape.len() {
            return Err(EvalError::IndexRank {
                buffer: buffer.to_string(),
                expected: state.shape.len(),
                got: values.len(),
            });
        }
        let inside = values
            .iter()
            .zip(&state.shape)
            .all(|(i, d)| (0..*d).contains(i));
        let offset: i64 = values.iter().zip(&state.strides).map(|(i, s)| i * s).sum();
        match usize::try_from(offset) {
            Ok(offset) if inside && offset < state.data.len() => Ok(offset),
            _ => Err(EvalError::OutOfBounds {
                buffer: buffer.to_string(),
                indices: values,
                shape: state.shape.clone(),
            }),
        }
    }
}
