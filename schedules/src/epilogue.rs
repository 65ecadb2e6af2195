//! Fused epilogues applied per output tile: after the last reduction block of a tile,
//! the epilogue of a fused function (see [`oxrelax_dsl::fuse`]) rewrites the tile in
//! place while it is still in cache, vectorized along the columns. A windowed epilogue
//! (RoPE, whose lanes read their partners) computes each row of the tile into a local
//! buffer before storing it; its tiles hold whole windows.

use crate::tir_build::{for_loop, index, let_in};
use oxrelax_dsl::fuse::Epilogue;
use oxrelax_dsl::tir::{BinOp, Buffer, ForKind, PrimExpr, Stmt};
use oxrelax_dsl::SymExpr;

/// The variables of a tile's epilogue: the row within the tile, the flat row, the first
/// column and the column within the tile.
const ROW: &str = "er";
const FLAT_ROW: &str = "e_row";
const FIRST_COLUMN: &str = "e_col";
const COLUMN: &str = "ec";
/// The local row of a windowed epilogue.
const STAGE: &str = "e_stage";

/// `epilogue` over the tile of `rows` rows from flat row `first_row` and `cols` columns
/// (at most `width`) from column `first_col`, of an output whose dims are `batch` then
/// the columns.
pub(crate) fn epilogue_tile(
    epilogue: &Epilogue,
    batch: &[SymExpr],
    (rows, first_row): (PrimExpr, PrimExpr),
    (cols, first_col, width): (PrimExpr, PrimExpr, i64),
) -> Stmt {
    let nest = &epilogue.nest;
    let mut indices = unflatten(index(FLAT_ROW), batch);
    indices.push(index(FIRST_COLUMN) + index(COLUMN));
    let value = nest.value_at(&indices);
    let store = |buffer: &str, indices: Vec<PrimExpr>, value: PrimExpr| {
        let store = Stmt::Store {
            buffer: buffer.to_string(),
            indices,
            value,
        };
        for_loop(COLUMN, cols.clone(), ForKind::Vectorized, store)
    };
    let columns = if epilogue.window == 1 {
        store(&nest.buffer, indices, value)
    } else {
        let stage = Buffer::new(STAGE, oxrelax_dsl::DataType::F32, vec![width.into()]);
        let lane = vec![index(COLUMN)];
        let staged = PrimExpr::Load {
            buffer: STAGE.to_string(),
            dtype: stage.dtype,
            indices: lane.clone(),
        };
        let compute = store(STAGE, lane, value);
        let copy = store(&nest.buffer, indices, staged);
        Stmt::Allocate {
            buffer: stage,
            body: Box::new(Stmt::Seq(vec![compute, copy])),
        }
    };
    let row = let_in(FLAT_ROW, first_row + index(ROW), columns);
    let_in(
        FIRST_COLUMN,
        first_col,
        for_loop(ROW, rows, ForKind::Serial, row),
    )
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
