//! What is benchmarked: an op at a concrete shape, with the token count `n` symbolic.

use super::BenchError;
use oxrelax_dsl::ir::{Expr, Var};
use oxrelax_dsl::op::InferError;
use oxrelax_dsl::{op, DataType, StructInfo, SymExpr, SymVar, Target};
use std::fmt;
use std::str::FromStr;

/// The upper bound declared for the symbolic token count `n` (the context window of the
/// models targeted); raised to the benchmarked count when that is larger.
pub const N_BOUND: usize = 2048;

/// The largest dim accepted on the command line (keeps every dim an `i64` and every
/// product of two dims a `usize`).
pub const MAX_DIM: usize = 1 << 31;

/// The epsilon of the benchmarked `rms_norm`.
const RMS_NORM_EPSILON: f64 = 1e-5;

/// A matmul `[M, K] x [K, N] -> [M, N]`: `M` activation rows (the token count, symbolic
/// in the kernel), `K` the reduction, `N` output columns; the weight is `[K, N]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatmulShape {
    /// Activation rows.
    pub m: usize,
    /// Output columns.
    pub n: usize,
    /// Reduction length.
    pub k: usize,
}

impl fmt::Display for MatmulShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}x{}", self.m, self.n, self.k)
    }
}

impl FromStr for MatmulShape {
    type Err = BenchError;

    /// Parses `MxNxK` (three positive integers).
    fn from_str(value: &str) -> Result<Self, BenchError> {
        let bad = |reason: String| BenchError::BadMatmulShape {
            flag: "--matmul",
            value: value.to_string(),
            reason,
        };
        let parts: Vec<&str> = value.split(['x', 'X']).collect();
        let [m, n, k] = parts.as_slice() else {
            return Err(bad(format!("{} dims instead of 3", parts.len())));
        };
        let dim = |name: &str, text: &str| match text.trim().parse::<usize>() {
            Ok(0) => Err(bad(format!("{name} is 0"))),
            Ok(d) if d > MAX_DIM => Err(bad(format!("{name} is larger than {MAX_DIM}"))),
            Ok(d) => Ok(d),
            Err(_) => Err(bad(format!("{name} `{text}` is not a positive integer"))),
        };
        Ok(MatmulShape {
            m: dim("M", m)?,
            n: dim("N", n)?,
            k: dim("K", k)?,
        })
    }
}

/// A row-wise kernel's input `[rows, cols]`; `rows` is the symbolic token count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowShape {
    /// Rows (tokens).
    pub rows: usize,
    /// Columns (the reduced axis).
    pub cols: usize,
}

impl fmt::Display for RowShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.rows, self.cols)
    }
}

/// A decode-style GEMV on cold weights: the matmul of `shape`, each run reading the next
/// of `ring` distinct weight matrices `[K, N]` (together more than the caches hold), so
/// the weights stream from memory as in a real decode step. Its `M` rows are static, as
/// in a compiled `decode` function (so the decode schedule applies).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColdGemv {
    /// The matmul shape (`M` is normally 1).
    pub shape: MatmulShape,
    /// Distinct weight matrices cycled through, one per run (at least 2).
    pub ring: usize,
}

impl ColdGemv {
    /// The smallest ring (at least 2 matrices) of `shape`'s weights that holds
    /// `ring_bytes` or more.
    pub fn with_ring_bytes(shape: MatmulShape, ring_bytes: usize) -> ColdGemv {
        let ring = ring_bytes.div_ceil(shape.weight_bytes().max(1)).max(2);
        ColdGemv { shape, ring }
    }

    /// Bytes of all the ring's weight matrices.
    pub fn ring_bytes(&self) -> usize {
        self.shape.weight_bytes().saturating_mul(self.ring)
    }
}

impl MatmulShape {
    /// Columns of the host's weight panels (the matmul microkernels' HP).
    pub fn panel_width() -> usize {
        Target::host().matmul_tiles().hp as usize
    }

    /// The packed weight's shape `[ceil(N / HP), K, HP]`: the `[K, N]` weight in the
    /// zero-padded column panels the compiler packs weights into at compile time.
    pub fn packed_weight_shape(&self) -> [usize; 3] {
        let hp = MatmulShape::panel_width();
        [self.n.div_ceil(hp), self.k, hp]
    }

    /// Bytes of the packed f32 weight the kernel reads.
    pub fn weight_bytes(&self) -> usize {
        self.packed_weight_shape()
            .iter()
            .fold(std::mem::size_of::<f32>(), |bytes, &d| {
                bytes.saturating_mul(d)
            })
    }
}

/// One benchmarked kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelSpec {
    /// `matmul(x: [n, K], w: [K, N])`.
    Matmul(MatmulShape),
    /// The matmul of a [`ColdGemv`], its weight cycling through a ring.
    GemvCold(ColdGemv),
    /// `softmax(x: [n, C], axis = -1)`.
    Softmax(RowShape),
    /// `rms_norm(x: [n, C], w: [C], axes = [-1], eps = 1e-5)`.
    RmsNorm(RowShape),
}

impl KernelSpec {
    /// The op name.
    pub fn name(&self) -> &'static str {
        match self {
            KernelSpec::Matmul(_) => "matmul",
            KernelSpec::GemvCold(_) => "gemv_cold",
            KernelSpec::Softmax(_) => "softmax",
            KernelSpec::RmsNorm(_) => "rms_norm",
        }
    }

    /// The shape as printed (`MxNxK` or `RxC`).
    pub fn shape(&self) -> String {
        match self {
            KernelSpec::Matmul(s) | KernelSpec::GemvCold(ColdGemv { shape: s, .. }) => {
                s.to_string()
            }
            KernelSpec::Softmax(s) | KernelSpec::RmsNorm(s) => s.to_string(),
        }
    }

    /// The value the symbolic `n` is bound to at run time.
    pub fn tokens(&self) -> usize {
        match self {
            KernelSpec::Matmul(s) | KernelSpec::GemvCold(ColdGemv { shape: s, .. }) => s.m,
            KernelSpec::Softmax(s) | KernelSpec::RmsNorm(s) => s.rows,
        }
    }

    /// Floating-point operations of one run, where the count is conventional
    /// (`2 * M * N * K` for a matmul); `None` for the row-wise kernels.
    pub fn flops(&self) -> Option<f64> {
        match self {
            KernelSpec::Matmul(s) | KernelSpec::GemvCold(ColdGemv { shape: s, .. }) => {
                Some(2.0 * s.m as f64 * s.n as f64 * s.k as f64)
            }
            KernelSpec::Softmax(_) | KernelSpec::RmsNorm(_) => None,
        }
    }

    /// The matmul shape of a matmul or cold GEMV.
    pub fn matmul_shape(&self) -> Option<MatmulShape> {
        match self {
            KernelSpec::Matmul(s) | KernelSpec::GemvCold(ColdGemv { shape: s, .. }) => Some(*s),
            KernelSpec::Softmax(_) | KernelSpec::RmsNorm(_) => None,
        }
    }

    /// Distinct weight matrices cycled through: the ring of a cold GEMV, 1 for a matmul,
    /// `None` for the row-wise kernels.
    pub fn ring(&self) -> Option<usize> {
        match self {
            KernelSpec::Matmul(_) => Some(1),
            KernelSpec::GemvCold(cold) => Some(cold.ring),
            KernelSpec::Softmax(_) | KernelSpec::RmsNorm(_) => None,
        }
    }

    /// The op call on f32 inputs with `n` symbolic (`n <= max(N_BOUND, tokens)`), except
    /// for a cold GEMV, whose `M` rows are static as in a decode function; a matmul is the
    /// compiler's: `packed_matmul` on a weight packed into panels.
    pub fn call(&self) -> Result<Expr, BenchError> {
        let n = SymVar::bounded("n", bound_of(self.tokens())).expr();
        let int = |d: usize| SymExpr::int(dim_i64(d));
        let call = match *self {
            KernelSpec::Matmul(s) => packed_matmul(s, n),
            KernelSpec::GemvCold(cold) => packed_matmul(cold.shape, int(cold.shape.m)),
            KernelSpec::Softmax(s) => op::softmax(&tensor("x", vec![n, int(s.cols)]), -1),
            KernelSpec::RmsNorm(s) => op::rms_norm(
                &tensor("x", vec![n, int(s.cols)]),
                &tensor("w", vec![int(s.cols)]),
                vec![-1],
                RMS_NORM_EPSILON,
            ),
        };
        call.map_err(|source| BenchError::Op {
            kernel: self.name(),
            shape: self.shape(),
            source: Box::new(source),
        })
    }
}

/// `packed_matmul(x: [rows, K], w)` with `w` the `[K, N]` weight of `shape` packed into
/// panels.
fn packed_matmul(shape: MatmulShape, rows: SymExpr) -> Result<Expr, InferError> {
    let int = |d: usize| SymExpr::int(dim_i64(d));
    let packed = shape.packed_weight_shape().map(int).to_vec();
    op::packed_matmul(
        &tensor("x", vec![rows, int(shape.k)]),
        &tensor("w", packed),
        dim_i64(shape.n),
    )
}

/// The bound declared for `n` when it is bound to `tokens`.
fn bound_of(tokens: usize) -> i64 {
    dim_i64(tokens.max(N_BOUND))
}

/// A dim as an `i64` (dims are at most [`MAX_DIM`], checked when parsed).
pub(crate) fn dim_i64(dim: usize) -> i64 {
    i64::try_from(dim.min(MAX_DIM)).unwrap_or(i64::MAX)
}

/// An f32 tensor variable.
fn tensor(name: &str, shape: Vec<SymExpr>) -> Expr {
    Expr::Var(Var::new(name, StructInfo::tensor(shape, DataType::F32)))
}
