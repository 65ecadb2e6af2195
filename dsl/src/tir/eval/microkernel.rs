//! Running a microkernel call with its reference semantics
//! ([`MicrokernelSpec::reference`]), bounds-checked like every other access.

use super::scalar::{self, Scalar};
use super::{EvalError, Machine};
use crate::tir::{GemmScalars, MicrokernelCall, MicrokernelSpec};
use crate::DataType;

impl Machine<'_> {
    pub(super) fn microkernel(&mut self, call: &MicrokernelCall) -> Result<(), EvalError> {
        let error = |message: String| EvalError::Microkernel {
            kernel: call.kernel.clone(),
            message,
        };
        let spec = MicrokernelSpec::lookup(&call.kernel)
            .ok_or_else(|| error("no such microkernel".to_string()))?;
        let [a, b, c] = call.operands.as_slice() else {
            return Err(error(format!(
                "takes 3 buffers, got {}",
                call.operands.len()
            )));
        };
        let values = call
            .scalars
            .iter()
            .map(|s| self.eval(s).map(Scalar::as_i64))
            .collect::<Result<Vec<_>, _>>()?;
        let [kc, ldc, rows, cols, accumulate] = values.as_slice() else {
            return Err(error(format!("takes 5 scalars, got {}", values.len())));
        };
        let scalars = GemmScalars {
            kc: *kc,
            ldc: *ldc,
            rows: *rows,
            cols: *cols,
            accumulate: *accumulate != 0,
        };
        let in_block = (0..=spec.ep).contains(rows) && (0..=spec.hp).contains(cols);
        if !in_block || *kc < 0 || *ldc < *cols {
            return Err(error(format!("bad scalars {values:?}")));
        }
        let [len_a, len_b, len_c] = spec.footprint(&scalars);
        let a = self.region(&a.buffer, &a.offset, len_a, &error)?;
        let b = self.region(&b.buffer, &b.offset, len_b, &error)?;
        let start = self.region_bounds(&c.buffer, &c.offset, len_c, &error)?;
        let state = self.buffer_mut(&c.buffer)?;
        let dtype = state.dtype;
        let out = &mut state.data[start..start + len_c as usize];
        spec.reference(&a, &b, out, &scalars);
        for value in out.iter_mut() {
            *value = scalar::round_to(*value, dtype);
        }
        Ok(())
    }

    /// A copy of `len` elements of f32 buffer `buffer` from flat element `offset`.
    fn region(
        &mut self,
        buffer: &str,
        offset: &crate::tir::PrimExpr,
        len: i64,
        error: &dyn Fn(String) -> EvalError,
    ) -> Result<Vec<f64>, EvalError> {
        let start = self.region_bounds(buffer, offset, len, error)?;
        let state = self.buffer_mut(buffer)?;
        Ok(state.data[start..start + len as usize].to_vec())
    }

    /// The start of the checked element range `[offset, offset + len)` of f32 buffer
    /// `buffer`.
    fn region_bounds(
        &mut self,
        buffer: &str,
        offset: &crate::tir::PrimExpr,
        len: i64,
        error: &dyn Fn(String) -> EvalError,
    ) -> Result<usize, EvalError> {
        let offset = self.eval(offset)?.as_i64();
        let state = self.buffer_mut(buffer)?;
        if state.dtype != DataType::F32 {
            return Err(error(format!(
                "buffer `{buffer}` is {}, not f32",
                state.dtype
            )));
        }
        let end = offset.checked_add(len);
        match (
            usize::try_from(offset),
            end.and_then(|e| usize::try_from(e).ok()),
        ) {
            (Ok(start), Some(end)) if end <= state.data.len() => Ok(start),
            _ => Err(error(format!(
                "region [{offset}, {offset} + {len}) of `{buffer}` is outside its {} elements",
                state.data.len()
            ))),
        }
    }
}
