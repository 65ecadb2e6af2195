//! Shape and dtype checks: `MatchShape` on values, and kernel arguments against the
//! kernel's signature before every call.

use super::bytecode::{DimPattern, Reg};
use super::error::VmError;
use super::exec::{BufferSig, KernelDecl};
use super::machine::Frame;
use super::run::{Ctx, Scope};
use crate::dtype::DType;
use crate::tensor::Tensor;

/// `[a, b, ...]` of the given items.
fn bracketed(items: impl Iterator<Item = String>) -> String {
    format!("[{}]", items.collect::<Vec<_>>().join(", "))
}

/// `[1, 9] f32`.
fn describe(t: &Tensor) -> String {
    format!("{:?} {}", t.shape(), t.dtype())
}

impl Ctx<'_> {
    /// The printable symbolic shape of `patterns`, e.g. `[1, n] i32`.
    fn pattern_text(&self, patterns: &[DimPattern], dtype: DType) -> String {
        let items = patterns.iter().map(|p| match p {
            DimPattern::Const(c) => c.to_string(),
            DimPattern::Bind(d) => self.dim_names[*d as usize].to_string(),
            DimPattern::Check(e) => e.display(&self.dim_names).to_string(),
        });
        format!("{} {dtype}", bracketed(items))
    }

    fn mismatch(&self, what: String, expected: String, t: &Tensor, reason: String) -> VmError {
        VmError::ShapeMismatch {
            func: self.name.to_string(),
            what,
            expected,
            got: describe(t),
            reason,
        }
    }

    /// Checks the tensor in `reg` against `dtype` and `patterns`, binding unbound dims.
    pub(super) fn match_shape(
        &self,
        frame: &mut Frame,
        reg: Reg,
        dtype: DType,
        patterns: &[DimPattern],
    ) -> Result<(), VmError> {
        let what = || self.reg_name(reg);
        let t = self.tensor(&frame.regs, reg, &what)?;
        let dims = &mut frame.dims;
        let fail = |reason: String| {
            Err(self.mismatch(what(), self.pattern_text(patterns, dtype), t, reason))
        };
        if t.dtype() != dtype {
            return fail(format!("dtype is {}, expected {dtype}", t.dtype()));
        }
        if t.ndim() != patterns.len() {
            return fail(format!("rank is {}, expected {}", t.ndim(), patterns.len()));
        }
        for (axis, (pattern, &extent)) in patterns.iter().zip(t.shape()).enumerate() {
            match pattern {
                DimPattern::Const(c) if extent != *c => {
                    return fail(format!("axis {axis} is {extent}, expected {c}"));
                }
                DimPattern::Const(_) => {}
                DimPattern::Bind(d) => match dims[*d as usize] {
                    Some(bound) if bound != extent => {
                        let name = self.dim_names[*d as usize];
                        return fail(format!("axis {axis} is {extent}, but `{name}` = {bound}"));
                    }
                    Some(_) => {}
                    None => {
                        self.check_bound(*d, extent, &what)?;
                        dims[*d as usize] = Some(extent);
                    }
                },
                DimPattern::Check(e) => {
                    let scope = Scope {
                        dim: &|d| dims[d as usize],
                        names: &self.dim_names,
                        context: &what,
                    };
                    let value = self.eval(e, &scope)?;
                    if value != extent {
                        let printed = e.display(&self.dim_names);
                        return fail(format!(
                            "axis {axis} is {extent}, expected `{printed}` = {value}"
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Checks a newly bound dim against its upper bound.
    fn check_bound(&self, dim: u32, value: i64, what: &dyn Fn() -> String) -> Result<(), VmError> {
        let decl = &self.func.dims[dim as usize];
        match decl.upper_bound {
            Some(bound) if value > bound => Err(VmError::DimOutOfBounds {
                func: self.name.to_string(),
                what: what(),
                dim: decl.name.clone(),
                value,
                bound,
            }),
            _ => Ok(()),
        }
    }

    /// Checks argument `index` of a kernel call against its signature, for kernel dim
    /// `values`: dtype, extents and contiguity.
    pub(super) fn check_kernel_arg(
        &self,
        t: &Tensor,
        decl: &KernelDecl,
        index: usize,
        sig: &BufferSig,
        values: &[i64],
    ) -> Result<(), VmError> {
        let what = || format!("kernel `{}` argument {index}", decl.name);
        let scope = Scope {
            dim: &|d| values.get(d as usize).copied(),
            names: &decl.dims,
            context: &what,
        };
        let mut same_extents = t.ndim() == sig.shape.len();
        for (axis, expr) in sig.shape.iter().enumerate() {
            let extent = self.extent(expr, &scope)?;
            same_extents &= t.shape().get(axis) == Some(&extent);
        }
        let reason = if t.dtype() != sig.dtype {
            format!("dtype is {}, expected {}", t.dtype(), sig.dtype)
        } else if !same_extents {
            let extents = self.extents(&sig.shape, &scope)?;
            format!("extents are {:?}, expected {extents:?}", t.shape())
        } else if !t.is_contiguous() {
            format!("strides {:?} are not row-major", t.strides())
        } else {
            return Ok(());
        };
        let shape = bracketed(sig.shape.iter().map(|e| e.display(&decl.dims).to_string()));
        let bindings: Vec<String> = decl
            .dims
            .iter()
            .zip(values)
            .map(|(n, v)| format!("{n} = {v}"))
            .collect();
        let expected = match bindings.is_empty() {
            true => format!("{shape} {}", sig.dtype),
            false => format!("{shape} {} with {}", sig.dtype, bindings.join(", ")),
        };
        Err(self.mismatch(what(), expected, t, reason))
    }
}
