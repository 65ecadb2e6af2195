//! Interval bound analysis of canonical expressions.
//!
//! Dims range over `[0, upper]` (unbounded above without an upper bound). Ranges are
//! propagated through the canonical form, so cancellations the simplifier already made
//! (`n - n`) never widen a bound.

use super::canon::Atom;
use super::{SymExpr, SymVar};

/// An inclusive integer range; `None` is unbounded on that side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval {
    /// The smallest value, if bounded below.
    pub lo: Option<i64>,
    /// The largest value, if bounded above.
    pub hi: Option<i64>,
}

impl Interval {
    /// The range holding only `value`.
    pub fn point(value: i64) -> Self {
        Interval {
            lo: Some(value),
            hi: Some(value),
        }
    }

    /// All integers.
    pub fn everything() -> Self {
        Interval { lo: None, hi: None }
    }

    /// The value if the range holds exactly one.
    pub fn as_point(&self) -> Option<i64> {
        match (self.lo, self.hi) {
            (Some(lo), Some(hi)) if lo == hi => Some(lo),
            _ => None,
        }
    }

    /// Whether `value` lies in the range.
    pub fn contains(&self, value: i64) -> bool {
        self.lo.is_none_or(|lo| lo <= value) && self.hi.is_none_or(|hi| value <= hi)
    }

    fn var(var: &SymVar) -> Self {
        Interval {
            lo: Some(0),
            hi: var.upper(),
        }
    }

    fn add(self, other: Interval) -> Self {
        Interval {
            lo: self.lo.zip(other.lo).map(|(a, b)| a.saturating_add(b)),
            hi: self.hi.zip(other.hi).map(|(a, b)| a.saturating_add(b)),
        }
    }

    fn scale(self, k: i64) -> Self {
        let lo = self.lo.map(|v| v.saturating_mul(k));
        let hi = self.hi.map(|v| v.saturating_mul(k));
        if k >= 0 {
            Interval { lo, hi }
        } else {
            Interval { lo: hi, hi: lo }
        }
    }

    fn mul(self, other: Interval) -> Self {
        // Corners as extended integers: a missing bound is -inf or +inf. Products of two
        // i64 values stay below i128::MAX in magnitude, so only infinities saturate.
        const INF: i128 = i128::MAX;
        let low = |v: Option<i64>| v.map_or(-INF, i128::from);
        let high = |v: Option<i64>| v.map_or(INF, i128::from);
        let corners = [
            low(self.lo).saturating_mul(low(other.lo)),
            low(self.lo).saturating_mul(high(other.hi)),
            high(self.hi).saturating_mul(low(other.lo)),
            high(self.hi).saturating_mul(high(other.hi)),
        ];
        let finite = |v: i128| {
            (v > -INF && v < INF).then(|| v.clamp(i64::MIN.into(), i64::MAX.into()) as i64)
        };
        Interval {
            lo: corners.iter().copied().min().and_then(finite),
            hi: corners.iter().copied().max().and_then(finite),
        }
    }

    /// The range of `floor(x / c)` for `x` in this range and `c > 0`.
    pub(crate) fn floordiv_const(self, c: i64) -> Self {
        Interval {
            lo: self.lo.map(|v| v.div_euclid(c)),
            hi: self.hi.map(|v| v.div_euclid(c)),
        }
    }

    fn union(self, other: Interval) -> Self {
        Interval {
            lo: self.lo.zip(other.lo).map(|(a, b)| a.min(b)),
            hi: self.hi.zip(other.hi).map(|(a, b)| a.max(b)),
        }
    }

    fn min(self, other: Interval) -> Self {
        let pick = |a: Option<i64>, b: Option<i64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (Some(v), None) | (None, Some(v)) => Some(v),
            (None, None) => None,
        };
        Interval {
            lo: self.lo.zip(other.lo).map(|(a, b)| a.min(b)),
            hi: pick(self.hi, other.hi),
        }
    }

    fn max(self, other: Interval) -> Self {
        let pick = |a: Option<i64>, b: Option<i64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (Some(v), None) | (None, Some(v)) => Some(v),
            (None, None) => None,
        };
        Interval {
            lo: pick(self.lo, other.lo),
            hi: self.hi.zip(other.hi).map(|(a, b)| a.max(b)),
        }
    }
}

impl SymExpr {
    /// The range of values this expression takes over the dims' ranges.
    pub fn bound(&self) -> Interval {
        let poly = self.poly();
        poly.terms
            .iter()
            .map(|(monomial, coeff)| {
                monomial
                    .iter()
                    .map(atom_bound)
                    .fold(Interval::point(1), Interval::mul)
                    .scale(*coeff)
            })
            .fold(Interval::point(poly.constant), Interval::add)
    }

    /// The largest value given the dims' upper bounds (`None` when unbounded).
    pub fn max_value(&self) -> Option<i64> {
        self.bound().hi
    }

    /// The smallest value given that dims are non-negative (`None` when unbounded).
    pub fn min_value(&self) -> Option<i64> {
        self.bound().lo
    }
}

fn atom_bound(atom: &Atom) -> Interval {
    match atom {
        Atom::Var(v) => Interval::var(v),
        Atom::FloorDiv(x, d) => match d.as_const() {
            Some(c) if c > 0 => x.bound().floordiv_const(c),
            _ => divide_by_positive(x.bound(), d.bound()),
        },
        Atom::FloorMod(_, d) => {
            let d = d.bound();
            match (d.lo, d.hi) {
                (Some(lo), hi) if lo > 0 => Interval {
                    lo: Some(0),
                    hi: hi.map(|h| h - 1),
                },
                _ => Interval::everything(),
            }
        }
        Atom::Min(a, b) => a.bound().min(b.bound()),
        Atom::Max(a, b) => a.bound().max(b.bound()),
        Atom::Cmp(..) => Interval {
            lo: Some(0),
            hi: Some(1),
        },
        Atom::Select(_, a, b) => a.bound().union(b.bound()),
    }
}

/// The range of `floor(x / d)` when `x >= 0` and `d >= 1`; unbounded otherwise.
fn divide_by_positive(x: Interval, d: Interval) -> Interval {
    match (x.lo, d.lo) {
        (Some(xl), Some(dl)) if xl >= 0 && dl >= 1 => Interval {
            lo: Some(0),
            hi: x.hi.map(|h| h / dl),
        },
        _ => Interval::everything(),
    }
}
