//! A partitioned model's NPU graphs run on the host: each graph of an `npu/` folder is
//! registered as the packed function `npu.<graph>` the compiled CPU part calls on the
//! graph's activations, executed by the host reference backend ([`super::sim`]). A
//! prefill graph runs full chunks: a shorter call's rows are padded with zeros along the
//! token axis and its outputs cut back (every NPU op works row by row, so padding changes
//! no real row).

use super::net::{GraphSpec, NetFile};
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
        let (sim, observer, spec) = (sim.clone(), observer.clone(), graph.clone());
        registry.register(&format!("npu.{}", graph.name), &params, move |args| {
            run_graph(&sim, &spec, mode, observer.as_ref(), args)
        })?;
    }
    Ok(())
}

fn run_graph(
    sim: &SimContext,
    spec: &GraphSpec,
    mode: SimMode,
    observer: Option<&TensorObserver>,
    args: &Args<'_>,
) -> Result<Value, BuiltinError> {
    let (tensors, token_axes) = (&sim.net().graph.tensors, &sim.net().token_axes);
    let axis_of = |name: &str| token_axes.get(name).map(|&a| a as usize);
    let mut rows = spec.tokens as i64;
    let mut inputs = Vec::with_capacity(spec.inputs.len());
    for (i, name) in spec.inputs.iter().enumerate() {
        let dims = &tensors[name].dims;
        let given = args.tensor(i)?;
        let axis = axis_of(name);
        let given_rows = axis.and_then(|a| given.shape().get(a).copied());
        let shape = with_rows(dims, axis, given_rows.unwrap_or(0));
        let fits = axis.is_none_or(|a| given_rows.is_some_and(|r| r <= dims[a] as i64));
        if !fits || shape.as_deref() != Some(given.shape()) {
            let reason = format!("graph input `{name}` has dims {dims:?} (token axis {axis:?})");
            return Err(args.invalid(i, format!("{:?}", given.shape()), &reason));
        }
        if let Some(r) = given_rows {
            rows = r;
        }
        let mut padded = given.as_slice::<f32>().map_err(|e| args.fail(e))?.to_vec();
        padded.resize(tensors[name].numel() as usize, 0.0);
        inputs.push(padded);
    }
    let refs: Vec<&[f32]> = inputs.iter().map(Vec::as_slice).collect();
    let mut observe = |tensor: &str, values: &[f32]| {
        if let Some(observer) = observer {
            observer(&spec.name, tensor, values);
        }
    };
    let outputs = sim
        .run_observed(&spec.name, &refs, mode, &mut observe)
        .map_err(|e| args.fail(BuiltinFailure::from(e)))?;
    let mut values = Vec::with_capacity(outputs.len());
    for (name, data) in spec.outputs.iter().zip(outputs) {
        let dims = &tensors[name].dims;
        let shape = with_rows(dims, axis_of(name), rows).ok_or_else(|| {
            let reason = "its token axis is not the outermost non-unit one";
            args.invalid(0, name, reason)
        })?;
        let kept = shape.iter().product::<i64>() as usize;
        let tensor = Tensor::from_slice(&data[..kept], &shape).map_err(|e| args.fail(e))?;
        values.push(Value::Tensor(tensor));
    }
    Ok(Value::Tuple(values))
}

/// `dims` with `rows` along the token `axis` (if any), when every axis before it has
/// length 1: then a call's rows are a prefix of the graph's padded tensor.
fn with_rows(dims: &[u32], axis: Option<usize>, rows: i64) -> Option<Vec<i64>> {
    if axis.is_some_and(|a| a >= dims.len() || dims[..a].iter().any(|&d| d != 1)) {
        return None;
    }
    let dim = |(a, &d): (usize, &u32)| if Some(a) == axis { rows } else { d as i64 };
    Some(dims.iter().enumerate().map(dim).collect())
}
