//! Scalar twins of every microkernel: plain Rust, for CPUs without a vector ISA we have
//! kernels for, and the reference the vector versions are tested against.
//!
//! Products are a plain `*` then `+` (two roundings), not `f32::mul_add`: without hardware
//! FMA — exactly the CPUs the twins run on — `mul_add` is a slow libm call. The vector
//! kernels use FMA, so results differ from the twins by rounding only.

use super::qgemm::{QCall, QPanel};
use super::{
    Implementation, Microkernel, MicrokernelFn, QueryRows, RowScales, U4Pair, QUANT_GROUP,
};
use half::f16;

/// The scalar twin row of `kernel`.
const fn twin(kernel: Microkernel, func: MicrokernelFn) -> Implementation {
    Implementation {
        kernel,
        isa: "scalar",
        features: &[],
        func,
    }
}

/// The scalar twin of every kernel.
pub(super) const IMPLEMENTATIONS: &[Implementation] = &[
    twin(
        Microkernel::Sgemm6x16,
        MicrokernelFn::Gemm(sgemm::<f32, 6, 16, 16>),
    ),
    twin(
        Microkernel::Sgemv1x64,
        MicrokernelFn::Gemm(sgemm::<f32, 1, 64, 16>),
    ),
    twin(
        Microkernel::Sgemm6x16F16,
        MicrokernelFn::GemmF16(sgemm::<f16, 6, 16, 16>),
    ),
    twin(
        Microkernel::Sgemv1x64F16,
        MicrokernelFn::GemmF16(sgemm::<f16, 1, 64, 16>),
    ),
    twin(
        Microkernel::Sgemm12x32,
        MicrokernelFn::Gemm(sgemm::<f32, 12, 32, 16>),
    ),
    twin(
        Microkernel::Sgemm12x32F16,
        MicrokernelFn::GemmF16(sgemm::<f16, 12, 32, 16>),
    ),
    twin(
        Microkernel::Sgemm6x16Q8,
        MicrokernelFn::GemmQ8(sgemm_quant::<i8, f32, 6, 16, 16>),
    ),
    twin(
        Microkernel::Sgemv1x64Q8,
        MicrokernelFn::GemmQ8(sgemm_quant::<i8, f32, 1, 64, 16>),
    ),
    twin(
        Microkernel::Sgemm12x32Q8,
        MicrokernelFn::GemmQ8(sgemm_quant::<i8, f32, 12, 32, 16>),
    ),
    twin(
        Microkernel::Sgemm6x16Q4,
        MicrokernelFn::GemmQ4(sgemm_quant::<U4Pair, f32, 6, 16, 16>),
    ),
    twin(
        Microkernel::Sgemv8x256Q4,
        MicrokernelFn::GemmQ4(
            sgemm_quant::<U4Pair, f32, { super::U4_GEMV_ROWS }, { super::U4_GEMV_COLS }, 16>,
        ),
    ),
    twin(
        Microkernel::Sgemm12x32Q4,
        MicrokernelFn::GemmQ4(sgemm_quant::<U4Pair, f32, 12, 32, 16>),
    ),
    twin(
        Microkernel::Sgemm6x16Q4F16,
        MicrokernelFn::GemmQ4F16(sgemm_quant::<U4Pair, f16, 6, 16, 16>),
    ),
    twin(
        Microkernel::Sgemv8x256Q4F16,
        MicrokernelFn::GemmQ4F16(
            sgemm_quant::<U4Pair, f16, { super::U4_GEMV_ROWS }, { super::U4_GEMV_COLS }, 16>,
        ),
    ),
    twin(
        Microkernel::Sgemm12x32Q4F16,
        MicrokernelFn::GemmQ4F16(sgemm_quant::<U4Pair, f16, 12, 32, 16>),
    ),
    twin(
        Microkernel::AttentionF32,
        MicrokernelFn::Attention(attention::<f32>),
    ),
    twin(
        Microkernel::AttentionF16Kv,
        MicrokernelFn::AttentionF16Kv(attention::<f16>),
    ),
    twin(
        Microkernel::AttentionQ8Kv,
        MicrokernelFn::AttentionQ8Kv(attention_q8kv),
    ),
    twin(
        Microkernel::Qgemm6x32W8,
        MicrokernelFn::QGemmW8(qgemm::<i8, 6, 32>),
    ),
    twin(
        Microkernel::Qgemm6x32W4,
        MicrokernelFn::QGemmW4(qgemm::<u8, 6, 32>),
    ),
    twin(
        Microkernel::Qgemm4x16W8,
        MicrokernelFn::QGemmW8(qgemm::<i8, 4, 16>),
    ),
    twin(
        Microkernel::Qgemm4x16W4,
        MicrokernelFn::QGemmW4(qgemm::<u8, 4, 16>),
    ),
    twin(
        Microkernel::Qgemv1x64W8,
        MicrokernelFn::QGemmW8(qgemm::<i8, 1, 64>),
    ),
    twin(
        Microkernel::Qgemv1x64W4,
        MicrokernelFn::QGemmW4(qgemm::<u8, 1, 64>),
    ),
];

/// A packed weight element of the twins: how many weights of consecutive k it holds, and
/// their values.
trait Packed: Copy {
    /// Weights per element, of consecutive k (a panel holds `ceil(depth / PER_ELEMENT)`
    /// elements per column).
    const PER_ELEMENT: usize = 1;

    /// The weight of depth `k` this element holds (`k % PER_ELEMENT` of its weights).
    fn weight(self, k: usize) -> f32;
}

impl Packed for f32 {
    fn weight(self, _k: usize) -> f32 {
        self
    }
}

impl Packed for f16 {
    fn weight(self, _k: usize) -> f32 {
        self.to_f32()
    }
}

impl Packed for i8 {
    fn weight(self, _k: usize) -> f32 {
        f32::from(self)
    }
}

impl Packed for U4Pair {
    const PER_ELEMENT: usize = 2;

    fn weight(self, k: usize) -> f32 {
        f32::from(U4Pair::weight(self, k))
    }
}

/// The scalar twin of every block shape `EP x HP` over panels `PANEL` wide of weights `W`
/// (`sgemm::<f32, 6, 16, 16>` is [`Microkernel::Sgemm6x16`], `W = f16` its f16-weight
/// version, ...), with the [`super::GemmFn`] contract: accumulate the whole block in a
/// local tile, panel by panel, then write back the valid `rows x cols` part.
///
/// # Safety
/// As [`super::GemmFn`].
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn sgemm<W: Packed, const EP: usize, const HP: usize, const PANEL: usize>(
    a: *const f32,
    b: *const W,
    c: *mut f32,
    kc: i64,
    lda: i64,
    ldc: i64,
    rows: i64,
    cols: i64,
    accumulate: i64,
) {
    // SAFETY: forwarded contract (no scales: float weights).
    unsafe {
        scaled_sgemm::<W, f32, EP, HP, PANEL>(
            a,
            (b, std::ptr::null()),
            c,
            kc,
            lda,
            ldc,
            rows,
            cols,
            accumulate,
        )
    }
}

/// The scalar twin of every quantized block GEMM, weights `W` (int8, 4-bit pairs) with
/// scales `S` (f32, f16): the [`super::GemmQuantFn`] contract.
///
/// # Safety
/// As [`super::GemmQuantFn`].
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn sgemm_quant<
    W: Packed,
    S: Copy + Into<f32>,
    const EP: usize,
    const HP: usize,
    const PANEL: usize,
>(
    a: *const f32,
    b: *const W,
    scales: *const S,
    c: *mut f32,
    kc: i64,
    lda: i64,
    ldc: i64,
    rows: i64,
    cols: i64,
    accumulate: i64,
) {
    // SAFETY: forwarded contract.
    unsafe {
        scaled_sgemm::<W, S, EP, HP, PANEL>(a, (b, scales), c, kc, lda, ldc, rows, cols, accumulate)
    }
}

/// The block GEMM of weights `W` times their group scale of `S` when `scales` is not null
/// ([`super::GemmQuantFn`]), else unscaled ([`super::GemmFn`]). Panels are
/// `ceil(lda / W::PER_ELEMENT) * PANEL` elements apart; the weights of depth `k` are the
/// `PANEL` elements from `(k / W::PER_ELEMENT) * PANEL` of each.
///
/// # Safety
/// As the contract the non-null-ness of `scales` selects.
#[allow(clippy::too_many_arguments)]
unsafe fn scaled_sgemm<
    W: Packed,
    S: Copy + Into<f32>,
    const EP: usize,
    const HP: usize,
    const PANEL: usize,
>(
    a: *const f32,
    (b, scales): (*const W, *const S),
    c: *mut f32,
    kc: i64,
    lda: i64,
    ldc: i64,
    rows: i64,
    cols: i64,
    accumulate: i64,
) {
    let rows = rows.clamp(0, EP as i64) as usize;
    let cols = cols.clamp(0, HP as i64) as usize;
    if rows == 0 || cols == 0 {
        return;
    }
    let kc = kc.max(0) as usize;
    let depth = lda.max(0) as usize;
    // Elements from one panel to the next, and scale groups per panel (quantized weights).
    let panel_stride = depth.div_ceil(W::PER_ELEMENT) * PANEL;
    let groups = depth.div_ceil(QUANT_GROUP);
    let mut tile = [[0.0f32; HP]; EP];
    for (i, row) in tile.iter_mut().enumerate().take(rows) {
        // SAFETY: row `i < rows` of `a` is lent: `kc` floats from `a + i * lda`.
        let a_i = unsafe { std::slice::from_raw_parts(a.offset(i as isize * lda as isize), kc) };
        for (q, row_q) in row
            .chunks_exact_mut(PANEL)
            .take(cols.div_ceil(PANEL))
            .enumerate()
        {
            for (k, &a_ik) in a_i.iter().enumerate() {
                let at = q * panel_stride + k / W::PER_ELEMENT * PANEL;
                // SAFETY: panel `q` holds one of the first `cols` columns, so the caller
                // lends the elements of its first `kc` depths from `b + q * panel_stride`;
                // `k < kc`.
                let b_k = unsafe { &*b.add(at).cast::<[W; PANEL]>() };
                if scales.is_null() {
                    for (acc, &b_kj) in row_q.iter_mut().zip(b_k) {
                        *acc += a_ik * b_kj.weight(k);
                    }
                    continue;
                }
                let scale_at = (q * groups + k / QUANT_GROUP) * PANEL;
                // SAFETY: the caller lends the scales of every group of panel `q` read.
                let s_k = unsafe { &*scales.add(scale_at).cast::<[S; PANEL]>() };
                for ((acc, &b_kj), &s_kj) in row_q.iter_mut().zip(b_k).zip(s_k) {
                    *acc += a_ik * (b_kj.weight(k) * s_kj.into());
                }
            }
        }
    }
    for (i, row) in tile.iter().enumerate().take(rows) {
        for (j, &sum) in row.iter().enumerate().take(cols) {
            // SAFETY: `i < rows`, `j < cols`: inside the part of `c` the caller lends.
            unsafe {
                let out = c.offset(i as isize * ldc as isize + j as isize);
                *out = if accumulate != 0 { *out + sum } else { sum };
            }
        }
    }
}

/// The scalar twin of every int8-activation GEMM block `EP x HP` over weight panels of `W`
/// (`i8`: int8, `u8`: 4-bit), the [`super::QGemmFn`] contract in its own words: per
/// element, the exact integer sum of each group's products of codes (`a - 128`) by weights,
/// scaled by the group's (f16) weight scale widened to f32 and the row's scale of the
/// group, summed in f32.
///
/// # Safety
/// As [`super::QGemmFn`].
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn qgemm<W: QPanel, const EP: usize, const HP: usize>(
    a: *const u8,
    a_scales: *const f32,
    b: *const W,
    scales: *const f16,
    c: *mut f32,
    kc: i64,
    lda: i64,
    ldc: i64,
    rows: i64,
    cols: i64,
) {
    let operands = (a, a_scales, b, scales, c);
    let Some(call) = QCall::new(operands, [kc, lda, ldc, rows, cols], (EP, HP)) else {
        return;
    };
    for i in 0..call.rows {
        // SAFETY: row `i < rows` is lent (`kc` bytes) and so are its group scales.
        let (a_i, a_scales) = unsafe {
            let a_i = std::slice::from_raw_parts(call.a_row(i), call.depth());
            let scales =
                std::slice::from_raw_parts(call.a_scales.add(i * call.groups), call.groups);
            (a_i, scales)
        };
        for j in 0..call.cols {
            // SAFETY: column `j < cols`: its panel is lent, all of it, with the scales of
            // each group.
            unsafe { *call.out(i, j) = column_sum(&call, (a_i, a_scales), j) };
        }
    }
}

/// `sum_g x_g * s(g, j) * sum_{k in g} (a_i[k] - 128) * w(k, j)`: the integer sum of each
/// group of activation row `a_i` (codes) by column `j`'s weights, scaled by the group's
/// weight scale and the row's scale `x_g` of the group, summed in f32.
///
/// # Safety
/// Column `j`'s panel (`panel_stride` elements) and its groups' scales are lent.
unsafe fn column_sum<W: QPanel>(
    call: &QCall<W>,
    (a_i, a_scales): (&[u8], &[f32]),
    j: usize,
) -> f32 {
    let (q, jq) = (j / 16, j % 16);
    // SAFETY: the caller's contract.
    let panel = unsafe { std::slice::from_raw_parts(call.panel(q), call.panel_stride) };
    let mut sum = 0.0f32;
    for (g, a_g) in a_i.chunks_exact(QUANT_GROUP).enumerate() {
        let k0 = g * QUANT_GROUP;
        let dot: i32 = (a_g.iter().enumerate())
            .map(|(dk, &a_k)| (i32::from(a_k) - 128) * W::weight(panel, k0 + dk, jq))
            .sum();
        // SAFETY: the scales of group `g` of panel `q` are lent (the caller's contract).
        let scale = f32::from(unsafe { *call.group_scales(q, g).add(jq) });
        sum += dot as f32 * scale * a_scales[g];
    }
    sum
}

/// The scalar twin of the attention kernels over float keys and values of `KV`
/// (`attention::<f32>` is [`Microkernel::AttentionF32`], `attention::<f16>`
/// [`Microkernel::AttentionF16Kv`]; the [`super::AttentionFn`] contract): [`attention_row`]
/// per query row.
///
/// # Safety
/// As [`super::AttentionFn`].
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn attention<KV: Copy + Into<f32>>(
    q: *const f32,
    k: *const KV,
    v: *const KV,
    out: *mut f32,
    rows: i64,
    keys: i64,
    kv_stride: i64,
    head_dim: i64,
    scale: f32,
) {
    let scalars = (keys, kv_stride, head_dim);
    for (q, out) in QueryRows::new(q, out, rows, head_dim) {
        // SAFETY: forwarded contract for each row.
        unsafe { attention_row(q, (k, v), None, out, scalars, scale) }
    }
}

/// The scalar twin of [`Microkernel::AttentionQ8Kv`] (the [`super::AttentionQ8KvFn`]
/// contract): [`attention_row`] per query row, over int8 rows with their scales.
///
/// # Safety
/// As [`super::AttentionQ8KvFn`].
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn attention_q8kv(
    q: *const f32,
    k: *const i8,
    v: *const i8,
    k_scales: *const f32,
    v_scales: *const f32,
    out: *mut f32,
    rows: i64,
    keys: i64,
    kv_stride: i64,
    head_dim: i64,
    scale: f32,
    scale_stride: i64,
) {
    let scales = RowScales::new(k_scales, v_scales, scale_stride);
    let scalars = (keys, kv_stride, head_dim);
    for (q, out) in QueryRows::new(q, out, rows, head_dim) {
        // SAFETY: forwarded contract for each row.
        unsafe { attention_row(q, (k, v), Some(scales), out, scalars, scale) }
    }
}

/// The attention of one query row over key/value rows of `KV`, each row times its scale
/// when `scales` are given, in two passes over the keys: the largest score, then the
/// exponentials and the weighted sum of the values (scores are computed twice; nothing is
/// allocated).
///
/// # Safety
/// As [`super::AttentionFn`] for one row (and [`super::AttentionQ8KvFn`] with `scales`).
unsafe fn attention_row<KV: Copy + Into<f32>>(
    q: *const f32,
    (k, v): (*const KV, *const KV),
    scales: Option<RowScales>,
    out: *mut f32,
    (keys, kv_stride, head_dim): (i64, i64, i64),
    scale: f32,
) {
    let (keys, stride, dim) = (
        keys.max(0) as usize,
        kv_stride as usize,
        head_dim.max(0) as usize,
    );
    // SAFETY: the caller lends `head_dim` floats at `q` and `out` (not overlapping), and
    // `(keys - 1) * kv_stride + head_dim` elements at `k` and `v`: row `j < keys` is in
    // bounds.
    let (q, out) = unsafe {
        (
            std::slice::from_raw_parts(q, dim),
            std::slice::from_raw_parts_mut(out, dim),
        )
    };
    // SAFETY: every call below passes `j < keys` (loops over `0..keys`), so `dim`
    // elements from `base + j * stride` are lent.
    let row = |base: *const KV, j: usize| unsafe {
        std::slice::from_raw_parts(base.add(j * stride), dim)
    };
    // SAFETY: every call below passes `j < keys`, whose key scale is lent with `scales`.
    let key_scale = |j: usize| scales.map_or(1.0, |s| unsafe { s.key(j) });
    // SAFETY: every call below passes `j < keys`, whose value scale is lent with `scales`.
    let value_scale = |j: usize| scales.map_or(1.0, |s| unsafe { s.value(j) });
    let score = |j: usize| {
        let dot = q.iter().zip(row(k, j)).map(|(&a, &b)| a * b.into());
        scale * dot.sum::<f32>() * key_scale(j)
    };
    out.fill(0.0);
    let max = (0..keys).map(score).fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f32;
    for j in 0..keys {
        let p = (score(j) - max).exp();
        sum += p;
        let weight = p * value_scale(j);
        for (o, &x) in out.iter_mut().zip(row(v, j)) {
            *o += weight * x.into();
        }
    }
    if keys > 0 {
        out.iter_mut().for_each(|o| *o /= sum);
    }
}
