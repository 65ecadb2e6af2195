//! Loading a net: `model_net.json` and `model.bin` read, every tensor's dims, type and
//! encoding checked, every static tensor's bytes checked and decoded, every name a graph
//! or node refers to checked to exist, every op checked to be one the simulator runs.

use super::error::SimError;
use super::ops::float_op;
use super::values::{decode_static, dims_of, Array, Encoding};
use crate::qnn::bin::{read_bin, BIN_FILE};
use crate::qnn::codes::{tensor_type, PACKAGE_QTI_AISW};
use crate::qnn::net::{NetFile, NET_FILE};
use std::collections::BTreeMap;
use std::path::Path;

/// A tensor's shape and encoding.
#[derive(Debug, Clone)]
pub(crate) struct TensorInfo {
    /// The shape.
    pub dims: Vec<usize>,
    /// The element count.
    pub numel: usize,
    /// How its values are represented.
    pub encoding: Encoding,
}

/// The checked contents of a net: every tensor's info and every static tensor's values.
pub(crate) struct Checked {
    /// Every tensor by name.
    pub tensors: BTreeMap<String, TensorInfo>,
    /// Every static tensor's real values by name.
    pub statics: BTreeMap<String, Array>,
}

/// Reads `model_net.json` and `model.bin` from `npu_dir`.
pub(crate) fn read_files(npu_dir: &Path) -> Result<(NetFile, BTreeMap<String, Vec<u8>>), SimError> {
    let net_path = npu_dir.join(NET_FILE);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SimError::Io { path, source }
    };
    let text = crate::files::read_text(&net_path).map_err(io(&net_path))?;
    let net = serde_json::from_str(&text).map_err(|e| SimError::Json {
        path: net_path.clone(),
        message: e.to_string(),
    })?;
    let bin_path = npu_dir.join(BIN_FILE);
    let file = std::fs::File::open(&bin_path).map_err(io(&bin_path))?;
    let len = file.metadata().map_err(io(&bin_path))?.len();
    let bin = read_bin(std::io::BufReader::new(file), len).map_err(io(&bin_path))?;
    Ok((net, bin))
}

/// Checks `net` against itself and `bin`, and decodes the static tensors.
pub(crate) fn check(net: &NetFile, bin: &BTreeMap<String, Vec<u8>>) -> Result<Checked, SimError> {
    let mut tensors = BTreeMap::new();
    let mut statics = BTreeMap::new();
    for (name, tensor) in &net.graph.tensors {
        let (dims, numel) = dims_of(name, tensor)?;
        let encoding = Encoding::of(name, tensor, &dims)?;
        if tensor.kind == tensor_type::STATIC {
            let bytes = bin
                .get(name)
                .ok_or_else(|| SimError::MissingStatic(name.clone()))?;
            let data = static_values(name, tensor, numel, bytes, &encoding)?;
            statics.insert(
                name.clone(),
                Array {
                    dims: dims.clone(),
                    data,
                },
            );
        }
        tensors.insert(
            name.clone(),
            TensorInfo {
                dims,
                numel,
                encoding,
            },
        );
    }
    check_references(net)?;
    Ok(Checked { tensors, statics })
}

fn static_values(
    name: &str,
    tensor: &crate::qnn::net::NetTensor,
    numel: usize,
    bytes: &[u8],
    encoding: &Encoding,
) -> Result<Vec<f32>, SimError> {
    let dtype = tensor.dtype().ok_or_else(|| SimError::DType {
        tensor: name.to_string(),
        code: tensor.data_type,
    })?;
    let expected = (numel as u64).saturating_mul(dtype.stored_bytes() as u64);
    if bytes.len() as u64 != expected {
        return Err(SimError::StaticSize {
            tensor: name.to_string(),
            expected,
            actual: bytes.len() as u64,
        });
    }
    decode_static(name, dtype, bytes, encoding)
}

/// Checks every name a graph or node refers to is declared, and every op is supported.
fn check_references(net: &NetFile) -> Result<(), SimError> {
    let undeclared = |user: &str, name: &str| SimError::Undeclared {
        user: user.to_string(),
        name: name.to_string(),
    };
    let tensors = &net.graph.tensors;
    for graph in &net.graphs {
        let names = graph.inputs.iter().chain(&graph.outputs);
        if let Some(name) = names.into_iter().find(|n| !tensors.contains_key(*n)) {
            return Err(undeclared(&graph.name, name));
        }
        if let Some(name) = graph
            .nodes
            .iter()
            .find(|n| !net.graph.nodes.contains_key(*n))
        {
            return Err(undeclared(&graph.name, name));
        }
    }
    for (name, node) in &net.graph.nodes {
        let names = node.input_names.iter().chain(&node.output_names);
        if let Some(missing) = names.into_iter().find(|n| !tensors.contains_key(*n)) {
            return Err(undeclared(name, missing));
        }
        if node.package != PACKAGE_QTI_AISW || float_op(&node.op_type).is_none() {
            return Err(SimError::UnknownOp {
                node: name.clone(),
                package: node.package.clone(),
                op_type: node.op_type.clone(),
            });
        }
    }
    Ok(())
}
