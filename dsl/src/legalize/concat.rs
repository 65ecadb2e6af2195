//! `concat` (written directly as TIR: one copy loop nest per part) and `split` (one
//! output per part; the function has several outputs).

use super::call::OpCall;
use super::error::LegalizeError;
use super::kernel::{Kernel, OpPattern};
use super::Legalized;
use crate::ir::Expr as IrExpr;
use crate::te::{self, Expr};
use crate::tir::{Buffer, ForKind, PrimExpr, PrimFunc, Stmt, TVar};
use crate::{DType, SymVar};
use crate::{StructInfo, SymExpr};

/// The ops of this family.
pub(super) const OPS: &[&str] = &["concat", "split"];

/// Concatenation or split along `axis`.
pub(super) fn legalize(call: &OpCall) -> Result<Legalized, LegalizeError> {
    match call.op {
        "concat" => concat(call),
        _ => split(call).map(Legalized::from),
    }
}

/// The fields of a tuple argument, as expressions (projections of a tuple variable).
fn tuple_fields(call: &OpCall, index: usize) -> Result<Vec<IrExpr>, LegalizeError> {
    let arg = call.arg(index)?;
    match (arg, arg.sinfo()) {
        (IrExpr::Tuple(items), _) => Ok(items.clone()),
        (_, StructInfo::Tuple(fields)) => Ok((0..fields.len())
            .map(|i| IrExpr::TupleGetItem(Box::new(arg.clone()), i))
            .collect()),
        (_, other) => Err(LegalizeError::BadArg {
            op: call.op.to_string(),
            index,
            expected: "a tuple of tensors".to_string(),
            got: other.to_string(),
        }),
    }
}

/// One copy loop nest per part, each writing its slice of the output: no part is read
/// outside its own extent, so empty parts (a KV cache before the first token) are safe.
fn concat(call: &OpCall) -> Result<Legalized, LegalizeError> {
    let args = tuple_fields(call, 0)?;
    let (shape, dtype) = call.output()?;
    let axis = call.axis(call.int_attr("axis", 0)?, shape.len())?;
    let mut params = Vec::with_capacity(args.len() + 1);
    for (i, field) in args.iter().enumerate() {
        let part = field.sinfo();
        let dims = part
            .as_tensor()
            .and_then(|t| t.dims().map(|d| (d.to_vec(), t.dtype)))
            .filter(|(d, part_dtype)| d.len() == shape.len() && *part_dtype == dtype)
            .ok_or_else(|| call.shape_error(format!("cannot concatenate part {i}: {part}")))?;
        params.push(Buffer::new(&format!("x{i}"), dtype, dims.0));
    }
    params.push(Buffer::new("out", dtype, shape.clone()));
    let mut offset = SymExpr::int(0);
    let mut copies = Vec::with_capacity(args.len());
    for (i, part) in params[..args.len()].iter().enumerate() {
        if part.shape[axis].as_const() != Some(0) {
            copies.push(copy_into(part, axis, &offset, i));
        }
        offset = &offset + &part.shape[axis];
    }
    let mut dims: Vec<SymVar> = params
        .iter()
        .flat_map(|b| b.shape.iter().flat_map(SymExpr::vars))
        .collect();
    dims.sort();
    dims.dedup();
    Ok(Legalized::Tir {
        func: PrimFunc {
            params,
            num_outputs: 1,
            dims,
            body: Stmt::Seq(copies),
            attrs: Default::default(),
        },
        args,
        pattern: OpPattern::Injective,
    })
}

/// `out[..., offset + j, ...] = part[..., j, ...]` over the part's shape.
fn copy_into(part: &Buffer, axis: usize, offset: &SymExpr, index: usize) -> Stmt {
    let vars: Vec<TVar> = (0..part.shape.len())
        .map(|d| TVar::new(&format!("p{index}_{d}"), DType::I64))
        .collect();
    let read: Vec<PrimExpr> = vars.iter().map(|v| PrimExpr::Var(v.clone())).collect();
    let mut write = read.clone();
    if offset.as_const() != Some(0) {
        write[axis] = PrimExpr::from(offset) + write[axis].clone();
    }
    let store = Stmt::Store {
        buffer: "out".to_string(),
        indices: write,
        value: PrimExpr::Load {
            buffer: part.name.clone(),
            dtype: part.dtype,
            indices: read,
        },
    };
    vars.iter()
        .zip(&part.shape)
        .rev()
        .fold(store, |body, (var, extent)| Stmt::For {
            var: var.clone(),
            extent: PrimExpr::from(extent),
            kind: ForKind::Serial,
            body: Box::new(body),
        })
}

fn split(call: &OpCall) -> Result<Kernel, LegalizeError> {
    let (inputs, args) = call.inputs(&["x"])?;
    let x = &inputs[0];
    let fields = call.output_fields()?;
    let axis = call.axis(call.int_attr("axis", 0)?, x.ndim())?;
    if fields.iter().any(|(shape, _)| shape.len() != x.ndim()) {
        return Err(call.bad_output(&format!("a tuple of tensors of rank {}", x.ndim())));
    }
    let mut offset = SymExpr::int(0);
    let mut outputs = Vec::new();
    for (part, (shape, _)) in fields.into_iter().enumerate() {
        let start = Expr::from(&offset);
        offset = &offset + &shape[axis];
        outputs.push(te::compute(&format!("out{part}"), shape, |i| {
            let mut index = i.to_vec();
            index[axis] = &i[axis] + &start;
            x.at(&index)
        }));
    }
    Ok(Kernel {
        inputs,
        args,
        outputs,
        pattern: OpPattern::Injective,
        attrs: Vec::new(),
        shared_loops: 0,
    })
}
