//! [`HtpContext`]: a QNN context of the HTP backend holding a net's graphs, either built
//! node by node from `model_net.json` and `model.bin` (each op validated by the backend,
//! every graph finalized once all are composed) or restored from a context binary; and
//! graph calls on real values, quantized and dequantized at the boundary by the graph's
//! input and output encodings.

use super::api::{
    Handle, OpConfig, Param, ParamValue, Scalar, OP_CONFIG_VERSION_1, PARAM_SCALAR, PARAM_TENSOR,
};
use super::backend::{entry, HtpBackend};
use super::error::HtpError;
use super::library::exclusive;
use super::tensor::{decode_values, encode_values, stored_len, Declared};
use crate::qnn::codes::tensor_type;
use crate::qnn::net::{scalar_value, GraphSpec, NetFile, NetNode};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ffi::CString;
use std::sync::Arc;

/// The ids the backend gave each graph's app tensors (what calls on a restored context
/// name them by): graph name -> tensor name -> id.
pub type TensorIds = BTreeMap<String, BTreeMap<String, u32>>;

/// A context and its graphs on one backend. Its calls take the process's QNN turn.
pub struct HtpContext {
    backend: Arc<HtpBackend>,
    context: Handle,
    graphs: BTreeMap<String, Handle>,
    net: Arc<NetFile>,
    ids: TensorIds,
}

// SAFETY: the handles are the library's, usable from any thread; every call takes the
// process's QNN turn first, so one runs at a time.
unsafe impl Send for HtpContext {}
// SAFETY: as above.
unsafe impl Sync for HtpContext {}

/// Whether to ask the backend to validate each op before adding it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValidateOps {
    /// `QnnBackend_validateOpConfig` on every node first.
    Yes,
    /// Add the nodes directly.
    No,
}

impl HtpContext {
    /// Builds every graph of `net` (static data in `bin`) in a new context on `backend`
    /// and finalizes them.
    pub fn build(
        backend: Arc<HtpBackend>,
        net: Arc<NetFile>,
        bin: &BTreeMap<String, Vec<u8>>,
        validate: ValidateOps,
    ) -> Result<HtpContext, HtpError> {
        let _turn = exclusive();
        let context_create = entry!(backend.library(), context_create)?;
        let mut context: Handle = std::ptr::null_mut();
        // SAFETY: valid handles from this library; null config; valid out-pointer.
        let status = unsafe {
            context_create(
                backend.backend(),
                backend.device(),
                std::ptr::null(),
                &mut context,
            )
        };
        backend.check(status, "QnnContext_create", "")?;
        let mut this = HtpContext {
            backend,
            context,
            graphs: BTreeMap::new(),
            net,
            ids: TensorIds::new(),
        };
        let net = this.net.clone();
        // The backend reads static tensors' data as late as finalize: every declaration
        // stays alive until all graphs are finalized.
        let mut declared = Vec::with_capacity(net.graphs.len());
        for graph in &net.graphs {
            let composed = this.compose(graph, bin, validate)?;
            this.graphs.insert(graph.name.clone(), composed.handle);
            this.ids.insert(graph.name.clone(), composed.ids);
            declared.push(composed.declared);
        }
        let finalize = entry!(this.backend.library(), graph_finalize)?;
        for (name, &graph) in &this.graphs {
            // SAFETY: a composed graph of this context, finalized once; the data its
            // tensors point into is alive (`declared`).
            let status = unsafe { finalize(graph, std::ptr::null_mut(), std::ptr::null_mut()) };
            this.backend.check(status, "QnnGraph_finalize", name)?;
        }
        drop(declared);
        Ok(this)
    }

    /// Restores a context from `binary` (written by [`HtpContext::binary`] for the same
    /// SoC) and retrieves the graphs of `net`, whose app tensors have the `ids` recorded
    /// when it was written.
    pub fn from_binary(
        backend: Arc<HtpBackend>,
        net: Arc<NetFile>,
        binary: &[u8],
        ids: TensorIds,
    ) -> Result<HtpContext, HtpError> {
        let _turn = exclusive();
        let create = entry!(backend.library(), context_create_from_binary)?;
        let mut context: Handle = std::ptr::null_mut();
        // SAFETY: the buffer is valid for its length for the call; valid handles.
        let status = unsafe {
            create(
                backend.backend(),
                backend.device(),
                std::ptr::null(),
                binary.as_ptr().cast(),
                binary.len() as u64,
                &mut context,
                std::ptr::null_mut(),
            )
        };
        backend.check(status, "QnnContext_createFromBinary", "")?;
        let mut this = HtpContext {
            backend,
            context,
            graphs: BTreeMap::new(),
            net,
            ids,
        };
        let retrieve = entry!(this.backend.library(), graph_retrieve)?;
        let net = this.net.clone();
        for graph in &net.graphs {
            let name = c_string(&graph.name)?;
            let mut handle: Handle = std::ptr::null_mut();
            // SAFETY: a context of this library; valid name and out-pointer.
            let status = unsafe { retrieve(this.context, name.as_ptr(), &mut handle) };
            this.backend
                .check(status, "QnnGraph_retrieve", &graph.name)?;
            let recorded = this.ids.get(&graph.name);
            let missing = (graph.inputs.iter().chain(&graph.outputs))
                .find(|t| recorded.is_none_or(|ids| !ids.contains_key(*t)));
            if let Some(tensor) = missing {
                return Err(HtpError::Inputs {
                    graph: graph.name.clone(),
                    reason: format!("no tensor id recorded for `{tensor}`"),
                });
            }
            this.graphs.insert(graph.name.clone(), handle);
        }
        Ok(this)
    }

    /// The context binary (what a device loads), for the backend's SoC.
    pub fn binary(&self) -> Result<Vec<u8>, HtpError> {
        let _turn = exclusive();
        let functions = self.backend.library();
        let size_of = entry!(functions, context_get_binary_size)?;
        let get = entry!(functions, context_get_binary)?;
        let mut size = 0u64;
        // SAFETY: a context of this library; valid out-pointer.
        let status = unsafe { size_of(self.context, &mut size) };
        self.backend.check(status, "QnnContext_getBinarySize", "")?;
        let mut buffer = vec![0u8; usize::try_from(size).unwrap_or(usize::MAX).min(1 << 34)];
        let mut written = 0u64;
        // SAFETY: the buffer holds `buffer.len()` writable bytes.
        let status = unsafe {
            get(
                self.context,
                buffer.as_mut_ptr().cast(),
                buffer.len() as u64,
                &mut written,
            )
        };
        self.backend.check(status, "QnnContext_getBinary", "")?;
        buffer.truncate(written as usize);
        Ok(buffer)
    }

    /// The ids of every graph's app tensors.
    pub fn tensor_ids(&self) -> &TensorIds {
        &self.ids
    }

    /// The net whose graphs this context holds.
    pub fn net(&self) -> &NetFile {
        &self.net
    }

    /// Runs `graph` on `inputs` (its app-written tensors in order, as real values) and
    /// returns its app-read tensors in order, as real values.
    pub fn run(&self, graph: &str, inputs: &[&[f32]]) -> Result<Vec<Vec<f32>>, HtpError> {
        let _turn = exclusive();
        let spec = self.spec(graph)?;
        let handle = self.graphs[graph];
        let ids = &self.ids[graph];
        if inputs.len() != spec.inputs.len() {
            return Err(HtpError::Inputs {
                graph: graph.into(),
                reason: format!(
                    "{} inputs given, it takes {}",
                    inputs.len(),
                    spec.inputs.len()
                ),
            });
        }
        let tensors = &self.net.graph.tensors;
        let mut ins = Vec::with_capacity(inputs.len());
        for (name, values) in spec.inputs.iter().zip(inputs) {
            let tensor = self.tensor(name)?;
            if values.len() as u64 != tensor.numel() {
                return Err(HtpError::Inputs {
                    graph: graph.into(),
                    reason: format!(
                        "`{name}` takes {} values, {} given",
                        tensor.numel(),
                        values.len()
                    ),
                });
            }
            let bytes = encode_values(name, tensor, values)?;
            let mut declared = Declared::new(name, tensor, bytes)?;
            declared.raw.v1.id = ids[name];
            ins.push(declared);
        }
        let mut outs = Vec::with_capacity(spec.outputs.len());
        for name in &spec.outputs {
            let tensor = self.tensor(name)?;
            let dtype = tensor.dtype();
            let len = dtype.and_then(|d| stored_len(tensor, d)).unwrap_or(0);
            let mut declared = Declared::new(name, tensor, vec![0u8; len])?;
            declared.raw.v1.id = ids[name];
            outs.push(declared);
        }
        let in_raw: Vec<_> = ins.iter().map(|d| d.raw).collect();
        let mut out_raw: Vec<_> = outs.iter().map(|d| d.raw).collect();
        let execute = entry!(self.backend.library(), graph_execute)?;
        // SAFETY: the tensors' pointers point into `ins` and `outs`, alive for the call;
        // each output buffer holds its tensor's stored size.
        let status = unsafe {
            execute(
                handle,
                in_raw.as_ptr(),
                in_raw.len() as u32,
                out_raw.as_mut_ptr(),
                out_raw.len() as u32,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        self.backend.check(status, "QnnGraph_execute", graph)?;
        spec.outputs
            .iter()
            .zip(&outs)
            .map(|(name, out)| decode_values(name, &tensors[name], out.data()))
            .collect()
    }

    fn spec(&self, graph: &str) -> Result<&GraphSpec, HtpError> {
        self.net
            .graphs
            .iter()
            .find(|g| g.name == graph)
            .filter(|_| self.graphs.contains_key(graph))
            .ok_or_else(|| HtpError::UnknownGraph(graph.to_string()))
    }

    fn tensor(&self, name: &str) -> Result<&crate::qnn::net::NetTensor, HtpError> {
        self.net
            .graph
            .tensors
            .get(name)
            .ok_or_else(|| HtpError::Tensor {
                tensor: name.to_string(),
                reason: "not declared in the net".into(),
            })
    }

    /// Creates `graph` and adds its nodes: the graph's handle, its app tensors' ids, and
    /// every tensor declared in it (whose memory must outlive the graph's finalize).
    fn compose(
        &self,
        graph: &GraphSpec,
        bin: &BTreeMap<String, Vec<u8>>,
        validate: ValidateOps,
    ) -> Result<Composed, HtpError> {
        let library = self.backend.library();
        let graph_create = entry!(library, graph_create)?;
        let name = c_string(&graph.name)?;
        let mut handle: Handle = std::ptr::null_mut();
        // SAFETY: a context of this library; valid name, null config, out-pointer.
        let status =
            unsafe { graph_create(self.context, name.as_ptr(), std::ptr::null(), &mut handle) };
        self.backend.check(status, "QnnGraph_create", &graph.name)?;
        let mut created: BTreeMap<String, Declared> = BTreeMap::new();
        let mut params = Vec::new();
        for node_name in &graph.nodes {
            let node = self
                .net
                .graph
                .nodes
                .get(node_name)
                .ok_or_else(|| HtpError::Tensor {
                    tensor: node_name.clone(),
                    reason: "a node the graph lists is not in the net".into(),
                })?;
            for tensor in node.input_names.iter().chain(&node.output_names) {
                if !created.contains_key(tensor) {
                    let declared = self.create_tensor(handle, tensor, bin)?;
                    created.insert(tensor.clone(), declared);
                }
            }
            params.extend(self.add_node(handle, node_name, node, &created, validate)?);
        }
        let ids = (graph.inputs.iter().chain(&graph.outputs))
            .map(|t| {
                let id = created.get(t).map(|d| d.raw.v1.id);
                id.map(|id| (t.clone(), id))
                    .ok_or_else(|| HtpError::Tensor {
                        tensor: t.clone(),
                        reason: format!("an app tensor of graph `{}` no node uses", graph.name),
                    })
            })
            .collect::<Result<_, _>>()?;
        params.extend(created.into_values());
        Ok(Composed {
            handle,
            ids,
            declared: params,
        })
    }

    /// Creates tensor `name` of the net in `graph` (a static one with its data).
    fn create_tensor(
        &self,
        graph: Handle,
        name: &str,
        bin: &BTreeMap<String, Vec<u8>>,
    ) -> Result<Declared, HtpError> {
        let tensor = self.tensor(name)?;
        let data = match tensor.kind == tensor_type::STATIC {
            true => bin.get(name).cloned().ok_or_else(|| HtpError::Tensor {
                tensor: name.to_string(),
                reason: "a static tensor with no data in model.bin".into(),
            })?,
            false => Vec::new(),
        };
        let mut declared = Declared::new(name, tensor, data)?;
        self.create_in(graph, &mut declared, name)?;
        Ok(declared)
    }

    fn create_in(
        &self,
        graph: Handle,
        declared: &mut Declared,
        name: &str,
    ) -> Result<(), HtpError> {
        let create = entry!(self.backend.library(), tensor_create_graph_tensor)?;
        // SAFETY: the declaration's pointers point into `declared`, alive for the call;
        // the backend writes the tensor's id into it.
        let status = unsafe { create(graph, &mut declared.raw) };
        self.backend
            .check(status, "QnnTensor_createGraphTensor", name)
    }

    /// Validates (if asked) and adds `node` to `graph`, its tensors already created.
    /// Returns the tensor parameters it declared.
    fn add_node(
        &self,
        graph: Handle,
        name: &str,
        node: &NetNode,
        created: &BTreeMap<String, Declared>,
        validate: ValidateOps,
    ) -> Result<Vec<Declared>, HtpError> {
        let mut param_tensors = Vec::new();
        let mut names = Vec::new();
        for (param, value) in &node.tensor_params {
            let mut declared = Declared::param(&format!("{name}__{param}"), value)?;
            self.create_in(graph, &mut declared, name)?;
            param_tensors.push((c_string(param)?, declared));
        }
        let mut params: Vec<Param> = param_tensors
            .iter()
            .map(|(param, declared)| Param {
                kind: PARAM_TENSOR,
                name: param.as_ptr(),
                value: ParamValue {
                    tensor: declared.raw,
                },
            })
            .collect();
        for (param, value) in &node.scalar_params {
            let (dtype, value) = scalar_value(value).ok_or_else(|| HtpError::Tensor {
                tensor: format!("{name}.{param}"),
                reason: "a scalar parameter of unknown type".into(),
            })?;
            let mut word = [0u8; 8];
            let bytes = dtype.encode(value);
            word[..bytes.len()].copy_from_slice(&bytes);
            names.push(c_string(param)?);
            params.push(Param {
                kind: PARAM_SCALAR,
                name: names[names.len() - 1].as_ptr(),
                value: ParamValue {
                    scalar: Scalar {
                        data_type: dtype.code(),
                        value: u64::from_le_bytes(word),
                    },
                },
            });
        }
        let raw = |t: &String| created[t].raw;
        let mut inputs: Vec<_> = node.input_names.iter().map(raw).collect();
        let mut outputs: Vec<_> = node.output_names.iter().map(raw).collect();
        let (c_name, package, op_type) = (
            c_string(name)?,
            c_string(&node.package)?,
            c_string(&node.op_type)?,
        );
        let op = OpConfig {
            version: OP_CONFIG_VERSION_1,
            name: c_name.as_ptr(),
            package: package.as_ptr(),
            type_name: op_type.as_ptr(),
            num_params: params.len() as u32,
            params: params.as_mut_ptr(),
            num_inputs: inputs.len() as u32,
            inputs: inputs.as_mut_ptr(),
            num_outputs: outputs.len() as u32,
            outputs: outputs.as_mut_ptr(),
        };
        let library = self.backend.library();
        if validate == ValidateOps::Yes {
            let check = entry!(library, backend_validate_op_config)?;
            // SAFETY: every pointer in `op` points into locals alive for the call.
            let status = unsafe { check(self.backend.backend(), op) };
            self.backend
                .check(status, "QnnBackend_validateOpConfig", name)?;
        }
        let add = entry!(library, graph_add_node)?;
        // SAFETY: as above; the graph is this context's, not finalized.
        let status = unsafe { add(graph, op) };
        self.backend.check(status, "QnnGraph_addNode", name)?;
        Ok(param_tensors
            .into_iter()
            .map(|(_, declared)| declared)
            .collect())
    }
}

/// A graph composed in a context.
struct Composed {
    handle: Handle,
    /// Its app tensors' ids.
    ids: BTreeMap<String, u32>,
    /// Every tensor declared in it (memory the backend reads until finalize).
    declared: Vec<Declared>,
}

impl Drop for HtpContext {
    fn drop(&mut self) {
        let _turn = exclusive();
        if let Some(free) = self.backend.library().functions().context_free {
            // SAFETY: the context was created by this library and is freed once; its
            // graphs go with it.
            unsafe { free(self.context, std::ptr::null_mut()) };
        }
    }
}

fn c_string(text: &str) -> Result<CString, HtpError> {
    CString::new(text).map_err(|_| HtpError::Tensor {
        tensor: text.replace('\0', "\\0"),
        reason: "a NUL in the name".into(),
    })
}

/// How the ids of a context's app tensors are stored beside its binary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BinaryRecord {
    /// The SoC's name.
    pub soc: String,
    /// Its `Qnn_SocModel_t` code.
    pub soc_model: u32,
    /// The QNN library's build id that wrote the binary.
    pub qnn_build: String,
    /// The app tensors' ids per graph.
    pub tensor_ids: TensorIds,
}
