//! The microkernel table: every hand-written kernel compiled code may call (a tensorized
//! inner block), declared once: its name, what it computes ([`MicrokernelKind`]: block
//! shape, operands and their dtypes) and its slot in the runtime's table
//! ([`Microkernel`] `as usize`, the index into `RtEnv::microkernels`).
//!
//! Three kinds ([`MicrokernelKind`]):
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
//!   int4 weight panels of the quads layout  with f16
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
//! The runtime implements each kernel per CPU feature, with a scalar twin; the compiler's
//! interpreter runs the reference semantics above.
//!
//! Adding a kernel: a row in the `microkernels!` list below, and its implementations
//! in the runtime (at least the scalar twin).

use crate::DType;

/// The run of the reduction (k) that shares one scale per output column in quantized
/// weight panels (symmetric group quantization, as MLC-LLM's q8/q4 schemes), and one
/// activation scale per row in the int8-activation kernels.
pub const QUANT_GROUP: usize = 32;

/// Width of one packed weight panel of every block GEMM (output columns per panel).
pub const PANEL: usize = 16;

/// Columns of one 4-bit decode GEMV call (16 panels: its x86 sides round the activations
/// once per call, for all of them).
pub const U4_GEMV_COLS: usize = 256;

/// Rows of one 4-bit decode GEMV call at most (the sequences of a batched decode step):
/// its x86 sides widen each weight once for all of them.
pub const U4_GEMV_ROWS: usize = 8;

/// What a microkernel computes, which fixes its operands and scalars.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MicrokernelKind {
    /// A block GEMM of block shape `ep x hp`: operands `(a, b, c)`, scalars
    /// `(kc, lda, ldc, rows, cols, accumulate)` (see the module docs).
    Gemm {
        /// The element type of the packed weights `b`: f32, f16, i8 or u4 (int4 panels
        /// of value pairs, see the module docs).
        weights: DType,
        /// The element type of the group scales of quantized weights (f32 or f16), which
        /// come as operand `scales` after `b`; `None` for float weights.
        scales: Option<DType>,
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
        weights: DType,
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
        kv: DType,
        /// The element type of the row scales of quantized keys and values (f32); `None`
        /// for float ones.
        scales: Option<DType>,
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
    pub fn operand_dtypes(self) -> Vec<DType> {
        match self {
            MicrokernelKind::Gemm {
                weights,
                scales: Some(scales),
                ..
            } => vec![DType::F32, weights, scales, DType::F32],
            MicrokernelKind::Gemm { weights, .. } => vec![DType::F32, weights, DType::F32],
            MicrokernelKind::IntGemm { weights, .. } => {
                vec![DType::U8, DType::F32, weights, DType::F16, DType::F32]
            }
            MicrokernelKind::Attention {
                kv,
                scales: Some(scales),
            } => vec![DType::F32, kv, kv, scales, scales, DType::F32],
            MicrokernelKind::Attention { kv, .. } => vec![DType::F32, kv, kv, DType::F32],
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
    pub fn scalars(self) -> &'static [(&'static str, DType)] {
        match self {
            MicrokernelKind::Gemm { .. } => &[
                ("kc", DType::I64),
                ("lda", DType::I64),
                ("ldc", DType::I64),
                ("rows", DType::I64),
                ("cols", DType::I64),
                ("accumulate", DType::I64),
            ],
            MicrokernelKind::IntGemm { .. } => &[
                ("kc", DType::I64),
                ("lda", DType::I64),
                ("ldc", DType::I64),
                ("rows", DType::I64),
                ("cols", DType::I64),
            ],
            MicrokernelKind::Attention {
                scales: Some(_), ..
            } => &[
                ("rows", DType::I64),
                ("keys", DType::I64),
                ("kv_stride", DType::I64),
                ("head_dim", DType::I64),
                ("scale", DType::F32),
                ("scale_stride", DType::I64),
            ],
            MicrokernelKind::Attention { .. } => &[
                ("rows", DType::I64),
                ("keys", DType::I64),
                ("kv_stride", DType::I64),
                ("head_dim", DType::I64),
                ("scale", DType::F32),
            ],
        }
    }
}

/// One row of the table: a kernel, its name and what it computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MicrokernelSpec {
    /// The kernel (its slot in the runtime's table).
    pub kernel: Microkernel,
    /// The stable name, e.g. `"sgemm_6x16"` (what TIR calls name).
    pub name: &'static str,
    /// What it computes.
    pub kind: MicrokernelKind,
    /// Whether implementations may round f32 activations to 16 bits
    /// ([`Microkernel::rounds_activations`]).
    pub rounds_activations: bool,
    /// Whether this is a decode kernel: it streams each weight once for all its rows (at
    /// most `ep`: one, or the few sequences of a batched decode step).
    pub decode: bool,
}

/// What a row declares besides the kernel and its name.
struct Row {
    kind: MicrokernelKind,
    rounds_activations: bool,
    decode: bool,
}

/// A block GEMM over `(weights, scales)` (scales for quantized weights), block `ep x hp`.
const fn gemm((weights, scales): (DType, Option<DType>), ep: i64, hp: i64) -> Row {
    Row {
        kind: MicrokernelKind::Gemm {
            weights,
            scales,
            ep,
            hp,
            panel: PANEL as i64,
        },
        rounds_activations: false,
        decode: false,
    }
}

/// A decode block GEMM over `(weights, scales)`: [`gemm`] streaming each weight once for
/// its `ep` rows.
const fn gemv(weights: (DType, Option<DType>), ep: i64, hp: i64) -> Row {
    Row {
        decode: true,
        ..gemm(weights, ep, hp)
    }
}

/// [`gemv`] whose implementations may round the f32 activations to 16 bits.
const fn gemv_a16(weights: (DType, Option<DType>), ep: i64, hp: i64) -> Row {
    Row {
        rounds_activations: true,
        ..gemv(weights, ep, hp)
    }
}

/// An int8-activation block GEMM over `weights` (i8 or u4), block `ep x hp`.
const fn int_gemm(weights: DType, ep: i64, hp: i64) -> Row {
    Row {
        kind: MicrokernelKind::IntGemm {
            weights,
            ep,
            hp,
            panel: PANEL as i64,
        },
        rounds_activations: false,
        decode: false,
    }
}

/// An int8-activation decode GEMM over `weights` (i8 or u4), block `ep x hp`.
const fn int_gemv(weights: DType, ep: i64, hp: i64) -> Row {
    Row {
        decode: true,
        ..int_gemm(weights, ep, hp)
    }
}

/// An attention over keys and values of `kv` with row scales of `scales` (quantized ones).
const fn attention((kv, scales): (DType, Option<DType>)) -> Row {
    Row {
        kind: MicrokernelKind::Attention { kv, scales },
        rounds_activations: false,
        decode: false,
    }
}

/// Declares [`Microkernel`] (one variant per row, in table order), [`Microkernel::ALL`],
/// [`Microkernel::COUNT`] and [`MICROKERNELS`] from one list of rows.
macro_rules! microkernels {
    ($($(#[doc = $doc:literal])* $kernel:ident = $name:literal: $row:expr;)*) => {
        /// The microkernels; `kernel as usize` is its slot in the runtime's table.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Microkernel {
            $($(#[doc = $doc])* $kernel,)*
        }

        impl Microkernel {
            /// Number of microkernels (the length of the runtime's table).
            pub const COUNT: usize = [$($name),*].len();

            /// Every microkernel, in table order.
            pub const ALL: [Microkernel; Microkernel::COUNT] = [$(Microkernel::$kernel),*];
        }

        /// Every microkernel's row, in table order.
        pub const MICROKERNELS: [MicrokernelSpec; Microkernel::COUNT] = [$({
            let row = $row;
            MicrokernelSpec {
                kernel: Microkernel::$kernel,
                name: $name,
                kind: row.kind,
                rounds_activations: row.rounds_activations,
                decode: row.decode,
            }
        }),*];
    };
}

const F32: (DType, Option<DType>) = (DType::F32, None);
const F16: (DType, Option<DType>) = (DType::F16, None);
const Q8: (DType, Option<DType>) = (DType::I8, Some(DType::F32));
const Q4: (DType, Option<DType>) = (DType::U4, Some(DType::F32));
const Q4F16: (DType, Option<DType>) = (DType::U4, Some(DType::F16));

microkernels! {
    /// f32 GEMM block of 6 rows x 16 columns (prefill: the classic 12-accumulator AVX2
    /// register block).
    Sgemm6x16 = "sgemm_6x16": gemm(F32, 6, 16);
    /// f32 GEMV block of 1 row x 64 columns over 4 panels (decode): `a` is a contiguous
    /// vector of `kc` floats; streams through the 4 panels at once.
    Sgemv1x64 = "sgemv_1x64": gemv(F32, 1, 64);
    /// [`Microkernel::Sgemm6x16`] over f16 weight panels.
    Sgemm6x16F16 = "sgemm_6x16_f16": gemm(F16, 6, 16);
    /// [`Microkernel::Sgemv1x64`] over f16 weight panels.
    Sgemv1x64F16 = "sgemv_1x64_f16": gemv(F16, 1, 64);
    /// f32 GEMM block of 12 rows x 32 columns over 2 panels (prefill on AVX-512: 24 zmm
    /// accumulators; per k, 2 panel loads and 12 broadcasts feed 24 FMAs).
    Sgemm12x32 = "sgemm_12x32": gemm(F32, 12, 32);
    /// [`Microkernel::Sgemm12x32`] over f16 weight panels.
    Sgemm12x32F16 = "sgemm_12x32_f16": gemm(F16, 12, 32);
    /// f32 attention of a group of query rows over a strided run of key/value rows.
    AttentionF32 = "attention_f32": attention(F32);
    /// [`Microkernel::Sgemm6x16`] over int8 weight panels with f32 group scales.
    Sgemm6x16Q8 = "sgemm_6x16_q8": gemm(Q8, 6, 16);
    /// [`Microkernel::Sgemv1x64`] over int8 weight panels.
    Sgemv1x64Q8 = "sgemv_1x64_q8": gemv(Q8, 1, 64);
    /// [`Microkernel::Sgemm12x32`] over int8 weight panels.
    Sgemm12x32Q8 = "sgemm_12x32_q8": gemm(Q8, 12, 32);
    /// [`Microkernel::Sgemm6x16`] over 4-bit weight panels with f32 group scales.
    Sgemm6x16Q4 = "sgemm_6x16_q4": gemm(Q4, 6, 16);
    /// The decode GEMV over 4-bit weight panels, up to [`U4_GEMV_ROWS`] rows x
    /// [`U4_GEMV_COLS`] columns: its x86 sides round the activations once per call, for
    /// all 16 panels, read the panels one after the other and widen each weight once for
    /// every row; the others run one row and 64 columns at a time.
    Sgemv8x256Q4 = "sgemv_8x256_q4": gemv_a16(Q4, U4_GEMV_ROWS as i64, U4_GEMV_COLS as i64);
    /// [`Microkernel::Sgemm12x32`] over 4-bit weight panels.
    Sgemm12x32Q4 = "sgemm_12x32_q4": gemm(Q4, 12, 32);
    /// [`Microkernel::Sgemm6x16`] over 4-bit weight panels with f16 group scales.
    Sgemm6x16Q4F16 = "sgemm_6x16_q4f16": gemm(Q4F16, 6, 16);
    /// [`Microkernel::Sgemv8x256Q4`] with f16 scales.
    Sgemv8x256Q4F16 = "sgemv_8x256_q4f16": gemv_a16(Q4F16, U4_GEMV_ROWS as i64, U4_GEMV_COLS as i64);
    /// [`Microkernel::Sgemm12x32`] over 4-bit weights, f16 scales.
    Sgemm12x32Q4F16 = "sgemm_12x32_q4f16": gemm(Q4F16, 12, 32);
    /// int8-activation GEMM block of 6 rows x 32 columns over 2 int8 weight panels
    /// (prefill on AVX-512 VNNI: 12 zmm of int32 sums per group, 12 of f32 results).
    Qgemm6x32W8 = "qgemm_6x32_w8": int_gemm(DType::I8, 6, 32);
    /// [`Microkernel::Qgemm6x32W8`] over 4-bit weight panels.
    Qgemm6x32W4 = "qgemm_6x32_w4": int_gemm(DType::U4, 6, 32);
    /// int8-activation GEMM block of 4 rows x 16 columns over one int8 weight panel
    /// (prefill on AVX2).
    Qgemm4x16W8 = "qgemm_4x16_w8": int_gemm(DType::I8, 4, 16);
    /// [`Microkernel::Qgemm4x16W8`] over a 4-bit weight panel.
    Qgemm4x16W4 = "qgemm_4x16_w4": int_gemm(DType::U4, 4, 16);
    /// int8-activation GEMV block of 1 row x 64 columns over 4 int8 weight panels
    /// (decode: streams the 4 panels one after the other).
    Qgemv1x64W8 = "qgemv_1x64_w8": int_gemv(DType::I8, 1, 64);
    /// [`Microkernel::Qgemv1x64W8`] over 4-bit weight panels.
    Qgemv1x64W4 = "qgemv_1x64_w4": int_gemv(DType::U4, 1, 64);
    /// [`Microkernel::AttentionF32`] over f16 keys and values.
    AttentionF16Kv = "attention_f16kv": attention(F16);
    /// [`Microkernel::AttentionF32`] over int8 keys and values with one f32 scale per row.
    AttentionQ8Kv = "attention_q8kv": attention(Q8);
}

/// The shape of a block GEMM, in elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmBlock {
    /// Activation rows per call (EP).
    pub rows: usize,
    /// Output columns per call (HP).
    pub cols: usize,
    /// Width of one packed weight panel (PANEL; `cols` is a multiple of it).
    pub panel: usize,
}

impl Microkernel {
    /// The kernel's row of [`MICROKERNELS`].
    pub fn spec(self) -> &'static MicrokernelSpec {
        &MICROKERNELS[self as usize]
    }

    /// The stable name, e.g. `"sgemm_6x16"`.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The microkernel named `name`, if any.
    pub fn from_name(name: &str) -> Option<Microkernel> {
        MICROKERNELS
            .iter()
            .find(|s| s.name == name)
            .map(|s| s.kernel)
    }

    /// Whether implementations of this f32-activation kernel may round each group of
    /// [`QUANT_GROUP`] activations (from the call's first depth) to 16-bit fixed point
    /// before multiplying: `code = round(a * CODE_MAX / m)` with `m` the group's largest
    /// magnitude and `CODE_MAX` the largest code (the runtime's `x86_gemv_a16::CODE_MAX`),
    /// an error of at most `m / (2 * CODE_MAX)` per activation (finer than f16 for every
    /// value within 32x of the largest). The 4-bit decode GEMVs do on x86 (`vpdpwssd` on
    /// AVX-512 VNNI, `vpmaddwd` on AVX2: two int16 products per lane, where f32 needs a
    /// widening per weight; `vpdpbusd` on the codes' two bytes on AVX-512 VBMI); a NaN or
    /// infinite activation still makes the result NaN.
    pub fn rounds_activations(self) -> bool {
        self.spec().rounds_activations
    }

    /// For a block GEMM (f32 or int8 activations), its block shape.
    pub fn gemm_block(self) -> Option<GemmBlock> {
        match self.spec().kind {
            MicrokernelKind::Gemm { ep, hp, panel, .. }
            | MicrokernelKind::IntGemm { ep, hp, panel, .. } => Some(GemmBlock {
                rows: ep as usize,
                cols: hp as usize,
                panel: panel as usize,
            }),
            MicrokernelKind::Attention { .. } => None,
        }
    }
}

impl MicrokernelSpec {
    /// The microkernel named `name`.
    pub fn lookup(name: &str) -> Option<&'static MicrokernelSpec> {
        Microkernel::from_name(name).map(Microkernel::spec)
    }

    /// The int8 block GEMM of block `(ep, hp)` over `weights` (i8 or u4), if the table
    /// has one.
    pub fn int_gemm(ep: i64, hp: i64, weights: DType) -> Option<&'static MicrokernelSpec> {
        let wanted = MicrokernelKind::IntGemm {
            weights,
            ep,
            hp,
            panel: PANEL as i64,
        };
        MICROKERNELS.iter().find(|k| k.kind == wanted)
    }

    /// The attention kernel over keys and values of `kv` with row scales of `scales`
    /// (`attention_f32` for f32, `attention_f16kv` for f16, `attention_q8kv` for i8 codes
    /// with f32 scales).
    pub fn attention_over(
        (kv, scales): (DType, Option<DType>),
    ) -> Option<&'static MicrokernelSpec> {
        let wanted = MicrokernelKind::Attention { kv, scales };
        MICROKERNELS.iter().find(|k| k.kind == wanted)
    }

    /// The block GEMM with the rows and panels of GEMM `name` over weights of `weights`
    /// with group scales of `scales` (`sgemm_6x16` over f16 is `sgemm_6x16_f16`, over u4
    /// with f16 scales `sgemm_6x16_q4f16`). Its block may span a multiple of `name`'s
    /// columns, and a decode kernel's twin may take more rows: the 4-bit GEMVs
    /// (`sgemv_1x64` over u4 is `sgemv_8x256_q4`) span 256 columns, as their x86 sides
    /// round the activations once per call, which then serves 16 panels, and up to 8 rows.
    pub fn gemm_over(
        name: &str,
        (weights, scales): (DType, Option<DType>),
    ) -> Option<&'static MicrokernelSpec> {
        let named = Self::lookup(name)?;
        let MicrokernelKind::Gemm { ep, hp, panel, .. } = named.kind else {
            return None;
        };
        MICROKERNELS.iter().find(|k| match k.kind {
            MicrokernelKind::Gemm {
                weights: w,
                scales: s,
                ep: e,
                hp: h,
                panel: p,
            } => {
                let rows = e == ep || (named.decode && e > ep);
                (w, s, p, k.decode) == (weights, scales, panel, named.decode) && rows && h % hp == 0
            }
            _ => false,
        })
    }
}

#[cfg(test)]
mod tests;
