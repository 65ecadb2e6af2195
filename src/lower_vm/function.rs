//! One graph function to bytecode.

use super::dims::DimTable;
use super::{KernelTable, LowerError};
use crate::passes::ARENA_OFFSETS;
use oxrelax_dsl::ir::{BindingValue, Call, Callee, Function, PrimValue};
use oxrelax_dsl::op::VIEW_OPS;
use oxrelax_dsl::tir::PrimFunc;
use oxrelax_dsl::{AttrValue, Expr, IRModule, StructInfo, SymExpr, TensorInfo};
use oxrelax_runtime::vm::{
    DimPattern, DimReg, Immediate, Instr, Placement, Reg, ShapeExpr, Slot, VmFunction,
};
use std::collections::{HashMap, HashSet};

/// The state of lowering one graph function.
pub(crate) struct FunctionLowering<'a> {
    name: &'a str,
    function: &'a Function,
    module: &'a IRModule,
    kernels: &'a mut KernelTable,
    dims: DimTable,
    bound: HashSet<DimReg>,
    regs: HashMap<String, Reg>,
    num_regs: Reg,
    instrs: Vec<Instr>,
    slots: Vec<Slot>,
    /// The binding being lowered (for errors).
    current: String,
}

impl<'a> FunctionLowering<'a> {
    pub(crate) fn new(
        name: &'a str,
        function: &'a Function,
        module: &'a IRModule,
        kernels: &'a mut KernelTable,
    ) -> Self {
        FunctionLowering {
            name,
            function,
            module,
            kernels,
            dims: DimTable::for_function(name, function),
            bound: HashSet::new(),
            regs: HashMap::new(),
            num_regs: 0,
            instrs: Vec::new(),
            slots: Vec::new(),
            current: String::new(),
        }
    }

    pub(crate) fn lower(mut self) -> Result<VmFunction, LowerError> {
        for param in &self.function.params {
            let reg = self.fresh();
            self.regs.insert(param.name.clone(), reg);
        }
        for param in &self.function.params {
            self.current = param.name.clone();
            let reg = self.regs[&param.name];
            self.match_shape(reg, &param.sinfo)?;
        }
        for binding in self.function.bindings() {
            self.current = binding.var.name.clone();
            let reg = match &binding.value {
                BindingValue::Expr(expr) => self.value(expr)?,
                BindingValue::MatchCast(expr, sinfo) => {
                    let reg = self.value(expr)?;
                    self.match_shape(reg, sinfo)?;
                    reg
                }
            };
            self.regs.insert(binding.var.name.clone(), reg);
        }
        self.current = "return".into();
        let ret = self.value(&self.function.ret)?;
        self.instrs.push(Instr::Ret { reg: ret });
        let arena_size = self
            .slots
            .iter()
            .map(|s| s.offset + s.size)
            .max()
            .unwrap_or(0);
        Ok(VmFunction {
            params: self
                .function
                .params
                .iter()
                .map(|p| p.name.clone())
                .collect(),
            dims: self.dims.decls(),
            num_regs: self.num_regs,
            instrs: self.instrs,
            arena_size,
            slots: self.slots,
        })
    }

    fn fresh(&mut self) -> Reg {
        self.num_regs += 1;
        self.num_regs - 1
    }

    fn unsupported(&self, reason: impl Into<String>) -> LowerError {
        LowerError::Unsupported {
            function: self.name.to_string(),
            var: self.current.clone(),
            reason: reason.into(),
        }
    }

    /// Checks a tensor's dtype and shape, binding dims on first sight.
    fn match_shape(&mut self, reg: Reg, sinfo: &StructInfo) -> Result<(), LowerError> {
        let Some(tensor) = sinfo.as_tensor() else {
            return Ok(());
        };
        let Some(shape) = tensor.dims() else {
            return Ok(());
        };
        let mut patterns = Vec::with_capacity(shape.len());
        for dim in shape {
            patterns.push(self.dim_pattern(dim)?);
        }
        self.instrs.push(Instr::MatchShape {
            reg,
            dtype: tensor.dtype,
            dims: patterns,
        });
        Ok(())
    }

    fn dim_pattern(&mut self, dim: &SymExpr) -> Result<DimPattern, LowerError> {
        if let Some(value) = dim.as_const() {
            return Ok(DimPattern::Const(value));
        }
        if let Some(reg) = dim.as_var().and_then(|v| self.dims.reg(v.name())) {
            if self.bound.insert(reg) {
                return Ok(DimPattern::Bind(reg));
            }
        }
        Ok(DimPattern::Check(self.dims.shape_expr(dim)?))
    }

    /// Emits the instructions computing `expr`; returns the register holding it.
    fn value(&mut self, expr: &Expr) -> Result<Reg, LowerError> {
        match expr {
            Expr::Var(v) => self
                .regs
                .get(&v.name)
                .copied()
                .ok_or_else(|| self.unsupported(format!("`{}` is not defined", v.name))),
            Expr::Call(call) => self.call(call),
            Expr::Tuple(items) => {
                let fields = items
                    .iter()
                    .map(|i| self.value(i))
                    .collect::<Result<Vec<_>, _>>()?;
                let dst = self.fresh();
                self.instrs.push(Instr::MakeTuple { dst, fields });
                Ok(dst)
            }
            Expr::TupleGetItem(tuple, index) => {
                let tuple = self.value(tuple)?;
                let dst = self.fresh();
                self.instrs.push(Instr::TupleGet {
                    dst,
                    tuple,
                    index: *index as u32,
                });
                Ok(dst)
            }
            Expr::Prim(PrimValue::Int(value, _)) => {
                let value = Immediate::Int(self.dims.shape_expr(value)?);
                self.load(value)
            }
            Expr::Prim(PrimValue::Float(value, _)) => self.load(Immediate::Float(*value)),
            Expr::Str(text) => self.load(Immediate::Str(text.clone())),
            Expr::Constant(_) => Err(self.unsupported("constant tensors in graph functions")),
            Expr::Shape(_) => Err(self.unsupported("shape values at run time")),
        }
    }

    fn load(&mut self, value: Immediate) -> Result<Reg, LowerError> {
        let dst = self.fresh();
        self.instrs.push(Instr::Load { dst, value });
        Ok(dst)
    }

    fn call(&mut self, call: &Call) -> Result<Reg, LowerError> {
        match &call.callee {
            Callee::Op(op) if VIEW_OPS.contains(&op.as_str()) => self.view(call),
            Callee::Op(op) => Err(self.unsupported(format!("op `{op}` was not legalized"))),
            Callee::Packed(name) => {
                let args = call
                    .args
                    .iter()
                    .map(|a| self.value(a))
                    .collect::<Result<Vec<_>, _>>()?;
                let dst = self.fresh();
                self.instrs.push(Instr::CallBuiltin {
                    name: name.clone(),
                    args,
                    dst: Some(dst),
                });
                Ok(dst)
            }
            Callee::Tir(callee) => self.call_tir(callee, call),
        }
    }

    /// A view op: its input viewed with the extents of its result.
    fn view(&mut self, call: &Call) -> Result<Reg, LowerError> {
        let input = call
            .args
            .first()
            .ok_or_else(|| self.unsupported("a view op without an input"))?;
        let src = self.value(input)?;
        let shape = self.extents(self.known_tensor(&call.sinfo)?)?;
        let dst = self.fresh();
        self.instrs.push(Instr::View { dst, src, shape });
        Ok(dst)
    }

    /// Allocates the outputs (in their planned slots), checks and calls the kernel.
    fn call_tir(&mut self, callee: &str, call: &Call) -> Result<Reg, LowerError> {
        let module = self.module;
        let func = module
            .prim_funcs
            .get(callee)
            .ok_or_else(|| LowerError::UnknownPrimFunc {
                function: self.name.to_string(),
                callee: callee.to_string(),
            })?;
        let mut args = call
            .args
            .iter()
            .map(|a| self.value(a))
            .collect::<Result<Vec<_>, _>>()?;
        let outputs: Vec<&StructInfo> = match &call.sinfo {
            StructInfo::Tuple(items) => items.iter().collect(),
            other => vec![other],
        };
        let offsets = match call.attrs.get(ARENA_OFFSETS) {
            Some(AttrValue::Ints(offsets)) => offsets.clone(),
            _ => Vec::new(),
        };
        let mut out_regs = Vec::with_capacity(outputs.len());
        for (k, sinfo) in outputs.iter().enumerate() {
            out_regs.push(self.alloc(sinfo, offsets.get(k).copied())?);
        }
        let mut sinfos: Vec<StructInfo> = call.args.iter().map(Expr::sinfo).collect();
        sinfos.extend(outputs.iter().map(|s| (*s).clone()));
        let dims = self.kernel_dims(callee, func, &sinfos)?;
        let kernel = self.kernels.id(callee, func)?;
        args.extend(&out_regs);
        self.instrs.push(Instr::CallKernel { kernel, args, dims });
        if out_regs.len() == 1 && !matches!(call.sinfo, StructInfo::Tuple(_)) {
            return Ok(out_regs[0]);
        }
        let dst = self.fresh();
        self.instrs.push(Instr::MakeTuple {
            dst,
            fields: out_regs,
        });
        Ok(dst)
    }

    fn alloc(&mut self, sinfo: &StructInfo, offset: Option<i64>) -> Result<Reg, LowerError> {
        let tensor = self.known_tensor(sinfo)?;
        let shape = self.extents(tensor)?;
        let place = match offset {
            Some(offset) => {
                let size = crate::passes::planned_bytes(sinfo)
                    .ok_or_else(|| self.unsupported("unbounded output"))?;
                self.slots.push(Slot {
                    offset: offset as u64,
                    size: size as u64,
                });
                Placement::Slot(self.slots.len() as u32 - 1)
            }
            None => Placement::Fresh,
        };
        let dst = self.fresh();
        self.instrs.push(Instr::AllocTensor {
            dst,
            place,
            dtype: tensor.dtype,
            shape,
        });
        Ok(dst)
    }

    /// The extents of `tensor` as expressions over the dim registers.
    fn extents(&self, tensor: &TensorInfo) -> Result<Vec<ShapeExpr>, LowerError> {
        tensor
            .dims()
            .unwrap_or_default()
            .iter()
            .map(|d| self.dims.shape_expr(d))
            .collect()
    }

    fn known_tensor<'s>(&self, sinfo: &'s StructInfo) -> Result<&'s TensorInfo, LowerError> {
        sinfo
            .as_tensor()
            .filter(|t| t.dims().is_some())
            .ok_or_else(|| self.unsupported(format!("output {sinfo} has no known shape")))
    }

    /// The values of the kernel's dims at this call: each dim is read off the argument
    /// or output whose buffer has it as a whole extent; a dim no buffer has on its own
    /// (such as a position offset) takes the caller's dim of the same name.
    fn kernel_dims(
        &self,
        callee: &str,
        func: &PrimFunc,
        sinfos: &[StructInfo],
    ) -> Result<Vec<ShapeExpr>, LowerError> {
        func.dims
            .iter()
            .map(|dim| {
                let from_buffer = func.params.iter().zip(sinfos).find_map(|(buffer, sinfo)| {
                    let axis = buffer.shape.iter().position(|d| d.as_var() == Some(dim))?;
                    sinfo.as_tensor()?.dims()?.get(axis).cloned()
                });
                match from_buffer {
                    Some(expr) => self.dims.shape_expr(&expr),
                    None => self
                        .dims
                        .reg(dim.name())
                        .map(ShapeExpr::Dim)
                        .ok_or_else(|| {
                            self.unsupported(format!(
                                "kernel `{callee}` takes dim `{}`, which no argument determines",
                                dim.name()
                            ))
                        }),
                }
            })
            .collect()
    }
}
