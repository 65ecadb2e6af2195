//! The matmul rules: a legalized `packed_matmul` (activations `x [..., L]`, weights packed
//! into panels `[P, L, HP]`, output `[..., H]`) tensorized onto the target's f32 block
//! microkernels.
//!
//! - [`GemvRule`] (decode, one row): each panel is one `1 x HP` microkernel call over the
//!   whole reduction, so every weight byte is read exactly once; parallel over panels.
//! - [`MatmulRule`] (prefill, `E` rows): parallel over groups of panels; per reduction block
//!   of `l_block` and per `EP` rows, the rows are packed into an `(L, EP)` block on the
//!   stack (zero padded past `E`), then one `EP x HP` microkernel call per panel of the
//!   group accumulates into the output tile.

use crate::rule::ScheduleRule;
use crate::tir_build::{ceil_div, for_loop, index, let_in, min};
use oxrelax_dsl::legalize::OP_ATTR;
use oxrelax_dsl::tir::{
    BinOp, Buffer, BufferRegion, ForKind, MicrokernelCall, PrimCmp, PrimExpr, PrimFunc, Stmt,
};
use oxrelax_dsl::{AttrValue, DataType, MatmulTiles, SymExpr, Target};

/// Parallelize a matmul only when it does at least this many multiply-adds (at the
/// dims' upper bounds): below it, a launch costs more than it saves.
const PARALLEL_MIN_MACS: i64 = 1 << 16;

/// The parts of a recognized `packed_matmul`.
struct PackedMatmul<'a> {
    func: &'a PrimFunc,
    x: &'a Buffer,
    packed: &'a Buffer,
    out: &'a Buffer,
    /// Rows: the product of the batch dims.
    rows: SymExpr,
    depth: i64,
    features: i64,
    panels: i64,
}

/// Recognizes a legalized f32 `packed_matmul` whose panel width is the target's.
fn recognize<'a>(func: &'a PrimFunc, tiles: &MatmulTiles) -> Option<PackedMatmul<'a>> {
    let op = matches!(func.attrs.get(OP_ATTR), Some(AttrValue::Str(s)) if s == "packed_matmul");
    let [x, packed, out] = func.params.as_slice() else {
        return None;
    };
    let all_f32 = [x, packed, out].iter().all(|b| b.dtype == DataType::F32);
    let dense = [x, packed, out].iter().all(|b| b.strides.is_none());
    if !op || !all_f32 || !dense || func.num_outputs != 1 {
        return None;
    }
    let [panels, depth, block] = packed.shape.as_slice() else {
        return None;
    };
    if block.as_const() != Some(tiles.hp) {
        return None;
    }
    let (_, batch) = x.shape.split_last()?;
    Some(PackedMatmul {
        func,
        x,
        packed,
        out,
        rows: SymExpr::product(batch),
        depth: depth.as_const()?,
        features: out.shape.last()?.as_const()?,
        panels: panels.as_const()?,
    })
}

/// Decode: `E = 1`, one microkernel call per panel.
pub struct GemvRule;

/// Prefill: `E` rows, packed `EP`-row blocks, panel groups per task.
pub struct MatmulRule;

impl ScheduleRule for GemvRule {
    fn name(&self) -> &'static str {
        "gemv"
    }

    fn apply(&self, func: &PrimFunc, target: &Target) -> Option<PrimFunc> {
        let tiles = target.matmul_tiles();
        let m = recognize(func, &tiles)?;
        if m.rows.as_const() != Some(1) {
            return None;
        }
        let p = index("p");
        let call = m.call(
            tiles.gemv_kernel,
            (&m.x.name, PrimExpr::index(0)),
            &p,
            (PrimExpr::index(0), PrimExpr::index(m.depth)),
            (PrimExpr::index(1), PrimExpr::index(0)),
            &tiles,
        );
        let kind = m.loop_kind(m.depth * m.features);
        Some(m.with_body(for_loop("p", PrimExpr::index(m.panels), kind, call)))
    }
}

impl ScheduleRule for MatmulRule {
    fn name(&self) -> &'static str {
        "matmul"
    }

    fn apply(&self, func: &PrimFunc, target: &Target) -> Option<PrimFunc> {
        let tiles = target.matmul_tiles();
        let m = recognize(func, &tiles)?;
        if m.rows.as_const() == Some(1) {
            return None;
        }
        let group = (m.panels / 8).clamp(1, tiles.panels_per_task);
        let groups = (m.panels + group - 1) / group;
        let l_blocks = (m.depth + tiles.l_block - 1) / tiles.l_block;
        let rows = PrimExpr::from(&m.rows);
        let row_blocks = ceil_div(rows.clone(), tiles.ep);
        // Panels of this group: `p = t * group + q` for `q < min(group, P - t * group)`.
        let p = index("t") * PrimExpr::index(group) + index("q");
        let panel_count = min(
            PrimExpr::index(group),
            PrimExpr::index(m.panels) - index("t") * PrimExpr::index(group),
        );
        let call = m.call(
            tiles.gemm_kernel,
            ("a_block", PrimExpr::index(0)),
            &p,
            (index("l0"), index("kc")),
            (index("e_rows"), index("e0")),
            &tiles,
        );
        let panels_loop = for_loop("q", panel_count, ForKind::Serial, call);
        let block = Buffer::new(
            "a_block",
            DataType::F32,
            vec![SymExpr::int(tiles.l_block * tiles.ep)],
        );
        let per_rows = Stmt::Seq(vec![m.pack_rows(&tiles), panels_loop]);
        let per_rows = let_in("e0", index("eb") * PrimExpr::index(tiles.ep), {
            let e_rows = min(PrimExpr::index(tiles.ep), rows.clone() - index("e0"));
            let_in("e_rows", e_rows, per_rows)
        });
        let rows_loop = for_loop("eb", row_blocks, ForKind::Serial, per_rows);
        let per_l = let_in("l0", index("lb") * PrimExpr::index(tiles.l_block), {
            let kc = min(
                PrimExpr::index(tiles.l_block),
                PrimExpr::index(m.depth) - index("l0"),
            );
            let_in("kc", kc, rows_loop)
        });
        let l_loop = for_loop("lb", PrimExpr::index(l_blocks), ForKind::Serial, per_l);
        let body = Stmt::Allocate {
            buffer: block,
            body: Box::new(l_loop),
        };
        let max_rows = m.rows.max_value().unwrap_or(i64::MAX);
        let kind = m.loop_kind(max_rows.saturating_mul(m.depth * m.features));
        let tasks = for_loop("t", PrimExpr::index(groups), kind, body);
        Some(m.with_body(tasks))
    }
}

impl PackedMatmul<'_> {
    /// Parallel when the matmul does enough work.
    fn loop_kind(&self, macs: i64) -> ForKind {
        if macs >= PARALLEL_MIN_MACS {
            ForKind::Parallel
        } else {
            ForKind::Serial
        }
    }

    /// The function with a new body (same parameters, dims and attributes).
    fn with_body(&self, body: Stmt) -> PrimFunc {
        PrimFunc {
            body,
            ..self.func.clone()
        }
    }

    /// One microkernel call on panel `p`: activations at `a`, reduction `(l0, kc)`, output
    /// rows `(rows, first row)`; accumulates after the first reduction block.
    fn call(
        &self,
        kernel: &str,
        (a_buffer, a_offset): (&str, PrimExpr),
        p: &PrimExpr,
        (l0, kc): (PrimExpr, PrimExpr),
        (rows, e0): (PrimExpr, PrimExpr),
        tiles: &MatmulTiles,
    ) -> Stmt {
        let hp = PrimExpr::index(tiles.hp);
        let h = PrimExpr::index(self.features);
        let panel_start = p.clone() * PrimExpr::index(self.depth) * hp.clone();
        let cols = min(hp.clone(), h.clone() - p.clone() * hp.clone());
        let accumulate = l0
            .clone()
            .compare(PrimCmp::Gt, PrimExpr::index(0))
            .cast(DataType::I64);
        let region = |buffer: &str, offset: PrimExpr| BufferRegion {
            buffer: buffer.to_string(),
            offset,
        };
        Stmt::Microkernel(MicrokernelCall {
            kernel: kernel.to_string(),
            operands: vec![
                region(a_buffer, a_offset),
                region(&self.packed.name, panel_start + l0 * hp.clone()),
                region(&self.out.name, e0 * h.clone() + p.clone() * hp),
            ],
            scalars: vec![kc, h, rows, cols, accumulate],
        })
    }

    /// `a_block[k * EP + i] = x[e0 + i, l0 + k]` for `i < EP`, `k < kc`; rows past `E`
    /// read the last row (inside `x`) and store 0.
    fn pack_rows(&self, tiles: &MatmulTiles) -> Stmt {
        let rows = PrimExpr::from(&self.rows);
        let row = min(index("e0") + index("i"), rows.clone() - PrimExpr::index(1));
        let mut indices = unflatten(row, &self.x.shape[..self.x.shape.len() - 1]);
        indices.push(index("l0") + index("k"));
        let load = PrimExpr::Load {
            buffer: self.x.name.clone(),
            dtype: DataType::F32,
            indices,
        };
        let valid = PrimExpr::Cmp(PrimCmp::Lt, Box::new(index("i")), Box::new(index("e_rows")));
        let store = Stmt::Store {
            buffer: "a_block".to_string(),
            indices: vec![index("k") * PrimExpr::index(tiles.ep) + index("i")],
            value: PrimExpr::select(valid, load, PrimExpr::f32(0.0)),
        };
        let inner = for_loop("k", index("kc"), ForKind::Serial, store);
        for_loop("i", PrimExpr::index(tiles.ep), ForKind::Unrolled, inner)
    }
}

/// The row-major indices of flat row `row` over `dims` (dims of extent 1 index 0; the
/// outermost dim of extent other than 1 takes what is left without a modulo).
fn unflatten(row: PrimExpr, dims: &[SymExpr]) -> Vec<PrimExpr> {
    let mut indices = Vec::with_capacity(dims.len());
    let mut rest = row;
    for (k, dim) in dims.iter().enumerate().rev() {
        let extent = PrimExpr::from(dim);
        if dim.as_const() == Some(1) {
            indices.push(PrimExpr::index(0));
        } else if dims[..k].iter().all(|d| d.as_const() == Some(1)) {
            indices.push(rest.clone());
        } else {
            indices.push(rest.clone().binary(BinOp::FloorMod, extent.clone()));
            rest = rest.binary(BinOp::FloorDiv, extent);
        }
    }
    indices.reverse();
    indices
}
