//! Integer mode: Conv2d, ElementWiseAdd and ElementWiseMultiply on fixed-point tensors
//! with integer arithmetic only, as a fixed-point NPU runs them (an op whose input or
//! output is not a per-tensor fixed-point tensor runs in f32 instead).
//!
//! - Conv2d: each block of the reduction axis accumulates `(q_in + offset_in) * q_w` in
//!   int32 (an overflow is an error); the block's sum times its integer LPBQ block scale
//!   goes into the channel's int64 accumulator (one block of scale 1 for per-tensor or
//!   per-channel weights, which must be symmetric), which starts at the bias in units of
//!   `scale_in * scale_w[c]`; one requantization by `scale_in * scale_w[c] / scale_out`.
//! - ElementWiseAdd: both operands, shifted left by [`ADD_LEFT_SHIFT`] bits, are rescaled
//!   to the common scale `2 * max(scale_a, scale_b)`, added, and requantized.
//! - ElementWiseMultiply: the product of `(q + offset)`s in int64, requantized by
//!   `scale_a * scale_b / scale_out`.
//!
//! Requantization is [`multiply_by_quantized_multiplier`], then the output offset is
//! subtracted and the result saturated to the output type's range.

use super::error::SimError;
use super::fixed::{multiply_by_quantized_multiplier, quantize_multiplier, saturate};
use super::node::{broadcast, Broadcast, NodeCtx, Operand};
use super::ops::conv_shape;
use super::values::{Array, Encoding, Scales};
use crate::qnn::net::ScaleOffset;

/// Extra bits the addends get before rescaling, so the rescale keeps their precision.
pub const ADD_LEFT_SHIFT: u32 = 20;

/// An op's integer implementation: `None` when its tensors are not all fixed-point.
pub(crate) type IntegerFn = fn(&NodeCtx) -> Result<Option<Array>, SimError>;

/// The ops Integer mode runs in integers.
const INTEGER_OPS: &[(&str, IntegerFn)] = &[
    ("Conv2d", conv2d),
    ("ElementWiseAdd", add),
    ("ElementWiseMultiply", multiply),
];

/// The integer implementation of `op_type`, if it has one.
pub(crate) fn integer_op(op_type: &str) -> Option<IntegerFn> {
    INTEGER_OPS
        .iter()
        .find(|(name, _)| *name == op_type)
        .map(|&(_, f)| f)
}

/// An activation's `q + offset` values and its scale, if per-tensor fixed-point.
fn centered(operand: &Operand) -> Option<(Vec<i64>, f64)> {
    let so = operand.encoding.per_tensor()?;
    let ints = operand.encoding.quantize(&operand.array.data)?;
    let offset = so.offset as i64;
    Some((ints.iter().map(|q| q + offset).collect(), so.scale as f64))
}

/// An output's requantization: `round(acc * multiplier) - offset`, saturated.
struct Requantizer<'a> {
    encoding: &'a Encoding,
    scale: f64,
    offset: i64,
    range: (i64, i64),
}

impl<'a> Requantizer<'a> {
    /// The requantizer of `ctx`'s output, if it is per-tensor fixed-point.
    fn of(ctx: &'a NodeCtx) -> Option<Requantizer<'a>> {
        let encoding = ctx.outputs.first()?.encoding;
        let ScaleOffset { scale, offset } = encoding.per_tensor()?;
        Some(Requantizer {
            encoding,
            scale: scale as f64,
            offset: offset as i64,
            range: encoding.range()?,
        })
    }

    /// The output integer of accumulator `acc`, given the multiplier of its scale.
    fn quantize(&self, acc: i64, (multiplier, shift): (i32, i32)) -> i64 {
        saturate(
            multiply_by_quantized_multiplier(acc, multiplier, shift) - self.offset,
            self.range,
        )
    }

    /// The Q31 multiplier taking an accumulator in units of `acc_scale` to output units.
    fn multiplier(&self, acc_scale: f64) -> (i32, i32) {
        quantize_multiplier(acc_scale / self.scale)
    }

    /// The output's real values from its integers.
    fn finish(&self, dims: Vec<usize>, ints: &[i64]) -> Array {
        Array {
            dims,
            data: self.encoding.dequantize(ints),
        }
    }
}

/// A symmetric weight's per-channel float scales and per-block integer scales.
struct WeightScales {
    channel: Vec<f64>,
    block_size: usize,
    blocks: usize,
    block: Vec<i64>,
}

fn weight_scales(ctx: &NodeCtx, cin: usize, cout: usize) -> Result<WeightScales, SimError> {
    let encoding = ctx.inputs[1].encoding;
    let Encoding::Fixed { scales, .. } = encoding else {
        return Err(ctx.error("integer mode needs fixed-point weights"));
    };
    let asymmetric = || ctx.error("integer mode needs symmetric weights (offset 0)");
    let per_channel = |list: &[ScaleOffset]| WeightScales {
        channel: list.iter().map(|so| so.scale as f64).collect(),
        block_size: cin,
        blocks: 1,
        block: vec![1; cout],
    };
    match scales {
        Scales::Tensor(so) if so.offset == 0 => Ok(per_channel(&vec![*so; cout])),
        Scales::Axis(axis, list) if axis.stride == 1 && axis.len == cout => {
            if list.iter().any(|so| so.offset != 0) {
                return Err(asymmetric());
            }
            Ok(per_channel(list))
        }
        Scales::Block(b)
            if b.channel.len == cout
                && b.channel.stride == 1
                && b.reduce.len == cin
                && b.reduce.stride == cout =>
        {
            Ok(WeightScales {
                channel: b.channel_scales.iter().map(|&s| s as f64).collect(),
                block_size: b.block_size,
                blocks: b.blocks,
                block: b.block_scales.iter().map(|&s| s as i64).collect(),
            })
        }
        Scales::Tensor(_) => Err(asymmetric()),
        _ => Err(ctx.error("weight scales must run along the output channels")),
    }
}

fn conv2d(ctx: &NodeCtx) -> Result<Option<Array>, SimError> {
    let shape = conv_shape(ctx)?;
    let (Some((x, scale_in)), Some(out)) = (centered(&ctx.inputs[0]), Requantizer::of(ctx)) else {
        return Ok(None);
    };
    let weights = weight_scales(ctx, shape.cin, shape.cout)?;
    let w = ctx.inputs[1]
        .encoding
        .quantize(&ctx.inputs[1].array.data)
        .unwrap_or_default();
    let acc_scale: Vec<f64> = weights.channel.iter().map(|s| scale_in * s).collect();
    let bias: Vec<i64> = match ctx.inputs.get(2) {
        Some(b) => (b.array.data.iter().zip(&acc_scale))
            .map(|(&real, scale)| (real as f64 / scale).round() as i64)
            .collect(),
        None => vec![0; shape.cout],
    };
    let multipliers: Vec<(i32, i32)> = acc_scale.iter().map(|&s| out.multiplier(s)).collect();
    let overflow = || ctx.error("a block's int32 accumulator overflows");
    let mut ints = Vec::with_capacity(shape.rows * shape.cout);
    for row in x.chunks_exact(shape.cin) {
        for c in 0..shape.cout {
            let mut acc = bias[c];
            for (b, block) in row.chunks(weights.block_size.max(1)).enumerate() {
                let start = b * weights.block_size;
                let partial = block.iter().enumerate().try_fold(0i32, |sum, (k, &xq)| {
                    let product = xq.checked_mul(w[(start + k) * shape.cout + c])?;
                    let product = i32::try_from(product).ok()?;
                    sum.checked_add(product)
                });
                let scale = weights.block[c * weights.blocks + b];
                acc = acc.saturating_add(partial.ok_or_else(overflow)? as i64 * scale);
            }
            ints.push(out.quantize(acc, multipliers[c]));
        }
    }
    Ok(Some(out.finish(ctx.out_dims().to_vec(), &ints)))
}

fn add(ctx: &NodeCtx) -> Result<Option<Array>, SimError> {
    let Some(pair) = Pair::of(ctx)? else {
        return Ok(None);
    };
    let twice_max = 2.0 * pair.a.1.max(pair.b.1);
    let ma = quantize_multiplier(pair.a.1 / twice_max);
    let mb = quantize_multiplier(pair.b.1 / twice_max);
    let m_out = pair
        .out
        .multiplier(twice_max / (1u64 << ADD_LEFT_SHIFT) as f64);
    let rescale = |v: i64, (m, s): (i32, i32)| {
        multiply_by_quantized_multiplier(v.saturating_mul(1 << ADD_LEFT_SHIFT), m, s)
    };
    Ok(Some(pair.map(|x, y| {
        pair.out
            .quantize(rescale(x, ma).saturating_add(rescale(y, mb)), m_out)
    })))
}

fn multiply(ctx: &NodeCtx) -> Result<Option<Array>, SimError> {
    let Some(pair) = Pair::of(ctx)? else {
        return Ok(None);
    };
    let m = pair.out.multiplier(pair.a.1 * pair.b.1);
    Ok(Some(
        pair.map(|x, y| pair.out.quantize(x.saturating_mul(y), m)),
    ))
}

/// The operands of a broadcasting binary op: each one's `q + offset` values and scale,
/// the broadcast, and the output's requantizer.
struct Pair<'a> {
    a: (Vec<i64>, f64),
    b: (Vec<i64>, f64),
    shape: Broadcast,
    out: Requantizer<'a>,
}

impl<'a> Pair<'a> {
    /// The operands of `ctx`, or `None` if a tensor is not per-tensor fixed-point.
    fn of(ctx: &'a NodeCtx) -> Result<Option<Pair<'a>>, SimError> {
        ctx.expect_arity(2, 2)?;
        let (Some(a), Some(b), Some(out)) = (
            centered(&ctx.inputs[0]),
            centered(&ctx.inputs[1]),
            Requantizer::of(ctx),
        ) else {
            return Ok(None);
        };
        let (da, db) = (&ctx.inputs[0].array.dims, &ctx.inputs[1].array.dims);
        let shape = broadcast(da, db).map_err(|reason| ctx.error(reason))?;
        Ok(Some(Pair { a, b, shape, out }))
    }

    /// The output of `element` applied to each broadcast pair of `q + offset` values.
    fn map(&self, element: impl Fn(i64, i64) -> i64) -> Array {
        let ints: Vec<i64> = (self.shape.left.iter().zip(&self.shape.right))
            .map(|(&i, &j)| element(self.a.0[i], self.b.0[j]))
            .collect();
        self.out.finish(self.shape.dims.clone(), &ints)
    }
}
