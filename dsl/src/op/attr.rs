//! Attribute specs of ops, their validation, typed access to attribute values, and the
//! normalization of (possibly negative) axes.

use super::error::InferError;
use crate::{AttrValue, Attrs, DType, SymExpr};
use std::fmt;

/// The kind of value an attribute holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttrKind {
    /// [`AttrValue::Int`].
    Int,
    /// [`AttrValue::Ints`].
    Ints,
    /// [`AttrValue::Float`].
    Float,
    /// [`AttrValue::Bool`].
    Bool,
    /// [`AttrValue::Str`], restricted to the listed values.
    Str(&'static [&'static str]),
    /// [`AttrValue::DType`].
    DType,
    /// [`AttrValue::Shape`].
    Shape,
}

impl AttrKind {
    /// Whether `value` is of this kind (a `Str` must also be one of the listed values).
    pub fn admits(self, value: &AttrValue) -> bool {
        match (self, value) {
            (AttrKind::Str(allowed), AttrValue::Str(s)) => allowed.contains(&s.as_str()),
            (AttrKind::Int, AttrValue::Int(_))
            | (AttrKind::Ints, AttrValue::Ints(_))
            | (AttrKind::Float, AttrValue::Float(_))
            | (AttrKind::Bool, AttrValue::Bool(_))
            | (AttrKind::DType, AttrValue::DType(_))
            | (AttrKind::Shape, AttrValue::Shape(_)) => true,
            _ => false,
        }
    }
}

impl fmt::Display for AttrKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttrKind::Int => f.write_str("an Int"),
            AttrKind::Ints => f.write_str("Ints"),
            AttrKind::Float => f.write_str("a Float"),
            AttrKind::Bool => f.write_str("a Bool"),
            AttrKind::Str(allowed) => {
                let quoted: Vec<String> = allowed.iter().map(|s| format!("\"{s}\"")).collect();
                write!(f, "a Str, one of {}", quoted.join(", "))
            }
            AttrKind::DType => f.write_str("a DType"),
            AttrKind::Shape => f.write_str("a Shape"),
        }
    }
}

/// What happens when a call omits an attribute.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AttrDefault {
    /// The call must give it.
    Required,
    /// It may be absent; the op then has a rule of its own (e.g. "all axes").
    Optional,
    /// This integer.
    Int(i64),
    /// This list of integers.
    Ints(&'static [i64]),
    /// This float.
    Float(f64),
    /// This flag.
    Bool(bool),
    /// This string.
    Str(&'static str),
}

impl AttrDefault {
    /// The value filled in for an omitted attribute, if any.
    pub fn value(self) -> Option<AttrValue> {
        match self {
            AttrDefault::Required | AttrDefault::Optional => None,
            AttrDefault::Int(v) => Some(AttrValue::Int(v)),
            AttrDefault::Ints(v) => Some(AttrValue::Ints(v.to_vec())),
            AttrDefault::Float(v) => Some(AttrValue::Float(v)),
            AttrDefault::Bool(v) => Some(AttrValue::Bool(v)),
            AttrDefault::Str(v) => Some(AttrValue::Str(v.to_string())),
        }
    }
}

/// One attribute an op takes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttrSpec {
    /// Its name.
    pub name: &'static str,
    /// The kind of value.
    pub kind: AttrKind,
    /// What an omitted attribute means.
    pub default: AttrDefault,
}

impl AttrSpec {
    /// A spec (usable in constant tables).
    pub const fn new(name: &'static str, kind: AttrKind, default: AttrDefault) -> Self {
        AttrSpec {
            name,
            kind,
            default,
        }
    }
}

/// Checks `attrs` against `specs` (no unknown attribute, every value of its kind, every
/// required one present) and returns them with the defaults filled in.
pub fn complete(op: &'static str, specs: &[AttrSpec], attrs: &Attrs) -> Result<Attrs, InferError> {
    for (name, value) in attrs {
        let spec = specs
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| unknown_attr(op, specs, name))?;
        if !spec.kind.admits(value) {
            return Err(InferError::AttrKind {
                op,
                attr: spec.name,
                expected: spec.kind,
                got: value.clone(),
            });
        }
    }
    let mut out = attrs.clone();
    for spec in specs.iter().filter(|s| !attrs.contains_key(s.name)) {
        if spec.default == AttrDefault::Required {
            return Err(InferError::MissingAttr {
                op,
                attr: spec.name,
            });
        }
        if let Some(value) = spec.default.value() {
            out.insert(spec.name.to_string(), value);
        }
    }
    Ok(out)
}

fn unknown_attr(op: &'static str, specs: &[AttrSpec], name: &str) -> InferError {
    let names: Vec<&str> = specs.iter().map(|s| s.name).collect();
    InferError::UnknownAttr {
        op,
        attr: name.to_string(),
        expected: if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        },
    }
}

macro_rules! getters {
    ($($(#[$doc:meta])* $fn:ident$(<$lt:lifetime>)? -> $ty:ty = $variant:ident($v:ident) => $out:expr;)*) => {$(
        $(#[$doc])*
        pub fn $fn$(<$lt>)?(attrs: &$($lt)? Attrs, name: &str) -> Option<$ty> {
            match attrs.get(name)? {
                AttrValue::$variant($v) => Some($out),
                _ => None,
            }
        }
    )*};
}

getters! {
    /// The `Int` attribute `name`, if present and of that kind.
    int -> i64 = Int(v) => *v;
    /// The `Ints` attribute `name`, if present and of that kind.
    ints<'a> -> &'a [i64] = Ints(v) => v.as_slice();
    /// The `Float` attribute `name`, if present and of that kind.
    float -> f64 = Float(v) => *v;
    /// The `Bool` attribute `name`, if present and of that kind.
    boolean -> bool = Bool(v) => *v;
    /// The `Str` attribute `name`, if present and of that kind.
    string<'a> -> &'a str = Str(v) => v.as_str();
    /// The `DType` attribute `name`, if present and of that kind.
    dtype -> DType = DType(v) => *v;
    /// The `Shape` attribute `name`, if present and of that kind.
    shape<'a> -> &'a [SymExpr] = Shape(v) => v.as_slice();
}

/// Normalizes a possibly negative axis of attribute `attr` against rank `ndim`.
pub fn normalize_axis(
    op: &'static str,
    attr: &'static str,
    axis: i64,
    ndim: usize,
) -> Result<usize, InferError> {
    let rank = i64::try_from(ndim).unwrap_or(i64::MAX);
    let normalized = if axis < 0 { axis + rank } else { axis };
    if (0..rank).contains(&normalized) {
        usize::try_from(normalized).map_err(|_| out_of_range(op, attr, axis, ndim))
    } else {
        Err(out_of_range(op, attr, axis, ndim))
    }
}

fn out_of_range(op: &'static str, attr: &'static str, axis: i64, ndim: usize) -> InferError {
    InferError::AxisOutOfRange {
        op,
        attr,
        axis,
        ndim,
    }
}

/// Normalizes a list of axes against rank `ndim`, rejecting repeats; order is kept.
pub fn normalize_axes(
    op: &'static str,
    attr: &'static str,
    axes: &[i64],
    ndim: usize,
) -> Result<Vec<usize>, InferError> {
    let mut out: Vec<usize> = Vec::with_capacity(axes.len());
    for &axis in axes {
        let normalized = normalize_axis(op, attr, axis, ndim)?;
        if out.contains(&normalized) {
            return Err(InferError::DuplicateAxis {
                op,
                attr,
                axis: normalized,
            });
        }
        out.push(normalized);
    }
    Ok(out)
}
