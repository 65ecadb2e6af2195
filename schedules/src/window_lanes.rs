//! The lane arithmetic of a windowed epilogue, specialized per part of a window.
//!
//! A windowed epilogue (RoPE) indexes its column `c` through `floordiv(c, W)` (which
//! window) and `floormod(c, W)` (where in it), then compares and splits that position
//! (`< W / 2`, `floormod(.., W / 2)`): per vector lane those are gathers and selects.
//! With `c = base + p * h + j`, where `base` is a multiple of `W`, `p` one of the `W / h`
//! parts of the window and `j` the lane (`0 <= j < h`), every such term over the part's
//! `h` lanes is a constant or `j` plus a constant, so the part's loop reads contiguous
//! columns. [`specialize`] does that rewrite and reports whether it removed every
//! non-affine use of the lane.

use crate::tir_build::index;
use oxrelax_dsl::tir::{BinOp, PrimCmp, PrimExpr};
use oxrelax_dsl::DType;

/// One part of a window: columns `base + offset + j` for lanes `0 <= j < lanes`.
pub(crate) struct WindowPart<'a> {
    /// The variable the epilogue's value reads the column as.
    pub column: &'a str,
    /// The window `W`.
    pub window: i64,
    /// The first column of the window (a multiple of `W`).
    pub base: PrimExpr,
    /// The part's first position in the window (`p * h`).
    pub offset: i64,
    /// Lanes of the part (`h`, dividing `W`).
    pub lanes: i64,
    /// The lane variable `j`.
    pub lane: &'a str,
}

/// A sub-expression as a function of the lane.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// The same integer for every lane.
    Const(i64),
    /// `j + a`.
    Lane(i64),
    /// Anything else.
    Other,
}

impl WindowPart<'_> {
    /// `value` (reading the column as [`WindowPart::column`]) over this part's lanes, with
    /// the window arithmetic resolved; `None` when a division, remainder or comparison of
    /// the lane is left (a lane range that straddles a boundary).
    pub(crate) fn specialize(&self, value: &PrimExpr) -> Option<PrimExpr> {
        let resolved = value.rewrite(&mut |e| self.resolve(e));
        let column = self.base.clone() + self.lane_plus(self.offset);
        let resolved = resolved.substitute(self.column, &column);
        let lane_bound = resolved.any(&mut |e| match e {
            PrimExpr::Binary(BinOp::FloorDiv | BinOp::FloorMod, x, y) | PrimExpr::Cmp(_, x, y) => {
                x.uses_var(self.lane) || y.uses_var(self.lane)
            }
            _ => false,
        });
        (!lane_bound).then_some(resolved)
    }

    /// One rebuilt node, its children already resolved.
    fn resolve(&self, e: PrimExpr) -> PrimExpr {
        match &e {
            PrimExpr::Binary(op @ (BinOp::FloorDiv | BinOp::FloorMod), x, m) => {
                let Some(m) = positive_int(m) else { return e };
                if matches!(&**x, PrimExpr::Var(v) if v.name == self.column) && m == self.window {
                    return match op {
                        BinOp::FloorDiv => self
                            .base
                            .clone()
                            .binary(BinOp::FloorDiv, PrimExpr::index(m)),
                        _ => self.lane_plus(self.offset),
                    };
                }
                match self.form(x) {
                    Form::Lane(a) if a >= 0 && a / m == (a + self.lanes - 1) / m => match op {
                        BinOp::FloorDiv => PrimExpr::index(a / m),
                        _ => self.lane_plus(a % m),
                    },
                    _ => e,
                }
            }
            PrimExpr::Cmp(cmp, x, k) => match (self.form(x), int(k)) {
                (Form::Lane(a), Some(k)) => self.decide(*cmp, a, k).map_or(e, boolean),
                _ => e,
            },
            PrimExpr::Select(c, a, b) => match &**c {
                PrimExpr::Int(v, DType::Bool) => {
                    if *v != 0 {
                        *a.clone()
                    } else {
                        *b.clone()
                    }
                }
                _ => e,
            },
            _ => e,
        }
    }

    /// `x cmp k` for every lane `x = j + a` of the part, if it is the same for all.
    fn decide(&self, cmp: PrimCmp, a: i64, k: i64) -> Option<bool> {
        let (lo, hi) = (a, a + self.lanes - 1);
        let holds = |x: i64| match cmp {
            PrimCmp::Lt => x < k,
            PrimCmp::Le => x <= k,
            PrimCmp::Gt => x > k,
            PrimCmp::Ge => x >= k,
            PrimCmp::Eq => x == k,
            PrimCmp::Ne => x != k,
        };
        let uniform = !matches!(cmp, PrimCmp::Eq | PrimCmp::Ne) || lo == hi || k < lo || k > hi;
        (uniform && holds(lo) == holds(hi)).then(|| holds(lo))
    }

    /// What `e` is as a function of the lane.
    fn form(&self, e: &PrimExpr) -> Form {
        match e {
            PrimExpr::Var(v) if v.name == self.lane => Form::Lane(0),
            PrimExpr::Int(k, d) if *d != DType::Bool => Form::Const(*k),
            PrimExpr::Binary(op @ (BinOp::Add | BinOp::Sub), x, y) => {
                let sign = if *op == BinOp::Add { 1 } else { -1 };
                match (self.form(x), self.form(y)) {
                    (Form::Lane(a), Form::Const(k)) => Form::Lane(a + sign * k),
                    (Form::Const(k), Form::Lane(a)) if sign == 1 => Form::Lane(a + k),
                    (Form::Const(a), Form::Const(b)) => Form::Const(a + sign * b),
                    _ => Form::Other,
                }
            }
            _ => Form::Other,
        }
    }

    /// `j + a`.
    fn lane_plus(&self, a: i64) -> PrimExpr {
        match a {
            0 => index(self.lane),
            a => index(self.lane) + PrimExpr::index(a),
        }
    }
}

/// The value of an integer immediate.
fn int(e: &PrimExpr) -> Option<i64> {
    match e {
        PrimExpr::Int(k, d) if *d != DType::Bool => Some(*k),
        _ => None,
    }
}

/// The value of a positive integer immediate.
fn positive_int(e: &PrimExpr) -> Option<i64> {
    int(e).filter(|&k| k > 0)
}

fn boolean(value: bool) -> PrimExpr {
    PrimExpr::Int(i64::from(value), DType::Bool)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RoPE's column arithmetic over a window of 64: not affine over the whole window
    /// (the halves read different partners), affine over each half.
    #[test]
    fn rope_columns_are_affine_per_half_window() {
        let c = || index("c");
        let at = |e: PrimExpr| e.binary(BinOp::FloorMod, PrimExpr::index(64));
        let head = || c().binary(BinOp::FloorDiv, PrimExpr::index(64)) * PrimExpr::index(64);
        let load = |i: PrimExpr| PrimExpr::Load {
            buffer: "x".into(),
            dtype: DType::F32,
            indices: vec![i],
        };
        let partner = load(head() + at(at(c()) + PrimExpr::index(32)));
        let lower = at(c()).compare(PrimCmp::Lt, PrimExpr::index(32));
        let cos = load(at(c()).binary(BinOp::FloorMod, PrimExpr::index(32)));
        let value = load(head() + at(c())) * cos
            + PrimExpr::select(lower, PrimExpr::f32(0.0) - partner.clone(), partner);
        let part = |offset, lanes| WindowPart {
            column: "c",
            window: 64,
            base: index("base"),
            offset,
            lanes,
            lane: "j",
        };
        assert!(part(0, 64).specialize(&value).is_none());
        for offset in [0, 32] {
            let got = part(offset, 32)
                .specialize(&value)
                .expect("affine per half");
            assert!(!got.uses_var("c"), "{got:?}");
        }
    }
}
