//! Parallel loops. The body of a top-level `for i in parallel(extent)` becomes its own
//! function `fn(closure: *const u8, task: i64, env: *const RtEnv) -> i32`; the caller packs
//! every live variable and buffer pointer into a closure on its stack and calls
//! `env.parallel_for(body, closure, n_tasks, env)`. Each task runs a contiguous chunk of
//! iterations, the chunks as even as can be and the longer ones first (the pool hands
//! tasks out in order, so the threads finish together: 22 iterations on 2 threads were 7
//! tasks of 3 and one of 1, so one thread ran 12 and the other 10; now 6 of 3 and 2 of 2,
//! 11 each); there are at most 4 tasks per thread. With a null `env` (no runtime) the
//! caller runs the tasks itself, one after another. Parallel loops nested in a parallel
//! body run serially.

use super::Lowerer;
use crate::CodegenError;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    types, AbiParam, FuncRef, InstBuilder, MemFlagsData, Signature, StackSlotData, StackSlotKind,
    Type, Value,
};
use cranelift_frontend::FunctionBuilder;
use oxrelax_abi::RtEnvField;
use oxrelax_dsl::tir::{Buffer, ForKind, PrimExpr, Stmt, TVar};

/// Tasks per thread for a parallel loop.
const TASKS_PER_THREAD: i64 = 4;

/// Slots of the closure after the captured variables and buffers.
const CLOSURE_EXTENT: usize = 0;
const CLOSURE_TASKS: usize = 1;

/// A parallel loop body to compile as its own function.
pub(crate) struct OutlinedBody {
    /// Which outlined function (in declaration order).
    pub(crate) index: usize,
    var: TVar,
    body: Stmt,
    /// Captured variables, in closure order, with their machine types.
    vars: Vec<(String, Type)>,
    /// Captured buffers, in closure order after the variables.
    buffers: Vec<Buffer>,
}

/// The outlined functions available to a lowering and the bodies produced for them.
pub(crate) struct Outlining {
    funcs: Vec<FuncRef>,
    pub(crate) bodies: Vec<OutlinedBody>,
}

impl Outlining {
    pub(crate) fn new(funcs: Vec<FuncRef>) -> Self {
        Outlining {
            funcs,
            bodies: Vec::new(),
        }
    }
}

/// How many top-level parallel loops (not nested in another) `stmt` has: the number of
/// functions to outline.
pub(crate) fn count_parallel(stmt: &Stmt) -> usize {
    match stmt {
        Stmt::For {
            kind: ForKind::Parallel,
            ..
        } => 1,
        other => other.children().into_iter().map(count_parallel).sum(),
    }
}

/// The signature of an outlined body.
pub(crate) fn outlined_signature(
    ptr: Type,
    call_conv: cranelift_codegen::isa::CallConv,
) -> Signature {
    let mut sig = Signature::new(call_conv);
    sig.params.extend([
        AbiParam::new(ptr),
        AbiParam::new(types::I64),
        AbiParam::new(ptr),
    ]);
    sig.returns.push(AbiParam::new(types::I32));
    sig
}

fn env_offset(field: RtEnvField, ptr: Type) -> i32 {
    field.offset(ptr.bytes() as usize) as i32
}

impl Lowerer<'_, '_> {
    /// `for var in parallel(extent) { body }`.
    pub(crate) fn parallel_loop(
        &mut self,
        var: &TVar,
        extent: &PrimExpr,
        body: &Stmt,
    ) -> Result<(), CodegenError> {
        let index = self.parallel.bodies.len();
        let Some(&func) = self.parallel.funcs.get(index) else {
            let end = self.expr(extent)?;
            let zero = self.b.ins().iconst(types::I64, 0);
            return self.serial_loop(var, zero, end, body);
        };
        let extent = self.expr(extent)?;
        let (vars, buffers) = self.captures();
        let slots = vars.len() + buffers.len() + 2;
        let closure_slot = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            8 * slots as u32,
            3,
        ));
        let closure = self.b.ins().stack_addr(self.ptr, closure_slot, 0);
        let flags = MemFlagsData::trusted();
        for (k, (name, _)) in vars.iter().enumerate() {
            let value = self.b.use_var(self.vars[name].0);
            self.b.ins().store(flags, value, closure, 8 * k as i32);
        }
        for (k, buffer) in buffers.iter().enumerate() {
            let base = self.buffers[&buffer.name].base;
            self.b
                .ins()
                .store(flags, base, closure, 8 * (vars.len() + k) as i32);
        }
        let n_tasks = self.task_count(extent);
        let tail = 8 * (vars.len() + buffers.len()) as i32;
        self.b
            .ins()
            .store(flags, extent, closure, tail + 8 * CLOSURE_EXTENT as i32);
        self.b
            .ins()
            .store(flags, n_tasks, closure, tail + 8 * CLOSURE_TASKS as i32);
        self.launch(func, closure, n_tasks)?;
        self.parallel.bodies.push(OutlinedBody {
            index,
            var: var.clone(),
            body: body.clone(),
            vars,
            buffers,
        });
        Ok(())
    }

    /// Every variable and buffer in scope, sorted by name.
    fn captures(&self) -> (Vec<(String, Type)>, Vec<Buffer>) {
        let mut vars: Vec<(String, Type)> = self
            .vars
            .iter()
            .map(|(n, (_, ty))| (n.clone(), *ty))
            .collect();
        vars.sort_by(|a, b| a.0.cmp(&b.0));
        let mut buffers: Vec<Buffer> = self.buffers.values().map(|b| b.decl.clone()).collect();
        buffers.sort_by(|a, b| a.name.cmp(&b.name));
        (vars, buffers)
    }

    /// `n_tasks = min(extent, threads * TASKS_PER_THREAD)` (threads = 1 without a runtime).
    fn task_count(&mut self, extent: Value) -> Value {
        let one = self.b.ins().iconst(types::I64, 1);
        let null = self.b.ins().icmp_imm_u(IntCC::Equal, self.env, 0);
        let read = self.b.create_block();
        let known = self.b.create_block();
        self.b.append_block_param(known, types::I64);
        self.b.ins().brif(null, known, &[one.into()], read, &[]);
        self.b.switch_to_block(read);
        let from_env = self.b.ins().load(
            types::I64,
            MemFlagsData::trusted(),
            self.env,
            env_offset(RtEnvField::NumThreads, self.ptr),
        );
        self.b.ins().jump(known, &[from_env.into()]);
        self.b.switch_to_block(known);
        let threads = self.b.block_params(known)[0];
        let threads = self.b.ins().smax(threads, one);
        let max_tasks = self.b.ins().imul_imm_s(threads, TASKS_PER_THREAD);
        self.b.ins().smin(extent, max_tasks)
    }

    /// Runs tasks `0..n_tasks` of `func` on the pool (or inline without a runtime) and
    /// returns early with the first non-zero status.
    fn launch(
        &mut self,
        func: FuncRef,
        closure: Value,
        n_tasks: Value,
    ) -> Result<(), CodegenError> {
        let ptr = self.ptr;
        let body_address = self.b.ins().func_addr(ptr, func);
        let with_pool = self.b.create_block();
        let inline = self.b.create_block();
        let done = self.b.create_block();
        self.b.append_block_param(done, types::I32);
        let null = self.b.ins().icmp_imm_u(IntCC::Equal, self.env, 0);
        self.b.ins().brif(null, inline, &[], with_pool, &[]);

        self.b.switch_to_block(with_pool);
        let call_conv = self.b.func.signature.call_conv;
        let mut sig = Signature::new(call_conv);
        sig.params.extend([
            AbiParam::new(ptr),
            AbiParam::new(ptr),
            AbiParam::new(types::I64),
            AbiParam::new(ptr),
        ]);
        sig.returns.push(AbiParam::new(types::I32));
        let sig = self.b.import_signature(sig);
        let parallel_for = self.b.ins().load(
            ptr,
            MemFlagsData::trusted(),
            self.env,
            env_offset(RtEnvField::ParallelFor, ptr),
        );
        let call = self.b.ins().call_indirect(
            sig,
            parallel_for,
            &[body_address, closure, n_tasks, self.env],
        );
        let status = self.b.inst_results(call)[0];
        self.b.ins().jump(done, &[status.into()]);

        self.b.switch_to_block(inline);
        let status = self.inline_tasks(func, closure, n_tasks);
        self.b.ins().jump(done, &[status.into()]);

        self.b.switch_to_block(done);
        let status = self.b.block_params(done)[0];
        let failed = self.b.create_block();
        let next = self.b.create_block();
        self.b.ins().brif(status, failed, &[], next, &[]);
        self.b.switch_to_block(failed);
        self.b.ins().return_(&[status]);
        self.b.switch_to_block(next);
        Ok(())
    }

    /// Calls the body for every task in turn; the first non-zero status stops the loop.
    fn inline_tasks(&mut self, func: FuncRef, closure: Value, n_tasks: Value) -> Value {
        let header = self.b.create_block();
        let body = self.b.create_block();
        let exit = self.b.create_block();
        self.b.append_block_param(header, types::I64);
        self.b.append_block_param(exit, types::I32);
        let zero = self.b.ins().iconst(types::I64, 0);
        let ok = self.b.ins().iconst(types::I32, 0);
        self.b.ins().jump(header, &[zero.into()]);
        self.b.switch_to_block(header);
        let task = self.b.block_params(header)[0];
        let more = self.b.ins().icmp(IntCC::SignedLessThan, task, n_tasks);
        self.b.ins().brif(more, body, &[], exit, &[ok.into()]);
        self.b.switch_to_block(body);
        let call = self.b.ins().call(func, &[closure, task, self.env]);
        let status = self.b.inst_results(call)[0];
        let next = self.b.ins().iadd_imm_s(task, 1);
        let failed = self.b.ins().icmp_imm_u(IntCC::NotEqual, status, 0);
        let continue_block = self.b.create_block();
        self.b
            .ins()
            .brif(failed, exit, &[status.into()], continue_block, &[]);
        self.b.switch_to_block(continue_block);
        self.b.ins().jump(header, &[next.into()]);
        self.b.switch_to_block(exit);
        self.b.block_params(exit)[0]
    }
}

/// Builds an outlined body: unpacks the closure, then runs task `task`'s iterations of
/// the loop: with `extent = q * n_tasks + r`, `q + 1` of them for the first `r` tasks and
/// `q` for the others, in order.
pub(crate) fn lower_outlined(
    name: &str,
    outlined: &OutlinedBody,
    b: &mut FunctionBuilder<'_>,
    ptr: Type,
) -> Result<(), CodegenError> {
    let mut lowerer = Lowerer::new(name, b, ptr, Vec::new());
    let (closure, task) = (lowerer.param(0), lowerer.param(1));
    let flags = MemFlagsData::trusted();
    for (k, (var, ty)) in outlined.vars.iter().enumerate() {
        let value = lowerer.b.ins().load(*ty, flags, closure, 8 * k as i32);
        lowerer.define_var(var, *ty, value);
    }
    for (k, buffer) in outlined.buffers.iter().enumerate() {
        let base = lowerer
            .b
            .ins()
            .load(ptr, flags, closure, 8 * (outlined.vars.len() + k) as i32);
        lowerer.add_buffer(buffer, base)?;
    }
    let tail = 8 * (outlined.vars.len() + outlined.buffers.len()) as i32;
    let extent = lowerer
        .b
        .ins()
        .load(types::I64, flags, closure, tail + 8 * CLOSURE_EXTENT as i32);
    let n_tasks = lowerer
        .b
        .ins()
        .load(types::I64, flags, closure, tail + 8 * CLOSURE_TASKS as i32);
    let (start, end) = task_range(lowerer.b, extent, n_tasks, task);
    lowerer.serial_loop(&outlined.var, start, end, &outlined.body)?;
    lowerer.finish();
    Ok(())
}

/// Iterations `start..end` of task `task` of `n_tasks` (at least 1) over `0..extent`:
/// `start = task * q + min(task, r)` and one more than `q` iterations while `task < r`
/// (`q, r = extent / n_tasks, extent % n_tasks`).
fn task_range(
    b: &mut FunctionBuilder<'_>,
    extent: Value,
    n_tasks: Value,
    task: Value,
) -> (Value, Value) {
    let one = b.ins().iconst(types::I64, 1);
    let n_tasks = b.ins().smax(n_tasks, one);
    let q = b.ins().sdiv(extent, n_tasks);
    let r = b.ins().srem(extent, n_tasks);
    let before = b.ins().smin(task, r);
    let start = b.ins().imul(task, q);
    let start = b.ins().iadd(start, before);
    let longer = b.ins().icmp(IntCC::SignedLessThan, task, r);
    let longer = b.ins().uextend(types::I64, longer);
    let len = b.ins().iadd(q, longer);
    (start, b.ins().iadd(start, len))
}
