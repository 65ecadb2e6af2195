//! A partitioned model's NPU graphs run on the host: each graph of an `npu/` folder is
//! registered as the packed function `npu.<graph>` the compiled CPU part calls on the
//! graph's activations, executed by the host reference backend ([`super::sim`]). A
//! prefill graph runs full chunks: a shorter call's rows are padded with zeros along the
//! token axis and its outputs cut back (every NPU op works row by row, so padding changes
//! no real row).

use super::net::NetFile;
use super::sim::{SimContext, SimMode};
use crate::packed::{Args, BuiltinError, BuiltinFailure};
use crate::{Registry, Tensor, Value, ValueKind};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Observed `(min, max)` of tensors, by name.
pub type Ranges = BTreeMap<String, (f32, f32)>;

/// Receives every non-static tensor a graph call computes (its inputs first, padded to
/// the graph's tokens): the graph's name, the tensor's name and its values.
pub type TensorObserver = Arc<dyn Fn(&str, &str, &[f32]) + Send + Sync>;

/// An observer widening `ranges` to every tensor's values (calibration).
pub fn range_observer(ranges: Arc<Mutex<Ranges>>) -> TensorObserver {
    Arc::new(move |_graph, tensor, values| {
        let (lo, hi) = values
            .iter()
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), &v| {
                (l.min(v), h.max(v))
            });
        let mut ranges = ranges.lock().unwrap_or_else(|e| e.into_inner());
        let range = ranges.entry(tensor.to_string()).or_insert((lo, hi));
        *range = (range.0.min(lo), range.1.max(hi));
    })
}

/// Registers `npu.<graph>` for every graph of `sim` in `registry`, taking the graph's
/// activations (its weights are its static tensors). With `observer`, every tensor each
/// call computes is shown to it.
pub fn register_npu_graphs(
    registry: &mut Registry,
    sim: Arc<SimContext>,
    mode: SimMode,
    observer: Option<TensorObserver>,
) -> Result<(), BuiltinError> {
    let net: &NetFile = sim.net();
    for graph in &net.graphs {
        let params: Vec<(&str, ValueKind)> = graph
            .inputs
            .iter()
            .map(|_| ("activation", ValueKind::Tensor))
            .collect();
        let (sim, observer, graph) = (sim.clone(), observer.clone(), graph.name.clone());
        registry.register(&format!("npu.{graph}"), &params, move |args| {
            run_graph(&sim, &graph, mode, observer.as_ref(), args)
        })?;
    }
    Ok(())
}

fn run_graph(
    sim: &SimContext,
    graph: &str,
    mode: SimMode,
    observer: Option<&TensorObserver>,
    args: &Args<'_>,
) -> Result<Value, BuiltinError> {
    let spec = sim
        .net()
        .graphs
        .iter()
        .find(|g| g.name == graph)
        .ok_or_else(|| args.invalid(0, graph, "no such NPU graph"))?;
    let (tensors, token_axes) = (&sim.net().graph.tensors, &sim.net().token_axes);
    let mut rows = spec.tokens as i64;
    let mut inputs = Vec::with_capacity(spec.inputs.len());
    for (i, name) in spec.inputs.iter().enumerate() {
        let dims = &tensors[name].dims;
        let given = args.tensor(i)?;
        let axis = token_axes.get(name).map(|&a| a as usize);
        let expected = |a: usize, d: u32| {
            if Some(a) == axis {
                given.shape().get(a).copied().unwrap_or(0)
            } else {
                d as i64
            }
        };
        let shape: Vec<i64> = dims
            .iter()
            .enumerate()
            .map(|(a, &d)| expected(a, d))
            .collect();
        let outermost = axis.is_none_or(|a| dims[..a].iter().all(|&d| d == 1));
        if !outermost
            || given.shape() != shape.as_slice()
            || axis.is_some_and(|a| shape[a] > dims[a] as i64)
        {
            let reason = format!("graph input `{name}` has dims {dims:?} (token axis {axis:?})");
            return Err(args.invalid(i, format!("{:?}", given.shape()), &reason));
        }
        if let Some(a) = axis {
            rows = shape[a];
        }
        let mut padded = given.as_slice::<f32>().map_err(|e| args.fail(e))?.to_vec();
        padded.resize(tensors[name].numel() as usize, 0.0);
        inputs.push(padded);
    }
    let refs: Vec<&[f32]> = inputs.iter().map(Vec::as_slice).collect();
    let mut observe = |tensor: &str, values: &[f32]| {
        if let Some(observer) = observer {
            observer(graph, tensor, values);
        }
    };
    let outputs = sim
        .run_observed(graph, &refs, mode, &mut observe)
        .map_err(|e| args.fail(BuiltinFailure::from(e)))?;
    let mut values = Vec::with_capacity(outputs.len());
    for (name, data) in spec.outputs.iter().zip(outputs) {
        let dims = &tensors[name].dims;
        let axis = token_axes.get(name).map(|&a| a as usize);
        let shape: Vec<i64> = dims
            .iter()
            .enumerate()
            .map(|(a, &d)| if Some(a) == axis { rows } else { d as i64 })
            .collect();
        let kept = shape.iter().product::<i64>() as usize;
        let tensor = Tensor::from_slice(&data[..kept], &shape).map_err(|e| args.fail(e))?;
        values.push(Value::Tensor(tensor));
    }
    Ok(Value::Tuple(values))
}
