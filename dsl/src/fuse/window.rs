//! Windowed epilogues: a consumer reading its operand across a window of the last axis
//! (RoPE's partner lanes within a head), fused into the matmul producing that operand
//! before a reshape split the axis into `[.., heads, window]`.

use super::{
    assemble, fresh, load, names_in, pattern, rename_consumer, split_epilogue, within_cap,
    ElementwiseNest, Epilogue,
};
use crate::legalize::OpPattern;
use crate::tir::{BinOp, Buffer, PrimExpr, PrimFunc, TVar};
use crate::DType;

/// `consumer` (one loop nest, one output) fused into the matmul `producer` as a windowed
/// epilogue, where the consumer's input number `operand` is the producer's output
/// `[batch.., H]` reshaped to `[batch.., H / w, w]` and the consumer writes that shape,
/// reading the operand only within the window `w` of the element it writes. The fused
/// function writes the producer's output shape (the caller reshapes its result); its
/// inputs are the producer's, then the consumer's other inputs. `None` when the pair does
/// not fit, the producer already has a windowed epilogue, or the pair would compute more
/// than [`MAX_FUSED_OPS`](super::MAX_FUSED_OPS) ops.
pub fn fuse_windowed(producer: &PrimFunc, consumer: &PrimFunc, operand: usize) -> Option<PrimFunc> {
    let one_output = producer.num_outputs == 1 && consumer.num_outputs == 1;
    let fits = one_output && within_cap(producer, consumer);
    if pattern(producer) != Some(OpPattern::OutEwiseFusible) || !fits {
        return None;
    }
    let out = producer.outputs()[0].clone();
    let read = consumer.inputs().get(operand)?;
    let written = &consumer.outputs()[0];
    let window = split_last_axis(&out, read)?;
    if written.shape != read.shape || written.dtype != out.dtype || written.strides.is_some() {
        return None;
    }
    let nest = ElementwiseNest::parse(&consumer.body)?;
    if nest.buffer != written.name || !nest.reads_within_window(&read.name, window) {
        return None;
    }
    let (main, produced) = match split_epilogue(producer) {
        Some((_, epilogue)) if epilogue.window > 1 => return None,
        Some((main, epilogue)) => (main.clone(), Some(epilogue.nest)),
        None => (producer.body.clone(), None),
    };
    let mut taken = names_in(producer);
    let (extra, nest) = rename_consumer(consumer, operand, nest, &mut taken);
    let column = TVar::new(&fresh("c", &mut taken), DType::I64);
    let merged = merge_window(&nest, &column, window);
    let value = merged.replace_reads(&read.name, &|indices: &[PrimExpr]| {
        let mut at = indices[..indices.len() - 2].to_vec();
        let (head, lane) = (&indices[indices.len() - 2], &indices[indices.len() - 1]);
        at.push(head.clone() * PrimExpr::index(window) + lane.clone());
        match &produced {
            Some(nest) => nest.value_at(&at),
            None => load(&out, &at),
        }
    });
    let epilogue = Epilogue {
        nest: ElementwiseNest {
            buffer: out.name.clone(),
            extents: out.shape.iter().map(PrimExpr::from).collect(),
            value,
            vars: merged.vars,
        },
        window,
    };
    Some(assemble(
        producer,
        consumer,
        producer,
        extra,
        (Some(main), epilogue),
        &mut taken,
    ))
}

/// The window `w` when `split` is `out` (`[batch.., H]`, dense) with its last axis split
/// into `[H / w, w]`, `w > 1`.
fn split_last_axis(out: &Buffer, split: &Buffer) -> Option<i64> {
    let (features, batch) = out.shape.split_last()?;
    let [heads, window] = split.shape.get(batch.len()..)? else {
        return None;
    };
    let (features, heads, window) = (features.as_const()?, heads.as_const()?, window.as_const()?);
    let fits = split.shape[..batch.len()] == *batch
        && heads * window == features
        && window > 1
        && split.dtype == out.dtype
        && out.strides.is_none()
        && split.strides.is_none();
    fits.then_some(window)
}

/// `nest` over `[batch.., heads, window]` as a nest over `[batch.., heads * window]`: its
/// last two loop variables become `column / window` and `column % window` (the extents
/// are left for the caller).
fn merge_window(nest: &ElementwiseNest, column: &TVar, window: i64) -> ElementwiseNest {
    let k = nest.vars.len() - 2;
    let c = PrimExpr::Var(column.clone());
    let w = PrimExpr::index(window);
    let value = nest
        .value
        .substitute(
            &nest.vars[k].name,
            &c.clone().binary(BinOp::FloorDiv, w.clone()),
        )
        .substitute(
            &nest.vars[k + 1].name,
            &c.binary(BinOp::FloorMod, w.clone()),
        );
    let mut vars = nest.vars[..k].to_vec();
    vars.push(column.clone());
    ElementwiseNest {
        vars,
        extents: Vec::new(),
        buffer: nest.buffer.clone(),
        value,
    }
}
