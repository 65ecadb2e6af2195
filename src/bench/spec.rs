//! What is benchmarked: an op at a concrete shape, with the token count `n` symbolic.

use super::BenchError;
use crate::passes::WeightFormat;
use crate::quantization::Quantization;
use oxrelax_dsl::ir::{Expr, Var};
use oxrelax_dsl::op::{InferError, QuantLayout};
use oxrelax_dsl::{op, DType, StructInfo, SymExpr, SymVar, Target};
use oxrelax_runtime::tensor::storage_bytes;
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
/// in a compiled `decode` function (so the decode schedule applies). The weights are
/// stored as `quant` stores a model's projections: f32 panels (`q0f32`), or quantized
/// panels and their group scales (`packed_matmul_quant`, the schemes with f32
/// activations).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColdGemv {
    /// The matmul shape (`M` is normally 1).
    pub shape: MatmulShape,
    /// How the weights are stored.
    pub quant: Quantization,
    /// Distinct weight matrices cycled through, one per run (at least 2).
    pub ring: usize,
}

impl ColdGemv {
    /// The cold GEMV of `shape` over weights stored as `quant` with the smallest ring (at
    /// least 2 matrices) that holds `ring_bytes` or more; an error naming `quant` if the
    /// harness cannot store weights that way.
    pub fn with_ring_bytes(
        shape: MatmulShape,
        quant: Quantization,
        ring_bytes: usize,
    ) -> Result<ColdGemv, BenchError> {
        let format = cold_format(quant)?;
        let ring = ring_bytes
            .div_ceil(weight_bytes(shape, format).max(1))
            .max(2);
        Ok(ColdGemv { shape, quant, ring })
    }

    /// Bytes of one weight matrix as stored (its quantized panels and scales, if any).
    pub fn weight_bytes(&self) -> usize {
        weight_bytes(self.shape, self.format())
    }

    /// The quantized format of the weights (`None`: f32 panels).
    fn format(&self) -> Option<&'static WeightFormat> {
        cold_format(self.quant).ok().flatten()
    }

    /// Bytes of all the ring's weight matrices.
    pub fn ring_bytes(&self) -> usize {
        self.weight_bytes().saturating_mul(self.ring)
    }

    /// `x: [M, K]` (static rows) times the stored weight: `packed_matmul` on f32 panels,
    /// or `packed_matmul_quant` on quantized panels and their scales.
    fn call(&self) -> Result<Expr, InferError> {
        let shape = self.shape;
        let Some(format) = self.format() else {
            return packed_matmul(shape, SymExpr::int(dim_i64(shape.m)));
        };
        let x = tensor("x", static_dims([shape.m, shape.k].map(dim_i64)));
        let (packed, dtype) = quant_panels(shape, format);
        let packed = typed_tensor("packed", static_dims(packed), dtype);
        let scales = typed_tensor("scales", static_dims(quant_scales(shape)), format.scales);
        op::packed_matmul_quant(&x, &packed, &scales, dim_i64(shape.n))
    }
}

/// The quantized format a cold GEMV stores weights in for `quant` (`None`: f32 panels),
/// or why it cannot.
fn cold_format(quant: Quantization) -> Result<Option<&'static WeightFormat>, BenchError> {
    let bad = |reason| BenchError::BadOption {
        flag: "--cold-quant",
        value: quant.name().to_string(),
        reason,
    };
    match (quant, quant.packed_format()) {
        (Quantization::Q0f32, _) => Ok(None),
        (_, Some(format)) if format.layout == QuantLayout::Rows && !format.offsets => {
            Ok(Some(format))
        }
        (_, Some(format)) if format.offsets => Err(bad(
            "adds its offsets' term outside the GEMV; the cold GEMV times one kernel (q0f32, \
             q8f32, q4f32_1, q4f16_1)",
        )),
        (_, Some(_)) => Err(bad(
            "quantizes its activations at run time; the cold GEMV times the schemes with f32 \
             activations (q0f32, q8f32, q4f32_1, q4f16_1)",
        )),
        (_, None) => Err(bad(
            "is not a weight storage the cold GEMV times (q0f32, q8f32, q4f32_1, q4f16_1)",
        )),
    }
}

/// Bytes of `shape`'s weight stored as f32 panels (`None`) or in `format`.
fn weight_bytes(shape: MatmulShape, format: Option<&WeightFormat>) -> usize {
    let stored = |dims: &[i64], dtype: DType| storage_bytes(dtype, dims).unwrap_or(usize::MAX);
    match format {
        None => shape.weight_bytes(),
        Some(format) => {
            let (packed, dtype) = quant_panels(shape, format);
            let scales = stored(&quant_scales(shape), format.scales);
            stored(&packed, dtype).saturating_add(scales)
        }
    }
}

/// The shape and dtype of `shape`'s weight quantized into `format`'s panels.
fn quant_panels(shape: MatmulShape, format: &WeightFormat) -> (Vec<i64>, DType) {
    let hp = dim_i64(MatmulShape::panel_width());
    let (n, k) = (dim_i64(shape.n), dim_i64(shape.k));
    op::packed_quant_layout(n, k, hp, (format.bits, format.layout))
}

/// The shape of the group scales of `shape`'s quantized weight: `[panels, groups, HP]`.
fn quant_scales(shape: MatmulShape) -> Vec<i64> {
    let hp = MatmulShape::panel_width();
    let groups = op::quant_groups(dim_i64(shape.k));
    vec![dim_i64(shape.n.div_ceil(hp)), groups, dim_i64(hp)]
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

    /// The shape as printed (`MxNxK` or `RxC`; a cold GEMV over quantized weights adds
    /// the scheme: `MxNxK/q4f16_1`).
    pub fn shape(&self) -> String {
        match self {
            KernelSpec::GemvCold(cold) if cold.quant != Quantization::Q0f32 => {
                format!("{}/{}", cold.shape, cold.quant.name())
            }
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
            KernelSpec::GemvCold(cold) => cold.call(),
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
    typed_tensor(name, shape, DType::F32)
}

/// A tensor variable of `dtype`.
fn typed_tensor(name: &str, shape: Vec<SymExpr>, dtype: DType) -> Expr {
    Expr::Var(Var::new(name, StructInfo::tensor(shape, dtype)))
}

/// Static dims.
fn static_dims(values: impl IntoIterator<Item = i64>) -> Vec<SymExpr> {
    values.into_iter().map(SymExpr::int).collect()
}
