//! Fused epilogues applied per output tile: after the last reduction block of a tile,
//! the epilogue of a fused function (see [`oxrelax_dsl::fuse`]) rewrites the tile in
//! place while it is still in cache, vectorized along the columns. A windowed epilogue
//! (RoPE, whose lanes read their partners) computes each row of the tile into a local
//! buffer before storing it, a window at a time and each window in the parts over which
//! its column arithmetic is affine (RoPE: the two halves of a head); its tiles hold
//! whole windows.

use crate::tir_build::{for_loop, index, let_in};
use crate::window_lanes::WindowPart;
use oxrelax_dsl::fuse::Epilogue;
use oxrelax_dsl::tir::{BinOp, Buffer, ForKind, PrimExpr, Stmt};
use oxrelax_dsl::{DType, SymExpr};

/// The variables of a tile's epilogue: the row within the tile, the flat row, the first
/// column and the column within the tile.
const ROW: &str = "er";
const FLAT_ROW: &str = "e_row";
const FIRST_COLUMN: &str = "e_col";
const COLUMN: &str = "ec";
/// The local row of a windowed epilogue.
const STAGE: &str = "e_stage";
/// A windowed epilogue's window within the tile.
const WINDOW: &str = "ew";
/// The lane within a part of a window.
const LANE: &str = "ej";
/// The column as a windowed epilogue's value reads it before
/// [`WindowPart::specialize`] resolves it.
const WINDOW_COLUMN: &str = "e_window_column";
/// The fewest lanes a part of a window may have (one f32x4 vector).
const MIN_PART: i64 = 4;

/// `epilogue` over the tile of `rows` rows from flat row `first_row` and `cols` columns
/// (at most `width`) from column `first_col`, of an output whose dims are `batch` then
/// the columns.
pub(crate) fn epilogue_tile(
    epilogue: &Epilogue,
    batch: &[SymExpr],
    (rows, first_row): (PrimExpr, PrimExpr),
    (cols, first_col, width): (PrimExpr, PrimExpr, i64),
) -> Stmt {
    let prefix = unflatten(index(FLAT_ROW), batch);
    let columns = if epilogue.window == 1 {
        let indices = column_indices(&prefix, index(FIRST_COLUMN) + index(COLUMN));
        let value = epilogue.nest.value_at(&indices);
        vectorized(COLUMN, cols, &epilogue.nest.buffer, indices, value)
    } else {
        staged(epilogue, &prefix, cols, width)
    };
    let row = let_in(FLAT_ROW, first_row + index(ROW), columns);
    let_in(
        FIRST_COLUMN,
        first_col,
        for_loop(ROW, rows, ForKind::Serial, row),
    )
}

/// A windowed epilogue's row: computed into a local buffer (lanes read their partners),
/// then stored. Computed part by part of each window where that makes every lane's
/// column arithmetic affine ([`by_parts`]), else lane by lane through it.
fn staged(epilogue: &Epilogue, prefix: &[PrimExpr], cols: PrimExpr, width: i64) -> Stmt {
    let nest = &epilogue.nest;
    let indices = column_indices(prefix, index(FIRST_COLUMN) + index(COLUMN));
    let compute = by_parts(epilogue, prefix, &cols).unwrap_or_else(|| {
        let value = nest.value_at(&indices);
        vectorized(COLUMN, cols.clone(), STAGE, vec![index(COLUMN)], value)
    });
    let staged = PrimExpr::Load {
        buffer: STAGE.to_string(),
        dtype: DType::F32,
        indices: vec![index(COLUMN)],
    };
    let copy = vectorized(COLUMN, cols, &nest.buffer, indices, staged);
    Stmt::Allocate {
        buffer: Buffer::new(STAGE, DType::F32, vec![width.into()]),
        body: Box::new(Stmt::Seq(vec![compute, copy])),
    }
}

/// The windows of the row one after another, each in the fewest equal parts (of at least
/// [`MIN_PART`] lanes) over which the epilogue's column arithmetic is affine in the lane
/// (RoPE: the two halves of a head); `None` if no split makes it so.
fn by_parts(epilogue: &Epilogue, prefix: &[PrimExpr], cols: &PrimExpr) -> Option<Stmt> {
    let window = epilogue.window;
    let value = epilogue
        .nest
        .value_at(&column_indices(prefix, index(WINDOW_COLUMN)));
    let start = index(WINDOW) * PrimExpr::index(window);
    let splits = (0..).map(|k| 1 << k).take_while(|p| window / p >= MIN_PART);
    splits.filter(|p| window % p == 0).find_map(|parts| {
        let lanes = window / parts;
        let loops = (0..parts).map(|p| {
            let part = WindowPart {
                column: WINDOW_COLUMN,
                window,
                base: index(FIRST_COLUMN) + start.clone(),
                offset: p * lanes,
                lanes,
                lane: LANE,
            };
            let first = match p * lanes {
                0 => start.clone(),
                offset => start.clone() + PrimExpr::index(offset),
            };
            let at = first + index(LANE);
            let value = part.specialize(&value)?;
            Some(vectorized(
                LANE,
                PrimExpr::index(lanes),
                STAGE,
                vec![at],
                value,
            ))
        });
        let loops = loops.collect::<Option<Vec<_>>>()?;
        let windows = cols
            .clone()
            .binary(BinOp::FloorDiv, PrimExpr::index(window));
        Some(for_loop(WINDOW, windows, ForKind::Serial, Stmt::Seq(loops)))
    })
}

/// `prefix` then `column`.
fn column_indices(prefix: &[PrimExpr], column: PrimExpr) -> Vec<PrimExpr> {
    let mut indices = prefix.to_vec();
    indices.push(column);
    indices
}

/// `for var in vectorized(extent) { buffer[indices] = value }`.
fn vectorized(
    var: &str,
    extent: PrimExpr,
    buffer: &str,
    indices: Vec<PrimExpr>,
    value: PrimExpr,
) -> Stmt {
    let store = Stmt::Store {
        buffer: buffer.to_string(),
        indices,
        value,
    };
    for_loop(var, extent, ForKind::Vectorized, store)
}

/// The indices into `dims` (row-major) of flat position `flat`: a dim of size 1 is
/// index 0, the outermost other dim needs no modulo.
fn unflatten(flat: PrimExpr, dims: &[SymExpr]) -> Vec<PrimExpr> {
    let outermost = dims.iter().position(|d| d.as_const() != Some(1));
    let mut inner = SymExpr::int(1);
    let mut indices = vec![PrimExpr::index(0); dims.len()];
    for (axis, dim) in dims.iter().enumerate().rev() {
        if dim.as_const() == Some(1) {
            continue;
        }
        let mut i = flat.clone();
        if inner.as_const() != Some(1) {
            i = i.binary(BinOp::FloorDiv, PrimExpr::from(&inner));
        }
        if Some(axis) != outermost {
            i = i.binary(BinOp::FloorMod, PrimExpr::from(dim));
        }
        indices[axis] = i;
        inner = &inner * dim;
    }
    indices
}
