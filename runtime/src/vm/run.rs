//! The interpreter loop: one call of one function over its frame.

use super::bytecode::{Immediate, Instr, KernelId, Placement, Reg};
use super::error::VmError;
use super::exec::{KernelDecl, VmFunction};
use super::machine::Frame;
use super::shape_expr::{EvalError, ShapeExpr};
use crate::abi::{KernelFn, RuntimeEnv};
use crate::dtype::DType;
use crate::packed::PackedFunc;
use crate::tensor::{storage_bytes, Arena, StorageKind, Tensor, TensorError};
use crate::value::Value;
use smallvec::SmallVec;
use std::collections::HashMap;
use std::time::Instant;

/// Extents, dim values or argument pointers of one instruction: on the stack up to 8, so
/// running an instruction does not allocate.
pub(super) type Inline<T> = SmallVec<[T; 8]>;

/// What a call reads besides its frame.
pub(super) struct Ctx<'a> {
    pub(super) name: &'a str,
    pub(super) func: &'a VmFunction,
    pub(super) decls: &'a [KernelDecl],
    pub(super) kernels: &'a [KernelFn],
    pub(super) builtins: &'a HashMap<String, PackedFunc>,
    pub(super) env: &'a RuntimeEnv,
    pub(super) profiling: bool,
    /// Names of the function's dim registers.
    pub(super) dim_names: Vec<&'a str>,
}

/// Where shape expressions are evaluated: the dims' values and names, and what the
/// expressions size (for errors).
pub(super) struct Scope<'s, S> {
    /// The value of dim `d`, if bound.
    pub(super) dim: &'s dyn Fn(u32) -> Option<i64>,
    /// The dims' names.
    pub(super) names: &'s [S],
    /// What is being evaluated, for errors.
    pub(super) context: &'s dyn Fn() -> String,
}

impl Ctx<'_> {
    /// Runs the function's code on `frame` (whose parameter registers are set).
    pub(super) fn run(&self, frame: &mut Frame) -> Result<Value, VmError> {
        for (at, instr) in self.func.instrs.iter().enumerate() {
            match instr {
                Instr::MatchShape { reg, dtype, dims } => {
                    self.match_shape(frame, *reg, *dtype, dims)?
                }
                Instr::AllocTensor {
                    dst,
                    place,
                    dtype,
                    shape,
                } => {
                    let tensor = self.alloc(frame, *dst, *place, *dtype, shape)?;
                    set(frame, *dst, tensor.into());
                }
                Instr::View { dst, src, shape } => {
                    let view = self.view(frame, *dst, *src, shape)?;
                    set(frame, *dst, view.into());
                }
                Instr::CallKernel { kernel, args, dims } => {
                    self.call_kernel(frame, *kernel, args, dims)?
                }
                Instr::CallBuiltin { name, args, dst } => {
                    let value = self.call_builtin(frame, name, args)?;
                    if let Some(dst) = dst {
                        set(frame, *dst, value);
                    }
                }
                Instr::Load { dst, value } => {
                    let value = self.immediate(frame, *dst, value)?;
                    set(frame, *dst, value);
                }
                Instr::MakeTuple { dst, fields } => {
                    let fields = self.values(frame, fields)?;
                    set(frame, *dst, Value::Tuple(fields));
                }
                Instr::TupleGet { dst, tuple, index } => {
                    let field = self.tuple_field(frame, *tuple, *index)?;
                    set(frame, *dst, field);
                }
                Instr::Ret { reg } => {
                    let value = self.get(&frame.regs, *reg)?.clone();
                    return detach(value).map_err(|e| self.tensor_error(e));
                }
            }
            for &reg in &frame.last_uses[at] {
                frame.regs[reg as usize] = None;
            }
        }
        unreachable!("validated executables end every function with `ret`")
    }

    /// How errors name register `reg`: by parameter name, else by number.
    pub(super) fn reg_name(&self, reg: Reg) -> String {
        match self.func.params.get(reg as usize) {
            Some(param) => format!("argument `{param}`"),
            None => format!("register %{reg}"),
        }
    }

    pub(super) fn get<'f>(
        &self,
        regs: &'f [Option<Value>],
        reg: Reg,
    ) -> Result<&'f Value, VmError> {
        regs[reg as usize]
            .as_ref()
            .ok_or_else(|| VmError::UninitializedRegister {
                func: self.name.to_string(),
                reg,
            })
    }

    /// The tensor in `reg`; `what` names it in errors.
    pub(super) fn tensor<'f>(
        &self,
        regs: &'f [Option<Value>],
        reg: Reg,
        what: &dyn Fn() -> String,
    ) -> Result<&'f Tensor, VmError> {
        let value = self.get(regs, reg)?;
        value.as_tensor().ok_or_else(|| VmError::Kind {
            func: self.name.to_string(),
            what: what(),
            expected: "a tensor".into(),
            got: value.describe(),
        })
    }

    fn values(&self, frame: &Frame, regs: &[Reg]) -> Result<Vec<Value>, VmError> {
        regs.iter()
            .map(|&r| self.get(&frame.regs, r).cloned())
            .collect()
    }

    pub(super) fn tensor_error(&self, source: TensorError) -> VmError {
        VmError::Tensor {
            func: self.name.to_string(),
            source,
        }
    }

    /// Evaluates `expr` in `scope`.
    pub(super) fn eval<S: AsRef<str>>(
        &self,
        expr: &ShapeExpr,
        scope: &Scope<'_, S>,
    ) -> Result<i64, VmError> {
        expr.eval(scope.dim).map_err(|err| match err {
            EvalError::Unbound(d) => VmError::UnboundDim {
                func: self.name.to_string(),
                dim: scope
                    .names
                    .get(d as usize)
                    .map_or(format!("d{d}"), |n| n.as_ref().to_string()),
                context: (scope.context)(),
            },
            EvalError::Arithmetic => self.arith_error(expr, scope, "overflows or divides by zero"),
        })
    }

    pub(super) fn arith_error<S: AsRef<str>>(
        &self,
        expr: &ShapeExpr,
        scope: &Scope<'_, S>,
        reason: &str,
    ) -> VmError {
        VmError::ShapeArith {
            func: self.name.to_string(),
            context: (scope.context)(),
            expr: expr.display(scope.names).to_string(),
            reason: reason.to_string(),
        }
    }

    /// Evaluates tensor extents in `scope`; they must not be negative.
    pub(super) fn extents<S: AsRef<str>>(
        &self,
        exprs: &[ShapeExpr],
        scope: &Scope<'_, S>,
    ) -> Result<Inline<i64>, VmError> {
        exprs.iter().map(|expr| self.extent(expr, scope)).collect()
    }

    /// Evaluates one tensor extent in `scope`; it must not be negative.
    pub(super) fn extent<S: AsRef<str>>(
        &self,
        expr: &ShapeExpr,
        scope: &Scope<'_, S>,
    ) -> Result<i64, VmError> {
        match self.eval(expr, scope)? {
            v if v < 0 => Err(self.arith_error(expr, scope, &format!("is negative ({v})"))),
            v => Ok(v),
        }
    }

    fn alloc(
        &self,
        frame: &mut Frame,
        dst: Reg,
        place: Placement,
        dtype: DType,
        shape: &[ShapeExpr],
    ) -> Result<Tensor, VmError> {
        let context = || format!("the allocation of register %{dst}");
        let extents = self.frame_extents(&frame.dims, shape, &context)?;
        let Placement::Slot(slot) = place else {
            return Tensor::zeros(dtype, &extents).map_err(|e| self.tensor_error(e));
        };
        let planned = self.func.slots[slot as usize];
        let needed = storage_bytes(dtype, &extents).unwrap_or(usize::MAX);
        if needed as u64 > planned.size {
            return Err(VmError::SlotTooSmall {
                func: self.name.to_string(),
                slot,
                needed,
                size: planned.size,
            });
        }
        frame
            .arena
            .view(planned.offset as usize, dtype, &extents)
            .map_err(|e| self.tensor_error(e))
    }

    /// `shape` evaluated over the frame's `dims`; `context` names what it sizes in errors.
    fn frame_extents(
        &self,
        dims: &[Option<i64>],
        shape: &[ShapeExpr],
        context: &dyn Fn() -> String,
    ) -> Result<Inline<i64>, VmError> {
        let dim = |d: u32| dims[d as usize];
        let scope = Scope {
            dim: &dim,
            names: &self.dim_names,
            context,
        };
        self.extents(shape, &scope)
    }

    fn view(
        &self,
        frame: &mut Frame,
        dst: Reg,
        src: Reg,
        shape: &[ShapeExpr],
    ) -> Result<Tensor, VmError> {
        let context = || format!("the view in register %{dst}");
        let extents = self.frame_extents(&frame.dims, shape, &context)?;
        let tensor = self.tensor(&frame.regs, src, &|| format!("the source of view %{dst}"))?;
        tensor.reshaped(&extents).map_err(|e| self.tensor_error(e))
    }

    fn call_kernel(
        &self,
        frame: &mut Frame,
        kernel: KernelId,
        args: &[Reg],
        dims: &[ShapeExpr],
    ) -> Result<(), VmError> {
        let decl = &self.decls[kernel as usize];
        let context = || format!("the dims of kernel `{}`", decl.name);
        let values = self.frame_extents(&frame.dims, dims, &context)?;
        let mut ptrs = Inline::<*mut u8>::new();
        for (i, (&reg, sig)) in args.iter().zip(&decl.params).enumerate() {
            let tensor = self.tensor(&frame.regs, reg, &|| {
                format!("kernel `{}` argument {i}", decl.name)
            })?;
            self.check_kernel_arg(tensor, decl, i, sig, &values)?;
            ptrs.push(tensor.data_ptr());
        }
        let start = self.profiling.then(Instant::now);
        // SAFETY: every pointer is the data of a live tensor whose dtype, extents and
        // contiguity match the kernel's signature for these dim values; `values` holds one
        // value per kernel dim (validated at load); the env outlives the call.
        let code = unsafe {
            (self.kernels[kernel as usize])(ptrs.as_ptr(), values.as_ptr(), self.env.as_ptr())
        };
        if let Some(start) = start {
            frame.profile[kernel as usize].record(start.elapsed());
        }
        if code != 0 {
            return Err(VmError::KernelFailed {
                func: self.name.to_string(),
                kernel: decl.name.clone(),
                code,
            });
        }
        Ok(())
    }

    fn call_builtin(&self, frame: &Frame, name: &str, args: &[Reg]) -> Result<Value, VmError> {
        let func = self.name.to_string();
        let packed = self
            .builtins
            .get(name)
            .ok_or_else(|| VmError::MissingBuiltin {
                func: func.clone(),
                name: name.to_string(),
            })?;
        let handles = frame.arena.handles();
        let value = packed
            .call(&self.values(frame, args)?)
            .map_err(|source| VmError::Builtin {
                func: func.clone(),
                source: Box::new(source),
            })?;
        if frame.arena.handles() > handles + arena_views(&frame.arena, &value) {
            return Err(VmError::ArenaViewRetained {
                func,
                builtin: name.to_string(),
            });
        }
        Ok(value)
    }

    fn immediate(&self, frame: &Frame, dst: Reg, value: &Immediate) -> Result<Value, VmError> {
        Ok(match value {
            Immediate::Int(expr) => {
                let dims = |d: u32| frame.dims[d as usize];
                let scope = Scope {
                    dim: &dims,
                    names: &self.dim_names,
                    context: &|| format!("the load of register %{dst}"),
                };
                Value::Int(self.eval(expr, &scope)?)
            }
            Immediate::Float(v) => Value::Float(*v),
            Immediate::Str(s) => Value::Str(s.clone()),
        })
    }

    fn tuple_field(&self, frame: &Frame, reg: Reg, index: u32) -> Result<Value, VmError> {
        let value = self.get(&frame.regs, reg)?;
        let fields = value.as_tuple().ok_or_else(|| VmError::Kind {
            func: self.name.to_string(),
            what: self.reg_name(reg),
            expected: "a tuple".into(),
            got: value.describe(),
        })?;
        fields
            .get(index as usize)
            .cloned()
            .ok_or(VmError::TupleIndex {
                func: self.name.to_string(),
                reg,
                len: fields.len(),
                index,
            })
    }
}

fn set(frame: &mut Frame, reg: Reg, value: Value) {
    frame.regs[reg as usize] = Some(value);
}

/// The number of views of `arena` in `value` (through tuples).
fn arena_views(arena: &Arena, value: &Value) -> usize {
    match value {
        Value::Tensor(t) => usize::from(arena.contains(t)),
        Value::Tuple(fields) => fields.iter().map(|f| arena_views(arena, f)).sum(),
        _ => 0,
    }
}

/// Copies arena-backed tensors (also inside tuples) to owned storage, so a result survives
/// the next call that reuses the arena.
fn detach(value: Value) -> Result<Value, TensorError> {
    match value {
        Value::Tensor(t) if t.storage_kind() == StorageKind::Arena => {
            Ok(Value::Tensor(t.deep_copy()?))
        }
        Value::Tuple(fields) => Ok(Value::Tuple(
            fields.into_iter().map(detach).collect::<Result<_, _>>()?,
        )),
        other => Ok(other),
    }
}
