//! Where each weight of a set of packed quantized panels lives: one formula for the
//! compiler's packing and reference semantics and the runtime's kernels.
//!
//! A weight matrix of `H` output columns and a reduction of `depth` values is stored as
//! `ceil(H / PANEL)` panels, each holding [`PANEL`] columns over the whole reduction;
//! weight `(k, j)` (depth `k`, column `j`) is in panel `j / PANEL`, lane `j % PANEL`.
//! Positions count *elements* of the stored dtype; a 4-bit element is one nibble (element
//! `e` is byte `e / 2`, the low nibble when `e` is even).

use crate::microkernel::{PANEL, QUANT_GROUP};

/// How a panel orders the reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuantLayout {
    /// One depth after another (two per byte for 4 bits: a lane's consecutive depths share
    /// a byte): the f32-activation microkernels'.
    Rows,
    /// Groups of 4 consecutive depths per lane, the reduction padded to whole
    /// [`QUANT_GROUP`]s (for 4 bits, a byte holds depth `k` in its low nibble and `k + 4`
    /// in its high one): the operand layout of 4-way int8 dot products (`vpdpbusd`,
    /// `sdot`), read by the int8-activation microkernels.
    Quads,
}

impl QuantLayout {
    /// The layout named by `pack_weight_quant`'s `layout` attribute (absent: rows).
    pub fn from_attr(name: Option<&str>) -> Option<QuantLayout> {
        match name {
            None | Some("rows") => Some(QuantLayout::Rows),
            Some("quads") => Some(QuantLayout::Quads),
            Some(_) => None,
        }
    }

    /// The attribute value naming this layout.
    pub fn name(self) -> &'static str {
        match self {
            QuantLayout::Rows => "rows",
            QuantLayout::Quads => "quads",
        }
    }

    /// The depth a panel holds for a reduction of `depth` values: `depth` in rows, padded
    /// to whole groups in quads.
    pub fn padded_depth(self, depth: usize) -> usize {
        match self {
            QuantLayout::Rows => depth,
            QuantLayout::Quads => depth.div_ceil(QUANT_GROUP) * QUANT_GROUP,
        }
    }

    /// Elements from one panel to the next, for `bits`-bit weights (4 or 8) and a
    /// reduction of `depth` values.
    pub fn panel_elements(self, bits: u32, depth: usize) -> usize {
        let depth = self.padded_depth(depth);
        match (self, bits) {
            (QuantLayout::Rows, 4) => depth.div_ceil(2) * 2 * PANEL,
            _ => depth * PANEL,
        }
    }

    /// The element of the panels holding weight `(k, j)`, for `bits`-bit weights and a
    /// reduction of `depth` values.
    pub fn weight_element(self, bits: u32, depth: usize, (k, j): (usize, usize)) -> usize {
        (j / PANEL) * self.panel_elements(bits, depth) + self.lane_element(bits, (k, j % PANEL))
    }

    /// The element of one panel holding the weight of depth `k` in lane `lane`.
    pub fn lane_element(self, bits: u32, (k, lane): (usize, usize)) -> usize {
        match (self, bits) {
            (QuantLayout::Rows, 4) => (k / 2) * 2 * PANEL + lane * 2 + k % 2,
            (QuantLayout::Rows, _) => k * PANEL + lane,
            (QuantLayout::Quads, 4) => (k / 8) * 8 * PANEL + lane * 8 + (k % 4) * 2 + (k / 4) % 2,
            (QuantLayout::Quads, _) => (k / 4) * 4 * PANEL + lane * 4 + k % 4,
        }
    }
}

/// The element of a panel set's group scales (`[panel][group][lane]`) holding the scale of
/// weight `(k, j)`, when each panel has `groups` groups.
pub fn scale_element(groups: usize, (k, j): (usize, usize)) -> usize {
    ((j / PANEL) * groups + k / QUANT_GROUP) * PANEL + j % PANEL
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every weight of every layout has its own element, and the elements fill the panels.
    #[test]
    fn weights_fill_their_panels_one_element_each() {
        for layout in [QuantLayout::Rows, QuantLayout::Quads] {
            for bits in [4, 8] {
                for depth in [1, 7, 32, 33, 64] {
                    let cols = 2 * PANEL;
                    let padded = layout.padded_depth(depth);
                    let mut seen = vec![false; 2 * layout.panel_elements(bits, depth)];
                    for k in 0..padded {
                        for j in 0..cols {
                            let at = layout.weight_element(bits, depth, (k, j));
                            assert!(!seen[at], "{layout:?} {bits} {depth} ({k}, {j})");
                            seen[at] = true;
                        }
                    }
                    let odd_rows = layout == QuantLayout::Rows && bits == 4 && depth % 2 == 1;
                    assert_eq!(
                        seen.iter().all(|s| *s),
                        !odd_rows,
                        "{layout:?} {bits} {depth}"
                    );
                }
            }
        }
    }

    #[test]
    fn quads_keep_four_depths_of_a_lane_together() {
        let at = |k| QuantLayout::Quads.weight_element(8, 64, (k, 17));
        // Panel 1 starts at 64 * 16; lane 1 at 4; the next quad of depths 4 * 16 further.
        assert_eq!([at(0), at(1), at(3), at(4)], [1028, 1029, 1031, 1092]);
        let nibble = |k| QuantLayout::Quads.weight_element(4, 64, (k, 1));
        assert_eq!((nibble(0), nibble(4), nibble(1)), (8, 9, 10));
        assert_eq!(scale_element(2, (40, 17)), (2 + 1) * PANEL + 1);
    }
}
