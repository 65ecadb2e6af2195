//! The text form of symbolic expressions: `3 * n + 1`, `floordiv(n + 31, 32)`,
//! `min(n, 64)`, `lt(n, m)`, `select(c, a, b)`. [`super::parse`] reads it back.

use super::canon::{Atom, Monomial};
use super::SymExpr;
use std::fmt;

impl fmt::Display for Atom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Atom::Var(v) => f.write_str(v.name()),
            Atom::FloorDiv(a, b) => write!(f, "floordiv({a}, {b})"),
            Atom::FloorMod(a, b) => write!(f, "floormod({a}, {b})"),
            Atom::Min(a, b) => write!(f, "min({a}, {b})"),
            Atom::Max(a, b) => write!(f, "max({a}, {b})"),
            Atom::Cmp(op, a, b) => write!(f, "{}({a}, {b})", op.name()),
            Atom::Select(c, a, b) => write!(f, "select({c}, {a}, {b})"),
        }
    }
}

fn write_term(f: &mut fmt::Formatter<'_>, monomial: &Monomial, coeff: i64) -> fmt::Result {
    if coeff != 1 {
        write!(f, "{coeff} * ")?;
    }
    for (i, atom) in monomial.iter().enumerate() {
        if i > 0 {
            f.write_str(" * ")?;
        }
        write!(f, "{atom}")?;
    }
    Ok(())
}

impl fmt::Display for SymExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let poly = self.poly();
        for (i, (monomial, coeff)) in poly.terms.iter().enumerate() {
            match (i, *coeff < 0) {
                (0, true) if *coeff == -1 => f.write_str("-")?,
                (0, _) => {}
                (_, true) => f.write_str(" - ")?,
                (_, false) => f.write_str(" + ")?,
            }
            let shown = match (i, *coeff) {
                (0, -1) => 1,
                (0, c) => c,
                (_, c) => c.saturating_abs(),
            };
            write_term(f, monomial, shown)?;
        }
        match (poly.terms.is_empty(), poly.constant) {
            (true, c) => write!(f, "{c}"),
            (false, 0) => Ok(()),
            (false, c) if c < 0 => write!(f, " - {}", c.saturating_abs()),
            (false, c) => write!(f, " + {c}"),
        }
    }
}

impl fmt::Debug for SymExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SymExpr({self})")
    }
}
