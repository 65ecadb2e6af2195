//! What every implementation of the int8-activation GEMMs ([`super::QGemmFn`]) shares:
//! the weight panel layouts ([`QPanel`]: int8, 4-bit) and one call's operands, clamped and
//! addressed ([`QCall`]).

use super::{PANEL, QUANT_GROUP};
use half::f16;
use oxrelax_abi::QuantLayout;

/// Bytes of one step of a weight panel: the [`PANEL`] columns by 4 consecutive k of one
/// `vpdpbusd` operand (int8), or by 8 k (4-bit: two quads in the two nibbles).
pub(super) const STEP_BYTES: usize = 64;

/// The packed weight element of an int8-activation GEMM panel: `i8` (one weight per byte)
/// or `u8` (two 4-bit weights per byte, of the same column, 4 k apart).
pub(super) trait QPanel: Copy {
    /// The depths one [`STEP_BYTES`] step of a panel holds (4 for int8, 8 for 4-bit).
    const STEP_K: usize;

    /// The weight of depth `k < kc` and panel column `j < 16` of `panel` (whose elements
    /// are those of its first `kc` depths), as the layout of [`super::QGemmW8Fn`] or
    /// [`super::QGemmW4Fn`] says.
    fn weight(panel: &[Self], k: usize, j: usize) -> i32;

    /// Elements from one panel to the next when the reduction is `kc` deep.
    fn panel_stride(kc: usize) -> usize {
        kc / Self::STEP_K * STEP_BYTES
    }
}

impl QPanel for i8 {
    const STEP_K: usize = 4;

    fn weight(panel: &[i8], k: usize, j: usize) -> i32 {
        i32::from(panel[QuantLayout::Quads.lane_element(8, (k, j))])
    }
}

impl QPanel for u8 {
    const STEP_K: usize = 8;

    fn weight(panel: &[u8], k: usize, j: usize) -> i32 {
        let nibble = QuantLayout::Quads.lane_element(4, (k, j));
        let byte = panel[nibble / 2];
        let value = if nibble.is_multiple_of(2) {
            byte & 0x0F
        } else {
            byte >> 4
        };
        i32::from(value) - 8
    }
}

/// The operands of one [`super::QGemmFn`] call of an `EP x HP` block, with `rows` and
/// `cols` clamped to the block and `kc` rounded down to whole groups.
pub(super) struct QCall<W> {
    /// Activation row 0 (bytes, `code + 128`).
    pub a: *const u8,
    /// One scale per activation row and group (`[row][group]`).
    pub a_scales: *const f32,
    /// Weight panel 0.
    pub b: *const W,
    /// Group scales (f16), `[panel][group][16]`.
    pub scales: *const f16,
    /// Output row 0.
    pub c: *mut f32,
    /// Elements from one panel to the next.
    pub panel_stride: usize,
    /// Groups of [`QUANT_GROUP`] k summed.
    pub groups: usize,
    /// Bytes from one activation row to the next.
    pub lda: isize,
    /// Floats from one output row to the next.
    pub ldc: isize,
    /// Rows of the block computed (`1..=EP`).
    pub rows: usize,
    /// Columns of the block computed (`1..=HP`).
    pub cols: usize,
}

impl<W: QPanel> QCall<W> {
    /// The call of an `ep x hp` block with the arguments of [`super::QGemmFn`] (`a`,
    /// `a_scales`, `b`, `scales`, `c`, then `kc, lda, ldc, rows, cols`), or `None`
    /// when it computes nothing (`rows <= 0` or `cols <= 0`).
    pub fn new(
        (a, a_scales, b, scales, c): (*const u8, *const f32, *const W, *const f16, *mut f32),
        [kc, lda, ldc, rows, cols]: [i64; 5],
        (ep, hp): (usize, usize),
    ) -> Option<QCall<W>> {
        if rows <= 0 || cols <= 0 {
            return None;
        }
        let kc = kc.max(0) as usize;
        Some(QCall {
            a,
            a_scales,
            b,
            scales,
            c,
            panel_stride: W::panel_stride(kc),
            groups: kc / QUANT_GROUP,
            lda: lda as isize,
            ldc: ldc as isize,
            rows: (rows as usize).min(ep),
            cols: (cols as usize).min(hp),
        })
    }

    /// The depths summed (whole groups).
    pub fn depth(&self) -> usize {
        self.groups * QUANT_GROUP
    }

    /// Panels holding one of the `cols` columns (the only ones read).
    pub fn panels(&self) -> usize {
        self.cols.div_ceil(PANEL)
    }

    /// Activation row `i`, or the last computed row for `i >= rows` (so a block's spare
    /// rows re-read it; never stored).
    pub fn a_row(&self, i: usize) -> *const u8 {
        let i = i.min(self.rows - 1) as isize;
        self.a.wrapping_offset(i * self.lda)
    }

    /// The scale of group `g < groups` of activation row `i` (the last computed row's for
    /// `i >= rows`).
    ///
    /// # Safety
    /// The call's `a_scales` are lent ([`super::QGemmFn`]); `g < groups`.
    pub unsafe fn a_scale(&self, i: usize, g: usize) -> f32 {
        // SAFETY: the `groups` scales of row `min(i, rows - 1) < rows` are lent.
        unsafe { *self.a_scales.add(i.min(self.rows - 1) * self.groups + g) }
    }

    /// The start of panel `q`.
    pub fn panel(&self, q: usize) -> *const W {
        self.b.wrapping_add(q * self.panel_stride)
    }

    /// The 16 (f16) scales of group `g` of panel `q`.
    pub fn group_scales(&self, q: usize, g: usize) -> *const f16 {
        self.scales.wrapping_add((q * self.groups + g) * PANEL)
    }

    /// Where output row `i`, column `j` goes.
    pub fn out(&self, i: usize, j: usize) -> *mut f32 {
        self.c.wrapping_offset(i as isize * self.ldc + j as isize)
    }

    /// This call restricted to panel `q` (one of [`QCall::panels`]): its weights, scales
    /// and columns of C.
    pub fn panel_call(&self, q: usize) -> QCall<W> {
        QCall {
            b: self.panel(q),
            scales: self.group_scales(q, 0),
            c: self.out(0, q * PANEL),
            cols: (self.cols - q * PANEL).min(PANEL),
            ..*self
        }
    }
}

/// Defines `extern "C"` entry point `$name`, a [`super::QGemmFn`] over weights `$w` of
/// `$ep` rows by `$np` panels, compiled with `$features` enabled: its [`QCall`], then
/// `$panels::<$w, $ep, NQ>` (an ISA's always-inlined body) for the `NQ` panels holding one
/// of its `cols` columns (an edge block reads fewer).
macro_rules! qgemm_entry {
    ($(#[$doc:meta])* $name:ident, $w:ty, $ep:literal x $np:literal, $panels:ident, $features:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As [`crate::microkernel::QGemmFn`], and the CPU has the enabled features.
        #[allow(clippy::too_many_arguments)]
        #[target_feature(enable = $features)]
        pub(in crate::microkernel) unsafe extern "C" fn $name(
            a: *const u8,
            a_scales: *const f32,
            b: *const $w,
            scales: *const half::f16,
            c: *mut f32,
            kc: i64,
            lda: i64,
            ldc: i64,
            rows: i64,
            cols: i64,
        ) {
            let operands = (a, a_scales, b, scales, c);
            let shape = ($ep, $np * $crate::microkernel::PANEL);
            let Some(call) = $crate::microkernel::qgemm::QCall::new(
                operands,
                [kc, lda, ldc, rows, cols],
                shape,
            ) else {
                return;
            };
            // SAFETY: forwarded contract; the body's features are enabled here, and
            // `NQ` is the number of panels holding the columns.
            unsafe {
                if $ep == 1 {
                    // A GEMV reads its panels one after the other: one run of weights
                    // (and of scales) at a time streams faster from memory than four
                    // side by side (TinyLlama w4a8 decode on a 2-core Zen 4: 65-66
                    // against 55-57 tok/s).
                    for q in 0..call.panels().min($np) {
                        $panels::<$w, $ep, 1>(&call.panel_call(q));
                    }
                    return;
                }
                // A block of fewer rows (a small decode batch) over whole panels computes
                // 1, 2, 4 or 6 rows, not `EP` (a row's sums do not depend on how many
                // rows a block computes).
                if call.rows < $ep && call.panels() >= $np {
                    match call.rows {
                        1 => $panels::<$w, 1, $np>(&call),
                        2 => $panels::<$w, 2, $np>(&call),
                        3 | 4 => $panels::<$w, 4, $np>(&call),
                        _ => $panels::<$w, 6, $np>(&call),
                    }
                    return;
                }
                match call.panels().min($np) {
                    4 => $panels::<$w, $ep, 4>(&call),
                    3 => $panels::<$w, $ep, 3>(&call),
                    2 => $panels::<$w, $ep, 2>(&call),
                    _ => $panels::<$w, $ep, 1>(&call),
                }
            }
        }
    };
}
pub(super) use qgemm_entry;
