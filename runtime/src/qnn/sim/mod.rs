//! The host reference backend: executes the QNN graphs of an artifact's `npu/` folder on
//! the host with QNN's quantized semantics, for checking the emitter, calibrating
//! activation ranges and measuring quantization error without the SDK or a device.
//!
//! Every tensor's values are held as f32 reals. Nodes run in the graph's node order; each
//! op computes its output in f32 from its inputs' reals ([`SimMode::Float`] stops there),
//! and then, in [`SimMode::Spec`] and [`SimMode::Integer`], the output is settled onto
//! its tensor's encoding: f16 tensors round through half precision, fixed-point tensors
//! are quantized (`q = round(x / scale) - offset`, ties away from zero, saturated to the
//! type's range) and dequantized (`scale * (q + offset)`). Graph inputs are settled the
//! same way at the boundary, as an app quantizing its data would. In Integer mode,
//! Conv2d, ElementWiseAdd and ElementWiseMultiply on fixed-point tensors run in integer
//! arithmetic instead ([`integer`]); the other ops run as in Spec mode.

pub mod compare;
mod error;
pub mod fixed;
pub mod integer;
mod load;
mod node;
mod ops;
#[cfg(test)]
mod tests;
mod values;

pub use compare::{cosine, max_abs, sqnr_db, TensorGap};
pub use error::SimError;

use crate::qnn::net::{GraphSpec, NetFile, NetNode};
use load::{Checked, TensorInfo};
use node::{Declared, NodeCtx, Operand};
use std::collections::BTreeMap;
use std::path::Path;
use values::Array;

/// How a graph's arithmetic is carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimMode {
    /// f32 throughout, encodings ignored (static data dequantized once): the reference,
    /// and what calibration observes.
    Float,
    /// Each op in f32 on its inputs' values, its output requantized to its encoding.
    Spec,
    /// As Spec, but Conv2d, ElementWiseAdd and ElementWiseMultiply on fixed-point
    /// tensors in integer arithmetic with Q31 requantization.
    Integer,
}

/// A loaded, checked net, ready to run any of its graphs.
pub struct SimContext {
    net: NetFile,
    tensors: BTreeMap<String, TensorInfo>,
    statics: BTreeMap<String, Array>,
}

/// Receives each non-static tensor's name and real values as it is produced.
pub type Observer<'a> = dyn FnMut(&str, &[f32]) + 'a;

impl SimContext {
    /// Loads `model_net.json` and `model.bin` from an `npu/` folder and checks them.
    pub fn load(npu_dir: &Path) -> Result<SimContext, SimError> {
        let (net, bin) = load::read_files(npu_dir)?;
        SimContext::from_parts(net, bin)
    }

    /// Checks a net and its static data (tensor name -> bytes).
    pub fn from_parts(
        net: NetFile,
        bin: BTreeMap<String, Vec<u8>>,
    ) -> Result<SimContext, SimError> {
        let Checked { tensors, statics } = load::check(&net, &bin)?;
        Ok(SimContext {
            net,
            tensors,
            statics,
        })
    }

    /// The net this context runs.
    pub fn net(&self) -> &NetFile {
        &self.net
    }

    /// Runs `graph` on `inputs` (its app-written tensors in order, as f32 values) and
    /// returns its app-read tensors in order, as real values.
    pub fn run(
        &self,
        graph: &str,
        inputs: &[&[f32]],
        mode: SimMode,
    ) -> Result<Vec<Vec<f32>>, SimError> {
        self.run_observed(graph, inputs, mode, &mut |_, _| {})
    }

    /// [`SimContext::run`], calling `observer` with every non-static tensor's values as
    /// it is produced (the inputs first, as settled at the boundary).
    pub fn run_observed(
        &self,
        graph: &str,
        inputs: &[&[f32]],
        mode: SimMode,
        observer: &mut Observer,
    ) -> Result<Vec<Vec<f32>>, SimError> {
        let spec = self.graph(graph)?;
        let mut values = self.bind_inputs(spec, inputs, mode)?;
        for name in &spec.inputs {
            if let Some(array) = values.get(name.as_str()) {
                observer(name, &array.data);
            }
        }
        for node in &spec.nodes {
            let (name, array) = self.execute(node, &values, mode)?;
            observer(name, &array.data);
            values.insert(name, array);
        }
        let output = |name: &String| {
            let array = values
                .get(name.as_str())
                .ok_or_else(|| SimError::NotProduced {
                    user: graph.to_string(),
                    tensor: name.clone(),
                });
            array.map(|a| a.data.clone())
        };
        spec.outputs.iter().map(output).collect()
    }

    /// Runs `graph` in modes `a` and `b` and gives, for each non-static tensor in the
    /// order `a` produces them, how far `b`'s values are from `a`'s.
    pub fn gaps(
        &self,
        graph: &str,
        inputs: &[&[f32]],
        a: SimMode,
        b: SimMode,
    ) -> Result<Vec<TensorGap>, SimError> {
        let mut first = Vec::new();
        self.run_observed(graph, inputs, a, &mut |name, values| {
            first.push((name.to_string(), values.to_vec()))
        })?;
        let mut second = BTreeMap::new();
        self.run_observed(graph, inputs, b, &mut |name, values| {
            second.insert(name.to_string(), values.to_vec());
        })?;
        let gap = |(name, values): &(String, Vec<f32>)| {
            let other = second.get(name).map_or(&[][..], Vec::as_slice);
            TensorGap::between(name, values, other)
        };
        Ok(first.iter().map(gap).collect())
    }

    fn graph(&self, name: &str) -> Result<&GraphSpec, SimError> {
        let graphs = &self.net.graphs;
        let graph = graphs.iter().find(|g| g.name == name);
        graph.ok_or_else(|| SimError::UnknownGraph(name.to_string()))
    }

    fn info(&self, user: &str, name: &str) -> Result<&TensorInfo, SimError> {
        self.tensors.get(name).ok_or_else(|| SimError::Undeclared {
            user: user.to_string(),
            name: name.to_string(),
        })
    }

    /// The graph's inputs, checked against their dims and settled unless in Float mode.
    fn bind_inputs<'a>(
        &'a self,
        spec: &'a GraphSpec,
        inputs: &[&[f32]],
        mode: SimMode,
    ) -> Result<BTreeMap<&'a str, Array>, SimError> {
        if inputs.len() != spec.inputs.len() {
            return Err(SimError::InputCount {
                graph: spec.name.clone(),
                expected: spec.inputs.len(),
                actual: inputs.len(),
            });
        }
        let mut values = BTreeMap::new();
        for (name, data) in spec.inputs.iter().zip(inputs) {
            let info = self.info(&spec.name, name)?;
            if data.len() != info.numel {
                return Err(SimError::InputLength {
                    graph: spec.name.clone(),
                    tensor: name.clone(),
                    expected: info.numel,
                    actual: data.len(),
                });
            }
            let mut array = Array {
                dims: info.dims.clone(),
                data: data.to_vec(),
            };
            if mode != SimMode::Float {
                info.encoding.settle(&mut array.data);
            }
            values.insert(name.as_str(), array);
        }
        Ok(values)
    }

    /// Runs node `name` on `values`: its output's name and values.
    fn execute<'a>(
        &'a self,
        name: &'a str,
        values: &BTreeMap<&str, Array>,
        mode: SimMode,
    ) -> Result<(&'a str, Array), SimError> {
        let node = self
            .net
            .graph
            .nodes
            .get(name)
            .ok_or_else(|| SimError::Undeclared {
                user: "graph".to_string(),
                name: name.to_string(),
            })?;
        let out_name = node.output_names.first().map_or("", String::as_str);
        let ctx = self.node_ctx(name, node, values)?;
        let integer = match (mode, integer::integer_op(&ctx.node.op_type)) {
            (SimMode::Integer, Some(f)) => f(&ctx)?,
            _ => None,
        };
        let mut array = match integer {
            Some(array) => array,
            None => ops::float_op(&ctx.node.op_type).ok_or_else(|| SimError::UnknownOp {
                node: name.to_string(),
                package: ctx.node.package.clone(),
                op_type: ctx.node.op_type.clone(),
            })?(&ctx)?,
        };
        let declared = self.info(name, out_name)?;
        if array.dims != declared.dims || array.data.len() != declared.numel {
            return Err(ctx.error(format!(
                "produces dims {:?} ({} values), `{out_name}` is declared {:?}",
                array.dims,
                array.data.len(),
                declared.dims
            )));
        }
        if mode != SimMode::Float {
            declared.encoding.settle(&mut array.data);
        }
        Ok((out_name, array))
    }

    /// Node `name` with its operands looked up in `values` or the static tensors.
    fn node_ctx<'a>(
        &'a self,
        name: &'a str,
        node: &'a NetNode,
        values: &'a BTreeMap<&str, Array>,
    ) -> Result<NodeCtx<'a>, SimError> {
        let mut inputs = Vec::with_capacity(node.input_names.len());
        for input in &node.input_names {
            let array = self
                .statics
                .get(input)
                .or_else(|| values.get(input.as_str()));
            let array = array.ok_or_else(|| SimError::NotProduced {
                user: name.to_string(),
                tensor: input.clone(),
            })?;
            let encoding = &self.info(name, input)?.encoding;
            inputs.push(Operand { array, encoding });
        }
        let mut outputs = Vec::with_capacity(node.output_names.len());
        for output in &node.output_names {
            let info = self.info(name, output)?;
            outputs.push(Declared {
                dims: &info.dims,
                encoding: &info.encoding,
            });
        }
        Ok(NodeCtx {
            name,
            node,
            inputs,
            outputs,
        })
    }
}
