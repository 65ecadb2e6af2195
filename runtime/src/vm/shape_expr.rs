//! Symbolic shape arithmetic the VM evaluates at run time: trees over constants and dim
//! registers with `+ - * // % min max` (floor division and modulo, as in the compiler).

use serde::{Deserialize, Serialize};
use std::fmt;

/// Index of a dim register (a function's `n`, `m`, ...; or a kernel's dims).
pub type DimReg = u32;

/// A binary operator of [`ShapeExpr`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShapeOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `floor(a / b)`.
    FloorDiv,
    /// `a - b * floor(a / b)` (the sign of `b`).
    FloorMod,
    /// `min(a, b)`.
    Min,
    /// `max(a, b)`.
    Max,
}

impl ShapeOp {
    /// Applies the operator; `None` on overflow or division by zero.
    pub fn apply(self, a: i64, b: i64) -> Option<i64> {
        match self {
            ShapeOp::Add => a.checked_add(b),
            ShapeOp::Sub => a.checked_sub(b),
            ShapeOp::Mul => a.checked_mul(b),
            ShapeOp::FloorDiv => {
                let q = a.checked_div(b)?;
                Some(if a % b != 0 && (a < 0) != (b < 0) {
                    q - 1
                } else {
                    q
                })
            }
            ShapeOp::FloorMod => {
                let r = a.checked_rem(b)?;
                Some(if r != 0 && (r < 0) != (b < 0) {
                    r + b
                } else {
                    r
                })
            }
            ShapeOp::Min => Some(a.min(b)),
            ShapeOp::Max => Some(a.max(b)),
        }
    }

    /// The infix symbol and binding strength, or `None` for the function-call forms.
    fn infix(self) -> Option<(&'static str, u8)> {
        match self {
            ShapeOp::Add => Some(("+", 1)),
            ShapeOp::Sub => Some(("-", 1)),
            ShapeOp::Mul => Some(("*", 2)),
            ShapeOp::FloorDiv => Some(("//", 2)),
            ShapeOp::FloorMod => Some(("%", 2)),
            ShapeOp::Min | ShapeOp::Max => None,
        }
    }
}

/// An integer expression over dim registers.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShapeExpr {
    /// A constant.
    Const(i64),
    /// The value of a dim register.
    Dim(DimReg),
    /// An operator applied to two subexpressions.
    Bin(ShapeOp, Box<ShapeExpr>, Box<ShapeExpr>),
}

/// Why a [`ShapeExpr`] has no value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// A dim register read before anything bound it.
    #[error("dim register {0} is not bound")]
    Unbound(DimReg),
    /// Overflow or division by zero.
    #[error("arithmetic overflow or division by zero")]
    Arithmetic,
}

impl ShapeExpr {
    /// `op(lhs, rhs)`.
    pub fn bin(op: ShapeOp, lhs: ShapeExpr, rhs: ShapeExpr) -> ShapeExpr {
        ShapeExpr::Bin(op, Box::new(lhs), Box::new(rhs))
    }

    /// The value, reading dim registers through `dim`.
    pub fn eval(&self, dim: &dyn Fn(DimReg) -> Option<i64>) -> Result<i64, EvalError> {
        match self {
            ShapeExpr::Const(v) => Ok(*v),
            ShapeExpr::Dim(r) => dim(*r).ok_or(EvalError::Unbound(*r)),
            ShapeExpr::Bin(op, a, b) => op
                .apply(a.eval(dim)?, b.eval(dim)?)
                .ok_or(EvalError::Arithmetic),
        }
    }

    /// Every dim register the expression reads.
    pub fn dims(&self) -> Vec<DimReg> {
        match self {
            ShapeExpr::Const(_) => Vec::new(),
            ShapeExpr::Dim(r) => vec![*r],
            ShapeExpr::Bin(_, a, b) => [a.dims(), b.dims()].concat(),
        }
    }

    /// A printable form naming dim register `i` by `names[i]` (or `d{i}`).
    pub fn display<'a, S: AsRef<str>>(&'a self, names: &'a [S]) -> impl fmt::Display + 'a {
        Printed { expr: self, names }
    }
}

struct Printed<'a, S> {
    expr: &'a ShapeExpr,
    names: &'a [S],
}

impl<S: AsRef<str>> Printed<'_, S> {
    fn write(&self, f: &mut fmt::Formatter<'_>, expr: &ShapeExpr, outer: u8) -> fmt::Result {
        match expr {
            ShapeExpr::Const(v) if *v < 0 && outer > 0 => write!(f, "({v})"),
            ShapeExpr::Const(v) => write!(f, "{v}"),
            ShapeExpr::Dim(r) => match self.names.get(*r as usize) {
                Some(name) => f.write_str(name.as_ref()),
                None => write!(f, "d{r}"),
            },
            ShapeExpr::Bin(op, a, b) => match op.infix() {
                Some((symbol, strength)) => {
                    let parens = strength < outer;
                    f.write_str(if parens { "(" } else { "" })?;
                    self.write(f, a, strength)?;
                    write!(f, " {symbol} ")?;
                    self.write(f, b, strength + 1)?;
                    f.write_str(if parens { ")" } else { "" })
                }
                None => {
                    write!(f, "{}(", if *op == ShapeOp::Min { "min" } else { "max" })?;
                    self.write(f, a, 0)?;
                    f.write_str(", ")?;
                    self.write(f, b, 0)?;
                    f.write_str(")")
                }
            },
        }
    }
}

impl<S: AsRef<str>> fmt::Display for Printed<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, self.expr, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ShapeExpr::{Const, Dim};

    fn bin(op: ShapeOp, a: ShapeExpr, b: ShapeExpr) -> ShapeExpr {
        ShapeExpr::bin(op, a, b)
    }

    #[test]
    fn floor_division_and_modulo_round_toward_negative_infinity() {
        let cases = [
            (7, 2, 3, 1),
            (-7, 2, -4, 1),
            (7, -2, -4, -1),
            (-7, -2, 3, -1),
            (6, 3, 2, 0),
        ];
        for (a, b, q, r) in cases {
            assert_eq!(ShapeOp::FloorDiv.apply(a, b), Some(q), "{a} // {b}");
            assert_eq!(ShapeOp::FloorMod.apply(a, b), Some(r), "{a} % {b}");
        }
        assert_eq!(ShapeOp::FloorDiv.apply(1, 0), None);
        assert_eq!(ShapeOp::FloorMod.apply(1, 0), None);
        assert_eq!(ShapeOp::FloorDiv.apply(i64::MIN, -1), None);
        assert_eq!(ShapeOp::Mul.apply(i64::MAX, 2), None);
    }

    #[test]
    fn evaluates_over_dim_registers() {
        // (n + 31) // 32 * 32 - min(m, 4), with n = 40, m = 9
        let padded = bin(
            ShapeOp::Mul,
            bin(
                ShapeOp::FloorDiv,
                bin(ShapeOp::Add, Dim(0), Const(31)),
                Const(32),
            ),
            Const(32),
        );
        let e = bin(ShapeOp::Sub, padded, bin(ShapeOp::Min, Dim(1), Const(4)));
        let dims = [Some(40), Some(9)];
        assert_eq!(e.eval(&|r| dims[r as usize]), Ok(60));
        assert_eq!(e.dims(), vec![0, 1]);
        assert_eq!(
            e.eval(&|r| [Some(40), None][r as usize]),
            Err(EvalError::Unbound(1))
        );
        let div0 = bin(ShapeOp::FloorDiv, Dim(0), bin(ShapeOp::Sub, Dim(0), Dim(0)));
        assert_eq!(div0.eval(&|_| Some(3)), Err(EvalError::Arithmetic));
        assert_eq!(
            e.display(&["n", "m"]).to_string(),
            "(n + 31) // 32 * 32 - min(m, 4)"
        );
    }

    #[test]
    fn prints_with_minimal_parentheses() {
        let names = ["n"];
        let show = |e: &ShapeExpr| e.display(&names).to_string();
        let n_minus = bin(ShapeOp::Sub, Dim(0), bin(ShapeOp::Sub, Const(4), Const(1)));
        assert_eq!(show(&n_minus), "n - (4 - 1)");
        let sum_times = bin(ShapeOp::Mul, bin(ShapeOp::Add, Dim(0), Const(1)), Const(2));
        assert_eq!(show(&sum_times), "(n + 1) * 2");
        assert_eq!(show(&bin(ShapeOp::Add, Dim(0), Const(-1))), "n + (-1)");
        assert_eq!(show(&bin(ShapeOp::Max, Dim(3), Const(0))), "max(d3, 0)");
    }

    #[test]
    fn serializes_compactly() {
        let e = bin(ShapeOp::FloorMod, Dim(1), Const(8));
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(json, r#"{"bin":["floor_mod",{"dim":1},{"const":8}]}"#);
        assert_eq!(serde_json::from_str::<ShapeExpr>(&json).unwrap(), e);
    }
}
