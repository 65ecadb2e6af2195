//! Statements: loops, stores, lets, conditionals, allocations.

use super::{compute_type, Lowerer};
use crate::CodegenError;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, StackSlotData, StackSlotKind, Value};
use oxrelax_dsl::tir::{Buffer, ForKind, PrimExpr, Stmt, TVar};
use oxrelax_dsl::SymExpr;

/// Unrolled loops with a constant trip count up to this are emitted iteration by
/// iteration; longer or symbolic ones run as serial loops.
const MAX_UNROLL: i64 = 64;

/// Local allocations up to this many bytes live on the stack.
const MAX_STACK_ALLOCATION: i64 = 256 * 1024;

impl Lowerer<'_, '_> {
    pub(crate) fn stmt(&mut self, stmt: &Stmt) -> Result<(), CodegenError> {
        match stmt {
            Stmt::Seq(items) => items.iter().try_for_each(|s| self.stmt(s)),
            Stmt::For {
                var,
                extent,
                kind: ForKind::Vectorized,
                body,
            } => self.vector_loop(var, extent, body),
            Stmt::For {
                var,
                extent,
                kind: ForKind::Parallel,
                body,
            } => self.parallel_loop(var, extent, body),
            Stmt::For {
                var,
                extent: PrimExpr::Int(trips, _),
                kind: ForKind::Unrolled,
                body,
            } if *trips <= MAX_UNROLL => (0..*trips).try_for_each(|i| {
                let index = self.b.ins().iconst(types::I64, i);
                self.define_var(&var.name, types::I64, index);
                self.stmt(body)
            }),
            Stmt::For {
                var, extent, body, ..
            } => {
                let extent = self.expr(extent)?;
                let zero = self.b.ins().iconst(types::I64, 0);
                self.serial_loop(var, zero, extent, body)
            }
            Stmt::Store {
                buffer,
                indices,
                value,
            } => {
                let value = self.expr(value)?;
                self.store(buffer, indices, value)
            }
            Stmt::Let { var, value, body } => {
                let value = self.expr(value)?;
                self.define_var(&var.name, compute_type(var.dtype), value);
                self.stmt(body)
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } => self.conditional(cond, then, otherwise.as_deref()),
            Stmt::Allocate { buffer, body } => {
                if !self.try_promote(buffer, body) {
                    self.allocate(buffer)?;
                }
                self.stmt(body)
            }
            Stmt::Evaluate(expr) => self.expr(expr).map(|_| ()),
            Stmt::Microkernel(call) => self.microkernel(call),
        }
    }

    /// `for var in start..end { body }`.
    pub(crate) fn serial_loop(
        &mut self,
        var: &TVar,
        start: Value,
        end: Value,
        body: &Stmt,
    ) -> Result<(), CodegenError> {
        self.counted_loop(start, end, 1, |l, index| {
            l.define_var(&var.name, types::I64, index);
            l.stmt(body)
        })
    }

    /// A loop over `index = start, start + step, ...` while `index < end`, as
    /// header/body/exit blocks; `body` emits one iteration.
    pub(crate) fn counted_loop(
        &mut self,
        start: Value,
        end: Value,
        step: i64,
        body: impl FnOnce(&mut Self, Value) -> Result<(), CodegenError>,
    ) -> Result<(), CodegenError> {
        let header = self.b.create_block();
        let body_block = self.b.create_block();
        let exit = self.b.create_block();
        self.b.append_block_param(header, types::I64);
        self.b.ins().jump(header, &[start.into()]);

        self.b.switch_to_block(header);
        let index = self.b.block_params(header)[0];
        let more = self.b.ins().icmp(IntCC::SignedLessThan, index, end);
        self.b.ins().brif(more, body_block, &[], exit, &[]);

        self.b.switch_to_block(body_block);
        body(self, index)?;
        let next = self.b.ins().iadd_imm_s(index, step);
        self.b.ins().jump(header, &[next.into()]);

        self.b.switch_to_block(exit);
        Ok(())
    }

    fn conditional(
        &mut self,
        cond: &PrimExpr,
        then: &Stmt,
        otherwise: Option<&Stmt>,
    ) -> Result<(), CodegenError> {
        let cond = self.expr(cond)?;
        let then_block = self.b.create_block();
        let else_block = self.b.create_block();
        let merge = self.b.create_block();
        self.b.ins().brif(cond, then_block, &[], else_block, &[]);
        self.b.switch_to_block(then_block);
        self.stmt(then)?;
        self.b.ins().jump(merge, &[]);
        self.b.switch_to_block(else_block);
        if let Some(otherwise) = otherwise {
            self.stmt(otherwise)?;
        }
        self.b.ins().jump(merge, &[]);
        self.b.switch_to_block(merge);
        Ok(())
    }

    /// A local buffer on the stack, sized from the upper bounds of its dims.
    fn allocate(&mut self, buffer: &Buffer) -> Result<(), CodegenError> {
        let elements = SymExpr::product(&buffer.shape);
        let bytes = elements
            .max_value()
            .map(|e| (e * i64::from(buffer.dtype.bits()) + 7) / 8)
            .ok_or_else(|| {
                self.unsupported(format!(
                    "allocation `{}` of {} elements has no upper bound",
                    buffer.name, elements
                ))
            })?;
        if bytes > MAX_STACK_ALLOCATION {
            return Err(self.unsupported(format!(
                "allocation `{}` needs up to {bytes} bytes (stack limit {MAX_STACK_ALLOCATION})",
                buffer.name
            )));
        }
        let slot = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            bytes.max(1) as u32,
            6,
        ));
        let base = self.b.ins().stack_addr(self.ptr, slot, 0);
        self.add_buffer(buffer, base)
    }
}
