//! The NPU part of an artifact: any `model_net.json` (the input up to its first NUL
//! byte) with any `model.bin` archive (the bytes after it) is a checked net or a typed
//! error, and every graph of a small checked net runs in the simulator in each mode or
//! gives a typed error. An input without a NUL byte gives every static tensor zero bytes
//! of its size, so a real net's text alone reaches the checks past the archive.

#![no_main]

use libfuzzer_sys::fuzz_target;
use oxrelax_runtime::qnn::bin::read_bin;
use oxrelax_runtime::qnn::codes::tensor_type;
use oxrelax_runtime::qnn::sim::{SimContext, SimMode};
use oxrelax_runtime::qnn::{NetFile, QnnDataType};
use std::collections::BTreeMap;

/// The most elements of all tensors together for which the graphs are run (their
/// values are allocated whole).
const RUN_ELEMENTS: u64 = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let (text, archive) = match data.iter().position(|&b| b == 0) {
        Some(nul) => (&data[..nul], Some(&data[nul + 1..])),
        None => (data, None),
    };
    let Ok(net) = serde_json::from_slice::<NetFile>(text) else {
        return;
    };
    let Some(elements) = total_elements(&net) else {
        return;
    };
    let bin = match archive {
        Some(archive) => match read_bin(archive, archive.len() as u64) {
            Ok(bin) => bin,
            Err(_) => return,
        },
        None if elements <= RUN_ELEMENTS => zero_statics(&net),
        None => return,
    };
    let Ok(sim) = SimContext::from_parts(net, bin) else {
        return;
    };
    if elements > RUN_ELEMENTS {
        return;
    }
    for graph in &sim.net().graphs {
        let inputs: Vec<Vec<f32>> = graph
            .inputs
            .iter()
            .map(|name| vec![0.5; numel(sim.net(), name).unwrap_or(0) as usize])
            .collect();
        let inputs: Vec<&[f32]> = inputs.iter().map(Vec::as_slice).collect();
        for mode in [SimMode::Float, SimMode::Spec, SimMode::Integer] {
            let _ = sim.run(&graph.name, &inputs, mode);
        }
    }
});

/// The element count of tensor `name`, if it exists and its count fits in a u64.
fn numel(net: &NetFile, name: &str) -> Option<u64> {
    let tensor = net.graph.tensors.get(name)?;
    tensor
        .dims
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(u64::from(d)))
}

/// The element count of all tensors together, if it fits in a u64.
fn total_elements(net: &NetFile) -> Option<u64> {
    net.graph
        .tensors
        .keys()
        .try_fold(0u64, |sum, name| sum.checked_add(numel(net, name)?))
}

/// Zero bytes of its stored size for every static tensor of a known type.
fn zero_statics(net: &NetFile) -> BTreeMap<String, Vec<u8>> {
    let statics = net.graph.tensors.iter().filter(|(_, t)| t.kind == tensor_type::STATIC);
    statics
        .filter_map(|(name, tensor)| {
            let bytes = QnnDataType::from_code(tensor.data_type)?.stored_bytes();
            Some((name.clone(), vec![0; numel(net, name)? as usize * bytes]))
        })
        .collect()
}
