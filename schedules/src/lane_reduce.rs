//! Reductions across vector lanes (TVM's `rfactor`): a register reduction
//! `acc[0] = acc[0] OP f(k)` over `k < K` (OP `+`, `max` or `min`, on f32), whose reads
//! along `k` are contiguous, keeps [`PARTIALS`] partial results in a local buffer, updated
//! by a vectorized loop over `PARTIALS` consecutive `k`:
//!
//! ```text
//! alloc acc_part[PARTIALS] {
//!   for k_i in vectorized(PARTIALS) { acc_part[k_i] = identity }
//!   for k_o in serial(K / PARTIALS) {
//!     for k_v in vectorized(PARTIALS) { acc_part[k_v] = acc_part[k_v] OP f(k_o * PARTIALS + k_v) }
//!   }
//!   for k_c in serial(PARTIALS) { acc[0] = acc[0] OP acc_part[k_c] }
//!   for k_t in serial(K % PARTIALS) { acc[0] = acc[0] OP f(K / PARTIALS * PARTIALS + k_t) }  (when K % PARTIALS may be nonzero)
//! }
//! ```
//!
//! The serial chain of one accumulator (one element per FP-add latency) becomes
//! `PARTIALS / LANES` independent vector chains. Sums are reassociated (the usual float
//! rounding difference); max and min are exact.

use crate::primitives::simplified;
use oxrelax_dsl::tir::{BinOp, Buffer, ForKind, PrimExpr, PrimFunc, Stmt, TVar};
use oxrelax_dsl::{DType, SymExpr};

/// Partial results per reduction: 4 vectors of 4 f32 lanes.
pub const PARTIALS: i64 = 16;

/// Applies the rewrite to every matching reduction loop of `func`.
pub fn reduce_across_lanes(func: &PrimFunc) -> PrimFunc {
    let dims = func.dims.clone();
    PrimFunc {
        body: rewrite(&func.body, &dims),
        ..func.clone()
    }
}

fn rewrite(stmt: &Stmt, dims: &[oxrelax_dsl::SymVar]) -> Stmt {
    match LaneReduction::match_loop(stmt) {
        Some(reduction) if !too_short(reduction.extent) => reduction.split(dims),
        _ => stmt.map_children(&mut |c| rewrite(c, dims)),
    }
}

/// A reduction too short to fill the partial results once.
fn too_short(extent: &PrimExpr) -> bool {
    matches!(extent, PrimExpr::Int(k, _) if *k < PARTIALS)
}

/// `for var in serial(extent) { acc[0] = acc[0] op term }`.
struct LaneReduction<'a> {
    var: &'a TVar,
    extent: &'a PrimExpr,
    acc: &'a str,
    op: BinOp,
    term: &'a PrimExpr,
}

impl<'a> LaneReduction<'a> {
    fn match_loop(stmt: &'a Stmt) -> Option<LaneReduction<'a>> {
        let Stmt::For {
            var,
            kind: ForKind::Serial,
            extent,
            body,
        } = stmt
        else {
            return None;
        };
        let Stmt::Store {
            buffer,
            indices,
            value: PrimExpr::Binary(op, lhs, rhs),
        } = body.as_ref()
        else {
            return None;
        };
        if !matches!(op, BinOp::Add | BinOp::Max | BinOp::Min)
            || value_dtype(lhs) != Some(DType::F32)
            || indices.as_slice() != [PrimExpr::index(0)]
        {
            return None;
        }
        let is_acc = |e: &PrimExpr| matches!(e, PrimExpr::Load { buffer: b, indices: i, .. } if b == buffer && i == indices);
        let term = match (is_acc(lhs), is_acc(rhs)) {
            (true, false) => rhs.as_ref(),
            (false, true) => lhs.as_ref(),
            _ => return None,
        };
        let reads_acc =
            term.any(&mut |e| matches!(e, PrimExpr::Load { buffer: b, .. } if b == buffer));
        if reads_acc || !reads_contiguously(term, &var.name) {
            return None;
        }
        Some(LaneReduction {
            var,
            extent,
            acc: buffer,
            op: *op,
            term,
        })
    }

    /// The rewritten loop (see the module documentation).
    fn split(&self, dims: &[oxrelax_dsl::SymVar]) -> Stmt {
        let k = &self.var.name;
        let part = format!("{}_part", self.acc);
        let [init, outer, lane, combine, tail] =
            ["i", "o", "v", "c", "t"].map(|s| TVar::new(&format!("{k}_{s}"), DType::I64));
        let width = PrimExpr::index(PARTIALS);
        let whole = simplified(
            self.extent.clone().binary(BinOp::FloorDiv, width.clone()),
            dims,
        );
        let covered = simplified(whole.clone().binary(BinOp::Mul, width.clone()), dims);
        let rest = simplified(
            self.extent.clone().binary(BinOp::Sub, covered.clone()),
            dims,
        );
        let at = |buffer: &str, var: &TVar| PrimExpr::Load {
            buffer: buffer.to_string(),
            dtype: DType::F32,
            indices: vec![PrimExpr::Var(var.clone())],
        };
        let acc0 = PrimExpr::Load {
            buffer: self.acc.to_string(),
            dtype: DType::F32,
            indices: vec![PrimExpr::index(0)],
        };
        let term_at = |k_value: PrimExpr| self.term.substitute(k, &k_value);
        let lane_k = PrimExpr::Var(outer.clone())
            .binary(BinOp::Mul, width.clone())
            .binary(BinOp::Add, PrimExpr::Var(lane.clone()));
        let tail_k = covered.binary(BinOp::Add, PrimExpr::Var(tail.clone()));
        let update_part = store(
            &part,
            &lane,
            at(&part, &lane).binary(self.op, term_at(lane_k)),
        );
        let mut body = vec![
            for_loop(
                &init,
                ForKind::Vectorized,
                width.clone(),
                store(&part, &init, identity(self.op)),
            ),
            for_loop(
                &outer,
                ForKind::Serial,
                whole,
                for_loop(&lane, ForKind::Vectorized, width.clone(), update_part),
            ),
            for_loop(
                &combine,
                ForKind::Serial,
                width,
                store_acc(self.acc, acc0.clone().binary(self.op, at(&part, &combine))),
            ),
        ];
        if rest != PrimExpr::index(0) {
            let update_acc = store_acc(self.acc, acc0.binary(self.op, term_at(tail_k)));
            body.push(for_loop(&tail, ForKind::Serial, rest, update_acc));
        }
        Stmt::Allocate {
            buffer: Buffer::new(&part, DType::F32, vec![SymExpr::int(PARTIALS)]),
            body: Box::new(Stmt::Seq(body)),
        }
    }
}

/// The dtype of a load's value (the accumulator's), if `expr` is a load.
fn value_dtype(expr: &PrimExpr) -> Option<DType> {
    match expr {
        PrimExpr::Load { dtype, .. } => Some(*dtype),
        _ => None,
    }
}

/// Whether every load of `term` that depends on `var` has `var` as its last index and
/// nowhere else (consecutive `var` read consecutive elements).
fn reads_contiguously(term: &PrimExpr, var: &str) -> bool {
    !term.any(&mut |e| match e {
        PrimExpr::Load { indices, .. } if indices.iter().any(|i| i.uses_var(var)) => {
            match indices.split_last() {
                Some((PrimExpr::Var(v), rest)) => {
                    v.name != var || rest.iter().any(|i| i.uses_var(var))
                }
                _ => true,
            }
        }
        _ => false,
    })
}

/// The value `op` leaves unchanged.
fn identity(op: BinOp) -> PrimExpr {
    let value = match op {
        BinOp::Max => f64::NEG_INFINITY,
        BinOp::Min => f64::INFINITY,
        _ => 0.0,
    };
    PrimExpr::f32(value)
}

fn store(buffer: &str, var: &TVar, value: PrimExpr) -> Stmt {
    Stmt::Store {
        buffer: buffer.to_string(),
        indices: vec![PrimExpr::Var(var.clone())],
        value,
    }
}

fn store_acc(acc: &str, value: PrimExpr) -> Stmt {
    Stmt::Store {
        buffer: acc.to_string(),
        indices: vec![PrimExpr::index(0)],
        value,
    }
}

fn for_loop(var: &TVar, kind: ForKind, extent: PrimExpr, body: Stmt) -> Stmt {
    Stmt::For {
        var: var.clone(),
        kind,
        extent,
        body: Box::new(body),
    }
}
