//! Running a microkernel call with its reference semantics
//! ([`GemmScalars::reference`], [`AttentionScalars::reference`]), bounds-checked like every
//! other access.

use super::scalar::{self, Scalar};
use super::{EvalError, Machine};
use crate::tir::{
    AttentionScalars, BufferRegion, GemmScalars, IntGemmScalars, MicrokernelCall, MicrokernelKind,
    MicrokernelSpec,
};
use crate::DType;
use oxrelax_abi::PANEL;

impl Machine<'_> {
    pub(super) fn microkernel(&mut self, call: &MicrokernelCall) -> Result<(), EvalError> {
        let error = |message: String| EvalError::Microkernel {
            kernel: call.kernel.clone(),
            message,
        };
        let spec = MicrokernelSpec::lookup(&call.kernel)
            .ok_or_else(|| error("no such microkernel".to_string()))?;
        let (operands, scalars) = (spec.kind.operands(), spec.kind.scalars());
        if call.operands.len() != operands.len() || call.scalars.len() != scalars.len() {
            return Err(error(format!(
                "takes {} buffers and {} scalars, got {} and {}",
                operands.len(),
                scalars.len(),
                call.operands.len(),
                call.scalars.len()
            )));
        }
        for (operand, wanted) in call.operands.iter().zip(spec.kind.operand_dtypes()) {
            let dtype = self.buffer_mut(&operand.buffer)?.dtype;
            if dtype != wanted {
                let buffer = &operand.buffer;
                return Err(error(format!("buffer `{buffer}` is {dtype}, not {wanted}")));
            }
        }
        let values = call
            .scalars
            .iter()
            .map(|s| self.eval(s))
            .collect::<Result<Vec<_>, _>>()?;
        match spec.kind {
            MicrokernelKind::Gemm {
                ep, hp, weights, ..
            } => self.gemm(call, (ep, hp, weights), &values, &error),
            MicrokernelKind::IntGemm {
                ep, hp, weights, ..
            } => self.int_gemm(call, ((ep, hp), weights), &values, &error),
            MicrokernelKind::Attention { .. } => self.attention(call, &values, &error),
        }
    }

    fn int_gemm(
        &mut self,
        call: &MicrokernelCall,
        (block, weights): ((i64, i64), DType),
        values: &[Scalar],
        error: &dyn Fn(String) -> EvalError,
    ) -> Result<(), EvalError> {
        let ints: Vec<i64> = values.iter().map(|v| v.as_i64()).collect();
        let &[kc, lda, ldc, rows, cols] = ints.as_slice() else {
            unreachable!("the scalar count was checked");
        };
        let scalars = IntGemmScalars {
            kc,
            lda,
            ldc,
            rows,
            cols,
        };
        if !scalars.valid(block) {
            return Err(error(format!("bad scalars {ints:?}")));
        }
        let lens = scalars.footprint();
        let (c, inputs) = call
            .operands
            .split_last()
            .expect("the operand count was checked");
        let mut read = Vec::with_capacity(inputs.len());
        for (operand, &len) in inputs.iter().zip(&lens) {
            read.push(self.region(&operand.buffer, &operand.offset, len, error)?);
        }
        let [a, a_scales, b, scales] = [0, 1, 2, 3].map(|i| read[i].as_slice());
        self.write_region(c, lens[4], error, |out| {
            scalars.reference(weights, [a, a_scales, b, scales], out)
        })
    }

    fn gemm(
        &mut self,
        call: &MicrokernelCall,
        (ep, hp, weights): (i64, i64, DType),
        values: &[Scalar],
        error: &dyn Fn(String) -> EvalError,
    ) -> Result<(), EvalError> {
        let ints: Vec<i64> = values.iter().map(|v| v.as_i64()).collect();
        let &[kc, lda, ldc, rows, cols, accumulate] = ints.as_slice() else {
            unreachable!("the scalar count was checked");
        };
        let scalars = GemmScalars {
            kc,
            lda,
            ldc,
            rows,
            cols,
            accumulate: accumulate != 0,
        };
        let in_block = (0..=ep).contains(&rows) && (0..=hp).contains(&cols);
        if !in_block || kc < 0 || ldc < cols || ((rows > 1 || cols > PANEL as i64) && lda < kc) {
            return Err(error(format!("bad scalars {ints:?}")));
        }
        let [len_a, len_b, len_c] = scalars.footprint(weights);
        let (a, b, scales, c) = match &call.operands[..] {
            [a, b, c] => (a, b, None, c),
            [a, b, scales, c] => (a, b, Some(scales), c),
            _ => unreachable!("the operand count was checked"),
        };
        let a = self.region(&a.buffer, &a.offset, len_a, error)?;
        let b = self.region(&b.buffer, &b.offset, len_b, error)?;
        let scales = match scales {
            Some(s) => {
                let len = scalars.scales_footprint();
                Some(self.region(&s.buffer, &s.offset, len, error)?)
            }
            None => None,
        };
        self.write_region(c, len_c, error, |out| {
            scalars.reference(weights, (&a, &b, scales.as_deref()), out)
        })
    }

    fn attention(
        &mut self,
        call: &MicrokernelCall,
        values: &[Scalar],
        error: &dyn Fn(String) -> EvalError,
    ) -> Result<(), EvalError> {
        let (&[rows, keys, kv_stride, head_dim, scale], scale_stride) = values.split_at(5) else {
            unreachable!("the scalar count was checked");
        };
        let scalars = AttentionScalars {
            rows: rows.as_i64(),
            keys: keys.as_i64(),
            kv_stride: kv_stride.as_i64(),
            head_dim: head_dim.as_i64(),
            scale: scale.as_f64(),
            scale_stride: scale_stride.first().map(|s| s.as_i64()),
        };
        let bad_stride = scalars.scale_stride.is_some_and(|s| s < 0);
        let bad_rows = scalars.rows < 0;
        if scalars.head_dim < 0 || scalars.kv_stride < scalars.head_dim || bad_stride || bad_rows {
            return Err(error(format!("bad scalars {scalars:?}")));
        }
        let [len_q, len_k, len_v, len_out] = scalars.footprint();
        let (out, inputs) = call
            .operands
            .split_last()
            .expect("the operand count was checked");
        let mut lens = vec![len_q, len_k, len_v];
        lens.resize(inputs.len(), scalars.scales_footprint());
        let mut read = Vec::with_capacity(inputs.len());
        for (operand, &len) in inputs.iter().zip(&lens) {
            read.push(self.region(&operand.buffer, &operand.offset, len, error)?);
        }
        let scales = match &read[..] {
            [_, _, _, k_scales, v_scales] => Some((k_scales.as_slice(), v_scales.as_slice())),
            _ => None,
        };
        self.write_region(out, len_out, error, |out| {
            scalars.reference(&read[0], (&read[1], &read[2]), scales, out)
        })
    }

    /// Runs `compute` on the checked elements `[offset, offset + len)` of `region`'s
    /// buffer, then rounds them to the buffer's dtype.
    fn write_region(
        &mut self,
        region: &BufferRegion,
        len: i64,
        error: &dyn Fn(String) -> EvalError,
        compute: impl FnOnce(&mut [f64]),
    ) -> Result<(), EvalError> {
        let start = self.region_bounds(&region.buffer, &region.offset, len, error)?;
        let state = self.buffer_mut(&region.buffer)?;
        let dtype = state.dtype;
        let out = &mut state.data[start..start + len as usize];
        compute(out);
        for value in out.iter_mut() {
            *value = scalar::round_to(*value, dtype);
        }
        Ok(())
    }

    /// A copy of `len` elements of buffer `buffer` from flat element `offset`.
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

    /// The start of the checked element range `[offset, offset + len)` of buffer
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
