//! Scalar expressions of TIR.

use crate::sym::canon::Atom;
use crate::sym::CmpOp;
use crate::{DType, SymExpr};
use serde::{Deserialize, Serialize};

/// A scalar variable: a loop variable, a `let` variable, or a symbolic dim (`i64`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TVar {
    /// Name, unique within the primitive function.
    pub name: String,
    /// Type of the value.
    pub dtype: DType,
}

impl TVar {
    /// A variable of type `dtype`.
    pub fn new(name: &str, dtype: DType) -> Self {
        TVar {
            name: name.to_string(),
            dtype,
        }
    }
}

/// Binary arithmetic and logic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BinOp {
    /// `a + b`
    Add,
    /// `a - b`
    Sub,
    /// `a * b`
    Mul,
    /// `a / b` (floats)
    Div,
    /// `floor(a / b)` (integers)
    FloorDiv,
    /// `a - b * floor(a / b)` (integers)
    FloorMod,
    /// `min(a, b)`
    Min,
    /// `max(a, b)`
    Max,
    /// Logical and (bools) or bitwise and (integers).
    And,
    /// Logical or (bools) or bitwise or (integers).
    Or,
    /// Shift left (integers).
    Shl,
    /// Arithmetic shift right (integers).
    Shr,
}

impl BinOp {
    /// Every binary operation.
    pub const ALL: [BinOp; 12] = [
        BinOp::Add,
        BinOp::Sub,
        BinOp::Mul,
        BinOp::Div,
        BinOp::FloorDiv,
        BinOp::FloorMod,
        BinOp::Min,
        BinOp::Max,
        BinOp::And,
        BinOp::Or,
        BinOp::Shl,
        BinOp::Shr,
    ];

    /// The name used in the text form.
    pub fn name(self) -> &'static str {
        match self {
            BinOp::Add => "add",
            BinOp::Sub => "sub",
            BinOp::Mul => "mul",
            BinOp::Div => "div",
            BinOp::FloorDiv => "floordiv",
            BinOp::FloorMod => "floormod",
            BinOp::Min => "min",
            BinOp::Max => "max",
            BinOp::And => "and",
            BinOp::Or => "or",
            BinOp::Shl => "shl",
            BinOp::Shr => "shr",
        }
    }
}

/// Comparisons (the result is `bool`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PrimCmp {
    /// `a < b`
    Lt,
    /// `a <= b`
    Le,
    /// `a > b`
    Gt,
    /// `a >= b`
    Ge,
    /// `a == b`
    Eq,
    /// `a != b`
    Ne,
}

/// Math intrinsics codegen provides (scalar and vector forms).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Intrinsic {
    /// `e^x`
    Exp,
    /// natural logarithm
    Log,
    /// square root
    Sqrt,
    /// `1 / sqrt(x)`
    Rsqrt,
    /// hyperbolic tangent
    Tanh,
    /// error function
    Erf,
    /// `1 / (1 + e^-x)`
    Sigmoid,
    /// sine
    Sin,
    /// cosine
    Cos,
    /// `x^y`
    Pow,
    /// `a * b + c`, fused
    Fma,
    /// absolute value
    Abs,
    /// round toward -inf
    Floor,
}

impl Intrinsic {
    /// Every intrinsic.
    pub const ALL: [Intrinsic; 13] = [
        Intrinsic::Exp,
        Intrinsic::Log,
        Intrinsic::Sqrt,
        Intrinsic::Rsqrt,
        Intrinsic::Tanh,
        Intrinsic::Erf,
        Intrinsic::Sigmoid,
        Intrinsic::Sin,
        Intrinsic::Cos,
        Intrinsic::Pow,
        Intrinsic::Fma,
        Intrinsic::Abs,
        Intrinsic::Floor,
    ];

    /// The name used in the text form.
    pub fn name(self) -> &'static str {
        match self {
            Intrinsic::Exp => "exp",
            Intrinsic::Log => "log",
            Intrinsic::Sqrt => "sqrt",
            Intrinsic::Rsqrt => "rsqrt",
            Intrinsic::Tanh => "tanh",
            Intrinsic::Erf => "erf",
            Intrinsic::Sigmoid => "sigmoid",
            Intrinsic::Sin => "sin",
            Intrinsic::Cos => "cos",
            Intrinsic::Pow => "pow",
            Intrinsic::Fma => "fma",
            Intrinsic::Abs => "abs",
            Intrinsic::Floor => "floor",
        }
    }

    /// The intrinsic with this name.
    pub fn from_name(name: &str) -> Option<Self> {
        Intrinsic::ALL.into_iter().find(|i| i.name() == name)
    }

    /// How many arguments it takes.
    pub fn arity(self) -> usize {
        match self {
            Intrinsic::Pow => 2,
            Intrinsic::Fma => 3,
            _ => 1,
        }
    }
}

/// A TIR scalar expression.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum PrimExpr {
    /// An integer immediate of an integer (or bool) dtype.
    Int(i64, DType),
    /// A float immediate of a float dtype.
    Float(#[serde(with = "crate::text::finite_f64")] f64, DType),
    /// A variable.
    Var(TVar),
    /// `buffer[indices]`; `dtype` is the buffer's element type.
    Load {
        /// Buffer name (a parameter or an allocation).
        buffer: String,
        /// Element type of the buffer.
        dtype: DType,
        /// One index per buffer dim.
        indices: Vec<PrimExpr>,
    },
    /// A binary operation of two operands of one dtype.
    Binary(BinOp, Box<PrimExpr>, Box<PrimExpr>),
    /// A comparison.
    Cmp(PrimCmp, Box<PrimExpr>, Box<PrimExpr>),
    /// Logical negation of a bool.
    Not(Box<PrimExpr>),
    /// A conversion to another dtype.
    Cast(DType, Box<PrimExpr>),
    /// `cond ? then : otherwise`.
    Select(Box<PrimExpr>, Box<PrimExpr>, Box<PrimExpr>),
    /// A math intrinsic.
    Call(Intrinsic, Vec<PrimExpr>),
}

impl PrimExpr {
    /// An `i64` immediate (the index type).
    pub fn index(value: i64) -> Self {
        PrimExpr::Int(value, DType::I64)
    }

    /// An `f32` immediate.
    pub fn f32(value: f64) -> Self {
        PrimExpr::Float(value, DType::F32)
    }

    /// The type of the value.
    pub fn dtype(&self) -> DType {
        match self {
            PrimExpr::Int(_, d) | PrimExpr::Float(_, d) | PrimExpr::Cast(d, _) => *d,
            PrimExpr::Var(v) => v.dtype,
            PrimExpr::Load { dtype, .. } => *dtype,
            PrimExpr::Binary(_, a, _) => a.dtype(),
            PrimExpr::Cmp(..) | PrimExpr::Not(_) => DType::Bool,
            PrimExpr::Select(_, a, _) => a.dtype(),
            PrimExpr::Call(_, args) => args.first().map_or(DType::F32, PrimExpr::dtype),
        }
    }

    /// `op(self, rhs)`.
    pub fn binary(self, op: BinOp, rhs: PrimExpr) -> PrimExpr {
        PrimExpr::Binary(op, Box::new(self), Box::new(rhs))
    }

    /// `self cmp rhs`.
    pub fn compare(self, cmp: PrimCmp, rhs: PrimExpr) -> PrimExpr {
        PrimExpr::Cmp(cmp, Box::new(self), Box::new(rhs))
    }

    /// `self` converted to `dtype` (no-op when it already has it).
    pub fn cast(self, dtype: DType) -> PrimExpr {
        if self.dtype() == dtype {
            self
        } else {
            PrimExpr::Cast(dtype, Box::new(self))
        }
    }

    /// `intrinsic(args)`.
    pub fn call(intrinsic: Intrinsic, args: Vec<PrimExpr>) -> PrimExpr {
        PrimExpr::Call(intrinsic, args)
    }

    /// `cond ? then : otherwise`.
    pub fn select(cond: PrimExpr, then: PrimExpr, otherwise: PrimExpr) -> PrimExpr {
        PrimExpr::Select(Box::new(cond), Box::new(then), Box::new(otherwise))
    }
}

macro_rules! prim_operator {
    ($trait:ident, $method:ident, $op:expr) => {
        impl std::ops::$trait for PrimExpr {
            type Output = PrimExpr;
            fn $method(self, rhs: PrimExpr) -> PrimExpr {
                self.binary($op, rhs)
            }
        }
    };
}

prim_operator!(Add, add, BinOp::Add);
prim_operator!(Sub, sub, BinOp::Sub);
prim_operator!(Mul, mul, BinOp::Mul);
prim_operator!(Div, div, BinOp::Div);

impl From<&SymExpr> for PrimExpr {
    /// The `i64` index expression computing a symbolic expression; dims become `i64`
    /// variables of the same name.
    fn from(expr: &SymExpr) -> Self {
        let poly = expr.poly();
        let mut acc: Option<PrimExpr> = None;
        for (monomial, coeff) in &poly.terms {
            let mut term = monomial
                .iter()
                .map(atom_to_prim)
                .reduce(|a, b| a * b)
                .unwrap_or(PrimExpr::index(1));
            if *coeff != 1 {
                term = PrimExpr::index(*coeff) * term;
            }
            acc = Some(match acc {
                Some(a) => a + term,
                None => term,
            });
        }
        match (acc, poly.constant) {
            (None, c) => PrimExpr::index(c),
            (Some(a), 0) => a,
            (Some(a), c) => a + PrimExpr::index(c),
        }
    }
}

impl From<SymExpr> for PrimExpr {
    fn from(expr: SymExpr) -> Self {
        PrimExpr::from(&expr)
    }
}

fn atom_to_prim(atom: &Atom) -> PrimExpr {
    let p = PrimExpr::from;
    match atom {
        Atom::Var(v) => PrimExpr::Var(TVar::new(v.name(), DType::I64)),
        Atom::FloorDiv(a, b) => p(a).binary(BinOp::FloorDiv, p(b)),
        Atom::FloorMod(a, b) => p(a).binary(BinOp::FloorMod, p(b)),
        Atom::Min(a, b) => p(a).binary(BinOp::Min, p(b)),
        Atom::Max(a, b) => p(a).binary(BinOp::Max, p(b)),
        Atom::Cmp(op, a, b) => {
            let cmp = match op {
                CmpOp::Lt => PrimCmp::Lt,
                CmpOp::Le => PrimCmp::Le,
                CmpOp::Eq => PrimCmp::Eq,
                CmpOp::Ne => PrimCmp::Ne,
            };
            p(a).compare(cmp, p(b)).cast(DType::I64)
        }
        Atom::Select(c, a, b) => {
            PrimExpr::select(p(c).compare(PrimCmp::Ne, PrimExpr::index(0)), p(a), p(b))
        }
    }
}

impl PrimExpr {
    /// This integer expression as a symbolic expression, when it only combines integer
    /// immediates and the dims in `dims` with `+ - *`, floor division/modulo, min and max.
    /// Used to simplify loop extents with the canonical simplifier.
    pub fn to_sym(&self, dims: &[crate::SymVar]) -> Option<SymExpr> {
        let s = |e: &PrimExpr| e.to_sym(dims);
        match self {
            PrimExpr::Int(v, dtype) if dtype.is_int() => Some(SymExpr::int(*v)),
            PrimExpr::Var(v) => dims.iter().find(|d| d.name() == v.name).map(|d| d.expr()),
            PrimExpr::Binary(op, a, b) => {
                let (a, b) = (s(a)?, s(b)?);
                Some(match op {
                    BinOp::Add => &a + &b,
                    BinOp::Sub => &a - &b,
                    BinOp::Mul => &a * &b,
                    BinOp::FloorDiv => a.floordiv(&b),
                    BinOp::FloorMod => a.floormod(&b),
                    BinOp::Min => a.minimum(&b),
                    BinOp::Max => a.maximum(&b),
                    _ => return None,
                })
            }
            _ => None,
        }
    }
}
