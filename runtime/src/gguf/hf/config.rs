//! The Hugging Face `config.json` a GGUF file's metadata describes, for the model
//! library's config parser: hyper-parameters under `{arch}.*`, special token ids under
//! `tokenizer.ggml.*`, tied embeddings when the file has no `output.weight`.

use super::arch::ArchSpec;
use crate::gguf::{GgufError, GgufFile, MetaArray, MetaValue};
use serde_json::{json, Map, Value};

/// The RoPE base of Gemma 3's sliding-window layers when the file does not give one
/// (llama.cpp's default too).
const GEMMA3_LOCAL_ROPE_BASE: f32 = 10_000.0;

/// Gemma 3's default layer pattern: every sixth layer attends globally.
const GEMMA3_PATTERN: u32 = 6;

/// The `config.json` of `file`, an `arch` model.
pub(crate) fn config_json(file: &GgufFile, arch: &ArchSpec) -> Result<Value, GgufError> {
    let key = |name: &str| format!("{}.{name}", arch.gguf);
    let bad = |name: &str, reason: String| GgufError::BadValue {
        path: file.path().to_path_buf(),
        key: key(name),
        reason,
    };
    let optional_u32 = |name: &str| optional(file, &key(name), GgufFile::get_u32);
    let layers = block_count(file, arch)?;
    let hidden = file.get_u32(&key("embedding_length"))?;
    let heads = file.get_u32(&key("attention.head_count"))?;
    if heads == 0 {
        return Err(bad("attention.head_count", "must be positive".into()));
    }
    let head_dim = optional_u32("attention.key_length")?.unwrap_or(hidden / heads);
    if let Some(v) = optional_u32("attention.value_length")?.filter(|&v| v != head_dim) {
        let reason = format!("{v} differs from the key length {head_dim}");
        return Err(bad("attention.value_length", reason));
    }
    if let Some(d) = optional_u32("rope.dimension_count")?.filter(|&d| d != head_dim) {
        let reason = format!("RoPE over {d} of {head_dim} lanes per head is not supported");
        return Err(bad("rope.dimension_count", reason));
    }
    if let Some(kind) = optional(file, &key("rope.scaling.type"), GgufFile::get_str)? {
        if kind != "none" {
            let reason = format!("RoPE scaling `{kind}` is not supported from GGUF");
            return Err(bad("rope.scaling.type", reason));
        }
    }
    if let Some(n) = optional_u32("expert_count")?.filter(|&n| n > 0) {
        return Err(bad(
            "expert_count",
            format!("{n} experts: mixtures of experts are not supported"),
        ));
    }
    let embedding = file
        .tensor("token_embd.weight")
        .ok_or_else(|| GgufError::NoTensor {
            path: file.path().to_path_buf(),
            tensor: "token_embd.weight".into(),
        })?;
    let vocab = embedding.dims.get(1).copied().unwrap_or(0);
    let has = |tensor: &str| file.tensor(tensor).is_some();
    let mut config = Map::new();
    let mut set = |k: &str, v: Value| {
        config.insert(k.to_string(), v);
    };
    set("architectures", json!([arch.class]));
    set("model_type", json!(arch.model_type));
    set("hidden_size", json!(hidden));
    set(
        "intermediate_size",
        json!(file.get_u32(&key("feed_forward_length"))?),
    );
    set("num_hidden_layers", json!(layers));
    set("num_attention_heads", json!(heads));
    set(
        "num_key_value_heads",
        json!(optional_u32("attention.head_count_kv")?.unwrap_or(heads)),
    );
    set("head_dim", json!(head_dim));
    set("vocab_size", json!(vocab));
    set(
        "rms_norm_eps",
        json!(file.get_f32(&key("attention.layer_norm_rms_epsilon"))?),
    );
    let rope_base = optional(file, &key("rope.freq_base"), GgufFile::get_f32)?;
    set("rope_theta", json!(rope_base.unwrap_or(10_000.0)));
    set(
        "max_position_embeddings",
        json!(file.get_u32(&key("context_length"))?),
    );
    set("tie_word_embeddings", json!(!has("output.weight")));
    set("attention_bias", json!(has("blk.0.attn_q.bias")));
    set("mlp_bias", json!(has("blk.0.ffn_up.bias")));
    set("torch_dtype", json!("float32"));
    for (name, id) in [
        ("bos_token_id", "bos_token_id"),
        ("eos_token_id", "eos_token_id"),
    ] {
        if let Some(v) = optional(file, &format!("tokenizer.ggml.{id}"), GgufFile::get_u32)? {
            set(name, json!(v));
        }
    }
    if arch.gguf == "gemma3" {
        gemma3_fields(file, arch, (layers, hidden, heads, head_dim), &mut config)?;
    }
    Ok(Value::Object(config))
}

/// Gemma 3's own fields: the sliding window, which layers use it, the local RoPE base,
/// the query scale and the activation.
fn gemma3_fields(
    file: &GgufFile,
    arch: &ArchSpec,
    (layers, hidden, heads, head_dim): (u32, u32, u32, u32),
    config: &mut Map<String, Value>,
) -> Result<(), GgufError> {
    let key = |name: &str| format!("{}.{name}", arch.gguf);
    if let Some(cap) = optional(file, &key("final_logit_softcapping"), GgufFile::get_f32)? {
        if cap != 0.0 {
            return Err(GgufError::BadValue {
                path: file.path().to_path_buf(),
                key: key("final_logit_softcapping"),
                reason: format!("{cap}: logit soft-capping is not supported"),
            });
        }
    }
    let window = optional(file, &key("attention.sliding_window"), GgufFile::get_u32)?;
    let sliding = match window.filter(|&w| w > 0) {
        Some(_) => sliding_layers(file, &key("attention.sliding_window_pattern"), layers)?,
        None => vec![false; layers as usize],
    };
    let types: Vec<&str> = sliding
        .iter()
        .map(|&s| {
            if s {
                "sliding_attention"
            } else {
                "full_attention"
            }
        })
        .collect();
    let local_base = optional(file, &key("rope.freq_base_swa"), GgufFile::get_f32)?;
    // llama.cpp scales queries by 1/sqrt(hidden / heads) for the 62-layer (27B) model, by
    // 1/sqrt(head_dim) for the others, as Gemma's reference does.
    let query_scalar = if layers == 62 {
        hidden / heads
    } else {
        head_dim
    };
    if let Some(window) = window.filter(|&w| w > 0) {
        config.insert("sliding_window".into(), json!(window));
    }
    config.insert("layer_types".into(), json!(types));
    config.insert(
        "rope_local_base_freq".into(),
        json!(local_base.unwrap_or(GEMMA3_LOCAL_ROPE_BASE)),
    );
    config.insert("query_pre_attn_scalar".into(), json!(query_scalar));
    config.insert("hidden_activation".into(), json!("gelu_pytorch_tanh"));
    Ok(())
}

/// `{arch}.block_count`: the number of layers, at most the number of tensors the file
/// holds (each layer has some), so nothing sized by it outgrows the file.
fn block_count(file: &GgufFile, arch: &ArchSpec) -> Result<u32, GgufError> {
    let key = format!("{}.block_count", arch.gguf);
    let layers = file.get_u32(&key)?;
    let tensors = file.tensors().len();
    if layers as usize > tensors {
        return Err(GgufError::BadValue {
            path: file.path().to_path_buf(),
            key,
            reason: format!("{layers} layers, but the file holds {tensors} tensors"),
        });
    }
    Ok(layers)
}

/// Which of `layers` layers use the sliding window: the per-layer flags `key` gives, or
/// its period `n` (every `n`-th layer global), or Gemma 3's default period.
fn sliding_layers(file: &GgufFile, key: &str, layers: u32) -> Result<Vec<bool>, GgufError> {
    let bad = |reason: String| GgufError::BadValue {
        path: file.path().to_path_buf(),
        key: key.to_string(),
        reason,
    };
    match file.metadata().get(key) {
        Some(MetaValue::Array(MetaArray::Bool(flags))) if flags.len() == layers as usize => {
            Ok(flags.clone())
        }
        Some(MetaValue::Array(a)) => Err(bad(format!(
            "{} values of type {}, not {layers} bools",
            a.len(),
            a.elem_type().name()
        ))),
        Some(_) | None => {
            let period = optional(file, key, GgufFile::get_u32)?.unwrap_or(GEMMA3_PATTERN);
            if period == 0 {
                return Err(bad("a period of 0".into()));
            }
            Ok((0..layers).map(|i| i % period < period - 1).collect())
        }
    }
}

/// `get(file, key)` when the file holds `key`, else `None`.
pub(super) fn optional<'a, T>(
    file: &'a GgufFile,
    key: &str,
    get: fn(&'a GgufFile, &str) -> Result<T, GgufError>,
) -> Result<Option<T>, GgufError> {
    match file.metadata().contains_key(key) {
        true => get(file, key).map(Some),
        false => Ok(None),
    }
}
