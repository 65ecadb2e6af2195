//! Data movement that rearranges one tensor: `reshape` (through the flat row-major
//! index), `permute_dims`, `expand_dims`, `squeeze` and `broadcast_to`.

use super::call::OpCall;
use super::error::LegalizeError;
use super::kernel::{broadcast_indices, Kernel, OpPattern};
use crate::te::{self, Expr};
use crate::SymExpr;

/// The ops of this family.
pub(super) const OPS: &[&str] = &[
    "reshape",
    "permute_dims",
    "expand_dims",
    "squeeze",
    "broadcast_to",
];

/// The input index of an output index.
type IndexMap = Box<dyn Fn(&[Expr]) -> Vec<Expr>>;

/// `out[i] = x[map(i)]` for the op's index map.
pub(super) fn legalize(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let (inputs, args) = call.inputs(&["x"])?;
    let (shape, _) = call.output()?;
    let x = &inputs[0];
    let in_shape = x.shape().to_vec();
    let map: IndexMap = match call.op {
        "reshape" => reshape_map(call, &in_shape, &shape)?,
        "permute_dims" => permute_map(call, in_shape.len(), shape.len())?,
        "expand_dims" => expand_map(call, in_shape.len(), shape.len())?,
        "squeeze" => squeeze_map(call, &in_shape, shape.len())?,
        _ => broadcast_map(call, &in_shape, shape.len())?,
    };
    let out = te::compute("out", shape, |i| x.at(&map(i)));
    let pattern = match call.op {
        "broadcast_to" => OpPattern::Broadcast,
        _ => OpPattern::Injective,
    };
    Ok(Kernel::new(inputs, args, out, pattern))
}

/// `x` at the row-major position of `out[i]`.
fn reshape_map(
    call: &OpCall,
    in_shape: &[SymExpr],
    out_shape: &[SymExpr],
) -> Result<IndexMap, LegalizeError> {
    let (in_size, out_size) = (SymExpr::product(in_shape), SymExpr::product(out_shape));
    if !in_size.prove_equal(&out_size) {
        return Err(call.shape_error(format!(
            "cannot reshape {in_size} elements into {}",
            call.call.sinfo
        )));
    }
    let out_strides = row_major_strides(out_shape);
    let in_strides = row_major_strides(in_shape);
    let in_shape = in_shape.to_vec();
    Ok(Box::new(move |i| {
        let flat = i
            .iter()
            .zip(&out_strides)
            .fold(Expr::int(0), |acc, (index, stride)| acc + index * stride);
        (0..in_shape.len())
            .map(|d| {
                let index = flat.floordiv(&in_strides[d]);
                if d == 0 {
                    index
                } else {
                    index.floormod(&in_shape[d])
                }
            })
            .collect()
    }))
}

fn row_major_strides(shape: &[SymExpr]) -> Vec<Expr> {
    (0..shape.len())
        .map(|d| Expr::from(SymExpr::product(&shape[d + 1..])))
        .collect()
}

/// `x[i[inverse(axes)]]`: output dim `j` is input dim `axes[j]`.
fn permute_map(call: &OpCall, ndim: usize, out_rank: usize) -> Result<IndexMap, LegalizeError> {
    let axes = match call.ints_attr("axes")? {
        Some(axes) => call.axes("axes", &axes, ndim)?,
        None => (0..ndim).rev().collect(),
    };
    if axes.len() != ndim {
        let expected = format!("a permutation of {ndim} axes");
        return Err(call.bad_attr("axes", &expected, format!("{axes:?}")));
    }
    if out_rank != ndim {
        return Err(call.bad_output(&format!("a tensor of rank {ndim}")));
    }
    Ok(Box::new(move |i| {
        let mut index = vec![Expr::int(0); axes.len()];
        for (j, &axis) in axes.iter().enumerate() {
            index[axis] = i[j].clone();
        }
        index
    }))
}

/// `i` without the inserted positions.
fn expand_map(call: &OpCall, in_rank: usize, out_rank: usize) -> Result<IndexMap, LegalizeError> {
    let axes = call.required_ints("axis")?;
    let inserted = call.axes("axis", &axes, in_rank + axes.len())?;
    if out_rank != in_rank + axes.len() {
        return Err(call.bad_output(&format!("a tensor of rank {}", in_rank + axes.len())));
    }
    Ok(Box::new(move |i| {
        (0..out_rank)
            .filter(|d| !inserted.contains(d))
            .map(|d| i[d].clone())
            .collect()
    }))
}

/// `i` with a 0 at each squeezed position.
fn squeeze_map(
    call: &OpCall,
    in_shape: &[SymExpr],
    out_rank: usize,
) -> Result<IndexMap, LegalizeError> {
    let squeezed = match call.ints_attr("axis")? {
        Some(axes) => call.axes("axis", &axes, in_shape.len())?,
        None => (0..in_shape.len())
            .filter(|&d| in_shape[d].as_const() == Some(1))
            .collect(),
    };
    if let Some(&d) = squeezed
        .iter()
        .find(|&&d| in_shape[d].as_const() != Some(1))
    {
        let detail = format!("cannot squeeze axis {d} of extent {}", in_shape[d]);
        return Err(call.shape_error(detail));
    }
    if out_rank + squeezed.len() != in_shape.len() {
        let expected = format!("a tensor of rank {}", in_shape.len() - squeezed.len());
        return Err(call.bad_output(&expected));
    }
    let in_rank = in_shape.len();
    Ok(Box::new(move |i| {
        let mut kept = i.iter();
        (0..in_rank)
            .map(|d| {
                let next = (!squeezed.contains(&d)).then(|| kept.next()).flatten();
                next.cloned().unwrap_or_else(|| Expr::int(0))
            })
            .collect()
    }))
}

/// `x[bcast(i)]`.
fn broadcast_map(
    call: &OpCall,
    in_shape: &[SymExpr],
    out_rank: usize,
) -> Result<IndexMap, LegalizeError> {
    let target = call.shape_arg(1)?;
    if target.len() != out_rank || in_shape.len() > out_rank {
        return Err(call.bad_output(&format!("a tensor of rank {}", target.len())));
    }
    let in_shape = in_shape.to_vec();
    Ok(Box::new(move |i| broadcast_indices(&in_shape, i)))
}
