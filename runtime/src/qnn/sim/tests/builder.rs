//! Building small nets in code.

use crate::qnn::codes::{tensor_type, QnnDataType};
use crate::qnn::net::*;
use std::collections::BTreeMap;

/// A net under construction with one graph.
#[derive(Default)]
pub struct Builder {
    graph: NetGraph,
    bin: BTreeMap<String, Vec<u8>>,
    inputs: Vec<String>,
    outputs: Vec<String>,
    order: Vec<String>,
}

/// The dims of a test tensor.
fn dims(d: &[usize]) -> Vec<u32> {
    d.iter().map(|&x| x as u32).collect()
}

impl Builder {
    /// Adds a tensor.
    pub fn tensor(
        &mut self,
        name: &str,
        kind: u32,
        dtype: QnnDataType,
        quant: QuantParams,
        d: &[usize],
    ) {
        let tensor = NetTensor {
            id: 0,
            kind,
            data_format: 0,
            data_type: dtype.code(),
            quant_params: quant,
            dims: dims(d),
        };
        self.graph.tensors.insert(name.to_string(), tensor);
        match kind {
            tensor_type::APP_WRITE => self.inputs.push(name.to_string()),
            tensor_type::APP_READ => self.outputs.push(name.to_string()),
            _ => {}
        }
    }

    /// Adds an activation: f32, or UFIXED_16 with `encoding`.
    pub fn activation(
        &mut self,
        name: &str,
        kind: u32,
        d: &[usize],
        encoding: Option<ScaleOffset>,
    ) {
        match encoding {
            Some(so) => self.tensor(
                name,
                kind,
                QnnDataType::UFixed16,
                QuantParams::scale_offset(so.scale, so.offset),
                d,
            ),
            None => self.tensor(name, kind, QnnDataType::Float32, QuantParams::none(), d),
        }
    }

    /// Adds a static tensor with its bytes.
    pub fn constant(
        &mut self,
        name: &str,
        dtype: QnnDataType,
        quant: QuantParams,
        d: &[usize],
        bytes: Vec<u8>,
    ) {
        self.tensor(name, tensor_type::STATIC, dtype, quant, d);
        self.bin.insert(name.to_string(), bytes);
    }

    /// Adds a static f32 tensor.
    pub fn constant_f32(&mut self, name: &str, d: &[usize], data: &[f32]) {
        let bytes = data.iter().flat_map(|x| x.to_le_bytes()).collect();
        self.constant(name, QnnDataType::Float32, QuantParams::none(), d, bytes);
    }

    /// Adds a node (run in the order added).
    pub fn node(
        &mut self,
        name: &str,
        op: &str,
        inputs: &[&str],
        output: &str,
        tensors: &[(&str, Vec<f64>)],
        scalars: &[(&str, QnnDataType, f64)],
    ) {
        let tensor_params = tensors
            .iter()
            .map(|(k, data)| {
                let param = TensorParam {
                    data_type: QnnDataType::Uint32.code(),
                    dims: vec![data.len() as u32],
                    data: data.clone(),
                };
                (k.to_string(), param)
            })
            .collect();
        let scalar_params = scalars
            .iter()
            .map(|&(k, t, v)| (k.to_string(), scalar_param(t, v)))
            .collect();
        let node = NetNode {
            package: "qti.aisw".into(),
            op_type: op.into(),
            tensor_params,
            scalar_params,
            input_names: inputs.iter().map(|s| s.to_string()).collect(),
            output_names: vec![output.to_string()],
        };
        self.graph.nodes.insert(name.to_string(), node);
        self.order.push(name.to_string());
    }

    /// The net (one graph named `name`) and its static data.
    pub fn finish(self, name: &str) -> (NetFile, BTreeMap<String, Vec<u8>>) {
        let spec = GraphSpec {
            name: name.to_string(),
            tokens: 1,
            inputs: self.inputs,
            outputs: self.outputs,
            nodes: self.order,
            variant_of: None,
        };
        let net = NetFile {
            model_cpp: "model.cpp".into(),
            model_bin: "model.bin".into(),
            converter_command: "test".into(),
            copyright_str: String::new(),
            op_types: vec![],
            graphs: vec![spec],
            token_axes: Default::default(),
            graph: self.graph,
        };
        (net, self.bin)
    }
}
