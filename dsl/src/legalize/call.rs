//! Reading an op call: its tensor arguments, result struct info and attributes.

use super::error::LegalizeError;
use crate::attrs::AttrValue;
use crate::ir::{Call, Expr};
use crate::te::{self, Tensor};
use crate::{DType, StructInfo, SymExpr};

/// An op call being legalized.
pub(super) struct OpCall<'a> {
    /// The op name.
    pub(super) op: &'a str,
    /// The call.
    pub(super) call: &'a Call,
}

/// The dims and dtype of a tensor struct info of known shape.
fn known_tensor(sinfo: &StructInfo) -> Option<(Vec<SymExpr>, DType)> {
    let tensor = sinfo.as_tensor()?;
    Some((tensor.dims()?.to_vec(), tensor.dtype))
}

impl OpCall<'_> {
    /// Argument `index`.
    pub(super) fn arg(&self, index: usize) -> Result<&Expr, LegalizeError> {
        self.call
            .args
            .get(index)
            .ok_or_else(|| LegalizeError::MissingArg {
                op: self.op.to_string(),
                index,
                count: self.call.args.len(),
            })
    }

    /// A placeholder named `name` for the tensor `expr` (argument `index`, or a field of it).
    pub(super) fn placeholder(
        &self,
        expr: &Expr,
        index: usize,
        name: &str,
    ) -> Result<Tensor, LegalizeError> {
        let sinfo = expr.sinfo();
        let (shape, dtype) = known_tensor(&sinfo).ok_or_else(|| LegalizeError::BadArg {
            op: self.op.to_string(),
            index,
            expected: "a tensor of known shape".to_string(),
            got: sinfo.to_string(),
        })?;
        Ok(te::placeholder(name, shape, dtype))
    }

    /// Placeholders for the leading tensor arguments, named `names`, and those arguments.
    pub(super) fn inputs(&self, names: &[&str]) -> Result<(Vec<Tensor>, Vec<Expr>), LegalizeError> {
        let mut tensors = Vec::new();
        let mut args = Vec::new();
        for (index, name) in names.iter().enumerate() {
            let arg = self.arg(index)?;
            tensors.push(self.placeholder(arg, index, name)?);
            args.push(arg.clone());
        }
        Ok((tensors, args))
    }

    /// The shape held by argument `index` (an `Expr::Shape` or a value of known shape).
    pub(super) fn shape_arg(&self, index: usize) -> Result<Vec<SymExpr>, LegalizeError> {
        match self.arg(index)?.sinfo() {
            StructInfo::Shape(Some(values)) => Ok(values),
            other => Err(LegalizeError::BadArg {
                op: self.op.to_string(),
                index,
                expected: "a shape of known values".to_string(),
                got: other.to_string(),
            }),
        }
    }

    /// The result's dims and dtype.
    pub(super) fn output(&self) -> Result<(Vec<SymExpr>, DType), LegalizeError> {
        known_tensor(&self.call.sinfo).ok_or_else(|| self.bad_output("a tensor of known shape"))
    }

    /// The result's dims and dtype, which must have rank `rank`.
    pub(super) fn output_of_rank(
        &self,
        rank: usize,
    ) -> Result<(Vec<SymExpr>, DType), LegalizeError> {
        let (shape, dtype) = self.output()?;
        if shape.len() != rank {
            return Err(self.bad_output(&format!("a tensor of rank {rank}")));
        }
        Ok((shape, dtype))
    }

    /// The dims and dtypes of a tuple result's fields.
    pub(super) fn output_fields(&self) -> Result<Vec<(Vec<SymExpr>, DType)>, LegalizeError> {
        let expected = "a tuple of tensors of known shape";
        match &self.call.sinfo {
            StructInfo::Tuple(fields) => fields
                .iter()
                .map(|f| known_tensor(f).ok_or_else(|| self.bad_output(expected)))
                .collect(),
            _ => Err(self.bad_output(expected)),
        }
    }

    /// An error saying the result should be `expected`.
    pub(super) fn bad_output(&self, expected: &str) -> LegalizeError {
        LegalizeError::BadOutput {
            op: self.op.to_string(),
            expected: expected.to_string(),
            got: self.call.sinfo.to_string(),
        }
    }

    /// A shape error with a message.
    pub(super) fn shape_error(&self, detail: String) -> LegalizeError {
        LegalizeError::Shape {
            op: self.op.to_string(),
            detail,
        }
    }

    /// Fails unless argument `index`'s dtype satisfies `ok`.
    pub(super) fn require_dtype(
        &self,
        index: usize,
        dtype: DType,
        ok: bool,
        expected: &str,
    ) -> Result<(), LegalizeError> {
        if ok {
            return Ok(());
        }
        Err(LegalizeError::UnsupportedDtype {
            op: self.op.to_string(),
            index,
            dtype,
            expected: expected.to_string(),
        })
    }

    /// `axis` normalized into `0..ndim` (negative counts from the end).
    pub(super) fn axis(&self, axis: i64, ndim: usize) -> Result<usize, LegalizeError> {
        let rank = i64::try_from(ndim).unwrap_or(i64::MAX);
        let normalized = if axis < 0 { axis + rank } else { axis };
        if (0..rank).contains(&normalized) {
            Ok(normalized as usize)
        } else {
            Err(LegalizeError::AxisOutOfRange {
                op: self.op.to_string(),
                axis,
                ndim,
            })
        }
    }

    /// Every axis normalized; duplicates are an error.
    pub(super) fn axes(
        &self,
        attr: &str,
        axes: &[i64],
        ndim: usize,
    ) -> Result<Vec<usize>, LegalizeError> {
        let normalized = axes
            .iter()
            .map(|&a| self.axis(a, ndim))
            .collect::<Result<Vec<_>, _>>()?;
        let mut sorted = normalized.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != normalized.len() {
            return Err(self.bad_attr(attr, "distinct axes", format!("{axes:?}")));
        }
        Ok(normalized)
    }

    fn attr<T>(
        &self,
        name: &str,
        expected: &str,
        pick: impl Fn(&AttrValue) -> Option<T>,
    ) -> Result<Option<T>, LegalizeError> {
        match self.call.attrs.get(name) {
            None => Ok(None),
            Some(value) => pick(value)
                .map(Some)
                .ok_or_else(|| self.bad_attr(name, expected, format!("{value:?}"))),
        }
    }

    /// An error saying attribute `attr` must be `expected`.
    pub(super) fn bad_attr(&self, attr: &str, expected: &str, got: String) -> LegalizeError {
        LegalizeError::BadAttr {
            op: self.op.to_string(),
            attr: attr.to_string(),
            expected: expected.to_string(),
            got,
        }
    }

    fn required<T>(&self, name: &str, value: Option<T>) -> Result<T, LegalizeError> {
        value.ok_or_else(|| LegalizeError::MissingAttr {
            op: self.op.to_string(),
            attr: name.to_string(),
        })
    }

    /// An `Int` attribute, `default` when absent.
    pub(super) fn int_attr(&self, name: &str, default: i64) -> Result<i64, LegalizeError> {
        let value = self.attr(name, "an Int", |v| match v {
            AttrValue::Int(i) => Some(*i),
            _ => None,
        })?;
        Ok(value.unwrap_or(default))
    }

    /// An `Ints` attribute, if present.
    pub(super) fn ints_attr(&self, name: &str) -> Result<Option<Vec<i64>>, LegalizeError> {
        self.attr(name, "Ints", |v| match v {
            AttrValue::Ints(i) => Some(i.clone()),
            _ => None,
        })
    }

    /// A required `Ints` attribute.
    pub(super) fn required_ints(&self, name: &str) -> Result<Vec<i64>, LegalizeError> {
        let value = self.ints_attr(name)?;
        self.required(name, value)
    }

    /// A `Float` (or `Int`) attribute, `default` when absent.
    pub(super) fn float_attr(&self, name: &str, default: f64) -> Result<f64, LegalizeError> {
        let value = self.attr(name, "a Float", |v| match v {
            AttrValue::Float(f) => Some(*f),
            AttrValue::Int(i) => Some(*i as f64),
            _ => None,
        })?;
        Ok(value.unwrap_or(default))
    }

    /// A `Bool` attribute, `default` when absent.
    pub(super) fn bool_attr(&self, name: &str, default: bool) -> Result<bool, LegalizeError> {
        let value = self.attr(name, "a Bool", |v| match v {
            AttrValue::Bool(b) => Some(*b),
            _ => None,
        })?;
        Ok(value.unwrap_or(default))
    }

    /// A `Str` attribute, `default` when absent.
    pub(super) fn str_attr(&self, name: &str, default: &str) -> Result<String, LegalizeError> {
        let value = self.attr(name, "a Str", |v| match v {
            AttrValue::Str(s) => Some(s.clone()),
            _ => None,
        })?;
        Ok(value.unwrap_or_else(|| default.to_string()))
    }

    /// A required `DType` attribute.
    pub(super) fn dtype_attr(&self, name: &str) -> Result<DType, LegalizeError> {
        let value = self.attr(name, "a DType", |v| match v {
            AttrValue::DType(d) => Some(*d),
            _ => None,
        })?;
        self.required(name, value)
    }

    /// A required `Shape` attribute.
    pub(super) fn shape_attr(&self, name: &str) -> Result<Vec<SymExpr>, LegalizeError> {
        let value = self.attr(name, "a Shape", |v| match v {
            AttrValue::Shape(s) => Some(s.clone()),
            _ => None,
        })?;
        self.required(name, value)
    }
}
