//! Struct info: the static type and shape knowledge every graph-IR value carries.

use crate::{DType, SymExpr, SymVar};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// What is known about a tensor's shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TensorShape {
    /// Every dim is known as a symbolic expression.
    Known(Vec<SymExpr>),
    /// Only the rank is known.
    Rank(usize),
    /// Nothing is known.
    Unknown,
}

/// Struct info of a tensor value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TensorInfo {
    /// The shape, as far as it is known.
    pub shape: TensorShape,
    /// The element type.
    pub dtype: DType,
}

impl TensorInfo {
    /// A tensor of known shape.
    pub fn new(shape: Vec<SymExpr>, dtype: DType) -> Self {
        TensorInfo {
            shape: TensorShape::Known(shape),
            dtype,
        }
    }

    /// The dims when the shape is known.
    pub fn dims(&self) -> Option<&[SymExpr]> {
        match &self.shape {
            TensorShape::Known(dims) => Some(dims),
            _ => None,
        }
    }

    /// The rank when it is known.
    pub fn ndim(&self) -> Option<usize> {
        match &self.shape {
            TensorShape::Known(dims) => Some(dims.len()),
            TensorShape::Rank(r) => Some(*r),
            TensorShape::Unknown => None,
        }
    }
}

/// The static information a value carries.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StructInfo {
    /// A tensor.
    Tensor(TensorInfo),
    /// A tuple of values.
    Tuple(Vec<StructInfo>),
    /// A shape value (e.g. the argument of `reshape`); `None` when only unknown.
    Shape(Option<Vec<SymExpr>>),
    /// A scalar of a data type (a `PrimValue`).
    Scalar(DType),
    /// An opaque runtime object (a KV cache, a string).
    Object,
}

impl StructInfo {
    /// A tensor of known shape.
    pub fn tensor(shape: Vec<SymExpr>, dtype: DType) -> Self {
        StructInfo::Tensor(TensorInfo::new(shape, dtype))
    }

    /// The tensor info, if this is a tensor.
    pub fn as_tensor(&self) -> Option<&TensorInfo> {
        match self {
            StructInfo::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// Every symbolic dim mentioned anywhere in this struct info.
    pub fn sym_vars(&self) -> BTreeSet<SymVar> {
        let mut out = BTreeSet::new();
        self.collect_sym_vars(&mut out);
        out
    }

    fn collect_sym_vars(&self, out: &mut BTreeSet<SymVar>) {
        let dims: &[SymExpr] = match self {
            StructInfo::Tensor(t) => t.dims().unwrap_or(&[]),
            StructInfo::Shape(Some(values)) => values,
            StructInfo::Tuple(items) => {
                items.iter().for_each(|i| i.collect_sym_vars(out));
                &[]
            }
            _ => &[],
        };
        for d in dims {
            out.extend(d.vars());
        }
    }

    /// Whether a value with struct info `other` may be used where `self` is expected
    /// (equal, or `self` is less specific).
    pub fn accepts(&self, other: &StructInfo) -> bool {
        match (self, other) {
            (StructInfo::Tensor(a), StructInfo::Tensor(b)) => {
                a.dtype == b.dtype
                    && match (&a.shape, &b.shape) {
                        (TensorShape::Unknown, _) => true,
                        (TensorShape::Rank(r), _) => b.ndim() == Some(*r),
                        (TensorShape::Known(x), TensorShape::Known(y)) => {
                            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.prove_equal(q))
                        }
                        (TensorShape::Known(_), _) => false,
                    }
            }
            (StructInfo::Tuple(a), StructInfo::Tuple(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.accepts(y))
            }
            (StructInfo::Shape(None), StructInfo::Shape(_)) => true,
            (StructInfo::Shape(Some(a)), StructInfo::Shape(Some(b))) => {
                a.len() == b.len() && a.iter().zip(b).all(|(p, q)| p.prove_equal(q))
            }
            (StructInfo::Scalar(a), StructInfo::Scalar(b)) => a == b,
            (StructInfo::Object, _) => true,
            _ => false,
        }
    }
}

impl std::fmt::Display for StructInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |f: &mut std::fmt::Formatter<'_>, dims: &[SymExpr]| {
            let parts: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
            write!(
                f,
                "({}{})",
                parts.join(", "),
                if dims.len() == 1 { "," } else { "" }
            )
        };
        match self {
            StructInfo::Tensor(t) => {
                f.write_str("Tensor(")?;
                match &t.shape {
                    TensorShape::Known(dims) => list(f, dims)?,
                    TensorShape::Rank(r) => write!(f, "ndim={r}")?,
                    TensorShape::Unknown => f.write_str("?")?,
                }
                write!(f, ", {})", t.dtype)
            }
            StructInfo::Tuple(items) => {
                let parts: Vec<String> = items.iter().map(|i| i.to_string()).collect();
                write!(f, "Tuple({})", parts.join(", "))
            }
            StructInfo::Shape(Some(values)) => {
                f.write_str("Shape(")?;
                list(f, values)?;
                f.write_str(")")
            }
            StructInfo::Shape(None) => f.write_str("Shape(?)"),
            StructInfo::Scalar(d) => write!(f, "Scalar({d})"),
            StructInfo::Object => f.write_str("Object"),
        }
    }
}
