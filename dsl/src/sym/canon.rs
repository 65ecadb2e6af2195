//! The canonical form of symbolic expressions and the simplifying constructors.
//!
//! A [`Poly`] is `sum(coeff_i * monomial_i) + constant`: monomials are sorted multisets of
//! [`Atom`]s, sorted by monomial, with no zero coefficient. Rules applied on construction:
//! like terms merge; `k*c * floordiv(x, c)` becomes `k * (x - floormod(x, c))`; divisions
//! and remainders by a constant pull out multiples of the divisor, divide by common
//! factors and fold when bounds decide them; min/max/comparisons/select fold when the
//! bounds of the dims decide them, and otherwise order commutative operands.

use super::{CmpOp, SymExpr, SymVar};
use std::collections::{BTreeMap, BTreeSet};

/// A non-polynomial factor.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Atom {
    Var(SymVar),
    FloorDiv(SymExpr, SymExpr),
    FloorMod(SymExpr, SymExpr),
    Min(SymExpr, SymExpr),
    Max(SymExpr, SymExpr),
    /// `lhs op rhs`, stored as given after canonicalizing both sides.
    Cmp(CmpOp, SymExpr, SymExpr),
    Select(SymExpr, SymExpr, SymExpr),
}

/// A product of atoms (sorted; repeated atoms are powers).
pub(crate) type Monomial = Vec<Atom>;

/// A canonical polynomial.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Poly {
    pub(crate) terms: Vec<(Monomial, i64)>,
    pub(crate) constant: i64,
}

impl Poly {
    pub(crate) fn constant(value: i64) -> Poly {
        Poly {
            terms: Vec::new(),
            constant: value,
        }
    }

    pub(crate) fn atom(atom: Atom) -> Poly {
        Poly {
            terms: vec![(vec![atom], 1)],
            constant: 0,
        }
    }

    pub(crate) fn as_const(&self) -> Option<i64> {
        self.terms.is_empty().then_some(self.constant)
    }

    pub(crate) fn as_single_atom(&self) -> Option<&Atom> {
        match (self.terms.as_slice(), self.constant) {
            ([(monomial, 1)], 0) if monomial.len() == 1 => Some(&monomial[0]),
            _ => None,
        }
    }

    pub(crate) fn collect_vars(&self, out: &mut BTreeSet<SymVar>) {
        for atom in self.terms.iter().flat_map(|(m, _)| m) {
            match atom {
                Atom::Var(v) => {
                    out.insert(v.clone());
                }
                Atom::FloorDiv(a, b)
                | Atom::FloorMod(a, b)
                | Atom::Min(a, b)
                | Atom::Max(a, b)
                | Atom::Cmp(_, a, b) => {
                    a.poly().collect_vars(out);
                    b.poly().collect_vars(out);
                }
                Atom::Select(c, a, b) => {
                    for e in [c, a, b] {
                        e.poly().collect_vars(out);
                    }
                }
            }
        }
    }

    /// The greatest common divisor of every coefficient and the constant (0 for zero).
    fn content(&self) -> i64 {
        self.terms.iter().map(|(_, c)| *c).fold(self.constant, gcd)
    }

    fn scaled_div(&self, divisor: i64) -> Poly {
        Poly {
            terms: self
                .terms
                .iter()
                .map(|(m, c)| (m.clone(), c / divisor))
                .collect(),
            constant: self.constant / divisor,
        }
    }
}

fn gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a as i64
}

/// Builds a canonical polynomial from raw terms: merges, drops zeros, expands
/// `k*c * floordiv(x, c)`.
fn normalize(terms: impl IntoIterator<Item = (Monomial, i64)>, constant: i64) -> SymExpr {
    let mut merged: BTreeMap<Monomial, i64> = BTreeMap::new();
    let mut constant = constant;
    let mut pending: Vec<(Monomial, i64)> = terms.into_iter().collect();
    while let Some((mut monomial, coeff)) = pending.pop() {
        if coeff == 0 {
            continue;
        }
        if monomial.is_empty() {
            constant = constant.saturating_add(coeff);
            continue;
        }
        if let [Atom::FloorDiv(x, c)] = monomial.as_slice() {
            if let Some(c) = c.as_const().filter(|&c| c > 0 && coeff % c == 0) {
                // c * floordiv(x, c) == x - floormod(x, c)
                let k = coeff / c;
                let expanded = x - &x.floormod(&SymExpr::int(c));
                pending.extend(
                    expanded
                        .poly()
                        .terms
                        .iter()
                        .map(|(m, v)| (m.clone(), v * k)),
                );
                constant = constant.saturating_add(expanded.poly().constant.saturating_mul(k));
                continue;
            }
        }
        monomial.sort();
        let slot = merged.entry(monomial).or_insert(0);
        *slot = slot.saturating_add(coeff);
    }
    SymExpr::from_poly(Poly {
        terms: merged.into_iter().filter(|(_, c)| *c != 0).collect(),
        constant,
    })
}

pub(crate) fn add(a: &SymExpr, b: &SymExpr) -> SymExpr {
    let (pa, pb) = (a.poly(), b.poly());
    normalize(
        pa.terms.iter().chain(&pb.terms).cloned(),
        pa.constant.saturating_add(pb.constant),
    )
}

pub(crate) fn sub(a: &SymExpr, b: &SymExpr) -> SymExpr {
    add(a, &mul(b, &SymExpr::int(-1)))
}

pub(crate) fn mul(a: &SymExpr, b: &SymExpr) -> SymExpr {
    let (pa, pb) = (a.poly(), b.poly());
    let with_constant = |p: &Poly| {
        let mut all = p.terms.clone();
        all.push((Vec::new(), p.constant));
        all
    };
    let (ta, tb) = (with_constant(pa), with_constant(pb));
    let mut terms = Vec::with_capacity(ta.len() * tb.len());
    for (ma, ca) in &ta {
        for (mb, cb) in &tb {
            let monomial: Monomial = ma.iter().chain(mb).cloned().collect();
            terms.push((monomial, ca.saturating_mul(*cb)));
        }
    }
    normalize(terms, 0)
}

/// Splits `x` into `c * quotient + rest` where `quotient` collects every term whose
/// coefficient is a multiple of `c` and `rest`'s constant lies in `[0, c)`.
fn split_multiples(x: &SymExpr, c: i64) -> (SymExpr, SymExpr) {
    let p = x.poly();
    let (mut quotient, mut rest) = (Vec::new(), Vec::new());
    for (m, coeff) in &p.terms {
        if coeff % c == 0 {
            quotient.push((m.clone(), coeff / c));
        } else {
            rest.push((m.clone(), *coeff));
        }
    }
    (
        normalize(quotient, p.constant.div_euclid(c)),
        normalize(rest, p.constant.rem_euclid(c)),
    )
}

pub(crate) fn floordiv(a: &SymExpr, b: &SymExpr) -> SymExpr {
    match b.as_const() {
        Some(c) if c < 0 => floordiv(&-a, &SymExpr::int(-c)),
        Some(c) if c > 0 => floordiv_const(a, c),
        _ if a == b && b.bound().lo.is_some_and(|lo| lo > 0) => SymExpr::int(1),
        _ => SymExpr::atom(Atom::FloorDiv(a.clone(), b.clone())),
    }
}

fn floordiv_const(a: &SymExpr, c: i64) -> SymExpr {
    if c == 1 {
        return a.clone();
    }
    let (quotient, rest) = split_multiples(a, c);
    let g = gcd(rest.poly().content(), c);
    let (rest, c) = if g > 1 {
        (SymExpr::from_poly(rest.poly().scaled_div(g)), c / g)
    } else {
        (rest, c)
    };
    let folded = match rest.bound().floordiv_const(c).as_point() {
        Some(value) => SymExpr::int(value),
        None if c == 1 => rest,
        None => SymExpr::atom(Atom::FloorDiv(rest, SymExpr::int(c))),
    };
    &quotient + &folded
}

pub(crate) fn floormod(a: &SymExpr, b: &SymExpr) -> SymExpr {
    match b.as_const() {
        Some(c) if c != 0 => floormod_const(a, c),
        _ if a == b => SymExpr::int(0),
        _ => SymExpr::atom(Atom::FloorMod(a.clone(), b.clone())),
    }
}

fn floormod_const(a: &SymExpr, c: i64) -> SymExpr {
    if c < 0 {
        // x mod c == -((-x) mod -c) for floor semantics.
        return -floormod_const(&-a, -c);
    }
    let (_, rest) = split_multiples(a, c);
    let g = gcd(rest.poly().content(), c);
    if g > 1 {
        let reduced = SymExpr::from_poly(rest.poly().scaled_div(g));
        return &floormod_const(&reduced, c / g) * g;
    }
    match rest.bound().floordiv_const(c).as_point() {
        Some(q) => &rest - q.saturating_mul(c),
        None => SymExpr::atom(Atom::FloorMod(rest, SymExpr::int(c))),
    }
}

pub(crate) fn min_max(a: &SymExpr, b: &SymExpr, is_max: bool) -> SymExpr {
    let diff = (b - a).bound();
    let a_smaller = diff.lo.is_some_and(|lo| lo >= 0);
    let b_smaller = diff.hi.is_some_and(|hi| hi <= 0);
    match (a_smaller, b_smaller, is_max) {
        (true, _, false) | (_, true, true) => a.clone(),
        (_, true, false) | (true, _, true) => b.clone(),
        _ => {
            let (x, y) = if a <= b { (a, b) } else { (b, a) };
            let atom = if is_max {
                Atom::Max(x.clone(), y.clone())
            } else {
                Atom::Min(x.clone(), y.clone())
            };
            SymExpr::atom(atom)
        }
    }
}

pub(crate) fn compare(a: &SymExpr, op: CmpOp, b: &SymExpr) -> SymExpr {
    let diff = (a - b).bound();
    let decided = match op {
        CmpOp::Lt => decide(
            diff.hi.is_some_and(|h| h < 0),
            diff.lo.is_some_and(|l| l >= 0),
        ),
        CmpOp::Le => decide(
            diff.hi.is_some_and(|h| h <= 0),
            diff.lo.is_some_and(|l| l > 0),
        ),
        CmpOp::Eq => decide(diff.as_point() == Some(0), !diff.contains(0)),
        CmpOp::Ne => decide(!diff.contains(0), diff.as_point() == Some(0)),
    };
    match decided {
        Some(truth) => SymExpr::int(truth as i64),
        None => {
            let (x, y) = if matches!(op, CmpOp::Eq | CmpOp::Ne) && b < a {
                (b, a)
            } else {
                (a, b)
            };
            SymExpr::atom(Atom::Cmp(op, x.clone(), y.clone()))
        }
    }
}

fn decide(proved_true: bool, proved_false: bool) -> Option<bool> {
    if proved_true {
        Some(true)
    } else if proved_false {
        Some(false)
    } else {
        None
    }
}

pub(crate) fn select(cond: &SymExpr, then: &SymExpr, otherwise: &SymExpr) -> SymExpr {
    if then == otherwise {
        return then.clone();
    }
    let range = cond.bound();
    if !range.contains(0) {
        then.clone()
    } else if range.as_point() == Some(0) {
        otherwise.clone()
    } else {
        SymExpr::atom(Atom::Select(cond.clone(), then.clone(), otherwise.clone()))
    }
}
