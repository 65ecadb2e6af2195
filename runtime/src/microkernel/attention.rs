//! The signatures of the attention microkernels (the query rows sharing a kv head over a
//! strided run of key/value rows) and the row scales of an int8 KV cache they share.

/// The attention of `rows` query rows over the same `keys` key/value rows (softmax
/// computed online; grouped-query attention hands the query heads sharing a kv head to one
/// call, which can read each key and value once for all of them): for each `r < rows`,
/// with `s_j = scale * sum_d q[r*head_dim + d] * k[j*kv_stride + d]`,
/// `out[r*head_dim + d] = sum_{j < keys} exp(s_j - max_j s_j) * v[j*kv_stride + d] / sum_j exp(s_j - max_j s_j)`
/// for `d < head_dim`. `keys <= 0` writes zeros. The keys and values are of `KV` (f32, or
/// f16 widened to f32 as they are loaded: [`AttentionF16KvFn`]); `q` and `out` are f32.
///
/// # Safety
/// `q` readable for `rows * head_dim` floats; `k` and `v` for
/// `(keys - 1) * kv_stride + head_dim` elements when `keys > 0`; `out` writable for
/// `rows * head_dim` floats (the only memory written) and not overlapping the inputs.
/// `head_dim >= 0`, `kv_stride >= head_dim` (`rows <= 0` does nothing). Pointers need
/// only the alignment of their element type.
pub type AttentionFn<KV = f32> = unsafe extern "C" fn(
    q: *const f32,
    k: *const KV,
    v: *const KV,
    out: *mut f32,
    rows: i64,
    keys: i64,
    kv_stride: i64,
    head_dim: i64,
    scale: f32,
);

/// The attention over f16 keys and values ([`AttentionFn`] with `k` and `v` holding f16
/// values, each widened to f32 as it is loaded), so an f16 KV cache streams at half the
/// bytes of an f32 one.
pub type AttentionF16KvFn = AttentionFn<half::f16>;

/// The attention over int8 keys and values with one f32 scale per row (an int8 KV cache,
/// a quarter of the bytes of an f32 one plus the scales): [`AttentionFn`] where key row
/// `j` is `k[j*kv_stride + d] * k_scales[j*scale_stride]` and value row `j` is
/// `v[j*kv_stride + d] * v_scales[j*scale_stride]`.
///
/// # Safety
/// As [`AttentionFn`] over i8 elements, and `k_scales` and `v_scales` readable for
/// `(keys - 1) * scale_stride + 1` floats when `keys > 0`; `scale_stride >= 0`.
pub type AttentionQ8KvFn = unsafe extern "C" fn(
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
);

/// The row scales of int8 keys and values ([`AttentionQ8KvFn`]): row `j`'s at
/// `j * stride` in `k` and in `v`.
#[derive(Clone, Copy, Debug)]
pub struct RowScales {
    /// The keys' scales.
    pub k: *const f32,
    /// The values' scales.
    pub v: *const f32,
    /// Floats from one row's scale to the next.
    pub stride: usize,
}

impl RowScales {
    /// The scales of an [`AttentionQ8KvFn`] call (a negative stride counts as 0).
    pub fn new(k: *const f32, v: *const f32, stride: i64) -> Self {
        RowScales {
            k,
            v,
            stride: stride.max(0) as usize,
        }
    }

    /// The scale of key row `j`.
    ///
    /// # Safety
    /// Row `j`'s key scale is lent.
    pub unsafe fn key(self, j: usize) -> f32 {
        // SAFETY: the caller's contract.
        unsafe { *self.k.add(j * self.stride) }
    }

    /// The scale of value row `j`.
    ///
    /// # Safety
    /// Row `j`'s value scale is lent.
    pub unsafe fn value(self, j: usize) -> f32 {
        // SAFETY: the caller's contract.
        unsafe { *self.v.add(j * self.stride) }
    }
}

/// The `(q, out)` row pairs of an attention call's `rows` query rows, `head_dim` floats
/// apart in both (no rows when `rows <= 0`), for kernels attending one row at a time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct QueryRows {
    q: *const f32,
    out: *mut f32,
    rows: usize,
    dim: usize,
}

impl QueryRows {
    /// The rows of a call with operands `q`, `out` and scalars `rows`, `head_dim`.
    pub(crate) fn new(q: *const f32, out: *mut f32, rows: i64, head_dim: i64) -> Self {
        QueryRows {
            q,
            out,
            rows: rows.max(0) as usize,
            dim: head_dim.max(0) as usize,
        }
    }
}

impl Iterator for QueryRows {
    type Item = (*const f32, *mut f32);

    fn next(&mut self) -> Option<Self::Item> {
        if self.rows == 0 {
            return None;
        }
        let row = (self.q, self.out);
        self.rows -= 1;
        // Wrapping: past the last row the pointers are never used.
        self.q = self.q.wrapping_add(self.dim);
        self.out = self.out.wrapping_add(self.dim);
        Some(row)
    }
}
