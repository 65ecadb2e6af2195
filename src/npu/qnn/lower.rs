//! Lowering of the partition's outlined graph functions (`codegen="qnn"`, static shapes)
//! to QNN graphs, as mllm and executorch build them: a projection `matmul(x, W^T)` as a
//! 1x1 `Conv2d` over `[1, 1, tokens, in]` with its weight in HWIO layout (the transpose
//! done at compile time), `silu` as `x * Sigmoid(x)`, `rms_norm` as `RmsNorm` with a zero
//! beta, element-wise ops and layout changes one to one. Every tensor is f32 here; the
//! quantization recipe ([`super::recipe`]) then gives each its QNN type and encoding.

use super::error::QnnError;
use super::names::c_name;
use crate::npu::partition::{CODEGEN_ATTR, NPU_FUNCTIONS};
use oxrelax_dsl::ir::{BindingValue, Callee, Function, NUM_INPUT_ATTR};
use oxrelax_dsl::{AttrValue, Expr, IRModule, StructInfo};
use oxrelax_runtime::qnn::codes::{
    tensor_type, QnnDataType, DATA_FORMAT_FLAT_BUFFER, PACKAGE_QTI_AISW,
};
use oxrelax_runtime::qnn::net::{
    scalar_param, GraphSpec, NetGraph, NetNode, NetTensor, QuantParams, TensorParam,
};
use oxrelax_runtime::WeightError;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

/// The NPU graphs of a module in QNN form, every tensor f32, with the static tensors'
/// values.
#[derive(Debug, Clone, Default)]
pub struct FloatNet {
    /// The graphs, in composition order.
    pub graphs: Vec<GraphSpec>,
    /// Their tensors and nodes.
    pub graph: NetGraph,
    /// Each static tensor's values, row-major.
    pub statics: BTreeMap<String, Vec<f32>>,
    /// The token axis of each graph input and output that has one.
    pub token_axes: BTreeMap<String, u32>,
}

/// Where a weight's f32 values come from (by the weight's name in the model).
pub type WeightSource<'a> = dyn Fn(&str) -> Result<Vec<f32>, WeightError> + 'a;

/// Lowers every function of `module` marked `codegen="qnn"`, prefill graphs before decode
/// graphs, each in the order the partition numbered them.
pub fn lower_module(module: &IRModule, weights: &WeightSource<'_>) -> Result<FloatNet, QnnError> {
    let mut names: Vec<&String> = module
        .functions
        .iter()
        .filter(|(_, f)| f.attrs.get(CODEGEN_ATTR) == Some(&AttrValue::Str("qnn".into())))
        .map(|(name, _)| name)
        .collect();
    names.sort_by_key(|name| graph_order(name));
    let mut net = FloatNet::default();
    for name in names {
        GraphLowering::new(name, &mut net, weights).lower(&module.functions[name.as_str()])?;
    }
    net.token_axes = token_axes(module, &net.graphs);
    Ok(net)
}

/// The token axes of the graphs' inputs and outputs: where the callers' `npu.<graph>`
/// calls have a symbolic dim (the token count), the graph has the chunk.
fn token_axes(module: &IRModule, graphs: &[GraphSpec]) -> BTreeMap<String, u32> {
    let symbolic_axis = |sinfo: &StructInfo| match sinfo {
        StructInfo::Tensor(info) => info
            .dims()
            .and_then(|dims| dims.iter().position(|d| d.as_const().is_none()))
            .map(|a| a as u32),
        _ => None,
    };
    let mut axes = BTreeMap::new();
    for function in module.functions.values() {
        for binding in function.bindings() {
            let BindingValue::Expr(Expr::Call(call)) = &binding.value else {
                continue;
            };
            let Callee::Packed(callee) = &call.callee else {
                continue;
            };
            let Some(graph) = graphs
                .iter()
                .find(|g| callee.strip_prefix("npu.") == Some(g.name.as_str()))
            else {
                continue;
            };
            for (name, arg) in graph.inputs.iter().zip(&call.args) {
                if let Some(axis) = symbolic_axis(&arg.sinfo()) {
                    axes.insert(name.clone(), axis);
                }
            }
            if let StructInfo::Tuple(fields) = &call.sinfo {
                for (name, field) in graph.outputs.iter().zip(fields) {
                    if let Some(axis) = symbolic_axis(field) {
                        axes.insert(name.clone(), axis);
                    }
                }
            }
        }
    }
    axes
}

/// Prefill graphs first, then by the partition's number (`npu10` after `npu9`).
fn graph_order(name: &str) -> (bool, String, u64) {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (stem, number) = name.split_at(name.len() - digits);
    (
        !stem.starts_with("prefill"),
        stem.to_string(),
        number.parse().unwrap_or(0),
    )
}

/// A lowered value: a tensor of the graph, or a static tensor not yet placed in it.
#[derive(Debug, Clone)]
enum Lowered {
    /// A graph tensor by name, with its dims.
    Tensor(String, Vec<u32>),
    /// Static values (a weight or a transform of one), placed when a node reads them.
    Static(StaticValue),
    /// A shape argument (`reshape`'s; the binding's own dims say the same).
    Shape,
}

/// A static tensor's values and dims, named after the weight it derives from.
#[derive(Debug, Clone)]
struct StaticValue {
    name: String,
    dims: Vec<u32>,
    data: Rc<Vec<f32>>,
}

/// The lowering of one outlined function into the net.
struct GraphLowering<'n, 'w> {
    graph: String,
    net: &'n mut FloatNet,
    weights: &'n WeightSource<'w>,
    values: HashMap<String, Lowered>,
    nodes: Vec<String>,
}

impl<'n, 'w> GraphLowering<'n, 'w> {
    fn new(graph: &str, net: &'n mut FloatNet, weights: &'n WeightSource<'w>) -> Self {
        GraphLowering {
            graph: graph.to_string(),
            net,
            weights,
            values: HashMap::new(),
            nodes: Vec::new(),
        }
    }

    fn lower(mut self, function: &Function) -> Result<(), QnnError> {
        let num_input = function
            .attrs
            .get(NUM_INPUT_ATTR)
            .and_then(|v| match v {
                AttrValue::Int(n) => Some(*n as usize),
                _ => None,
            })
            .unwrap_or(function.params.len());
        let mut inputs = Vec::new();
        for (i, param) in function.params.iter().enumerate() {
            let dims = self.static_dims(&param.name, &param.sinfo)?;
            let lowered = if i < num_input {
                let name = self.tensor_name(&param.name);
                self.add_tensor(&name, tensor_type::APP_WRITE, &dims);
                inputs.push(name.clone());
                Lowered::Tensor(name, dims)
            } else {
                let data = (self.weights)(&param.name).map_err(|source| QnnError::Weight {
                    graph: self.graph.clone(),
                    weight: param.name.clone(),
                    source: Box::new(source),
                })?;
                Lowered::Static(StaticValue {
                    name: c_name(&param.name),
                    dims,
                    data: Rc::new(data),
                })
            };
            self.values.insert(param.name.clone(), lowered);
        }
        for binding in function.bindings() {
            let BindingValue::Expr(Expr::Call(call)) = &binding.value else {
                return Err(self.unsupported(&binding.var.name, "not an op call"));
            };
            let Callee::Op(op) = &call.callee else {
                return Err(self.unsupported(&binding.var.name, "not an op call"));
            };
            let dims = self.static_dims(&binding.var.name, &binding.var.sinfo)?;
            let args = call
                .args
                .iter()
                .map(|arg| self.arg(&binding.var.name, arg))
                .collect::<Result<Vec<_>, _>>()?;
            let out = OpLowering {
                var: &binding.var.name,
                op,
                args,
                attrs: &call.attrs,
                dims,
            };
            let lowered = self.lower_op(out)?;
            self.values.insert(binding.var.name.clone(), lowered);
        }
        let outputs = self.outputs(&function.ret)?;
        self.net.graphs.push(GraphSpec {
            name: self.graph.clone(),
            tokens: tokens_of(&self.graph, function),
            inputs,
            outputs,
            nodes: self.nodes,
            variant_of: None,
        });
        Ok(())
    }

    /// The graph's results, marked app-read.
    fn outputs(&mut self, ret: &Expr) -> Result<Vec<String>, QnnError> {
        let vars: Vec<&Expr> = match ret {
            Expr::Tuple(fields) => fields.iter().collect(),
            other => vec![other],
        };
        let mut names = Vec::new();
        for var in vars {
            let Expr::Var(var) = var else {
                return Err(self.unsupported("<return>", "a result that is not a variable"));
            };
            let Some(Lowered::Tensor(name, _)) = self.values.get(&var.name) else {
                return Err(self.unsupported(&var.name, "a result that is not computed on the NPU"));
            };
            if let Some(tensor) = self.net.graph.tensors.get_mut(name) {
                tensor.kind = tensor_type::APP_READ;
            }
            names.push(name.clone());
        }
        Ok(names)
    }

    fn arg(&self, binding: &str, arg: &Expr) -> Result<Lowered, QnnError> {
        match arg {
            Expr::Var(var) => {
                self.values.get(&var.name).cloned().ok_or_else(|| {
                    self.unsupported(binding, "an argument defined outside the graph")
                })
            }
            Expr::Shape(_) => Ok(Lowered::Shape),
            _ => Err(self.unsupported(binding, "an argument that is not a variable")),
        }
    }

    fn lower_op(&mut self, op: OpLowering<'_>) -> Result<Lowered, QnnError> {
        let out = self.tensor_name(op.var);
        match (op.op.as_str(), op.args.as_slice()) {
            ("permute_dims", [Lowered::Static(w)]) => Ok(Lowered::Static(transpose_static(
                w,
                &permutation(op.attrs, w.dims.len()),
            ))),
            ("permute_dims", [Lowered::Tensor(x, x_dims)]) => {
                let perm = permutation(op.attrs, x_dims.len());
                let perm = uint_param(
                    &[perm.len() as u32],
                    perm.iter().map(|&p| p as f64).collect(),
                );
                self.node(
                    &out,
                    "Transpose",
                    vec![x.clone()],
                    &op.dims,
                    [("perm", perm)],
                    [],
                );
                Ok(Lowered::Tensor(out, op.dims))
            }
            ("matmul", [Lowered::Tensor(x, x_dims), Lowered::Static(w)]) if w.dims.len() == 2 => {
                self.linear(&out, (x, x_dims), w, &op.dims)?;
                Ok(Lowered::Tensor(out, op.dims))
            }
            ("rms_norm", [Lowered::Tensor(x, x_dims), Lowered::Static(gamma)]) => {
                let axes = int_list(op.attrs, "axes").unwrap_or_else(|| vec![-1]);
                let last = x_dims.len() as i64 - 1;
                if axes.len() != 1 || (axes[0] != -1 && axes[0] != last) {
                    return Err(self.unsupported(op.var, "rms_norm over other than the last axis"));
                }
                let epsilon = match op.attrs.get("epsilon") {
                    Some(AttrValue::Float(e)) => *e,
                    _ => 1e-5,
                };
                let beta = StaticValue {
                    name: format!("{}_beta", gamma.name),
                    dims: gamma.dims.clone(),
                    data: Rc::new(vec![0.0; gamma.data.len()]),
                };
                let gamma = self.place_static(gamma)?;
                let beta = self.place_static(&beta)?;
                let axes = uint_param(&[1], vec![last as f64]);
                let epsilon = scalar_param(QnnDataType::Float32, epsilon);
                self.node(
                    &out,
                    "RmsNorm",
                    vec![x.clone(), gamma, beta],
                    &op.dims,
                    [("axes", axes)],
                    [("epsilon", epsilon)],
                );
                Ok(Lowered::Tensor(out, op.dims))
            }
            ("add" | "multiply", [a, b]) => {
                let kind = if op.op == "add" {
                    "ElementWiseAdd"
                } else {
                    "ElementWiseMultiply"
                };
                let inputs = vec![self.operand(a)?, self.operand(b)?];
                self.node(&out, kind, inputs, &op.dims, [], []);
                Ok(Lowered::Tensor(out, op.dims))
            }
            ("sigmoid", [Lowered::Tensor(x, _)]) => {
                self.node(&out, "Sigmoid", vec![x.clone()], &op.dims, [], []);
                Ok(Lowered::Tensor(out, op.dims))
            }
            ("silu", [Lowered::Tensor(x, _)]) => {
                let gate = format!("{out}_sigmoid");
                self.node(&gate, "Sigmoid", vec![x.clone()], &op.dims, [], []);
                self.node(
                    &out,
                    "ElementWiseMultiply",
                    vec![x.clone(), gate],
                    &op.dims,
                    [],
                    [],
                );
                Ok(Lowered::Tensor(out, op.dims))
            }
            ("reshape", [Lowered::Tensor(x, _), Lowered::Shape]) => {
                self.node(&out, "Reshape", vec![x.clone()], &op.dims, [], []);
                Ok(Lowered::Tensor(out, op.dims))
            }
            _ => Err(self.unsupported(op.var, &format!("op `{}` with these operands", op.op))),
        }
    }

    /// `x @ w` (`w` of `[in, out]`) as a 1x1 convolution over `[1, 1, tokens, in]`.
    fn linear(
        &mut self,
        out: &str,
        (x, x_dims): (&String, &Vec<u32>),
        w: &StaticValue,
        out_dims: &[u32],
    ) -> Result<(), QnnError> {
        let (cin, cout) = (w.dims[0], w.dims[1]);
        let tokens: u32 = x_dims[..x_dims.len() - 1].iter().product();
        let nhwc_in = vec![1, 1, tokens, cin];
        let conv_in = format!("{out}_nhwc");
        self.node(&conv_in, "Reshape", vec![x.clone()], &nhwc_in, [], []);
        let filter = StaticValue {
            name: w.name.clone(),
            dims: vec![1, 1, cin, cout],
            data: w.data.clone(),
        };
        let filter = self.place_static(&filter)?;
        let conv_out = format!("{out}_conv");
        let params = [
            ("dilation", uint_param(&[2], vec![1.0, 1.0])),
            ("pad_amount", uint_param(&[2, 2], vec![0.0; 4])),
            ("stride", uint_param(&[2], vec![1.0, 1.0])),
        ];
        let group = scalar_param(QnnDataType::Uint32, 1.0);
        self.node(
            &conv_out,
            "Conv2d",
            vec![conv_in, filter],
            &[1, 1, tokens, cout],
            params,
            [("group", group)],
        );
        self.node(out, "Reshape", vec![conv_out], out_dims, [], []);
        Ok(())
    }

    /// The tensor name of an operand, placing a static one.
    fn operand(&mut self, value: &Lowered) -> Result<String, QnnError> {
        match value {
            Lowered::Tensor(name, _) => Ok(name.clone()),
            Lowered::Static(value) => self.place_static(value),
            Lowered::Shape => Err(self.unsupported(&self.graph, "a shape operand")),
        }
    }

    /// Adds a static tensor to the net (once: a prefill and a decode graph share it).
    fn place_static(&mut self, value: &StaticValue) -> Result<String, QnnError> {
        if let Some(existing) = self.net.statics.get(&value.name) {
            let same_dims = self.net.graph.tensors[&value.name].dims == value.dims;
            if !same_dims || existing.as_slice() != value.data.as_slice() {
                return Err(QnnError::StaticConflict {
                    tensor: value.name.clone(),
                    graph: self.graph.clone(),
                });
            }
            return Ok(value.name.clone());
        }
        self.add_tensor(&value.name, tensor_type::STATIC, &value.dims);
        self.net
            .statics
            .insert(value.name.clone(), value.data.as_ref().clone());
        Ok(value.name.clone())
    }

    /// Adds a node writing the new native tensor `out` of `dims` (the node takes its
    /// output's name).
    fn node<const T: usize, const S: usize>(
        &mut self,
        out: &str,
        op_type: &str,
        inputs: Vec<String>,
        dims: &[u32],
        tensor_params: [(&str, TensorParam); T],
        scalar_params: [(&str, BTreeMap<String, f64>); S],
    ) {
        self.add_tensor(out, tensor_type::NATIVE, dims);
        let node = NetNode {
            package: PACKAGE_QTI_AISW.to_string(),
            op_type: op_type.to_string(),
            tensor_params: tensor_params
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            scalar_params: scalar_params
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            input_names: inputs,
            output_names: vec![out.to_string()],
        };
        self.net.graph.nodes.insert(out.to_string(), node);
        self.nodes.push(out.to_string());
    }

    fn add_tensor(&mut self, name: &str, kind: u32, dims: &[u32]) {
        let tensor = NetTensor {
            id: 0,
            kind,
            data_format: DATA_FORMAT_FLAT_BUFFER,
            data_type: QnnDataType::Float32.code(),
            quant_params: QuantParams::none(),
            dims: dims.to_vec(),
        };
        self.net.graph.tensors.insert(name.to_string(), tensor);
    }

    /// The graph-unique tensor (and node) name of a variable.
    fn tensor_name(&self, var: &str) -> String {
        c_name(&format!("{}__{var}", self.graph))
    }

    fn static_dims(&self, var: &str, sinfo: &StructInfo) -> Result<Vec<u32>, QnnError> {
        let not_static = || QnnError::NotStatic {
            graph: self.graph.clone(),
            tensor: var.to_string(),
            shape: format!("{sinfo:?}"),
        };
        let StructInfo::Tensor(info) = sinfo else {
            return Err(not_static());
        };
        let dims = info.dims().ok_or_else(not_static)?;
        dims.iter()
            .map(|d| {
                d.as_const()
                    .filter(|&d| d > 0 && d <= u32::MAX as i64)
                    .map(|d| d as u32)
            })
            .collect::<Option<Vec<u32>>>()
            .ok_or_else(not_static)
    }

    fn unsupported(&self, binding: &str, what: &str) -> QnnError {
        QnnError::Unsupported {
            graph: self.graph.clone(),
            binding: binding.to_string(),
            what: what.to_string(),
        }
    }
}

/// Tokens per call of graph `name`: the chunk for a chunked function's graphs, else one.
fn tokens_of(name: &str, function: &Function) -> u32 {
    let chunked = NPU_FUNCTIONS
        .iter()
        .find(|(f, _)| name.starts_with(&format!("{f}_npu")))
        .is_some_and(|&(_, chunked)| chunked);
    match function.attrs.get("chunk") {
        Some(AttrValue::Int(chunk)) if chunked => *chunk as u32,
        _ => 1,
    }
}

/// One binding to lower.
struct OpLowering<'a> {
    var: &'a str,
    op: &'a String,
    args: Vec<Lowered>,
    attrs: &'a oxrelax_dsl::Attrs,
    dims: Vec<u32>,
}

/// A UINT_32 tensor parameter.
fn uint_param(dims: &[u32], data: Vec<f64>) -> TensorParam {
    TensorParam {
        data_type: QnnDataType::Uint32.code(),
        dims: dims.to_vec(),
        data,
    }
}

fn int_list(attrs: &oxrelax_dsl::Attrs, key: &str) -> Option<Vec<i64>> {
    match attrs.get(key) {
        Some(AttrValue::Ints(v)) => Some(v.clone()),
        _ => None,
    }
}

/// `permute_dims`' axes (all reversed when absent), made non-negative.
fn permutation(attrs: &oxrelax_dsl::Attrs, rank: usize) -> Vec<usize> {
    match int_list(attrs, "axes") {
        Some(axes) => axes
            .iter()
            .map(|&a| a.rem_euclid(rank as i64) as usize)
            .collect(),
        None => (0..rank).rev().collect(),
    }
}

/// The static value permuted by `perm` (computed once, at compile time).
fn transpose_static(value: &StaticValue, perm: &[usize]) -> StaticValue {
    let dims: Vec<u32> = perm.iter().map(|&p| value.dims[p]).collect();
    let rank = dims.len();
    let mut in_strides = vec![1usize; rank];
    for i in (0..rank.saturating_sub(1)).rev() {
        in_strides[i] = in_strides[i + 1] * value.dims[i + 1] as usize;
    }
    let mut data = Vec::with_capacity(value.data.len());
    let mut index = vec![0usize; rank];
    for _ in 0..value.data.len() {
        let offset: usize = (0..rank).map(|i| index[i] * in_strides[perm[i]]).sum();
        data.push(value.data[offset]);
        for i in (0..rank).rev() {
            index[i] += 1;
            if index[i] < dims[i] as usize {
                break;
            }
            index[i] = 0;
        }
    }
    let suffix: String = perm.iter().map(|p| p.to_string()).collect();
    StaticValue {
        name: format!("{}_p{suffix}", value.name),
        dims,
        data: Rc::new(data),
    }
}
