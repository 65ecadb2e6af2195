//! Fusion of element-wise work into the function producing its input, at the TIR level
//! (the graph pass `FuseOps` decides where; this builds the fused function).
//!
//! - An element-wise producer is inlined: the consumer reads the producer's value instead
//!   of its output buffer (`silu` into `multiply`).
//! - An `out_ewise_fusible` producer (a matmul) gets the consumer as its epilogue: the
//!   fused body is `seq { main; epilogue }`, where `main` is the producer's computation
//!   writing the output and the epilogue an [`ElementwiseNest`] rewriting the output in
//!   place (`packed_matmul` then `add` of the residual). Schedule rules apply the epilogue
//!   per output tile while it is still in cache.
//!
//! - A consumer that reads its operand across a window of the last axis (RoPE: each lane
//!   reads its partner in the same head), behind a reshape that splits that axis into
//!   `[.., heads, window]`, becomes a windowed epilogue of a matmul ([`fuse_windowed`]):
//!   the epilogue computes a whole row into a local buffer before storing it, and
//!   records the window in [`EPILOGUE_WINDOW_ATTR`] so schedules apply it to tiles of
//!   whole windows.
//!
//! A fused function keeps the anchor's op identity (`op`: the producer's for an epilogue,
//! the consumer's when inlining) and lists every op it computes, in order, in
//! [`FUSED_ATTR`]. A fusion that would compute more than [`MAX_FUSED_OPS`] ops is
//! refused.

mod nest;
#[cfg(test)]
mod tests;
mod window;

pub use nest::ElementwiseNest;
pub use window::fuse_windowed;

use crate::legalize::{OpPattern, OP_ATTR, OP_PATTERN_ATTR};
use crate::tir::{Buffer, PrimExpr, PrimFunc, Stmt, TVar};
use crate::AttrValue;
use std::collections::{BTreeMap, BTreeSet};

/// The attribute listing the ops a fused function computes, in order (`"packed_matmul,add"`).
pub const FUSED_ATTR: &str = "fused";

/// The attribute of a function with a windowed epilogue: the width of the last-axis
/// window the epilogue reads whole (absent: 1, every element alone).
pub const EPILOGUE_WINDOW_ATTR: &str = "epilogue_window";

/// The most ops one fused function computes (as TVM's `FuseOps` caps a group). Each
/// fusion rebuilds the fused function and inlining nests the producer's value in the
/// consumer's, so without a cap a chain of `n` element-wise ops would take time
/// quadratic in `n` and build an expression `n` deep.
pub const MAX_FUSED_OPS: usize = 256;

/// Whether fusing `consumer` into `producer` stays within [`MAX_FUSED_OPS`].
fn within_cap(producer: &PrimFunc, consumer: &PrimFunc) -> bool {
    fused_ops(producer).len() + fused_ops(consumer).len() <= MAX_FUSED_OPS
}

/// The fused epilogue of an `out_ewise_fusible` function.
#[derive(Clone, Debug, PartialEq)]
pub struct Epilogue {
    /// The element-wise nest rewriting the output.
    pub nest: ElementwiseNest,
    /// The aligned window of the last axis each element's value may read (1: only
    /// itself); a schedule applies the epilogue to tiles of whole windows.
    pub window: i64,
}

impl Epilogue {
    /// The epilogue as a statement of a function whose names are `taken`: the nest
    /// itself, or staged through a row buffer when it reads across a window.
    fn to_stmt(&self, out: &Buffer, taken: &mut BTreeSet<String>) -> Stmt {
        if self.window == 1 {
            return self.nest.to_stmt();
        }
        let row = out.shape.last().cloned().unwrap_or_else(|| 1.into());
        let stage = Buffer::new(&fresh("stage", taken), out.dtype, vec![row]);
        self.nest.to_staged_stmt(&stage)
    }
}

/// The pattern attribute of `func`, if it has one.
pub fn pattern(func: &PrimFunc) -> Option<OpPattern> {
    match func.attrs.get(OP_PATTERN_ATTR) {
        Some(AttrValue::Str(name)) => OpPattern::from_name(name),
        _ => None,
    }
}

/// The ops `func` computes, in order: its [`FUSED_ATTR`] list, or its own op.
pub fn fused_ops(func: &PrimFunc) -> Vec<String> {
    let attr = |key: &str| match func.attrs.get(key) {
        Some(AttrValue::Str(s)) => Some(s.clone()),
        _ => None,
    };
    attr(FUSED_ATTR)
        .or_else(|| attr(OP_ATTR))
        .map(|s| s.split(',').map(str::to_string).collect())
        .unwrap_or_default()
}

/// The main computation and the epilogue of an `out_ewise_fusible` function with a fused
/// epilogue; `None` for any other function.
pub fn split_epilogue(func: &PrimFunc) -> Option<(&Stmt, Epilogue)> {
    if pattern(func) != Some(OpPattern::OutEwiseFusible) || !func.attrs.contains_key(FUSED_ATTR) {
        return None;
    }
    let window = match func.attrs.get(EPILOGUE_WINDOW_ATTR) {
        None => 1,
        Some(AttrValue::Int(w)) if *w > 1 => *w,
        Some(_) => return None,
    };
    let Stmt::Seq(items) = &func.body else {
        return None;
    };
    let [main, epilogue] = items.as_slice() else {
        return None;
    };
    let nest = match window {
        1 => ElementwiseNest::parse(epilogue)?,
        _ => ElementwiseNest::parse_staged(epilogue)?,
    };
    Some((main, Epilogue { nest, window }))
}

/// `consumer` (element-wise, one output) fused with `producer`, whose only output is
/// `consumer`'s input number `operand`. The fused function's inputs are the producer's,
/// then the consumer's other inputs; its output is the producer's output buffer. `None`
/// when the pair cannot fuse: the consumer reads the operand at other elements than the
/// one it writes, shapes or dtypes differ, the producer is not element-wise or
/// `out_ewise_fusible`, or the pair would compute more than [`MAX_FUSED_OPS`] ops.
pub fn fuse_elementwise(
    producer: &PrimFunc,
    consumer: &PrimFunc,
    operand: usize,
) -> Option<PrimFunc> {
    let ewise = |p| matches!(p, Some(OpPattern::Elemwise | OpPattern::Broadcast));
    let one_output = producer.num_outputs == 1 && consumer.num_outputs == 1;
    if !ewise(pattern(consumer)) || !one_output || !within_cap(producer, consumer) {
        return None;
    }
    let out = producer.outputs()[0].clone();
    let read = consumer.inputs().get(operand)?;
    let written = &consumer.outputs()[0];
    let same = |b: &Buffer| b.shape == out.shape && b.dtype == out.dtype && b.strides.is_none();
    if !same(read) || !same(written) || out.strides.is_some() {
        return None;
    }
    let nest = ElementwiseNest::parse(&consumer.body)?;
    if nest.buffer != written.name || !nest.reads_own_element(&read.name) {
        return None;
    }
    let mut taken = names_in(producer);
    let (extra, nest) = rename_consumer(consumer, operand, nest, &mut taken);
    let (main, value, window, anchor) = match pattern(producer) {
        Some(OpPattern::OutEwiseFusible) => {
            let (main, value, window) = match split_epilogue(producer) {
                Some((main, epilogue)) => {
                    let with = |i: &[PrimExpr]| epilogue.nest.value_at(i);
                    let value = nest.replace_reads(&read.name, &with);
                    (main.clone(), value, epilogue.window)
                }
                None => {
                    let with = |i: &[PrimExpr]| load(&out, i);
                    (
                        producer.body.clone(),
                        nest.replace_reads(&read.name, &with),
                        1,
                    )
                }
            };
            (Some(main), value, window, producer)
        }
        p if ewise(p) => {
            let inner = ElementwiseNest::parse(&producer.body)?;
            let with = |i: &[PrimExpr]| inner.value_at(i);
            (None, nest.replace_reads(&read.name, &with), 1, consumer)
        }
        _ => return None,
    };
    let epilogue = Epilogue {
        nest: ElementwiseNest {
            buffer: out.name.clone(),
            value,
            ..nest
        },
        window,
    };
    let mut fused = assemble(
        producer,
        consumer,
        anchor,
        extra,
        (main, epilogue),
        &mut taken,
    );
    if anchor == consumer && pattern(producer) == Some(OpPattern::Broadcast) {
        let broadcast = AttrValue::Str(OpPattern::Broadcast.name().to_string());
        fused.attrs.insert(OP_PATTERN_ATTR.to_string(), broadcast);
    }
    Some(fused)
}

/// The function fusing `consumer` into `producer`: the producer's inputs, then `extra`
/// (the consumer's other inputs), then the producer's output; the body is `main` (if
/// any) followed by `epilogue`; the dims of both; the attributes of `anchor`, listing
/// the ops of both and the epilogue's window.
fn assemble(
    producer: &PrimFunc,
    consumer: &PrimFunc,
    anchor: &PrimFunc,
    extra: Vec<Buffer>,
    (main, epilogue): (Option<Stmt>, Epilogue),
    taken: &mut BTreeSet<String>,
) -> PrimFunc {
    let out = producer.outputs()[0].clone();
    let epilogue_stmt = epilogue.to_stmt(&out, taken);
    let mut params = producer.inputs().to_vec();
    params.extend(extra);
    params.push(out);
    let mut dims = producer.dims.clone();
    dims.extend(consumer.dims.iter().cloned());
    dims.sort_by(|a, b| a.name().cmp(b.name()));
    dims.dedup();
    let mut attrs = anchor.attrs.clone();
    let mut ops = fused_ops(producer);
    ops.extend(fused_ops(consumer));
    attrs.insert(FUSED_ATTR.to_string(), AttrValue::Str(ops.join(",")));
    if epilogue.window > 1 {
        let window = AttrValue::Int(epilogue.window);
        attrs.insert(EPILOGUE_WINDOW_ATTR.to_string(), window);
    }
    PrimFunc {
        params,
        num_outputs: 1,
        dims,
        body: match main {
            Some(main) => Stmt::Seq(vec![main, epilogue_stmt]),
            None => epilogue_stmt,
        },
        attrs,
    }
}

/// The consumer's inputs other than `operand` and its nest, with buffers and loop
/// variables renamed (all at once) away from `taken` and the operand's name.
fn rename_consumer(
    consumer: &PrimFunc,
    operand: usize,
    nest: ElementwiseNest,
    taken: &mut BTreeSet<String>,
) -> (Vec<Buffer>, ElementwiseNest) {
    taken.insert(consumer.inputs()[operand].name.clone());
    let mut buffers = BTreeMap::new();
    let mut extra = Vec::new();
    for (index, buffer) in consumer.inputs().iter().enumerate() {
        if index != operand {
            let name = fresh(&buffer.name, taken);
            buffers.insert(buffer.name.clone(), name.clone());
            extra.push(Buffer {
                name,
                ..buffer.clone()
            });
        }
    }
    let vars: Vec<TVar> = nest
        .vars
        .iter()
        .map(|v| TVar::new(&fresh(&v.name, taken), v.dtype))
        .collect();
    let renamed_var: BTreeMap<&str, &TVar> = nest
        .vars
        .iter()
        .map(|v| v.name.as_str())
        .zip(&vars)
        .collect();
    let value = nest.value.rewrite(&mut |e| match e {
        PrimExpr::Var(v) => match renamed_var.get(v.name.as_str()) {
            Some(new) => PrimExpr::Var((*new).clone()),
            None => PrimExpr::Var(v),
        },
        PrimExpr::Load {
            buffer,
            dtype,
            indices,
        } => PrimExpr::Load {
            buffer: buffers.get(&buffer).cloned().unwrap_or(buffer),
            dtype,
            indices,
        },
        other => other,
    });
    (
        extra,
        ElementwiseNest {
            vars,
            value,
            ..nest
        },
    )
}

/// A free name based on `name`, recorded in `taken`.
fn fresh(name: &str, taken: &mut BTreeSet<String>) -> String {
    let chosen = crate::names::fresh_name(name, |n| taken.contains(n));
    taken.insert(chosen.clone());
    chosen
}

/// Every buffer, dim and variable name of `func`.
fn names_in(func: &PrimFunc) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = func.params.iter().map(|b| b.name.clone()).collect();
    names.extend(func.dims.iter().map(|d| d.name().to_string()));
    func.body.any_stmt(&mut |s| {
        match s {
            Stmt::For { var, .. } | Stmt::Let { var, .. } => {
                names.insert(var.name.clone());
            }
            Stmt::Allocate { buffer, .. } => {
                names.insert(buffer.name.clone());
            }
            _ => {}
        }
        false
    });
    names
}

/// `buffer[indices]`.
fn load(buffer: &Buffer, indices: &[PrimExpr]) -> PrimExpr {
    load_named(&buffer.name, buffer.dtype, indices)
}

fn load_named(name: &str, dtype: crate::DType, indices: &[PrimExpr]) -> PrimExpr {
    PrimExpr::Load {
        buffer: name.to_string(),
        dtype,
        indices: indices.to_vec(),
    }
}
