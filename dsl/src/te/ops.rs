//! Arithmetic, comparison, logic, cast, select and intrinsic builders of [`Expr`].

use super::expr::{Expr, Node};
use crate::tir::{BinOp, Intrinsic, PrimCmp};
use crate::DType;

impl Expr {
    /// `op(self, rhs)`, folding `x + 0`, `x - 0`, `x * 1`, `floordiv(x, 1)`,
    /// `floormod(x, 1)` and arithmetic on two `i64` immediates.
    pub fn binary(&self, op: BinOp, rhs: impl Into<Expr>) -> Expr {
        let rhs = rhs.into();
        if let Some(folded) = fold(op, self, &rhs) {
            return folded;
        }
        Expr::new(Node::Binary(op, self.clone(), rhs), self.dtype())
    }

    /// `floor(self / rhs)` (integers).
    pub fn floordiv(&self, rhs: impl Into<Expr>) -> Expr {
        self.binary(BinOp::FloorDiv, rhs)
    }

    /// `self - rhs * floor(self / rhs)` (integers).
    pub fn floormod(&self, rhs: impl Into<Expr>) -> Expr {
        self.binary(BinOp::FloorMod, rhs)
    }

    /// The larger of `self` and `rhs`.
    pub fn maximum(&self, rhs: impl Into<Expr>) -> Expr {
        self.binary(BinOp::Max, rhs)
    }

    /// The smaller of `self` and `rhs`.
    pub fn minimum(&self, rhs: impl Into<Expr>) -> Expr {
        self.binary(BinOp::Min, rhs)
    }

    /// `self` clamped to `lo..=hi`.
    pub fn clamp(&self, lo: impl Into<Expr>, hi: impl Into<Expr>) -> Expr {
        self.minimum(hi).maximum(lo)
    }

    /// Logical (bools) or bitwise (integers) and.
    pub fn and(&self, rhs: impl Into<Expr>) -> Expr {
        self.binary(BinOp::And, rhs)
    }

    /// Logical (bools) or bitwise (integers) or.
    pub fn or(&self, rhs: impl Into<Expr>) -> Expr {
        self.binary(BinOp::Or, rhs)
    }

    /// `self cmp rhs` (a bool).
    pub fn compare(&self, cmp: PrimCmp, rhs: impl Into<Expr>) -> Expr {
        Expr::new(Node::Cmp(cmp, self.clone(), rhs.into()), DType::Bool)
    }

    /// `self < rhs`.
    pub fn lt(&self, rhs: impl Into<Expr>) -> Expr {
        self.compare(PrimCmp::Lt, rhs)
    }

    /// `self <= rhs`.
    pub fn le(&self, rhs: impl Into<Expr>) -> Expr {
        self.compare(PrimCmp::Le, rhs)
    }

    /// `self > rhs`.
    pub fn gt(&self, rhs: impl Into<Expr>) -> Expr {
        self.compare(PrimCmp::Gt, rhs)
    }

    /// `self >= rhs`.
    pub fn ge(&self, rhs: impl Into<Expr>) -> Expr {
        self.compare(PrimCmp::Ge, rhs)
    }

    /// `self == rhs`.
    pub fn equal(&self, rhs: impl Into<Expr>) -> Expr {
        self.compare(PrimCmp::Eq, rhs)
    }

    /// `self != rhs`.
    pub fn not_equal(&self, rhs: impl Into<Expr>) -> Expr {
        self.compare(PrimCmp::Ne, rhs)
    }

    /// `self` converted to `dtype` (no-op when it already has it; immediates fold).
    pub fn cast(&self, dtype: DType) -> Expr {
        match self.node() {
            _ if self.dtype() == dtype => self.clone(),
            Node::Int(v) => Expr::constant(*v as f64, dtype),
            Node::Float(v) => Expr::constant(*v, dtype),
            _ => Expr::new(Node::Cast(self.clone()), dtype),
        }
    }

    /// `intrinsic(args)`; the result has the first argument's dtype.
    pub fn call(intrinsic: Intrinsic, args: Vec<Expr>) -> Expr {
        let dtype = args.first().map_or(DType::F32, Expr::dtype);
        Expr::new(Node::Call(intrinsic, args), dtype)
    }

    /// `self ^ exponent`.
    pub fn pow(&self, exponent: impl Into<Expr>) -> Expr {
        Expr::call(Intrinsic::Pow, vec![self.clone(), exponent.into()])
    }

    /// `self * b + c`, fused.
    pub fn fma(&self, b: impl Into<Expr>, c: impl Into<Expr>) -> Expr {
        Expr::call(Intrinsic::Fma, vec![self.clone(), b.into(), c.into()])
    }
}

macro_rules! unary_intrinsics {
    ($($method:ident => $intrinsic:ident),* $(,)?) => {
        impl Expr {
            $(
                #[doc = concat!("`", stringify!($method), "(self)`.")]
                pub fn $method(&self) -> Expr {
                    Expr::call(Intrinsic::$intrinsic, vec![self.clone()])
                }
            )*
        }
    };
}

unary_intrinsics!(
    exp => Exp, log => Log, sqrt => Sqrt, rsqrt => Rsqrt, tanh => Tanh, erf => Erf,
    sigmoid => Sigmoid, sin => Sin, cos => Cos, abs => Abs, floor => Floor,
);

/// `cond ? then : otherwise`; both branches have one dtype, the result's.
pub fn select(cond: Expr, then: Expr, otherwise: Expr) -> Expr {
    let dtype = then.dtype();
    Expr::new(Node::Select(cond, then, otherwise), dtype)
}

fn fold(op: BinOp, a: &Expr, b: &Expr) -> Option<Expr> {
    if a.dtype() != b.dtype() || !a.dtype().is_int() {
        return None;
    }
    let constant = |v: Option<i64>| v.map(Expr::int);
    let both = a.dtype() == DType::I64;
    match (op, a.as_int(), b.as_int()) {
        (BinOp::Add, Some(x), Some(y)) if both => constant(x.checked_add(y)),
        (BinOp::Sub, Some(x), Some(y)) if both => constant(x.checked_sub(y)),
        (BinOp::Mul, Some(x), Some(y)) if both => constant(x.checked_mul(y)),
        (BinOp::Add, Some(0), _) | (BinOp::Mul, Some(1), _) => Some(b.clone()),
        (BinOp::Add | BinOp::Sub, _, Some(0)) | (BinOp::Mul | BinOp::FloorDiv, _, Some(1)) => {
            Some(a.clone())
        }
        (BinOp::FloorMod, _, Some(1)) => Some(Expr::int_of(0, a.dtype())),
        _ => None,
    }
}

/// An `f64` operand next to an expression of `like`'s dtype.
fn float_operand(value: f64, like: DType) -> Expr {
    if like.is_float() {
        Expr::float(value, like)
    } else {
        Expr::f32(value)
    }
}

/// An `i64` operand next to an expression of `like`'s dtype.
fn int_operand(value: i64, like: DType) -> Expr {
    match like {
        DType::Bool => Expr::int(value),
        d if d.is_float() => Expr::float(value as f64, d),
        d => Expr::int_of(value, d),
    }
}

/// `a op b`, where `/` on integers is floor division.
fn arith(a: &Expr, op: BinOp, b: Expr) -> Expr {
    let op = match op {
        BinOp::Div if !a.dtype().is_float() => BinOp::FloorDiv,
        op => op,
    };
    a.binary(op, b)
}

macro_rules! arith_operator {
    ($trait:ident, $method:ident, $op:expr) => {
        impl std::ops::$trait<Expr> for Expr {
            type Output = Expr;
            fn $method(self, rhs: Expr) -> Expr {
                arith(&self, $op, rhs)
            }
        }
        impl std::ops::$trait<&Expr> for Expr {
            type Output = Expr;
            fn $method(self, rhs: &Expr) -> Expr {
                arith(&self, $op, rhs.clone())
            }
        }
        impl std::ops::$trait<Expr> for &Expr {
            type Output = Expr;
            fn $method(self, rhs: Expr) -> Expr {
                arith(self, $op, rhs)
            }
        }
        impl std::ops::$trait<&Expr> for &Expr {
            type Output = Expr;
            fn $method(self, rhs: &Expr) -> Expr {
                arith(self, $op, rhs.clone())
            }
        }
        impl std::ops::$trait<f64> for Expr {
            type Output = Expr;
            fn $method(self, rhs: f64) -> Expr {
                arith(&self, $op, float_operand(rhs, self.dtype()))
            }
        }
        impl std::ops::$trait<f64> for &Expr {
            type Output = Expr;
            fn $method(self, rhs: f64) -> Expr {
                arith(self, $op, float_operand(rhs, self.dtype()))
            }
        }
        impl std::ops::$trait<i64> for Expr {
            type Output = Expr;
            fn $method(self, rhs: i64) -> Expr {
                arith(&self, $op, int_operand(rhs, self.dtype()))
            }
        }
        impl std::ops::$trait<i64> for &Expr {
            type Output = Expr;
            fn $method(self, rhs: i64) -> Expr {
                arith(self, $op, int_operand(rhs, self.dtype()))
            }
        }
        impl std::ops::$trait<Expr> for f64 {
            type Output = Expr;
            fn $method(self, rhs: Expr) -> Expr {
                arith(&float_operand(self, rhs.dtype()), $op, rhs)
            }
        }
        impl std::ops::$trait<&Expr> for f64 {
            type Output = Expr;
            fn $method(self, rhs: &Expr) -> Expr {
                arith(&float_operand(self, rhs.dtype()), $op, rhs.clone())
            }
        }
    };
}

arith_operator!(Add, add, BinOp::Add);
arith_operator!(Sub, sub, BinOp::Sub);
arith_operator!(Mul, mul, BinOp::Mul);
arith_operator!(Div, div, BinOp::Div);

impl std::ops::Neg for &Expr {
    type Output = Expr;
    fn neg(self) -> Expr {
        Expr::constant(0.0, self.dtype()) - self
    }
}

impl std::ops::Neg for Expr {
    type Output = Expr;
    fn neg(self) -> Expr {
        -&self
    }
}

impl std::ops::Not for Expr {
    type Output = Expr;
    fn not(self) -> Expr {
        Expr::new(Node::Not(self), DType::Bool)
    }
}
