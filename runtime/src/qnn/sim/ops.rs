//! The ops in f32 (package `qti.aisw`), one function each, found by op type in [`OPS`].
//! Each computes its output from its inputs' real values; the caller settles it onto the
//! output's encoding (Spec and Integer modes) or keeps it (Float mode).

use super::error::SimError;
use super::node::{broadcast, NodeCtx};
use super::values::Array;

/// An op's f32 implementation.
pub(crate) type OpFn = fn(&NodeCtx) -> Result<Array, SimError>;

/// Every op type the simulator executes, with its f32 implementation.
const OPS: &[(&str, OpFn)] = &[
    ("Conv2d", conv2d),
    ("Reshape", reshape),
    ("Transpose", transpose),
    ("RmsNorm", rms_norm),
    ("ElementWiseAdd", add),
    ("ElementWiseMultiply", multiply),
    ("Sigmoid", sigmoid),
];

/// The f32 implementation of `op_type`.
pub(crate) fn float_op(op_type: &str) -> Option<OpFn> {
    OPS.iter()
        .find(|(name, _)| *name == op_type)
        .map(|&(_, f)| f)
}

/// A 1x1 convolution as a matrix product: `rows` pixels of `cin` channels each, times a
/// `[cin, cout]` filter.
pub(crate) struct ConvShape {
    /// Pixels (`N x H x W`).
    pub rows: usize,
    /// Input channels.
    pub cin: usize,
    /// Output channels.
    pub cout: usize,
}

/// Checks a Conv2d node is a 1x1, stride 1, unpadded, undilated, ungrouped convolution
/// of consistent shapes, and gives its shape.
pub(crate) fn conv_shape(ctx: &NodeCtx) -> Result<ConvShape, SimError> {
    ctx.expect_arity(2, 3)?;
    let expect = |name: &str, wanted: usize, what: &str| -> Result<(), SimError> {
        match ctx.index_param(name)? {
            Some(values) if values.iter().any(|&v| v != wanted) => {
                Err(ctx.error(format!("{name} {values:?} is not supported (only {what})")))
            }
            _ => Ok(()),
        }
    };
    expect("stride", 1, "stride 1")?;
    expect("dilation", 1, "dilation 1")?;
    expect("pad_amount", 0, "no padding")?;
    if ctx.scalar("group")?.is_some_and(|g| g != 1.0) {
        return Err(ctx.error("only group 1 is supported"));
    }
    let (input, filter) = (&ctx.inputs[0].array.dims, &ctx.inputs[1].array.dims);
    let [n, h, w, cin] = input[..] else {
        return Err(ctx.error(format!("input dims {input:?} are not NHWC")));
    };
    let [1, 1, fin, cout] = filter[..] else {
        return Err(ctx.error(format!(
            "filter dims {filter:?}: only 1x1 HWIO filters are supported"
        )));
    };
    if cin == 0 || cout == 0 {
        return Err(ctx.error("a convolution needs channels"));
    }
    if fin != cin {
        return Err(ctx.error(format!("filter takes {fin} channels, input has {cin}")));
    }
    if let Some(bias) = ctx.inputs.get(2) {
        if bias.array.dims != [cout] {
            return Err(ctx.error(format!(
                "bias dims {:?}, expected [{cout}]",
                bias.array.dims
            )));
        }
    }
    Ok(ConvShape {
        rows: n * h * w,
        cin,
        cout,
    })
}

fn conv2d(ctx: &NodeCtx) -> Result<Array, SimError> {
    let shape = conv_shape(ctx)?;
    let (x, w) = (&ctx.inputs[0].array.data, &ctx.inputs[1].array.data);
    let bias = ctx.inputs.get(2).map(|b| &b.array.data);
    let mut out = vec![0.0f32; shape.rows * shape.cout];
    // Row by row, the weight rows streamed in order (each output still sums over k in
    // order, then adds the bias).
    for (row, acc) in x
        .chunks_exact(shape.cin)
        .zip(out.chunks_exact_mut(shape.cout))
    {
        for (&xk, w_k) in row.iter().zip(w.chunks_exact(shape.cout)) {
            for (a, &wkc) in acc.iter_mut().zip(w_k) {
                *a += xk * wkc;
            }
        }
        if let Some(bias) = bias {
            for (a, &b) in acc.iter_mut().zip(bias.iter()) {
                *a += b;
            }
        }
    }
    let mut dims = ctx.inputs[0].array.dims.clone();
    dims[3] = shape.cout;
    Ok(Array { dims, data: out })
}

fn reshape(ctx: &NodeCtx) -> Result<Array, SimError> {
    ctx.expect_arity(1, 1)?;
    let input = ctx.inputs[0].array;
    Ok(Array {
        dims: ctx.out_dims().to_vec(),
        data: input.data.clone(),
    })
}

fn transpose(ctx: &NodeCtx) -> Result<Array, SimError> {
    ctx.expect_arity(1, 1)?;
    let input = ctx.inputs[0].array;
    let perm = ctx
        .index_param("perm")?
        .ok_or_else(|| ctx.error("no `perm`"))?;
    let mut sorted = perm.clone();
    sorted.sort_unstable();
    if sorted != (0..input.dims.len()).collect::<Vec<_>>() {
        return Err(ctx.error(format!(
            "perm {perm:?} is not a permutation of the input's axes"
        )));
    }
    let dims: Vec<usize> = perm.iter().map(|&p| input.dims[p]).collect();
    let in_strides = strides(&input.dims);
    let data = (0..input.data.len())
        .map(|i| {
            let mut rest = i;
            let mut src = 0;
            for (axis, &p) in perm.iter().enumerate().rev() {
                src += (rest % dims[axis]) * in_strides[p];
                rest /= dims[axis];
            }
            input.data[src]
        })
        .collect();
    Ok(Array { dims, data })
}

fn strides(dims: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; dims.len()];
    for axis in (0..dims.len().saturating_sub(1)).rev() {
        strides[axis] = strides[axis + 1] * dims[axis + 1];
    }
    strides
}

fn rms_norm(ctx: &NodeCtx) -> Result<Array, SimError> {
    ctx.expect_arity(2, 3)?;
    let input = ctx.inputs[0].array;
    let last = input.dims.len().checked_sub(1);
    let axes = ctx.index_param("axes")?;
    if last.is_none() || axes != last.map(|l| vec![l]) {
        return Err(ctx.error(format!("axes {axes:?}: only the last axis is supported")));
    }
    let epsilon = ctx
        .scalar("epsilon")?
        .ok_or_else(|| ctx.error("no `epsilon`"))? as f32;
    let width = input.dims.last().copied().unwrap_or(0);
    let gamma = &ctx.inputs[1].array;
    let beta = ctx.inputs.get(2).map(|b| b.array);
    if gamma.dims != [width] || beta.is_some_and(|b| b.dims != [width]) {
        return Err(ctx.error(format!("gamma and beta must have dims [{width}]")));
    }
    let mut data = Vec::with_capacity(input.data.len());
    for row in input.data.chunks_exact(width.max(1)) {
        let mean_square = row.iter().map(|x| x * x).sum::<f32>() / width as f32;
        let inv = 1.0 / (mean_square + epsilon).sqrt();
        for (k, x) in row.iter().enumerate() {
            data.push(x * inv * gamma.data[k] + beta.map_or(0.0, |b| b.data[k]));
        }
    }
    Ok(Array {
        dims: input.dims.clone(),
        data,
    })
}

fn elementwise(ctx: &NodeCtx, f: fn(f32, f32) -> f32) -> Result<Array, SimError> {
    ctx.expect_arity(2, 2)?;
    let (a, b) = (ctx.inputs[0].array, ctx.inputs[1].array);
    let shape = broadcast(&a.dims, &b.dims).map_err(|reason| ctx.error(reason))?;
    let data = (shape.left.iter().zip(&shape.right))
        .map(|(&i, &j)| f(a.data[i], b.data[j]))
        .collect();
    Ok(Array {
        dims: shape.dims,
        data,
    })
}

fn add(ctx: &NodeCtx) -> Result<Array, SimError> {
    elementwise(ctx, |a, b| a + b)
}

fn multiply(ctx: &NodeCtx) -> Result<Array, SimError> {
    elementwise(ctx, |a, b| a * b)
}

fn sigmoid(ctx: &NodeCtx) -> Result<Array, SimError> {
    ctx.expect_arity(1, 1)?;
    let input = ctx.inputs[0].array;
    Ok(Array {
        dims: input.dims.clone(),
        data: input
            .data
            .iter()
            .map(|&x| 1.0 / (1.0 + (-x).exp()))
            .collect(),
    })
}
