//! A Llama checkpoint rewritten as Phi-3 stores its weights: the same function, with each
//! layer's q/k/v projections fused into `self_attn.qkv_proj` and its gate/up projections
//! into `mlp.gate_up_proj` (rows one after another, as `Phi3ForCausalLM` slices them).

use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};
use std::collections::BTreeMap;
use std::path::Path;

/// The fused weights: the projections of each group, in order, and the fused name.
const FUSED: [(&[&str], &str); 2] = [
    (&["q_proj", "k_proj", "v_proj"], "qkv_proj"),
    (&["gate_proj", "up_proj"], "gate_up_proj"),
];

/// The fused name of `name` and its part's index, when it is a fused projection's part.
fn fused_name(name: &str) -> Option<(String, usize)> {
    FUSED.iter().find_map(|(parts, fused)| {
        parts.iter().enumerate().find_map(|(index, part)| {
            let pattern = format!(".{part}.");
            name.contains(&pattern)
                .then(|| (name.replace(&pattern, &format!(".{fused}.")), index))
        })
    })
}

/// A copy of the Llama checkpoint in `dir` as a `Phi3ForCausalLM` one, in a fresh
/// temporary folder (with the tokenizer files).
pub fn phi3_copy(dir: &Path) -> tempfile::TempDir {
    let out = tempfile::tempdir().unwrap();
    let config = std::fs::read_to_string(dir.join("config.json")).unwrap();
    let mut config: serde_json::Value = serde_json::from_str(&config).unwrap();
    config["architectures"] = serde_json::json!(["Phi3ForCausalLM"]);
    config["model_type"] = serde_json::json!("phi3");
    std::fs::write(out.path().join("config.json"), config.to_string()).unwrap();
    for file in [
        "tokenizer.json",
        "tokenizer_config.json",
        "generation_config.json",
    ] {
        if dir.join(file).is_file() {
            std::fs::copy(dir.join(file), out.path().join(file)).unwrap();
        }
    }
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let tensors = SafeTensors::deserialize(&bytes).unwrap();
    let mut kept: BTreeMap<String, (Dtype, Vec<usize>, Vec<u8>)> = BTreeMap::new();
    let mut parts: BTreeMap<String, BTreeMap<usize, TensorView<'_>>> = BTreeMap::new();
    for (name, view) in tensors.tensors() {
        match fused_name(&name) {
            Some((fused, index)) => {
                parts.entry(fused).or_default().insert(index, view);
            }
            None => {
                let tensor = (view.dtype(), view.shape().to_vec(), view.data().to_vec());
                kept.insert(name, tensor);
            }
        }
    }
    for (name, parts) in parts {
        let first = &parts[&0];
        let mut shape = first.shape().to_vec();
        shape[0] = parts.values().map(|p| p.shape()[0]).sum();
        let data = parts.values().flat_map(|p| p.data().to_vec()).collect();
        kept.insert(name, (first.dtype(), shape, data));
    }
    let views: Vec<(String, TensorView<'_>)> = kept
        .iter()
        .map(|(name, (dtype, shape, data))| {
            let view = TensorView::new(*dtype, shape.clone(), data).unwrap();
            (name.clone(), view)
        })
        .collect();
    let written = safetensors::serialize(views, None).unwrap();
    std::fs::write(out.path().join("model.safetensors"), written).unwrap();
    out
}
