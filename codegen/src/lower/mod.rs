//! Lowering of one primitive function to a Cranelift function with the kernel ABI
//! `fn(args: *const *mut u8, dims: *const i64, env: *const RtEnv) -> i32`.
//!
//! Values are computed in three machine types: every float dtype as `f32`, every integer
//! dtype as `i64`, `bool` as `i8`. Loads and stores convert between these and the
//! buffer's storage type (`memory.rs`).

mod expr;
mod memory;
mod microkernel;
pub(crate) mod parallel;
mod registers;
mod stmt;
mod vector;
mod vector_expr;

use crate::CodegenError;
use cranelift_codegen::ir::{
    types, AbiParam, FuncRef, InstBuilder, MemFlagsData, Signature, Type, Value,
};
use cranelift_frontend::{FunctionBuilder, Variable};
use oxrelax_dsl::tir::{Buffer, PrimExpr, PrimFunc};
use oxrelax_dsl::DType;
use std::collections::HashMap;

/// The machine type a value of `dtype` is computed in.
pub(crate) fn compute_type(dtype: DType) -> Type {
    if dtype.is_float() {
        types::F32
    } else if dtype == DType::Bool {
        types::I8
    } else {
        types::I64
    }
}

/// The kernel ABI's signature for a pointer type.
pub fn kernel_signature(ptr: Type, call_conv: cranelift_codegen::isa::CallConv) -> Signature {
    let mut sig = Signature::new(call_conv);
    sig.params.extend([AbiParam::new(ptr); 3]);
    sig.returns.push(AbiParam::new(types::I32));
    sig
}

/// A buffer parameter or allocation as the body sees it.
struct BufferSlot {
    decl: Buffer,
    base: Value,
    strides: Vec<Value>,
    /// The strides that are compile-time constants.
    const_strides: Vec<Option<i64>>,
}

/// Lowers one primitive function's body into a function builder.
pub(crate) struct Lowerer<'a, 'f> {
    name: &'a str,
    b: &'a mut FunctionBuilder<'f>,
    ptr: Type,
    /// The function's parameters (the entry block's).
    params: Vec<Value>,
    env: Value,
    buffers: HashMap<String, BufferSlot>,
    vars: HashMap<String, (Variable, Type)>,
    /// Inside a vectorized loop body: the loop variable and lane values of `let`s.
    lanes: Option<vector::LaneScope>,
    /// Local buffers promoted to registers.
    registers: HashMap<String, registers::RegisterBuffer>,
    /// Outlined parallel loop bodies.
    parallel: parallel::Outlining,
}

impl<'a, 'f> Lowerer<'a, 'f> {
    fn new(
        name: &'a str,
        b: &'a mut FunctionBuilder<'f>,
        ptr: Type,
        outlined: Vec<FuncRef>,
    ) -> Self {
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let params = b.block_params(entry).to_vec();
        Lowerer {
            name,
            b,
            ptr,
            env: params[2],
            params,
            buffers: HashMap::new(),
            vars: HashMap::new(),
            lanes: None,
            registers: HashMap::new(),
            parallel: parallel::Outlining::new(outlined),
        }
    }

    fn param(&self, index: usize) -> Value {
        self.params[index]
    }

    fn finish(self) -> Vec<parallel::OutlinedBody> {
        let ok = self.b.ins().iconst(types::I32, 0);
        self.b.ins().return_(&[ok]);
        self.b.seal_all_blocks();
        self.parallel.bodies
    }
}

/// Builds the body of `func` (the builder's function must have the kernel signature);
/// `outlined` are the functions its top-level parallel loops become, in order. Returns
/// the bodies those functions must be given.
pub(crate) fn lower_prim_func(
    name: &str,
    func: &PrimFunc,
    b: &mut FunctionBuilder<'_>,
    ptr: Type,
    outlined: Vec<FuncRef>,
) -> Result<Vec<parallel::OutlinedBody>, CodegenError> {
    let mut lowerer = Lowerer::new(name, b, ptr, outlined);
    let (args, dims) = (lowerer.param(0), lowerer.param(1));
    lowerer.bind_dims(func, dims);
    lowerer.bind_params(func, args)?;
    if func
        .body
        .any_stmt(&mut |s| matches!(s, oxrelax_dsl::tir::Stmt::Microkernel(_)))
    {
        lowerer.require_env();
    }
    lowerer.stmt(&func.body)?;
    Ok(lowerer.finish())
}

impl Lowerer<'_, '_> {
    fn unsupported(&self, message: impl Into<String>) -> CodegenError {
        CodegenError::Unsupported {
            func: self.name.to_string(),
            message: message.into(),
        }
    }

    fn undefined(&self, kind: &'static str, name: &str) -> CodegenError {
        CodegenError::Undefined {
            func: self.name.to_string(),
            kind,
            name: name.to_string(),
        }
    }

    fn bind_dims(&mut self, func: &PrimFunc, dims_ptr: Value) {
        for (index, dim) in func.dims.iter().enumerate() {
            let value = self.b.ins().load(
                types::I64,
                MemFlagsData::trusted(),
                dims_ptr,
                8 * index as i32,
            );
            self.define_var(dim.name(), types::I64, value);
        }
    }

    fn bind_params(&mut self, func: &PrimFunc, args_ptr: Value) -> Result<(), CodegenError> {
        let width = self.ptr.bytes() as i32;
        for (index, buffer) in func.params.iter().enumerate() {
            let base = self.b.ins().load(
                self.ptr,
                MemFlagsData::trusted(),
                args_ptr,
                width * index as i32,
            );
            self.add_buffer(buffer, base)?;
        }
        Ok(())
    }

    fn add_buffer(&mut self, buffer: &Buffer, base: Value) -> Result<(), CodegenError> {
        let symbolic = buffer.effective_strides();
        let strides = symbolic
            .iter()
            .map(|s| self.expr(&PrimExpr::from(s)))
            .collect::<Result<Vec<_>, _>>()?;
        self.buffers.insert(
            buffer.name.clone(),
            BufferSlot {
                decl: buffer.clone(),
                base,
                strides,
                const_strides: symbolic.iter().map(|s| s.as_const()).collect(),
            },
        );
        Ok(())
    }

    /// Returns `INVALID_ARGUMENT` when called without a runtime env (a kernel that calls
    /// microkernels cannot run without the runtime's table).
    fn require_env(&mut self) {
        let missing = self.b.create_block();
        let present = self.b.create_block();
        self.b.ins().brif(self.env, present, &[], missing, &[]);
        self.b.switch_to_block(missing);
        let code = self
            .b
            .ins()
            .iconst(types::I32, i64::from(oxrelax_abi::INVALID_ARGUMENT));
        self.b.ins().return_(&[code]);
        self.b.switch_to_block(present);
    }

    fn define_var(&mut self, name: &str, ty: Type, value: Value) {
        let var = self.b.declare_var(ty);
        self.b.def_var(var, value);
        self.vars.insert(name.to_string(), (var, ty));
    }
}
