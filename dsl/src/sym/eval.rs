//! Substitution of dims and evaluation under a binding of the dims.

use super::canon::Atom;
use super::{CmpOp, SymExpr, SymVar};
use std::collections::BTreeMap;

/// Values of dims by name, e.g. `{"n": 7, "m": 12}`.
pub type SymBindings = BTreeMap<String, i64>;

/// Why a symbolic expression could not be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SymError {
    /// The expression mentions a dim that has no value.
    #[error("symbolic dim `{name}` is unbound while evaluating `{expr}`")]
    Unbound {
        /// The dim without a value.
        name: String,
        /// The expression being evaluated.
        expr: String,
    },
    /// A division or remainder by zero.
    #[error("division by zero while evaluating `{expr}`")]
    DivisionByZero {
        /// The expression being evaluated.
        expr: String,
    },
    /// An intermediate value does not fit in 64 bits.
    #[error("integer overflow while evaluating `{expr}`")]
    Overflow {
        /// The expression being evaluated.
        expr: String,
    },
}

impl SymExpr {
    /// Replaces dims by expressions (dims `map` returns `None` for stay as they are);
    /// the result is simplified again.
    pub fn subst(&self, map: &dyn Fn(&SymVar) -> Option<SymExpr>) -> SymExpr {
        let poly = self.poly();
        poly.terms
            .iter()
            .map(|(monomial, coeff)| {
                monomial
                    .iter()
                    .map(|atom| subst_atom(atom, map))
                    .fold(SymExpr::int(*coeff), |acc, factor| &acc * &factor)
            })
            .fold(SymExpr::int(poly.constant), |acc, term| &acc + &term)
    }

    /// The value of this expression with every dim bound by name.
    pub fn eval(&self, bindings: &SymBindings) -> Result<i64, SymError> {
        let overflow = || SymError::Overflow {
            expr: self.to_string(),
        };
        let poly = self.poly();
        let mut total = poly.constant;
        for (monomial, coeff) in &poly.terms {
            let mut term = *coeff;
            for atom in monomial {
                let value = eval_atom(atom, bindings, self)?;
                term = term.checked_mul(value).ok_or_else(overflow)?;
            }
            total = total.checked_add(term).ok_or_else(overflow)?;
        }
        Ok(total)
    }
}

fn subst_atom(atom: &Atom, map: &dyn Fn(&SymVar) -> Option<SymExpr>) -> SymExpr {
    let s = |e: &SymExpr| e.subst(map);
    match atom {
        Atom::Var(v) => map(v).unwrap_or_else(|| v.expr()),
        Atom::FloorDiv(a, b) => s(a).floordiv(&s(b)),
        Atom::FloorMod(a, b) => s(a).floormod(&s(b)),
        Atom::Min(a, b) => s(a).minimum(&s(b)),
        Atom::Max(a, b) => s(a).maximum(&s(b)),
        Atom::Cmp(op, a, b) => s(a).cmp(*op, &s(b)),
        Atom::Select(c, a, b) => SymExpr::select(&s(c), &s(a), &s(b)),
    }
}

fn eval_atom(atom: &Atom, bindings: &SymBindings, whole: &SymExpr) -> Result<i64, SymError> {
    let e = |x: &SymExpr| x.eval(bindings);
    let nonzero = |d: i64| {
        if d == 0 {
            Err(SymError::DivisionByZero {
                expr: whole.to_string(),
            })
        } else {
            Ok(d)
        }
    };
    Ok(match atom {
        Atom::Var(v) => *bindings.get(v.name()).ok_or_else(|| SymError::Unbound {
            name: v.name().to_string(),
            expr: whole.to_string(),
        })?,
        Atom::FloorDiv(a, b) => e(a)?.div_euclid(nonzero(e(b)?)?) - floor_fix(e(a)?, e(b)?),
        Atom::FloorMod(a, b) => {
            let (a, b) = (e(a)?, nonzero(e(b)?)?);
            a - b * (a.div_euclid(b) - floor_fix(a, b))
        }
        Atom::Min(a, b) => e(a)?.min(e(b)?),
        Atom::Max(a, b) => e(a)?.max(e(b)?),
        Atom::Cmp(op, a, b) => {
            let (a, b) = (e(a)?, e(b)?);
            i64::from(match op {
                CmpOp::Lt => a < b,
                CmpOp::Le => a <= b,
                CmpOp::Eq => a == b,
                CmpOp::Ne => a != b,
            })
        }
        Atom::Select(c, a, b) => {
            if e(c)? != 0 {
                e(a)?
            } else {
                e(b)?
            }
        }
    })
}

/// `div_euclid` rounds toward -inf only for positive divisors; this is the correction
/// that turns it into floor division for negative ones.
fn floor_fix(a: i64, b: i64) -> i64 {
    if b < 0 && a.rem_euclid(b) != 0 {
        1
    } else {
        0
    }
}
