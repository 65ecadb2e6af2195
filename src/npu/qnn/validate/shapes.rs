//! Each op's shape rule: the output's dims from the inputs' and the parameters' (QNN's op
//! definitions), and the parameter values the shapes depend on.

use oxrelax_runtime::qnn::net::{scalar_value, NetNode};

/// A node with the dims of its inputs and outputs, for a shape rule.
pub struct NodeView<'a> {
    /// The node (for its parameters).
    pub node: &'a NetNode,
    /// The inputs' dims, in order.
    pub inputs: Vec<&'a [u32]>,
    /// The outputs' dims, in order.
    pub outputs: Vec<&'a [u32]>,
}

impl NodeView<'_> {
    fn input(&self, i: usize) -> &[u32] {
        self.inputs.get(i).copied().unwrap_or(&[])
    }

    fn output(&self) -> &[u32] {
        self.outputs.first().copied().unwrap_or(&[])
    }
}

/// The values of the UINT_32 tensor parameter `name`, which must have dims `dims`
/// (`default` when the node leaves it out).
fn uint_param(
    node: &NetNode,
    name: &str,
    dims: &[u32],
    default: Option<Vec<u64>>,
) -> Result<Vec<u64>, String> {
    let Some(param) = node.tensor_params.get(name) else {
        return default.ok_or_else(|| format!("missing parameter `{name}`"));
    };
    if param.dims != dims {
        return Err(format!(
            "`{name}` has dims {:?}, expected {dims:?}",
            param.dims
        ));
    }
    param
        .data
        .iter()
        .map(|&v| {
            let ok = v.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&v);
            ok.then_some(v as u64)
                .ok_or_else(|| format!("`{name}` holds {v}, not a UINT_32"))
        })
        .collect()
}

fn expect_dims(what: &str, got: &[u32], want: &[u64]) -> Result<(), String> {
    let same = got.len() == want.len() && got.iter().zip(want).all(|(&g, &w)| u64::from(g) == w);
    if same {
        Ok(())
    } else {
        Err(format!("{what} has dims {got:?}, expected {want:?}"))
    }
}

fn widen(dims: &[u32]) -> Vec<u64> {
    dims.iter().map(|&d| u64::from(d)).collect()
}

fn expect_rank(what: &str, dims: &[u32], rank: usize) -> Result<(), String> {
    if dims.len() == rank {
        Ok(())
    } else {
        Err(format!("{what} has rank {}, expected {rank}", dims.len()))
    }
}

/// `Conv2d`: NHWC input, HWIO filter `[kH, kW, Cin / group, Cout]`, bias `[Cout]`;
/// output `[N, H', W', Cout]`, `H' = (H + pad_top + pad_bottom - dil (kH - 1) - 1) /
/// stride + 1`.
pub fn conv2d(view: &NodeView) -> Result<(), String> {
    let (x, w) = (view.input(0), view.input(1));
    expect_rank("input", x, 4)?;
    expect_rank("filter", w, 4)?;
    let stride = uint_param(view.node, "stride", &[2], None)?;
    let pad = uint_param(view.node, "pad_amount", &[2, 2], None)?;
    let dilation = uint_param(view.node, "dilation", &[2], Some(vec![1, 1]))?;
    let group = match view.node.scalar_params.get("group").and_then(scalar_value) {
        Some((_, g)) if g >= 1.0 && g.fract() == 0.0 => g as u64,
        Some((_, g)) => return Err(format!("group {g} is not a positive integer")),
        None => 1,
    };
    let cout = u64::from(w[3]);
    if u64::from(w[2]).saturating_mul(group) != u64::from(x[3]) || cout % group != 0 {
        return Err(format!(
            "filter {w:?} with group {group} does not fit input channels {}",
            x[3]
        ));
    }
    if view.inputs.len() > 2 {
        expect_dims("bias", view.input(2), &[cout])?;
    }
    let mut want = vec![u64::from(x[0]), 0, 0, cout];
    for axis in 0..2 {
        if stride[axis] == 0 || dilation[axis] == 0 {
            return Err(format!(
                "stride {stride:?} and dilation {dilation:?} must be positive"
            ));
        }
        let padded = u64::from(x[axis + 1]) + pad[axis * 2] + pad[axis * 2 + 1];
        let reach = dilation[axis] * u64::from(w[axis]).saturating_sub(1) + 1;
        let Some(span) = padded.checked_sub(reach) else {
            return Err(format!(
                "filter {w:?} is larger than the padded input {x:?}"
            ));
        };
        want[axis + 1] = span / stride[axis] + 1;
    }
    expect_dims("output", view.output(), &want)
}

/// `Reshape`: as many elements out as in.
pub fn reshape(view: &NodeView) -> Result<(), String> {
    let (x, y) = (view.input(0), view.output());
    let count = |d: &[u32]| super::context::numel(d);
    if count(x) == count(y) {
        Ok(())
    } else {
        Err(format!(
            "output {y:?} has {} elements, input {x:?} {}",
            count(y),
            count(x)
        ))
    }
}

/// `Transpose`: `perm` is a permutation of the axes, `out[i] = in[perm[i]]`.
pub fn transpose(view: &NodeView) -> Result<(), String> {
    let x = view.input(0);
    let perm = uint_param(view.node, "perm", &[x.len() as u32], None)?;
    let mut seen = vec![false; x.len()];
    let mut want = Vec::with_capacity(x.len());
    for &axis in &perm {
        match seen.get_mut(axis as usize) {
            Some(s) if !*s => *s = true,
            _ => {
                return Err(format!(
                    "perm {perm:?} is not a permutation of {} axes",
                    x.len()
                ))
            }
        }
        want.push(u64::from(x[axis as usize]));
    }
    expect_dims("output", view.output(), &want)
}

/// `RmsNorm`: `gamma` (and `beta`) `[C]`, C the last axis; `axes` valid axes; epsilon
/// > 0; output shape = input shape.
pub fn rms_norm(view: &NodeView) -> Result<(), String> {
    let x = view.input(0);
    let last = u64::from(x.last().copied().unwrap_or(0));
    for (i, name) in [(1, "gamma"), (2, "beta")] {
        if i < view.inputs.len() {
            expect_dims(name, view.input(i), &[last])?;
        }
    }
    let count = view
        .node
        .tensor_params
        .get("axes")
        .map_or(0, |p| p.data.len());
    let axes = uint_param(view.node, "axes", &[count as u32], None)?;
    if count == 0 || axes.iter().any(|&a| a >= x.len() as u64) {
        return Err(format!("axes {axes:?} are not axes of the input {x:?}"));
    }
    let epsilon = view
        .node
        .scalar_params
        .get("epsilon")
        .and_then(scalar_value);
    match epsilon {
        Some((_, e)) if e > 0.0 && e.is_finite() => {}
        _ => {
            return Err(format!(
                "epsilon {epsilon:?} is not a finite positive number"
            ))
        }
    }
    expect_dims("output", view.output(), &widen(x))
}

/// `ElementWiseAdd`, `ElementWiseMultiply`: numpy broadcasting of the two inputs.
pub fn broadcast(view: &NodeView) -> Result<(), String> {
    let (a, b) = (view.input(0), view.input(1));
    let rank = a.len().max(b.len());
    let dim = |d: &[u32], i: usize| (i + d.len()).checked_sub(rank).map_or(1, |j| d[j]);
    let mut want = Vec::with_capacity(rank);
    for i in 0..rank {
        let (da, db) = (dim(a, i), dim(b, i));
        if da != db && da != 1 && db != 1 {
            return Err(format!("inputs {a:?} and {b:?} do not broadcast"));
        }
        want.push(u64::from(da.max(db)));
    }
    expect_dims("output", view.output(), &want)
}

/// `Sigmoid` and other element-wise ops of one input: output shape = input shape.
pub fn same(view: &NodeView) -> Result<(), String> {
    expect_dims("output", view.output(), &widen(view.input(0)))
}
