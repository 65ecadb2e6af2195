//! Lowering a tensor-expression graph to a TIR primitive function: parameters are the
//! inputs then the outputs, every other compute tensor becomes an allocated intermediate,
//! and each compute stage becomes one serial loop nest, in topological order.

mod names;
mod stage;

use super::error::TeError;
use super::expr::{Expr, Node};
use super::tensor::{Tensor, TensorOp};
use crate::tir::{Buffer, PrimFunc, Stmt};
use crate::{SymExpr, SymVar};
use names::NameAllocator;
use stage::Lowerer;
use std::collections::{BTreeSet, HashMap, HashSet};

/// Lowers the graph computing `outputs` from `inputs` to a primitive function named
/// `name`. `dims` are the symbolic dims of the parameters' shapes, sorted by name.
pub fn lower(name: &str, inputs: &[Tensor], outputs: &[Tensor]) -> Result<PrimFunc, TeError> {
    lower_nested(name, inputs, outputs, 0)
}

/// [`lower`], with every stage inside one loop nest over the first `shared` dims of the
/// first output, which every stage's shape must start with (TVM's `compute_at` of every
/// stage at that depth): an intermediate then holds only the current element's trailing
/// dims, and may only be read at the reading stage's own leading indices. So a kernel
/// whose stages work per output element (a group's statistics, then its candidates, ...)
/// needs no whole-tensor intermediates. `shared = 0` is [`lower`].
pub fn lower_nested(
    name: &str,
    inputs: &[Tensor],
    outputs: &[Tensor],
    shared: usize,
) -> Result<PrimFunc, TeError> {
    let stages = topological_stages(name, inputs, outputs)?;
    let outer: Vec<SymExpr> = match outputs.first() {
        Some(first) if shared > 0 => first.shape().iter().take(shared).cloned().collect(),
        _ => Vec::new(),
    };
    if let Some(stage) = stages
        .iter()
        .find(|t| t.ndim() < shared || t.shape()[..outer.len()] != outer[..])
    {
        return Err(TeError::SharedDims {
            func: name.to_string(),
            stage: stage.name().to_string(),
            rank: shared,
        });
    }
    let params: Vec<Buffer> = inputs.iter().chain(outputs).map(buffer_of).collect();
    let dims: BTreeSet<SymVar> = params
        .iter()
        .flat_map(|b| b.shape.iter().flat_map(|d| d.vars()))
        .collect();
    let mut names = NameAllocator::default();
    dims.iter().for_each(|d| names.reserve(d.name()));
    let mut buffer_names = HashMap::new();
    let mut seen = HashSet::new();
    for tensor in inputs.iter().chain(outputs) {
        if !seen.insert(tensor.key()) || buffer_names.values().any(|n| n == tensor.name()) {
            return Err(TeError::DuplicateParam {
                func: name.to_string(),
                name: tensor.name().to_string(),
            });
        }
        names.reserve(tensor.name());
        buffer_names.insert(tensor.key(), tensor.name().to_string());
    }
    let mut intermediates = Vec::new();
    let mut trimmed = HashSet::new();
    for tensor in stages.iter().filter(|t| !seen.contains(&t.key())) {
        let unique = names.unique(tensor.name());
        let mut buffer = Buffer {
            name: unique.clone(),
            ..buffer_of(tensor)
        };
        if shared > 0 {
            buffer.shape.drain(..shared);
            if buffer.shape.is_empty() {
                buffer.shape.push(SymExpr::int(1));
            }
            trimmed.insert(tensor.key());
        }
        intermediates.push(buffer);
        buffer_names.insert(tensor.key(), unique);
    }
    let dim_names = dims.iter().map(|d| d.name().to_string()).collect();
    let mut lowerer = Lowerer::new(name, &buffer_names, &dim_names, names);
    for buffer in &intermediates {
        lowerer.check_shape(buffer)?;
    }
    let outer_loops = lowerer.share_outer_loops(&outer, trimmed)?;
    let stmts = stages
        .iter()
        .map(|t| lowerer.stage(t))
        .collect::<Result<Vec<_>, _>>()?;
    let body = intermediates
        .into_iter()
        .rev()
        .fold(Stmt::Seq(stmts), |body, buffer| Stmt::Allocate {
            buffer,
            body: Box::new(body),
        });
    let body = stage::loop_nest(outer_loops, body);
    Ok(PrimFunc {
        params,
        num_outputs: outputs.len(),
        dims: dims.into_iter().collect(),
        body,
        attrs: Default::default(),
    })
}

fn buffer_of(tensor: &Tensor) -> Buffer {
    Buffer::new(tensor.name(), tensor.dtype(), tensor.shape().to_vec())
}

/// The compute tensors needed for `outputs`, producers first, stopping at `inputs`.
fn topological_stages(
    func: &str,
    inputs: &[Tensor],
    outputs: &[Tensor],
) -> Result<Vec<Tensor>, TeError> {
    let mut walk = Walk {
        func,
        inputs: inputs.iter().map(Tensor::key).collect(),
        visited: HashSet::new(),
        order: Vec::new(),
    };
    for output in outputs {
        if output.is_placeholder() {
            return Err(TeError::OutputNotComputed {
                func: func.to_string(),
                tensor: output.name().to_string(),
            });
        }
        walk.inputs.remove(&output.key());
        walk.visit(output)?;
    }
    Ok(walk.order)
}

struct Walk<'a> {
    func: &'a str,
    inputs: HashSet<usize>,
    visited: HashSet<usize>,
    order: Vec<Tensor>,
}

impl Walk<'_> {
    fn visit(&mut self, tensor: &Tensor) -> Result<(), TeError> {
        if self.inputs.contains(&tensor.key()) || !self.visited.insert(tensor.key()) {
            return Ok(());
        }
        match &tensor.0.op {
            TensorOp::Placeholder => Err(TeError::UnlistedInput {
                func: self.func.to_string(),
                tensor: tensor.name().to_string(),
            }),
            TensorOp::Compute { body, .. } => {
                let mut reads = Vec::new();
                collect_reads(body, &mut reads);
                for read in &reads {
                    self.visit(read)?;
                }
                self.order.push(tensor.clone());
                Ok(())
            }
        }
    }
}

fn collect_reads(expr: &Expr, out: &mut Vec<Tensor>) {
    if let Node::Read(tensor, _) = expr.node() {
        out.push(tensor.clone());
    }
    for child in expr.children() {
        collect_reads(child, out);
    }
}
