//! The matmul rules: a legalized `packed_matmul` (activations `x [..., L]`, weights packed
//! into panels `[P, L, HP]`, output `[..., H]`), `packed_matmul_quant` (quantized
//! panels and their group scales) or `packed_matmul_int` (int8 activation codes and their
//! group scales, quads-layout panels and group scales) tensorized onto the target's block
//! microkernels. An int8 call always covers the whole reduction (the kernels overwrite
//! their output), so its reduction is one block.
//!
//! - [`GemvRule`] (decode, one row): each group of consecutive panels (as many as the GEMV
//!   microkernel's block spans, e.g. 4 panels of 16 for `1 x 64`) is one call over the
//!   whole reduction, so every weight byte is read exactly once, in several concurrent
//!   streams per thread; parallel over groups. A batched decode step (rows up to the
//!   target's `gemv_rows`) takes it too where the decode kernel takes several rows (the
//!   4-bit GEMVs, `8 x 256`): one call per group and block of its rows.
//! - [`MatmulRule`] (prefill, `E` rows): parallel over groups of panels; per reduction block
//!   of `l_block` and per `EP` rows, one `EP x HP` microkernel call per panel of the group
//!   accumulates into the output tile. The kernel reads the `EP` activation rows in place
//!   (stride `L`; an L block of them stays in L1 across the group's panels), so f32
//!   activations need no packing (MNN's `LP = 1`).
//!
//! A fused epilogue (residual or bias add, SiLU, `silu(g) * up`, RoPE) runs on each
//! output tile right after its last reduction block, while the tile is in cache: per
//! GEMV block, or per `EP` rows of a panel group. A windowed epilogue (RoPE reads a whole
//! head) gets tiles of whole windows: panel groups and GEMV tasks are widened to a
//! multiple of the window.

use crate::epilogue::epilogue_tile;
use crate::rule::ScheduleRule;
use crate::tir_build::{ceil_div, ceil_div_const, for_loop, index, let_in, min};
use oxrelax_dsl::fuse::{split_epilogue, Epilogue, FUSED_ATTR};
use oxrelax_dsl::legalize::OP_ATTR;
use oxrelax_dsl::op::quant_groups;
use oxrelax_dsl::tir::{
    BinOp, Buffer, BufferRegion, ForKind, MicrokernelCall, MicrokernelKind, MicrokernelSpec,
    PrimCmp, PrimExpr, PrimFunc, Stmt, QUANT_GROUP,
};
use oxrelax_dsl::{AttrValue, DType, MatmulTiles, SymExpr, Target};

/// Parallelize a matmul only when it does at least this many multiply-adds (at the
/// dims' upper bounds): below it, a launch costs more than it saves.
const PARALLEL_MIN_MACS: i64 = 1 << 16;

/// Calls a parallel decode GEMV makes at least: a matrix no wider than the microkernel's
/// block (TinyLlama's 256-column k and v projections under the 256-column 4-bit GEMV) is
/// split into narrower calls, so it does not run on one thread while the others wait (but
/// into few: each call rounds the activations again).
const MIN_GEMV_CALLS: i64 = 2;

/// The parts of a recognized `packed_matmul`.
struct PackedMatmul<'a> {
    func: &'a PrimFunc,
    x: &'a Buffer,
    packed: &'a Buffer,
    /// Quantized panels' group scales (`packed_matmul_quant`, `packed_matmul_int`).
    scales: Option<&'a Buffer>,
    /// The int8 activations' group scales (`packed_matmul_int`).
    int: Option<&'a Buffer>,
    out: &'a Buffer,
    /// Rows: the product of the batch dims.
    rows: SymExpr,
    /// The output's batch dims (all but the last).
    batch: &'a [SymExpr],
    /// The fused epilogue, if any.
    epilogue: Option<Epilogue>,
    depth: i64,
    features: i64,
    panels: i64,
    /// Elements from one panel to the next.
    panel_elements: i64,
    /// Panel width (the target's `hp`).
    hp: i64,
}

/// Recognizes a legalized `packed_matmul` (f32 activations, f32 or f16 weights) or
/// `packed_matmul_quant` (i8 or u4 weights and their f32 or f16 group scales) whose
/// panel width is the target's, possibly with a fused epilogue (whose extra inputs sit
/// between the weights and the output).
fn recognize<'a>(func: &'a PrimFunc, tiles: &MatmulTiles) -> Option<PackedMatmul<'a>> {
    let op = match func.attrs.get(OP_ATTR) {
        Some(AttrValue::Str(s)) => s.as_str(),
        _ => return None,
    };
    let (x, packed, scales, int, out) = match (op, func.params.as_slice()) {
        ("packed_matmul", [x, packed, .., out]) => (x, packed, None, None, out),
        ("packed_matmul_quant", [x, packed, scales, .., out]) => {
            (x, packed, Some(scales), None, out)
        }
        ("packed_matmul_int", [x, x_scales, packed, scales, .., out]) => {
            (x, packed, Some(scales), Some(x_scales), out)
        }
        _ => return None,
    };
    let x_dtype = if int.is_some() { DType::U8 } else { DType::F32 };
    let int_f32 = int.is_none_or(|s| s.dtype == DType::F32);
    let dtypes_ok = x.dtype == x_dtype && out.dtype == DType::F32 && int_f32;
    let dense = [Some(x), Some(packed), scales, Some(out), int]
        .into_iter()
        .flatten()
        .all(|b| b.strides.is_none());
    let groups_whole = scales.is_none() || tiles.l_block % QUANT_GROUP == 0;
    if !dtypes_ok || !dense || func.num_outputs != 1 || !groups_whole {
        return None;
    }
    let inputs = 2 + usize::from(scales.is_some()) + usize::from(int.is_some());
    let epilogue = match split_epilogue(func) {
        Some((_, epilogue)) => Some(epilogue),
        None if func.attrs.contains_key(FUSED_ATTR) || func.params.len() != inputs + 1 => {
            return None
        }
        None => None,
    };
    let (panels, block) = match packed.shape.as_slice() {
        [panels, _, block] | [panels, _, block, _] | [panels, _, block, _, _] => (panels, block),
        _ => return None,
    };
    if block.as_const() != Some(tiles.hp) {
        return None;
    }
    let (depth, batch) = x.shape.split_last()?;
    let panel_elements: Option<i64> = packed.shape[1..].iter().map(SymExpr::as_const).product();
    Some(PackedMatmul {
        func,
        x,
        packed,
        scales,
        int,
        out,
        rows: SymExpr::product(batch),
        batch: out.shape.split_last()?.1,
        epilogue,
        depth: depth.as_const()?,
        features: out.shape.last()?.as_const()?,
        panels: panels.as_const()?,
        panel_elements: panel_elements?,
        hp: tiles.hp,
    })
}

/// Decode: `E = 1`, one microkernel call per group of panels; or the few rows of a batched
/// decode step, where the target runs them on a decode kernel taking several.
#[derive(Clone, Copy, Debug)]
pub struct GemvRule {
    /// The target's tiles (its decode kernel, panel width and batched-decode rows).
    pub tiles: MatmulTiles,
    /// The target's int8-activation decode block (rows, columns).
    pub int_block: (i64, i64),
}

/// Prefill: `E` rows, packed `EP`-row blocks, panel groups per task.
#[derive(Clone, Copy, Debug)]
pub struct MatmulRule {
    /// The target's tiles (its prefill kernel and block, panel width, L block, panels
    /// per task).
    pub tiles: MatmulTiles,
    /// The target's int8-activation prefill block (rows, columns).
    pub int_block: (i64, i64),
}

impl GemvRule {
    /// The rule with `target`'s tile tables.
    pub fn for_target(target: &Target) -> GemvRule {
        GemvRule {
            tiles: target.matmul_tiles(),
            int_block: target.int_matmul_tiles().gemv,
        }
    }
}

impl MatmulRule {
    /// The rule with `target`'s tile tables.
    pub fn for_target(target: &Target) -> MatmulRule {
        MatmulRule {
            tiles: target.matmul_tiles(),
            int_block: target.int_matmul_tiles().gemm,
        }
    }
}

impl ScheduleRule for GemvRule {
    fn name(&self) -> &'static str {
        "gemv"
    }

    fn describe(&self) -> String {
        let t = &self.tiles;
        let (rows, cols) = self.int_block;
        let batched = match t.gemv_rows {
            1 => "one row".to_string(),
            n => format!("one row, or up to {n} on decode kernels taking several"),
        };
        format!(
            "gemv: {} over {}-wide panels ({batched}); int8 activations {rows}x{cols}",
            t.gemv_kernel, t.hp
        )
    }

    fn apply(&self, func: &PrimFunc) -> Option<PrimFunc> {
        let tiles = self.tiles;
        let m = recognize(func, &tiles)?;
        let kernel = m.kernel(tiles.gemv_kernel, self.int_block)?;
        let ep = MicrokernelSpec::lookup(kernel)?.kind.block()?.0;
        let one_row = m.rows.as_const() == Some(1);
        let max_rows = m.rows.max_value().unwrap_or(i64::MAX);
        if !one_row && (ep == 1 || max_rows > tiles.gemv_rows) {
            return None;
        }
        let kind = m.loop_kind(m.depth * m.features);
        let block = block_width(kernel, tiles.hp)?;
        let width = if kind == ForKind::Parallel {
            m.gemv_width(block)
        } else {
            block
        };
        // Each task covers `calls` blocks: enough for whole epilogue windows.
        let calls = m.aligned(width) / width;
        let group = width / tiles.hp;
        let first_panel = index("g") * PrimExpr::index(calls * group);
        let p = match calls {
            1 => first_panel.clone(),
            _ => first_panel.clone() + index("k") * PrimExpr::index(group),
        };
        let rows = PrimExpr::from(&m.rows);
        let (call_rows, a_offset) = if one_row {
            ((PrimExpr::index(1), PrimExpr::index(0)), PrimExpr::index(0))
        } else {
            let a_offset = index("e0") * PrimExpr::index(m.depth);
            ((index("e_rows"), index("e0")), a_offset)
        };
        let call = m.call(
            (kernel, width),
            a_offset,
            &p,
            (PrimExpr::index(0), PrimExpr::index(m.depth)),
            call_rows,
        );
        let blocks = if calls == 1 {
            call
        } else {
            let remaining = PrimExpr::index(m.panels) - first_panel.clone();
            let count = min(PrimExpr::index(calls), ceil_div(remaining, group));
            for_loop("k", count, ForKind::Serial, call)
        };
        // Several rows: the kernel's blocks of `ep` rows, each over the task's panels.
        let blocks = if one_row {
            blocks
        } else {
            row_blocks(&rows, ep, blocks)
        };
        let tile_rows = (rows, PrimExpr::index(0));
        let body = match m.epilogue_tile(tile_rows, &first_panel, calls * width) {
            Some(epilogue) => Stmt::Seq(vec![blocks, epilogue]),
            None => blocks,
        };
        let tasks = PrimExpr::index((m.panels + calls * group - 1) / (calls * group));
        Some(m.with_body(for_loop("g", tasks, kind, body)))
    }
}

/// The block width of GEMM microkernel `kernel` if it spans whole panels `hp` wide.
fn block_width(kernel: &str, hp: i64) -> Option<i64> {
    match MicrokernelSpec::lookup(kernel)?.kind {
        MicrokernelKind::Gemm {
            hp: width, panel, ..
        }
        | MicrokernelKind::IntGemm {
            hp: width, panel, ..
        } if panel == hp && width % hp == 0 => Some(width),
        _ => None,
    }
}

impl ScheduleRule for MatmulRule {
    fn name(&self) -> &'static str {
        "matmul"
    }

    fn describe(&self) -> String {
        let t = &self.tiles;
        let (rows, cols) = self.int_block;
        format!(
            "matmul: {} over {}-wide panels, L blocks of {}, up to {} panels a task; \
             int8 activations {rows}x{cols}",
            t.gemm_kernel, t.hp, t.l_block, t.panels_per_task
        )
    }

    fn apply(&self, func: &PrimFunc) -> Option<PrimFunc> {
        let tiles = self.tiles;
        let m = recognize(func, &tiles)?;
        if m.rows.as_const() == Some(1) {
            return None;
        }
        let kernel = m.kernel(tiles.gemm_kernel, self.int_block)?;
        let width = block_width(kernel, tiles.hp)?;
        let ep = MicrokernelSpec::lookup(kernel)?.kind.block()?.0;
        // An int8 call covers the whole reduction.
        let l_block = if m.int.is_some() {
            m.depth
        } else {
            tiles.l_block
        };
        // Panels per task: whole kernel blocks, and whole epilogue windows.
        let group = (m.panels / 8).clamp(1, tiles.panels_per_task);
        let group = m.aligned(lcm(group * tiles.hp, width)) / tiles.hp;
        let per_call = width / tiles.hp;
        let groups = (m.panels + group - 1) / group;
        let l_blocks = (m.depth + l_block - 1) / l_block;
        let rows = PrimExpr::from(&m.rows);
        // Blocks of this group: `p = t * group + q * per_call` for the `q` that start
        // before `min(group, P - t * group)` panels.
        let panel_count = min(
            PrimExpr::index(group),
            PrimExpr::index(m.panels) - index("t") * PrimExpr::index(group),
        );
        let (p, blocks) = match per_call {
            1 => (index("q"), panel_count),
            _ => (
                index("q") * PrimExpr::index(per_call),
                ceil_div(panel_count, per_call),
            ),
        };
        let p = index("t") * PrimExpr::index(group) + p;
        let a_offset = index("e0") * PrimExpr::index(m.depth) + index("l0");
        let call = m.call(
            (kernel, width),
            a_offset,
            &p,
            (index("l0"), index("kc")),
            (index("e_rows"), index("e0")),
        );
        let tile = (index("e_rows"), index("e0"));
        let panels_loop = for_loop("q", blocks, ForKind::Serial, call);
        // The epilogue follows the tile's last reduction block.
        let first_panel = index("t") * PrimExpr::index(group);
        let tile_body = match m.epilogue_tile(tile, &first_panel, group * tiles.hp) {
            Some(epilogue) if l_blocks > 1 => {
                let last = index("lb").compare(PrimCmp::Eq, PrimExpr::index(l_blocks - 1));
                let guarded = Stmt::If {
                    cond: last,
                    then: Box::new(epilogue),
                    otherwise: None,
                };
                Stmt::Seq(vec![panels_loop, guarded])
            }
            Some(epilogue) => Stmt::Seq(vec![panels_loop, epilogue]),
            None => panels_loop,
        };
        let rows_loop = row_blocks(&rows, ep, tile_body);
        let per_l = let_in("l0", index("lb") * PrimExpr::index(l_block), {
            let kc = min(
                PrimExpr::index(l_block),
                PrimExpr::index(m.depth) - index("l0"),
            );
            let_in("kc", kc, rows_loop)
        });
        let body = for_loop("lb", PrimExpr::index(l_blocks), ForKind::Serial, per_l);
        let max_rows = m.rows.max_value().unwrap_or(i64::MAX);
        let kind = m.loop_kind(max_rows.saturating_mul(m.depth * m.features));
        let tasks = for_loop("t", PrimExpr::index(groups), kind, body);
        Some(m.with_body(tasks))
    }
}

impl PackedMatmul<'_> {
    /// The microkernel for this matmul: the version of the target's f32-weight
    /// microkernel `kernel` over its packed weights and scales (itself for f32, its f16
    /// twin for f16, ...), or for int8 activations the int8 block `int_block` over its
    /// weights.
    fn kernel(&self, kernel: &str, (ep, hp): (i64, i64)) -> Option<&'static str> {
        if self.int.is_some() {
            return Some(MicrokernelSpec::int_gemm(ep, hp, self.packed.dtype)?.name);
        }
        let weights = (self.packed.dtype, self.scales.map(|s| s.dtype));
        Some(MicrokernelSpec::gemm_over(kernel, weights)?.name)
    }

    /// Parallel when the matmul does enough work.
    fn loop_kind(&self, macs: i64) -> ForKind {
        if macs >= PARALLEL_MIN_MACS {
            ForKind::Parallel
        } else {
            ForKind::Serial
        }
    }

    /// The output columns of the `width`-wide block from panel `p`: its first column and
    /// how many of its columns exist (`width`, or fewer at the right edge).
    fn columns(&self, p: &PrimExpr, width: i64) -> (PrimExpr, PrimExpr) {
        let first = p.clone() * PrimExpr::index(self.hp);
        let cols = min(
            PrimExpr::index(width),
            PrimExpr::index(self.features) - first.clone(),
        );
        (first, cols)
    }

    /// The fused epilogue (if any) on the tile of `rows` rows from `first_row` and the
    /// columns of the `width`-wide block from panel `p`.
    fn epilogue_tile(&self, rows: (PrimExpr, PrimExpr), p: &PrimExpr, width: i64) -> Option<Stmt> {
        let epilogue = self.epilogue.as_ref()?;
        let (first_col, cols) = self.columns(p, width);
        Some(epilogue_tile(
            epilogue,
            self.batch,
            rows,
            (cols, first_col, width),
        ))
    }

    /// The columns of a parallel GEMV's calls: the kernel's block `width`, or narrower
    /// (whole panels and epilogue windows) when the output would span fewer than
    /// [`MIN_GEMV_CALLS`] blocks.
    fn gemv_width(&self, width: i64) -> i64 {
        let step = self.aligned(self.hp);
        let share = ceil_div_const(self.features, MIN_GEMV_CALLS);
        width.min(ceil_div_const(share, step).max(1) * step)
    }

    /// The smallest multiple of `width` (a tile's columns) that holds whole epilogue
    /// windows.
    fn aligned(&self, width: i64) -> i64 {
        let window = self.epilogue.as_ref().map_or(1, |e| e.window);
        lcm(width, window)
    }

    /// The function with a new body (same parameters, dims and attributes).
    fn with_body(&self, body: Stmt) -> PrimFunc {
        PrimFunc {
            body,
            ..self.func.clone()
        }
    }

    /// One call of `kernel` (a block `width` columns wide) from panel `p` on: activation
    /// rows from flat element `a_offset` of `x` (row stride `L`), reduction `(l0, kc)`,
    /// output rows `(rows, first row)`; accumulates after the first reduction block.
    fn call(
        &self,
        (kernel, width): (&str, i64),
        a_offset: PrimExpr,
        p: &PrimExpr,
        (l0, kc): (PrimExpr, PrimExpr),
        (rows, e0): (PrimExpr, PrimExpr),
    ) -> Stmt {
        let hp = PrimExpr::index(self.hp);
        let h = PrimExpr::index(self.features);
        // `l0` starts a group: for value pairs (u4), `l0 / 2` pairs of `2 * hp` values.
        let panel_start = p.clone() * PrimExpr::index(self.panel_elements);
        let (first_col, cols) = self.columns(p, width);
        let accumulate = l0
            .clone()
            .compare(PrimCmp::Gt, PrimExpr::index(0))
            .cast(DType::I64);
        let region = |buffer: &str, offset: PrimExpr| BufferRegion {
            buffer: buffer.to_string(),
            offset,
        };
        if let (Some(x_scales), Some(scales)) = (self.int, self.scales) {
            let groups = PrimExpr::index(self.depth / QUANT_GROUP);
            let operands = vec![
                region(&self.x.name, a_offset),
                region(&x_scales.name, e0.clone() * groups.clone()),
                region(&self.packed.name, panel_start),
                region(&scales.name, p.clone() * groups * hp),
                region(&self.out.name, e0 * h.clone() + first_col),
            ];
            let depth = PrimExpr::index(self.depth);
            return Stmt::Microkernel(MicrokernelCall {
                kernel: kernel.to_string(),
                operands,
                scalars: vec![depth.clone(), depth, h, rows, cols],
            });
        }
        let mut operands = vec![
            region(&self.x.name, a_offset),
            region(&self.packed.name, panel_start + l0.clone() * hp.clone()),
        ];
        if let Some(scales) = self.scales {
            // Panel `p`'s scales, from the group holding `l0` (a multiple of the group).
            let groups = quant_groups(self.depth);
            let group = l0.binary(BinOp::FloorDiv, PrimExpr::index(QUANT_GROUP));
            let offset = (p.clone() * PrimExpr::index(groups) + group) * hp.clone();
            operands.push(region(&scales.name, offset));
        }
        operands.push(region(&self.out.name, e0 * h.clone() + first_col));
        Stmt::Microkernel(MicrokernelCall {
            kernel: kernel.to_string(),
            operands,
            scalars: vec![kc, PrimExpr::index(self.depth), h, rows, cols, accumulate],
        })
    }
}

/// `body` once per block of `ep` of the `rows` rows, in order: `eb` the block, `e0` its
/// first row and `e_rows` its rows (`ep`, or fewer in the last).
fn row_blocks(rows: &PrimExpr, ep: i64, body: Stmt) -> Stmt {
    let per_rows = let_in("e0", index("eb") * PrimExpr::index(ep), {
        let e_rows = min(PrimExpr::index(ep), rows.clone() - index("e0"));
        let_in("e_rows", e_rows, body)
    });
    for_loop("eb", ceil_div(rows.clone(), ep), ForKind::Serial, per_rows)
}

/// The least common multiple of two positive numbers.
fn lcm(a: i64, b: i64) -> i64 {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    a / x * b
}
