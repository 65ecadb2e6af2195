//! One node as an op sees it: its operands (values and encodings), its declared outputs,
//! its parameters, and numpy broadcasting for elementwise ops.

use super::error::SimError;
use super::values::{Array, Encoding};
use crate::qnn::net::{scalar_value, NetNode};

/// An input of a node: its values and encoding.
pub(crate) struct Operand<'a> {
    /// Its values.
    pub array: &'a Array,
    /// Its encoding.
    pub encoding: &'a Encoding,
}

/// A declared output of a node: its dims and encoding.
pub(crate) struct Declared<'a> {
    /// The declared shape.
    pub dims: &'a [usize],
    /// The declared encoding.
    pub encoding: &'a Encoding,
}

/// A node ready to execute.
pub(crate) struct NodeCtx<'a> {
    /// The node's name.
    pub name: &'a str,
    /// The node.
    pub node: &'a NetNode,
    /// Its inputs, in the op's order.
    pub inputs: Vec<Operand<'a>>,
    /// Its outputs, in the op's order.
    pub outputs: Vec<Declared<'a>>,
}

impl NodeCtx<'_> {
    /// An error about this node.
    pub fn error(&self, reason: impl Into<String>) -> SimError {
        SimError::Node {
            node: self.name.to_string(),
            op_type: self.node.op_type.clone(),
            reason: reason.into(),
        }
    }

    /// Checks the input count is within `min..=max` and there is one output.
    pub fn expect_arity(&self, min: usize, max: usize) -> Result<(), SimError> {
        let n = self.inputs.len();
        if n < min || n > max || self.outputs.len() != 1 {
            return Err(self.error(format!(
                "needs {min} to {max} inputs and 1 output, has {n} and {}",
                self.outputs.len()
            )));
        }
        Ok(())
    }

    /// The first output's declared shape (arity checked first).
    pub fn out_dims(&self) -> &[usize] {
        self.outputs.first().map_or(&[], |d| d.dims)
    }

    /// A scalar parameter's value, if present.
    pub fn scalar(&self, name: &str) -> Result<Option<f64>, SimError> {
        let Some(param) = self.node.scalar_params.get(name) else {
            return Ok(None);
        };
        let (_, value) = scalar_value(param)
            .ok_or_else(|| self.error(format!("scalar parameter `{name}` is malformed")))?;
        Ok(Some(value))
    }

    /// A tensor parameter's values as non-negative integers, if present.
    pub fn index_param(&self, name: &str) -> Result<Option<Vec<usize>>, SimError> {
        let Some(param) = self.node.tensor_params.get(name) else {
            return Ok(None);
        };
        let index = |&v: &f64| (v >= 0.0 && v.fract() == 0.0 && v < 1e15).then_some(v as usize);
        let values: Option<Vec<usize>> = param.data.iter().map(index).collect();
        let values = values
            .ok_or_else(|| self.error(format!("tensor parameter `{name}` must hold indices")))?;
        Ok(Some(values))
    }
}

/// Numpy broadcasting of two shapes: the output dims and, per output element, the flat
/// index into each operand.
pub(crate) struct Broadcast {
    /// The output shape.
    pub dims: Vec<usize>,
    /// The index into the first operand of each output element.
    pub left: Vec<usize>,
    /// The index into the second operand of each output element.
    pub right: Vec<usize>,
}

/// Broadcasts `a` and `b`, or says why they do not broadcast.
pub(crate) fn broadcast(a: &[usize], b: &[usize]) -> Result<Broadcast, String> {
    let rank = a.len().max(b.len());
    let pad = |d: &[usize]| [vec![1; rank - d.len()], d.to_vec()].concat();
    let (a, b) = (pad(a), pad(b));
    let mut dims = Vec::with_capacity(rank);
    for (&x, &y) in a.iter().zip(&b) {
        if x != y && x != 1 && y != 1 {
            return Err(format!("shapes {a:?} and {b:?} do not broadcast"));
        }
        dims.push(if x == 1 { y } else { x });
    }
    let numel: usize = dims.iter().product();
    let (mut left, mut right) = (Vec::with_capacity(numel), Vec::with_capacity(numel));
    for i in 0..numel {
        left.push(source_index(i, &dims, &a));
        right.push(source_index(i, &dims, &b));
    }
    Ok(Broadcast { dims, left, right })
}

/// The flat index in a tensor of shape `src` (same rank as `dims`, broadcast to it) of
/// output element `i`.
fn source_index(mut i: usize, dims: &[usize], src: &[usize]) -> usize {
    let (mut index, mut stride) = (0, 1);
    for (&d, &s) in dims.iter().zip(src).rev() {
        let coord = i % d.max(1);
        i /= d.max(1);
        if s != 1 {
            index += coord * stride;
        }
        stride *= s;
    }
    index
}
