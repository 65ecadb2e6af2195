//! The x86-64 block GEMM, written once for every vector ISA: generic over how one row of
//! 16 floats of the block is held in registers ([`Row16`]: two ymm registers on AVX2, one
//! zmm on AVX-512F) and over the packed weight element ([`PanelElement`]: f32, or f16
//! widened as loaded). The bodies are always inlined into `extern "C"` entry points that
//! enable their ISA's features ([`gemm_entry!`]).
//!
//! Each kernel keeps its whole block of C in accumulators, starting from zero; at the end
//! it adds C (if accumulating) and stores. Full blocks store straight to C; edge blocks
//! (fewer rows or columns) spill the registers to a stack tile and copy the valid part, so
//! nothing outside `rows x cols` of C is read or written.

/// Width of a packed weight panel, and of one row of a GEMM block here.
pub(super) const HP: usize = 16;

/// 16 f32 lanes (one row of a block) in the registers of one ISA.
///
/// # Safety
/// Every method needs the ISA's features, enabled in the function it is inlined into.
pub(super) trait Row16: Copy {
    /// All lanes zero.
    unsafe fn zero() -> Self;
    /// The 16 floats at `p` (16 readable floats).
    unsafe fn load(p: *const f32) -> Self;
    /// `self + a * b`, lane by lane (fused).
    unsafe fn fma(self, a: f32, b: Self) -> Self;
    /// `self + other`, lane by lane.
    unsafe fn add(self, other: Self) -> Self;
    /// Stores the lanes to `p` (16 writable floats).
    unsafe fn store(self, p: *mut f32);
}

/// A weight element the kernels widen to f32 lanes as they load it.
pub(super) trait PanelElement<R: Row16>: Copy {
    /// The 16 elements from `p` as f32 lanes.
    ///
    /// # Safety
    /// 16 elements are readable at `p`; the CPU has the ISA's and the element's features
    /// (F16C for f16 on AVX2), enabled in the function this is inlined into.
    unsafe fn load16(p: *const Self) -> R;
}

/// Defines `extern "C"` entry point `$name`, a [`super::GemmFn`] over weights `$w`: the
/// always-inlined generic body `$body::<$row, $w, $ep>` compiled with `$features` enabled.
macro_rules! gemm_entry {
    ($(#[$doc:meta])* $name:ident, $row:ty, $w:ty, $ep:literal, $features:literal, $body:ident) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As [`super::GemmFn`] over its weight type, and the CPU has the enabled features.
        #[allow(clippy::too_many_arguments)]
        #[target_feature(enable = $features)]
        pub(super) unsafe extern "C" fn $name(
            a: *const f32,
            b: *const $w,
            c: *mut f32,
            kc: i64,
            lda: i64,
            ldc: i64,
            rows: i64,
            cols: i64,
            accumulate: i64,
        ) {
            // SAFETY: forwarded contract; the body's features are enabled here.
            unsafe { $body::<$row, $w, $ep>(a, b, c, kc, lda, ldc, rows, cols, accumulate) }
        }
    };
}
pub(super) use gemm_entry;

/// `EP x 16` of C in `EP` rows of accumulators; per k, one panel load of `b` and, per row
/// of `a` (read in place at stride `lda`), one broadcast feeding one row FMA. Rows past
/// `rows` re-read the last valid row (never stored).
///
/// # Safety
/// As [`super::GemmFn`] with `b` of `W`; inlined into a function enabling `R`'s and `W`'s
/// features, which the CPU has.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn gemm_block<R: Row16, W: PanelElement<R>, const EP: usize>(
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
    if rows <= 0 || cols <= 0 {
        return;
    }
    let last = rows.min(EP as i64) as usize - 1;
    // SAFETY: row `min(i, last) < rows` of `a` is lent (`kc` floats from `a + row * lda`).
    let a_rows: [*const f32; EP] =
        std::array::from_fn(|i| unsafe { a.offset(i.min(last) as isize * lda as isize) });
    // SAFETY (rest): the caller's CPU has the features (see above).
    let mut acc = [unsafe { R::zero() }; EP];
    for k in 0..kc.max(0) as usize {
        // SAFETY: `k < kc`: the caller lends `kc * HP` elements at `b`.
        let b_k = unsafe { W::load16(b.add(k * HP)) };
        for (acc_i, &a_i) in acc.iter_mut().zip(&a_rows) {
            // SAFETY: `k < kc`: element k of a lent row.
            *acc_i = unsafe { acc_i.fma(*a_i.add(k), b_k) };
        }
    }
    // SAFETY: forwarded contract for `c`.
    unsafe { store_block(&acc, c, ldc, rows, cols, accumulate) }
}

/// Panels a one-row GEMV call streams at once.
pub(super) const GEMV_PANELS: usize = 4;

/// The decode GEMV block: one row times up to 4 consecutive panels, all streamed in the
/// same pass over `k` (4 concurrent memory streams and independent FMA chains keep more
/// cache-line fills in flight than one panel at a time). An edge block (`cols < 64`)
/// reads only the panels holding its columns. `a` is one row (`lda` is not read); `EP`
/// is 1.
///
/// # Safety
/// As [`gemm_block`].
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn gemv_block<R: Row16, W: PanelElement<R>, const EP: usize>(
    a: *const f32,
    b: *const W,
    c: *mut f32,
    kc: i64,
    _lda: i64,
    ldc: i64,
    rows: i64,
    cols: i64,
    accumulate: i64,
) {
    if rows <= 0 || cols <= 0 {
        return;
    }
    let kc = kc.max(0) as usize;
    let out = (c, ldc, cols, accumulate);
    // SAFETY: forwarded contract; the count is the number of panels holding the columns.
    unsafe {
        match (cols as usize).div_ceil(HP).min(GEMV_PANELS) {
            4 => gemv_panels::<R, W, 4>(a, b, kc, out),
            3 => gemv_panels::<R, W, 3>(a, b, kc, out),
            2 => gemv_panels::<R, W, 2>(a, b, kc, out),
            _ => gemv_panels::<R, W, 1>(a, b, kc, out),
        }
    }
}

/// One row times `NP` consecutive panels (`b + q * kc * HP` for `q < NP`), written to
/// `out = (c, ldc, cols, accumulate)` as [`super::GemmFn`] does.
///
/// # Safety
/// `a` holds `kc` floats, `b` `NP * kc * HP` elements; `c` as in [`store_block`] for the
/// `cols` columns (at least one in panel `NP - 1`); inlined as [`gemv_block`].
#[inline(always)]
unsafe fn gemv_panels<R: Row16, W: PanelElement<R>, const NP: usize>(
    a: *const f32,
    b: *const W,
    kc: usize,
    (c, ldc, cols, accumulate): (*mut f32, i64, i64, i64),
) {
    // SAFETY (whole body): `k < kc`: `a` holds `kc` floats, each panel `kc * HP`
    // elements; the CPU has the features.
    let mut acc = [unsafe { R::zero() }; NP];
    for k in 0..kc {
        unsafe {
            let a_k = *a.add(k);
            for (q, acc_q) in acc.iter_mut().enumerate() {
                *acc_q = acc_q.fma(a_k, W::load16(b.add((q * kc + k) * HP)));
            }
        }
    }
    for (q, acc_q) in acc.iter().enumerate() {
        let first = (q * HP) as i64;
        // SAFETY: columns `first..cols` of row 0 (clamped to 16) are lent.
        unsafe { store_block(&[*acc_q], c.add(q * HP), ldc, 1, cols - first, accumulate) }
    }
}

/// Writes the `rows x cols` part of an `EP x 16` block held in registers to `c`:
/// `c = (accumulate ? c : 0) + block`. A full block goes straight to `c`; an edge block
/// through a stack tile, touching only its valid part of `c`.
///
/// # Safety
/// `c[i*ldc + j]` is readable and writable for `i < rows, j < cols` (clamped to the block);
/// inlined into a function enabling `R`'s features, which the CPU has.
#[inline(always)]
unsafe fn store_block<R: Row16, const EP: usize>(
    block: &[R; EP],
    c: *mut f32,
    ldc: i64,
    rows: i64,
    cols: i64,
    accumulate: i64,
) {
    let ldc = ldc as isize;
    if rows == EP as i64 && cols == HP as i64 {
        for (i, &sum) in block.iter().enumerate() {
            // SAFETY: a full block: all 16 columns of rows `i < EP` are lent.
            unsafe {
                let out = c.offset(i as isize * ldc);
                let v = if accumulate != 0 {
                    R::load(out).add(sum)
                } else {
                    sum
                };
                v.store(out);
            }
        }
        return;
    }
    let rows = rows.clamp(0, EP as i64) as usize;
    let cols = cols.clamp(0, HP as i64) as usize;
    let mut tile = [[0.0f32; HP]; EP];
    for (row, sum) in tile.iter_mut().zip(block) {
        // SAFETY: each tile row holds 16 floats.
        unsafe { sum.store(row.as_mut_ptr()) }
    }
    for (i, row) in tile.iter().enumerate().take(rows) {
        for (j, &sum) in row.iter().enumerate().take(cols) {
            // SAFETY: `i < rows`, `j < cols`: inside the part of `c` the caller lends.
            unsafe {
                let out = c.offset(i as isize * ldc + j as isize);
                *out = if accumulate != 0 { *out + sum } else { sum };
            }
        }
    }
}
