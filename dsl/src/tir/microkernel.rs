//! Microkernel calls: a statement that hands an inner register block of a loop nest to
//! a hand-written kernel of the runtime (a tensorized block), and the table of the
//! microkernels TIR may call, with the reference semantics the interpreter runs.
//!
//! Two kinds ([`MicrokernelKind`]):
//! - block GEMMs (f32 activations and output; f32 or f16 weights, widened as loaded) with
//!   block shape `EP x HP` and operands
//!   `(a, b, c; kc, lda, ldc, rows, cols, accumulate)`: for `i < rows`, `j < cols`,
//!   `c[i*ldc + j] = (accumulate ? c[i*ldc + j] : 0) + sum_{k < kc} a[i*lda + k] * b(k, j)`,
//!   where `a` holds up to `EP` activation rows read in place and `b` is `HP / PANEL`
//!   packed weight panels `lda * PANEL` values apart (a panel holds the whole reduction,
//!   whose depth is the row stride `lda`), of which a call reads groups `0..kc`:
//!   `b(k, j) = b[(j / PANEL)*lda*PANEL + k*PANEL + j % PANEL]`. Quantized weights come
//!   with an operand `scales` after `b` (`(a, b, scales, c)`, scales f32 or f16):
//!   symmetric group quantization,
//!   `b(k, j) = w(k, j) * scales[(j / PANEL)*ceil(lda / G)*PANEL + (k / G)*PANEL + j % PANEL]`
//!   with `G =` [`QUANT_GROUP`] (a call starts at a group boundary), where for i8
//!   weights `w(k, j)` is the element above, and for u4 weights (value pairs: panels
//!   `ceil(lda/2) * 2 * PANEL` elements apart, two consecutive k of a column side by side)
//!   `w(k, j) = b[(j / PANEL)*ceil(lda/2)*2*PANEL + (k/2)*2*PANEL + (j % PANEL)*2 + k % 2] - 8`;
//! - int8 block GEMMs (dynamic int8 activations, MNN's w8a8 / w4a8): u8 activation codes
//!   (`code + 128`) with one f32 scale per row and group of [`QUANT_GROUP`] k, int8 or
//!   int4 weight panels of the quads layout (see [`crate::op::QuantLayout`]) with f16
//!   group scales; operands `(a, a_scales, b, scales, c; kc, lda, ldc, rows, cols)`: for
//!   `i < rows`, `j < cols`,
//!   `c[i*ldc + j] = sum_{k < kc} a_scales[i*(kc / G) + k / G] * s(k, j) * (a[i*lda + k] - 128) * w(k, j)`
//!   with `kc` the whole (padded) reduction, a multiple of [`QUANT_GROUP`];
//!   `s(k, j) = scales[((j / PANEL)*(kc / G) + k / G)*PANEL + j % PANEL]`, and `w(k, j)`
//!   element `(j / PANEL)*kc*PANEL + (k/4)*4*PANEL + (j % PANEL)*4 + k % 4` of i8 panels, or
//!   `(j / PANEL)*kc*PANEL + (k/8)*8*PANEL + (j % PANEL)*8 + (k % 4)*2 + (k/4) % 2` of u4
//!   panels minus 8;
//! - the attention of consecutive query rows (f32; query heads sharing one kv head) over
//!   a strided run of key/value rows (f32, or f16 widened as loaded: an f16 KV cache; or
//!   i8 codes with one f32 scale per row, dequantized as loaded: an int8 KV cache).
//!
//! The runtime's microkernel table implements each name per CPU feature, with a scalar
//! twin.

use super::expr::PrimExpr;
use crate::DataType;
use serde::{Deserialize, Serialize};

/// The run of the reduction sharing one scale per column in quantized weight panels (the
/// runtime's `QUANT_GROUP`).
pub const QUANT_GROUP: i64 = 32;

/// A buffer operand of a microkernel call: `buffer`'s elements from flat element index
/// `offset` on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BufferRegion {
    /// The buffer (a parameter or an allocation in scope).
    pub buffer: String,
    /// The first element, as a flat (row-major) element index.
    pub offset: PrimExpr,
}

/// A call of microkernel `kernel` on buffer regions and `i64` scalars.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MicrokernelCall {
    /// The microkernel's name in [`MICROKERNELS`].
    pub kernel: String,
    /// The buffer operands, in the kernel's order ([`MicrokernelKind::operands`]).
    pub operands: Vec<BufferRegion>,
    /// The scalar operands, in the kernel's order ([`MicrokernelKind::scalars`]).
    pub scalars: Vec<PrimExpr>,
}

/// What a microkernel computes, which fixes its operands and scalars.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MicrokernelKind {
    /// A block GEMM of block shape `ep x hp`: operands `(a, b, c)`, scalars
    /// `(kc, lda, ldc, rows, cols, accumulate)` (see the module docs).
    Gemm {
        /// The element type of the packed weights `b`: f32, f16, i8 or u4 (int4 panels
        /// of value pairs, see the module docs).
        weights: DataType,
        /// The element type of the group scales of quantized weights (f32 or f16), which
        /// come as operand `scales` after `b`; `None` for float weights.
        scales: Option<DataType>,
        /// Rows of the register block (activation rows per call).
        ep: i64,
        /// Columns of the register block.
        hp: i64,
        /// Width of one packed weight panel (`hp` is a multiple of it).
        panel: i64,
    },
    /// An int8 block GEMM of block shape `ep x hp`: operands
    /// `(a, a_scales, b, scales, c)`, scalars `(kc, lda, ldc, rows, cols)` (see the
    /// module docs).
    IntGemm {
        /// The element type of the packed weights: i8 or u4 (quads layout).
        weights: DataType,
        /// Rows of the register block.
        ep: i64,
        /// Columns of the register block.
        hp: i64,
        /// Width of one packed weight panel.
        panel: i64,
    },
    /// The attention of `rows` query rows over the same keys: operands `(q, k, v, out)`,
    /// scalars `(rows, keys, kv_stride, head_dim, scale)` (`scale` an f32): for each row
    /// `r < rows` (`q` and `out` rows `head_dim` apart), with
    /// `s_j = scale * q[r*head_dim ..] . k[j*kv_stride ..]`,
    /// `out[r*head_dim ..] = sum_j softmax(s)_j v[j*kv_stride ..]` over `head_dim`
    /// elements; zeros when `keys <= 0`. `q` and `out` are f32. Quantized
    /// keys and values come with operands `k_scales`, `v_scales` before `out` and a last
    /// scalar `scale_stride`: row `j` is `k[j*kv_stride ..] * k_scales[j*scale_stride]`
    /// (and so for `v`).
    Attention {
        /// The element type of `k` and `v` (f32, or f16 widened to f32 as loaded, or i8
        /// codes).
        kv: DataType,
        /// The element type of the row scales of quantized keys and values (f32); `None`
        /// for float ones.
        scales: Option<DataType>,
    },
}

impl MicrokernelKind {
    /// The buffer operands' names, in order.
    pub fn operands(self) -> &'static [&'static str] {
        match self {
            MicrokernelKind::Gemm {
                scales: Some(_), ..
            } => &["a", "b", "scales", "c"],
            MicrokernelKind::Gemm { .. } => &["a", "b", "c"],
            MicrokernelKind::IntGemm { .. } => &["a", "a_scales", "b", "scales", "c"],
            MicrokernelKind::Attention {
                scales: Some(_), ..
            } => &["q", "k", "v", "k_scales", "v_scales", "out"],
            MicrokernelKind::Attention { .. } => &["q", "k", "v", "out"],
        }
    }

    /// The element type of each buffer operand, in order.
    pub fn operand_dtypes(self) -> Vec<DataType> {
        match self {
            MicrokernelKind::Gemm {
                weights,
                scales: Some(scales),
                ..
            } => vec![DataType::F32, weights, scales, DataType::F32],
            MicrokernelKind::Gemm { weights, .. } => vec![DataType::F32, weights, DataType::F32],
            MicrokernelKind::IntGemm { weights, .. } => vec![
                DataType::U8,
                DataType::F32,
                weights,
                DataType::F16,
                DataType::F32,
            ],
            MicrokernelKind::Attention {
                kv,
                scales: Some(scales),
            } => vec![DataType::F32, kv, kv, scales, scales, DataType::F32],
            MicrokernelKind::Attention { kv, .. } => vec![DataType::F32, kv, kv, DataType::F32],
        }
    }

    /// The register block `(ep, hp)` of a block GEMM (f32 or int8 activations).
    pub fn block(self) -> Option<(i64, i64)> {
        match self {
            MicrokernelKind::Gemm { ep, hp, .. } | MicrokernelKind::IntGemm { ep, hp, .. } => {
                Some((ep, hp))
            }
            MicrokernelKind::Attention { .. } => None,
        }
    }

    /// The scalar operands' names and dtypes, in order.
    pub fn scalars(self) -> &'static [(&'static str, DataType)] {
        match self {
            MicrokernelKind::Gemm { .. } => &[
                ("kc", DataType::I64),
                ("lda", DataType::I64),
                ("ldc", DataType::I64),
                ("rows", DataType::I64),
                ("cols", DataType::I64),
                ("accumulate", DataType::I64),
            ],
            MicrokernelKind::IntGemm { .. } => &[
                ("kc", DataType::I64),
                ("lda", DataType::I64),
                ("ldc", DataType::I64),
                ("rows", DataType::I64),
                ("cols", DataType::I64),
            ],
            MicrokernelKind::Attention {
                scales: Some(_), ..
            } => &[
                ("rows", DataType::I64),
                ("keys", DataType::I64),
                ("kv_stride", DataType::I64),
                ("head_dim", DataType::I64),
                ("scale", DataType::F32),
                ("scale_stride", DataType::I64),
            ],
            MicrokernelKind::Attention { .. } => &[
                ("rows", DataType::I64),
                ("keys", DataType::I64),
                ("kv_stride", DataType::I64),
                ("head_dim", DataType::I64),
                ("scale", DataType::F32),
            ],
        }
    }
}

/// A microkernel TIR may call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MicrokernelSpec {
    /// The name (shared with the runtime's table).
    pub name: &'static str,
    /// What it computes.
    pub kind: MicrokernelKind,
}

/// Every microkernel TIR may call (in the runtime table's order).
pub const MICROKERNELS: &[MicrokernelSpec] = &[
    gemm("sgemm_6x16", (DataType::F32, None), 6, 16),
    gemm("sgemv_1x64", (DataType::F32, None), 1, 64),
    gemm("sgemm_6x16_f16", (DataType::F16, None), 6, 16),
    gemm("sgemv_1x64_f16", (DataType::F16, None), 1, 64),
    gemm("sgemm_12x32", (DataType::F32, None), 12, 32),
    gemm("sgemm_12x32_f16", (DataType::F16, None), 12, 32),
    attention("attention_f32", (DataType::F32, None)),
    gemm("sgemm_6x16_q8", (DataType::I8, Some(DataType::F32)), 6, 16),
    gemm("sgemv_1x64_q8", (DataType::I8, Some(DataType::F32)), 1, 64),
    gemm(
        "sgemm_12x32_q8",
        (DataType::I8, Some(DataType::F32)),
        12,
        32,
    ),
    gemm("sgemm_6x16_q4", (DataType::U4, Some(DataType::F32)), 6, 16),
    gemm(
        "sgemv_1x256_q4",
        (DataType::U4, Some(DataType::F32)),
        1,
        256,
    ),
    gemm(
        "sgemm_12x32_q4",
        (DataType::U4, Some(DataType::F32)),
        12,
        32,
    ),
    gemm(
        "sgemm_6x16_q4f16",
        (DataType::U4, Some(DataType::F16)),
        6,
        16,
    ),
    gemm(
        "sgemv_1x256_q4f16",
        (DataType::U4, Some(DataType::F16)),
        1,
        256,
    ),
    gemm(
        "sgemm_12x32_q4f16",
        (DataType::U4, Some(DataType::F16)),
        12,
        32,
    ),
    int_gemm("qgemm_6x32_w8", DataType::I8, 6, 32),
    int_gemm("qgemm_6x32_w4", DataType::U4, 6, 32),
    int_gemm("qgemm_4x16_w8", DataType::I8, 4, 16),
    int_gemm("qgemm_4x16_w4", DataType::U4, 4, 16),
    int_gemm("qgemv_1x64_w8", DataType::I8, 1, 64),
    int_gemm("qgemv_1x64_w4", DataType::U4, 1, 64),
    attention("attention_f16kv", (DataType::F16, None)),
    attention("attention_q8kv", (DataType::I8, Some(DataType::F32))),
];

/// The table row of int8 block GEMM `name` over `weights` (i8 or u4), block `ep x hp`,
/// panels 16 wide.
const fn int_gemm(name: &'static str, weights: DataType, ep: i64, hp: i64) -> MicrokernelSpec {
    MicrokernelSpec {
        name,
        kind: MicrokernelKind::IntGemm {
            weights,
            ep,
            hp,
            panel: 16,
        },
    }
}

/// The table row of attention kernel `name` over keys and values of `kv` with row
/// scales of `scales` (quantized ones).
const fn attention(
    name: &'static str,
    (kv, scales): (DataType, Option<DataType>),
) -> MicrokernelSpec {
    MicrokernelSpec {
        name,
        kind: MicrokernelKind::Attention { kv, scales },
    }
}

/// The table row of block GEMM `name` over `(weights, scales)`, block `ep x hp`, panels
/// 16 wide.
const fn gemm(
    name: &'static str,
    (weights, scales): (DataType, Option<DataType>),
    ep: i64,
    hp: i64,
) -> MicrokernelSpec {
    MicrokernelSpec {
        name,
        kind: MicrokernelKind::Gemm {
            weights,
            scales,
            ep,
            hp,
            panel: 16,
        },
    }
}

/// The scalar operands of one block GEMM call, evaluated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmScalars {
    /// Reduction length.
    pub kc: i64,
    /// Row stride of `a`.
    pub lda: i64,
    /// Row stride of `c`.
    pub ldc: i64,
    /// Valid rows (`<= ep`).
    pub rows: i64,
    /// Valid columns (`<= hp`).
    pub cols: i64,
    /// Whether to add to `c` (else overwrite).
    pub accumulate: bool,
}

impl GemmScalars {
    /// The elements of `a`, `b` and `c` one call on panels `panel` wide of `weights`
    /// may touch (the interpreter's bounds check; `a` and `c` count the rows up to
    /// `rows`, `b` the panels holding the first `cols` columns).
    pub fn footprint(&self, (panel, weights): (i64, DataType)) -> [i64; 3] {
        let rows = |stride: i64, len: i64| {
            if self.rows > 0 && len > 0 {
                (self.rows - 1) * stride + len
            } else {
                0
            }
        };
        [
            rows(self.lda, self.kc),
            self.panels_footprint(panel, weights),
            rows(self.ldc, self.cols),
        ]
    }

    /// The elements of `b` from the first panel's first group to the last group read of
    /// the last panel holding one of the `cols` columns.
    fn panels_footprint(&self, panel: i64, weights: DataType) -> i64 {
        let panels = (self.cols.max(0) + panel - 1) / panel;
        if panels == 0 || self.kc <= 0 {
            return 0;
        }
        if weights == DataType::U4 {
            let pairs = |k: i64| (k + 1) / 2 * 2 * panel;
            return (panels - 1) * pairs(self.lda) + pairs(self.kc);
        }
        (panels - 1) * self.lda * panel + self.kc * panel
    }

    /// The elements of a quantized kernel's `scales` one call may read: every group of the
    /// call's reduction, of each panel holding one of the `cols` columns.
    pub fn scales_footprint(&self, panel: i64) -> i64 {
        let panels = (self.cols.max(0) + panel - 1) / panel;
        if panels == 0 || self.kc <= 0 {
            return 0;
        }
        let groups = (self.lda + QUANT_GROUP - 1) / QUANT_GROUP;
        let read = (self.kc + QUANT_GROUP - 1) / QUANT_GROUP;
        ((panels - 1) * groups + read) * panel
    }

    /// The reference semantics (f64 arithmetic) on slices starting at each operand's
    /// offset, for panels `panel` wide of `weights`; the slices must hold
    /// [`GemmScalars::footprint`] elements (and `scales`, for quantized weights,
    /// [`GemmScalars::scales_footprint`]).
    pub fn reference(
        &self,
        (panel, weights): (i64, DataType),
        (a, b, scales): (&[f64], &[f64], Option<&[f64]>),
        c: &mut [f64],
    ) {
        let groups = (self.lda + QUANT_GROUP - 1) / QUANT_GROUP;
        let scale = |k: i64, j: i64| match scales {
            Some(s) => s[(((j / panel) * groups + k / QUANT_GROUP) * panel + j % panel) as usize],
            None => 1.0,
        };
        let weight = |k: i64, j: i64| {
            let (q, lane) = (j / panel, j % panel);
            if weights == DataType::U4 {
                let pairs = (self.lda + 1) / 2 * 2 * panel;
                b[(q * pairs + (k / 2) * 2 * panel + lane * 2 + k % 2) as usize] - 8.0
            } else {
                b[(q * self.lda * panel + k * panel + lane) as usize]
            }
        };
        for i in 0..self.rows {
            for j in 0..self.cols {
                let dot: f64 = (0..self.kc)
                    .map(|k| a[(i * self.lda + k) as usize] * (weight(k, j) * scale(k, j)))
                    .sum();
                let at = (i * self.ldc + j) as usize;
                c[at] = if self.accumulate { c[at] + dot } else { dot };
            }
        }
    }
}

/// The scalar operands of one int8 block GEMM call, evaluated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntGemmScalars {
    /// The (padded) reduction length, a multiple of [`QUANT_GROUP`].
    pub kc: i64,
    /// Row stride of `a`.
    pub lda: i64,
    /// Row stride of `c`.
    pub ldc: i64,
    /// Valid rows (`<= ep`).
    pub rows: i64,
    /// Valid columns (`<= hp`).
    pub cols: i64,
}

impl IntGemmScalars {
    /// Whether the scalars are valid for a block `ep x hp`.
    pub fn valid(&self, (ep, hp): (i64, i64)) -> bool {
        (0..=ep).contains(&self.rows)
            && (0..=hp).contains(&self.cols)
            && self.kc > 0
            && self.kc % QUANT_GROUP == 0
            && self.lda >= self.kc
            && self.ldc >= self.cols
    }

    /// The elements of `(a, a_scales, b, scales, c)` one call on panels `panel` wide may
    /// touch.
    pub fn footprint(&self, panel: i64) -> [i64; 5] {
        let rows = |stride: i64, len: i64| {
            if self.rows > 0 && self.cols > 0 {
                (self.rows - 1) * stride + len
            } else {
                0
            }
        };
        let panels = if self.rows > 0 {
            (self.cols.max(0) + panel - 1) / panel
        } else {
            0
        };
        let groups = self.kc / QUANT_GROUP;
        [
            rows(self.lda, self.kc),
            rows(groups, groups),
            panels * self.kc * panel,
            panels * groups * panel,
            rows(self.ldc, self.cols),
        ]
    }

    /// The reference semantics (f64 arithmetic) on slices starting at each operand's
    /// offset, for panels `panel` wide of `weights` (i8 or u4 element values); the slices
    /// must hold [`IntGemmScalars::footprint`] elements.
    pub fn reference(
        &self,
        (panel, weights): (i64, DataType),
        [a, a_scales, b, scales]: [&[f64]; 4],
        c: &mut [f64],
    ) {
        let groups = self.kc / QUANT_GROUP;
        let weight = |k: i64, j: i64| {
            let (q, lane) = (j / panel, j % panel);
            let start = q * self.kc * panel;
            if weights == DataType::U4 {
                let at = start + (k / 8) * 8 * panel + lane * 8 + (k % 4) * 2 + (k / 4) % 2;
                b[at as usize] - 8.0
            } else {
                b[(start + (k / 4) * 4 * panel + lane * 4 + k % 4) as usize]
            }
        };
        let scale = |k: i64, j: i64| {
            scales[(((j / panel) * groups + k / QUANT_GROUP) * panel + j % panel) as usize]
        };
        for i in 0..self.rows.max(0) {
            for j in 0..self.cols.max(0) {
                let dot: f64 = (0..self.kc)
                    .map(|k| {
                        let a_scale = a_scales[(i * groups + k / QUANT_GROUP) as usize];
                        let code = a[(i * self.lda + k) as usize] - 128.0;
                        a_scale * scale(k, j) * code * weight(k, j)
                    })
                    .sum();
                c[(i * self.ldc + j) as usize] = dot;
            }
        }
    }
}

impl MicrokernelSpec {
    /// The microkernel named `name`.
    pub fn lookup(name: &str) -> Option<&'static MicrokernelSpec> {
        MICROKERNELS.iter().find(|k| k.name == name)
    }

    /// The int8 block GEMM of block `(ep, hp)` over `weights` (i8 or u4), if the table
    /// has one.
    pub fn int_gemm(ep: i64, hp: i64, weights: DataType) -> Option<&'static MicrokernelSpec> {
        let wanted = MicrokernelKind::IntGemm {
            weights,
            ep,
            hp,
            panel: 16,
        };
        MICROKERNELS.iter().find(|k| k.kind == wanted)
    }

    /// The attention kernel over keys and values of `kv` with row scales of `scales`
    /// (`attention_f32` for f32, `attention_f16kv` for f16, `attention_q8kv` for i8 codes
    /// with f32 scales).
    pub fn attention_over(
        (kv, scales): (DataType, Option<DataType>),
    ) -> Option<&'static MicrokernelSpec> {
        let wanted = MicrokernelKind::Attention { kv, scales };
        MICROKERNELS.iter().find(|k| k.kind == wanted)
    }

    /// The block GEMM with the rows and panels of GEMM `name` over weights of `weights`
    /// with group scales of `scales` (`sgemm_6x16` over f16 is `sgemm_6x16_f16`, over u4
    /// with f16 scales `sgemm_6x16_q4f16`). Its block may span a multiple of `name`'s
    /// columns: the 4-bit GEMVs (`sgemv_1x64` over u4 is `sgemv_1x256_q4`) span 256, as
    /// their x86 sides round the activations once per call, which then serves 16 panels.
    pub fn gemm_over(
        name: &str,
        (weights, scales): (DataType, Option<DataType>),
    ) -> Option<&'static MicrokernelSpec> {
        let MicrokernelKind::Gemm { ep, hp, panel, .. } = Self::lookup(name)?.kind else {
            return None;
        };
        MICROKERNELS.iter().find(|k| match k.kind {
            MicrokernelKind::Gemm {
                weights: w,
                scales: s,
                ep: e,
                hp: h,
                panel: p,
            } => (w, s, e, p) == (weights, scales, ep, panel) && h % hp == 0,
            _ => false,
        })
    }
}
