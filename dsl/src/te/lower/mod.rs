//! Lowering a tensor-expression graph to a TIR primitive function: parameters are the
//! inputs then the outputs, every other compute tensor becomes an allocated intermediate,
//! and each compute stage becomes one serial loop nest, in topological order.

mod names;
mod stage;

use super::error::TeError;
use super::expr::{Expr, Node};
use super::tensor::{Tensor, TensorOp};
use crate::tir::{Buffer, PrimFunc, Stmt};
use crate::SymVar;
use names::NameAllocator;
use stage::Lowerer;
use std::collections::{BTreeSet, HashMap, HashSet};

/// Lowers the graph computing `outputs` from `inputs` to a primitive function named
/// `name`. `dims` are the symbolic dims of the parameters' shapes, sorted by name.
pub fn lower(name: &str, inputs: &[Tensor], outputs: &[Tensor]) -> Result<PrimFunc, TeError> {
    let stages = topological_stages(name, inputs, outputs)?;
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
    for tensor in stages.iter().filter(|t| !seen.contains(&t.key())) {
        let unique = names.unique(tensor.name());
        intermediates.push(Buffer {
            name: unique.clone(),
            ..buffer_of(tensor)
        });
        buffer_names.insert(tensor.key(), unique);
    }
    let dim_names = dims.iter().map(|d| d.name().to_string()).collect();
    let mut lowerer = Lowerer::new(name, &buffer_names, &dim_names, names);
    for buffer in &intermediates {
        lowerer.check_shape(buffer)?;
    }
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
