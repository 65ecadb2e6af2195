//! The context an op's inference function runs in: the op, its arguments' struct info
//! and its validated attributes, with accessors that fail with errors naming them.

use super::attr::{normalize_axes, normalize_axis};
use super::error::{ArgRef, Dims, InferError};
use super::OpDef;
use crate::{Attrs, DType, StructInfo, SymExpr, TensorInfo};

/// What an op's inference function sees: the op, the arguments' struct info and the
/// attributes (validated, defaults filled in).
pub struct InferCtx<'a> {
    def: &'static OpDef,
    args: &'a [StructInfo],
    attrs: &'a Attrs,
}

/// A tensor argument of known shape.
pub(crate) struct Tensor<'a> {
    /// Which argument it is.
    pub arg: ArgRef,
    /// Its dims.
    pub dims: &'a [SymExpr],
    /// Its element type.
    pub dtype: DType,
}

impl Tensor<'_> {
    /// The shape, for messages.
    pub fn shape(&self) -> Dims {
        Dims::from(self.dims)
    }

    /// The number of dims.
    pub fn rank(&self) -> usize {
        self.dims.len()
    }
}

impl<'a> InferCtx<'a> {
    /// A context for `def` applied to `args` with completed `attrs`.
    pub(crate) fn new(def: &'static OpDef, args: &'a [StructInfo], attrs: &'a Attrs) -> Self {
        InferCtx { def, args, attrs }
    }

    /// The op's name.
    pub(crate) fn op(&self) -> &'static str {
        self.def.name
    }

    /// The number of arguments.
    pub(crate) fn num_args(&self) -> usize {
        self.args.len()
    }

    /// Argument `index` for messages.
    pub(crate) fn arg(&self, index: usize) -> ArgRef {
        ArgRef {
            index,
            role: self
                .def
                .args
                .get(index)
                .copied()
                .unwrap_or("argument")
                .into(),
        }
    }

    fn sinfo(&self, index: usize) -> Result<&'a StructInfo, InferError> {
        self.args
            .get(index)
            .ok_or_else(|| self.def.arg_count_error(self.args.len()))
    }

    fn wrong_kind(&self, arg: ArgRef, expected: &'static str, got: &StructInfo) -> InferError {
        InferError::ArgKind {
            op: self.op(),
            arg,
            expected,
            got: got.clone(),
        }
    }

    /// Argument `index` as a tensor of any shape.
    pub(crate) fn any_tensor(&self, index: usize) -> Result<&'a TensorInfo, InferError> {
        let sinfo = self.sinfo(index)?;
        sinfo
            .as_tensor()
            .ok_or_else(|| self.wrong_kind(self.arg(index), "a tensor", sinfo))
    }

    /// Argument `index` as a tensor of known shape.
    pub(crate) fn tensor(&self, index: usize) -> Result<Tensor<'a>, InferError> {
        self.known_tensor(self.sinfo(index)?, self.arg(index))
    }

    /// `sinfo` (argument `arg` or a field of it) as a tensor of known shape.
    pub(crate) fn known_tensor(
        &self,
        sinfo: &'a StructInfo,
        arg: ArgRef,
    ) -> Result<Tensor<'a>, InferError> {
        match sinfo.as_tensor().and_then(|t| Some((t.dims()?, t.dtype))) {
            Some((dims, dtype)) => Ok(Tensor { arg, dims, dtype }),
            None => Err(self.wrong_kind(arg, "a tensor of known shape", sinfo)),
        }
    }

    /// Argument `index` as a shape value of known dims, as given.
    pub(crate) fn shape_value(&self, index: usize) -> Result<&'a [SymExpr], InferError> {
        match self.sinfo(index)? {
            StructInfo::Shape(Some(dims)) => Ok(dims),
            other => Err(self.wrong_kind(self.arg(index), "a shape value", other)),
        }
    }

    /// Argument `index` as the shape of a new tensor: no dim may be provably negative.
    pub(crate) fn new_shape(&self, index: usize) -> Result<&'a [SymExpr], InferError> {
        let dims = self.shape_value(index)?;
        match dims.iter().find(|d| d.max_value().is_some_and(|hi| hi < 0)) {
            Some(bad) => Err(self.invalid_arg(index, format!("dim {bad} is negative"))),
            None => Ok(dims),
        }
    }

    /// Argument `index` as a tuple's fields.
    pub(crate) fn tuple(&self, index: usize) -> Result<&'a [StructInfo], InferError> {
        match self.sinfo(index)? {
            StructInfo::Tuple(items) => Ok(items),
            other => Err(self.wrong_kind(self.arg(index), "a tuple", other)),
        }
    }

    /// Argument `index` as a scalar; its dtype.
    pub(crate) fn scalar(&self, index: usize) -> Result<DType, InferError> {
        match self.sinfo(index)? {
            StructInfo::Scalar(dtype) => Ok(*dtype),
            other => Err(self.wrong_kind(self.arg(index), "a scalar", other)),
        }
    }

    /// An "invalid argument" error for argument `index`.
    pub(crate) fn invalid_arg(&self, index: usize, reason: String) -> InferError {
        InferError::InvalidArg {
            op: self.op(),
            arg: self.arg(index),
            reason,
        }
    }

    /// Attribute `name` read with a getter of [`super::attr`], if present.
    pub(crate) fn attr<'s, T>(
        &'s self,
        name: &str,
        get: fn(&'s Attrs, &str) -> Option<T>,
    ) -> Option<T> {
        get(self.attrs, name)
    }

    /// Attribute `name`, which must be present (required or defaulted).
    pub(crate) fn require<'s, T>(
        &'s self,
        name: &'static str,
        get: fn(&'s Attrs, &str) -> Option<T>,
    ) -> Result<T, InferError> {
        get(self.attrs, name).ok_or(InferError::MissingAttr {
            op: self.op(),
            attr: name,
        })
    }

    /// The `Int` axis attribute `name`, normalized against rank `ndim`.
    pub(crate) fn axis(&self, name: &'static str, ndim: usize) -> Result<usize, InferError> {
        normalize_axis(self.op(), name, self.require(name, super::attr::int)?, ndim)
    }

    /// The optional `Ints` axes attribute `name`, normalized against rank `ndim`.
    pub(crate) fn axes(
        &self,
        name: &'static str,
        ndim: usize,
    ) -> Result<Option<Vec<usize>>, InferError> {
        self.attr(name, super::attr::ints)
            .map(|axes| normalize_axes(self.op(), name, axes, ndim))
            .transpose()
    }

    /// An "invalid attribute" error for `name`.
    pub(crate) fn invalid_attr(&self, name: &'static str, reason: String) -> InferError {
        InferError::InvalidAttr {
            op: self.op(),
            attr: name,
            reason,
        }
    }

    /// Fails unless `dtype` (of `arg`) satisfies `accept` (described by `expected`).
    pub(crate) fn check_dtype(
        &self,
        arg: ArgRef,
        dtype: DType,
        accept: fn(DType) -> bool,
        expected: &'static str,
    ) -> Result<(), InferError> {
        if accept(dtype) {
            Ok(())
        } else {
            Err(InferError::DTypeNotAllowed {
                op: self.op(),
                arg,
                dtype,
                expected,
            })
        }
    }

    /// Fails unless `a` and `b` have the same dtype; returns it.
    pub(crate) fn same_dtype(&self, a: &Tensor, b: &Tensor) -> Result<DType, InferError> {
        if a.dtype == b.dtype {
            Ok(a.dtype)
        } else {
            Err(InferError::DTypeMismatch {
                op: self.op(),
                lhs: a.arg.clone(),
                lhs_dtype: a.dtype,
                rhs: b.arg.clone(),
                rhs_dtype: b.dtype,
            })
        }
    }

    /// The result dtype of activations `x` times weights `w`: their common dtype, or f32
    /// for f32 activations with f16 weights (widened as they are read).
    pub(crate) fn weighted_dtype(&self, x: &Tensor, w: &Tensor) -> Result<DType, InferError> {
        match (x.dtype, w.dtype) {
            (DType::F32, DType::F16) => Ok(DType::F32),
            _ => self.same_dtype(x, w),
        }
    }

    /// A "shapes must agree" error between `a` and `b`.
    pub(crate) fn shape_mismatch(&self, what: &str, a: &Tensor, b: &Tensor) -> InferError {
        InferError::ShapeMismatch {
            op: self.op(),
            what: what.into(),
            lhs: a.arg.clone(),
            lhs_shape: a.shape(),
            rhs: b.arg.clone(),
            rhs_shape: b.shape(),
        }
    }
}

/// Whether `dtype` is a float type.
pub(crate) fn is_float(dtype: DType) -> bool {
    dtype.is_float()
}

/// Whether `dtype` is numeric (anything but bool).
pub(crate) fn is_numeric(dtype: DType) -> bool {
    dtype != DType::Bool
}
