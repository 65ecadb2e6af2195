//! Symbolic integer arithmetic over named dims (`n`, `m`, ...) with optional upper bounds.
//!
//! Every [`SymExpr`] is kept in a canonical form (see `canon`): a sum of monomials with
//! integer coefficients whose factors are symbolic dims or non-linear atoms (`floordiv`,
//! `floormod`, `min`, `max`, comparisons, `select`). Two expressions that the simplifier
//! proves equal are equal as values (`==`), so shapes compare structurally.
//! `bound` computes ranges from the dims' bounds (what memory planning uses), `eval`
//! substitutes and evaluates, `parse` reads the printed form back.

mod bound;
pub(crate) mod canon;
mod display;
mod eval;
mod parse;
#[cfg(test)]
mod tests;

pub use bound::Interval;
pub use eval::SymBindings;
pub use parse::ParseSymError;

use canon::{Atom, Poly};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::sync::Arc;

/// A named symbolic dim. Dims are non-negative; `upper` is an inclusive upper bound.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SymVar {
    name: Arc<str>,
    upper: Option<i64>,
}

impl SymVar {
    /// A dim without an upper bound.
    pub fn new(name: &str) -> Self {
        SymVar {
            name: name.into(),
            upper: None,
        }
    }

    /// A dim with an inclusive upper bound (`n <= upper`).
    pub fn bounded(name: &str, upper: i64) -> Self {
        SymVar {
            name: name.into(),
            upper: Some(upper),
        }
    }

    /// The dim's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The inclusive upper bound, if any.
    pub fn upper(&self) -> Option<i64> {
        self.upper
    }

    /// This dim as an expression.
    pub fn expr(&self) -> SymExpr {
        SymExpr::var(self)
    }
}

/// Comparison operators of symbolic expressions (the result is 1 when true, else 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum CmpOp {
    /// `a < b`
    Lt,
    /// `a <= b`
    Le,
    /// `a == b`
    Eq,
    /// `a != b`
    Ne,
}

impl CmpOp {
    /// The function name used in the text form (`lt`, `le`, `eq`, `ne`).
    pub fn name(self) -> &'static str {
        match self {
            CmpOp::Lt => "lt",
            CmpOp::Le => "le",
            CmpOp::Eq => "eq",
            CmpOp::Ne => "ne",
        }
    }
}

/// A symbolic integer expression in canonical form.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SymExpr(Arc<Poly>);

impl SymExpr {
    /// The constant `value`.
    pub fn int(value: i64) -> Self {
        SymExpr(Arc::new(Poly::constant(value)))
    }

    /// The dim `var`.
    pub fn var(var: &SymVar) -> Self {
        SymExpr::atom(Atom::Var(var.clone()))
    }

    pub(crate) fn atom(atom: Atom) -> Self {
        SymExpr(Arc::new(Poly::atom(atom)))
    }

    pub(crate) fn poly(&self) -> &Poly {
        &self.0
    }

    pub(crate) fn from_poly(poly: Poly) -> Self {
        SymExpr(Arc::new(poly))
    }

    /// The value if this expression is a constant.
    pub fn as_const(&self) -> Option<i64> {
        self.0.as_const()
    }

    /// The dim if this expression is exactly one dim.
    pub fn as_var(&self) -> Option<&SymVar> {
        match self.0.as_single_atom()? {
            Atom::Var(v) => Some(v),
            _ => None,
        }
    }

    /// Every dim this expression mentions.
    pub fn vars(&self) -> BTreeSet<SymVar> {
        let mut out = BTreeSet::new();
        self.0.collect_vars(&mut out);
        out
    }

    /// `floor(self / rhs)`.
    pub fn floordiv(&self, rhs: &SymExpr) -> SymExpr {
        canon::floordiv(self, rhs)
    }

    /// `self - rhs * floor(self / rhs)` (non-negative for a positive divisor).
    pub fn floormod(&self, rhs: &SymExpr) -> SymExpr {
        canon::floormod(self, rhs)
    }

    /// The smaller of two expressions.
    pub fn minimum(&self, rhs: &SymExpr) -> SymExpr {
        canon::min_max(self, rhs, false)
    }

    /// The larger of two expressions.
    pub fn maximum(&self, rhs: &SymExpr) -> SymExpr {
        canon::min_max(self, rhs, true)
    }

    /// `1` when `self op rhs` holds, else `0`.
    pub fn cmp(&self, op: CmpOp, rhs: &SymExpr) -> SymExpr {
        canon::compare(self, op, rhs)
    }

    /// `then` where `cond` is non-zero, else `otherwise`.
    pub fn select(cond: &SymExpr, then: &SymExpr, otherwise: &SymExpr) -> SymExpr {
        canon::select(cond, then, otherwise)
    }

    /// Whether the simplifier and the dims' bounds prove `self == other`.
    pub fn prove_equal(&self, other: &SymExpr) -> bool {
        self == other || (self - other).bound().as_point() == Some(0)
    }

    /// The product of a list of expressions (`1` for an empty list), e.g. a shape's size.
    pub fn product<'a>(items: impl IntoIterator<Item = &'a SymExpr>) -> SymExpr {
        items
            .into_iter()
            .fold(SymExpr::int(1), |acc, item| &acc * item)
    }
}

impl From<i64> for SymExpr {
    fn from(value: i64) -> Self {
        SymExpr::int(value)
    }
}

impl From<&SymVar> for SymExpr {
    fn from(var: &SymVar) -> Self {
        SymExpr::var(var)
    }
}

macro_rules! binary_operator {
    ($trait:ident, $method:ident, $imp:path) => {
        impl std::ops::$trait<&SymExpr> for &SymExpr {
            type Output = SymExpr;
            fn $method(self, rhs: &SymExpr) -> SymExpr {
                $imp(self, rhs)
            }
        }
        impl std::ops::$trait<SymExpr> for SymExpr {
            type Output = SymExpr;
            fn $method(self, rhs: SymExpr) -> SymExpr {
                $imp(&self, &rhs)
            }
        }
        impl std::ops::$trait<&SymExpr> for SymExpr {
            type Output = SymExpr;
            fn $method(self, rhs: &SymExpr) -> SymExpr {
                $imp(&self, rhs)
            }
        }
        impl std::ops::$trait<SymExpr> for &SymExpr {
            type Output = SymExpr;
            fn $method(self, rhs: SymExpr) -> SymExpr {
                $imp(self, &rhs)
            }
        }
        impl std::ops::$trait<i64> for &SymExpr {
            type Output = SymExpr;
            fn $method(self, rhs: i64) -> SymExpr {
                $imp(self, &SymExpr::int(rhs))
            }
        }
        impl std::ops::$trait<i64> for SymExpr {
            type Output = SymExpr;
            fn $method(self, rhs: i64) -> SymExpr {
                $imp(&self, &SymExpr::int(rhs))
            }
        }
    };
}

binary_operator!(Add, add, canon::add);
binary_operator!(Sub, sub, canon::sub);
binary_operator!(Mul, mul, canon::mul);

impl std::ops::Neg for &SymExpr {
    type Output = SymExpr;
    fn neg(self) -> SymExpr {
        canon::mul(self, &SymExpr::int(-1))
    }
}

impl std::ops::Neg for SymExpr {
    type Output = SymExpr;
    fn neg(self) -> SymExpr {
        -&self
    }
}

/// The serialized form: the printed expression plus the dims it mentions (with bounds).
#[derive(Serialize, Deserialize)]
struct SymExprRepr {
    expr: String,
    vars: Vec<SymVar>,
}

impl Serialize for SymExpr {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        SymExprRepr {
            expr: self.to_string(),
            vars: self.vars().into_iter().collect(),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for SymExpr {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let repr = SymExprRepr::deserialize(deserializer)?;
        let lookup = |name: &str| repr.vars.iter().find(|v| v.name() == name).cloned();
        SymExpr::parse(&repr.expr, &lookup).map_err(serde::de::Error::custom)
    }
}
