//! The x86-64 block GEMM, written once for every vector ISA and block shape: generic over
//! how one row of 16 floats of the block is held in registers ([`Row16`]: two ymm
//! registers on AVX2, one zmm on AVX-512F), over the packed weight element
//! ([`PanelElement`]: f32, or f16 widened as loaded), and over the block's rows and panels
//! (`6 x 1` panel for AVX2 prefill, `1 x 4` for the decode GEMV, which streams 4 panels at
//! once so more cache-line fills are in flight). The body is always inlined into
//! `extern "C"` entry points that enable their ISA's features ([`gemm_entry!`]).
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
    /// `self * other`, lane by lane.
    unsafe fn mul(self, other: Self) -> Self;
    /// Stores the lanes to `p` (16 writable floats).
    unsafe fn store(self, p: *mut f32);
}

/// A weight element the kernels widen to f32 lanes as they load it.
pub(super) trait PanelElement<R: Row16>: Copy {
    /// For a quantized element, the run of k that shares one scale per column
    /// ([`super::Q8_GROUP`]); 0 for floats, which are not scaled.
    const GROUP: usize = 0;

    /// The 16 elements from `p` as f32 lanes.
    ///
    /// # Safety
    /// 16 elements are readable at `p`; the CPU has the ISA's and the element's features
    /// (F16C for f16 on AVX2), enabled in the function this is inlined into.
    unsafe fn load16(p: *const Self) -> R;
}

/// Defines `extern "C"` entry point `$name`, a [`super::GemmFn`] over weights `$w`: the
/// always-inlined generic [`gemm_block`] for `$ep` rows by `$np` panels of 16 columns,
/// in rows of `$row`, compiled with `$features` enabled.
macro_rules! gemm_entry {
    ($(#[$doc:meta])* $name:ident, $row:ty, i8 scaled, $ep:literal x $np:literal, $features:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As [`super::GemmQ8Fn`], and the CPU has the enabled features.
        #[allow(clippy::too_many_arguments)]
        #[target_feature(enable = $features)]
        pub(super) unsafe extern "C" fn $name(
            a: *const f32,
            b: *const i8,
            scales: *const f32,
            c: *mut f32,
            kc: i64,
            lda: i64,
            ldc: i64,
            rows: i64,
            cols: i64,
            accumulate: i64,
        ) {
            // SAFETY: forwarded contract; the body's features are enabled here.
            unsafe {
                $crate::microkernel::x86_gemm::gemm_block::<$row, i8, $ep, $np>(
                    a, (b, scales), c, kc, lda, ldc, rows, cols, accumulate,
                )
            }
        }
    };
    ($(#[$doc:meta])* $name:ident, $row:ty, $w:ty, $ep:literal x $np:literal, $features:literal) => {
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
            unsafe {
                $crate::microkernel::x86_gemm::gemm_block::<$row, $w, $ep, $np>(
                    a, (b, std::ptr::null()), c, kc, lda, ldc, rows, cols, accumulate,
                )
            }
        }
    };
}
pub(super) use gemm_entry;

/// `EP x (NP * 16)` of C: the block GEMM of [`super::GemmFn`] (or, for quantized weights,
/// [`super::GemmQ8Fn`] with `scales`; null otherwise) over `NP` panels, reading only the
/// panels that hold one of the `cols` columns (an edge block at the right of the weights
/// has fewer).
///
/// # Safety
/// As [`super::GemmFn`] with `b` of `W`; inlined into a function enabling `R`'s and `W`'s
/// features, which the CPU has.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn gemm_block<R: Row16, W: PanelElement<R>, const EP: usize, const NP: usize>(
    a: *const f32,
    (b, scales): (*const W, *const f32),
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
    let block = Block {
        a,
        b,
        scales,
        c,
        kc: kc.max(0) as usize,
        lda: lda as isize,
        ldc,
        rows,
        cols,
        accumulate,
    };
    // SAFETY: forwarded contract; the count is the number of panels holding the columns.
    unsafe {
        match (cols as usize).div_ceil(HP).min(NP) {
            4 => block.panels::<R, EP, 4>(),
            3 => block.panels::<R, EP, 3>(),
            2 => block.panels::<R, EP, 2>(),
            _ => block.panels::<R, EP, 1>(),
        }
    }
}

/// The operands of one [`super::GemmFn`] call (`kc` clamped at 0).
struct Block<W> {
    a: *const f32,
    b: *const W,
    /// Quantized weights' scales (`[panel][group][16]`), null for floats.
    scales: *const f32,
    c: *mut f32,
    kc: usize,
    lda: isize,
    ldc: i64,
    rows: i64,
    cols: i64,
    accumulate: i64,
}

impl<W> Block<W> {
    /// `EP` rows by the `NQ` panels from `b` (`lda * 16` elements apart), in `EP x NQ`
    /// accumulators; per k, one load per panel and, per row of `a` (read in place at
    /// stride `lda`), one broadcast feeding `NQ` FMAs. Rows past `rows` re-read the last
    /// valid row (never stored).
    ///
    /// # Safety
    /// As [`gemm_block`], with at least one of the `cols` columns in panel `NQ - 1`.
    #[inline(always)]
    unsafe fn panels<R: Row16, const EP: usize, const NQ: usize>(&self)
    where
        W: PanelElement<R>,
    {
        let last = self.rows.min(EP as i64) as usize - 1;
        // SAFETY: row `min(i, last) < rows` of `a` is lent (`kc` floats from `a + row * lda`).
        let a_rows: [*const f32; EP] =
            std::array::from_fn(|i| unsafe { self.a.offset(i.min(last) as isize * self.lda) });
        // SAFETY: panel `q < NQ` holds one of the columns, so it is lent (its first `kc`
        // groups of 16 from `b + q * lda * 16`).
        let panels: [*const W; NQ] =
            std::array::from_fn(|q| unsafe { self.b.offset(q as isize * self.lda * HP as isize) });
        // SAFETY (rest): the caller's CPU has the features (see above).
        let mut acc = [[unsafe { R::zero() }; NQ]; EP];
        // Runs of k sharing a scale (the whole call for floats).
        let group = if W::GROUP == 0 {
            self.kc.max(1)
        } else {
            W::GROUP
        };
        let scale_stride = (self.lda as usize).div_ceil(group) * HP;
        let mut k0 = 0;
        while k0 < self.kc {
            let k1 = self.kc.min(k0 + group);
            // SAFETY: quantized weights come with the scales of every group read, panel
            // `q`'s `scale_stride` floats apart.
            let scale: [R; NQ] = std::array::from_fn(|q| unsafe {
                if W::GROUP == 0 {
                    R::zero()
                } else {
                    R::load(self.scales.add(q * scale_stride + k0 / group * HP))
                }
            });
            for k in k0..k1 {
                // SAFETY: `k < kc`: group `k` of each lent panel.
                let b_k: [R; NQ] = std::array::from_fn(|q| unsafe {
                    let w = W::load16(panels[q].add(k * HP));
                    if W::GROUP == 0 {
                        w
                    } else {
                        w.mul(scale[q])
                    }
                });
                for (acc_i, &a_i) in acc.iter_mut().zip(&a_rows) {
                    // SAFETY: `k < kc`: element k of a lent row.
                    let a_ik = unsafe { *a_i.add(k) };
                    for (acc_iq, &b_kq) in acc_i.iter_mut().zip(&b_k) {
                        // SAFETY: the features (see above).
                        *acc_iq = unsafe { acc_iq.fma(a_ik, b_kq) };
                    }
                }
            }
            k0 = k1;
        }
        let columns: [[R; EP]; NQ] = std::array::from_fn(|q| std::array::from_fn(|i| acc[i][q]));
        for (q, column) in columns.iter().enumerate() {
            let first = (q * HP) as i64;
            // SAFETY: columns `first..cols` (clamped to 16) of the lent rows of `c`.
            unsafe {
                store_block(
                    column,
                    self.c.add(q * HP),
                    self.ldc,
                    self.rows,
                    self.cols - first,
                    self.accumulate,
                )
            }
        }
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
