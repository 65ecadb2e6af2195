//! GGUF model files written here, read back as Hugging Face models: the config their
//! metadata describes, tensor names and the fixes loading undoes, tokenizers, and a typed
//! error for each thing the reader cannot build.

use super::*;
use serde_json::json;

/// A metadata value to write.
enum V<'a> {
    U32(u32),
    F32(f32),
    Bool(bool),
    Str(&'a str),
    Strs(Vec<String>),
    I32s(Vec<i32>),
    F32s(Vec<f32>),
}

/// Writes a version 3 GGUF file of `meta` and F32 `tensors` (name, GGUF dims, values).
fn build(meta: &[(String, V)], tensors: &[(String, Vec<u64>, Vec<f32>)]) -> GgufFile {
    let mut b = Vec::new();
    let str = |b: &mut Vec<u8>, s: &str| {
        b.extend((s.len() as u64).to_le_bytes());
        b.extend(s.as_bytes());
    };
    b.extend(b"GGUF");
    b.extend(3u32.to_le_bytes());
    b.extend((tensors.len() as u64).to_le_bytes());
    b.extend((meta.len() as u64).to_le_bytes());
    for (key, value) in meta {
        str(&mut b, key);
        let array = |b: &mut Vec<u8>, ty: u32, n: usize| {
            b.extend(9u32.to_le_bytes());
            b.extend(ty.to_le_bytes());
            b.extend((n as u64).to_le_bytes());
        };
        match value {
            V::U32(v) => b.extend(4u32.to_le_bytes().into_iter().chain(v.to_le_bytes())),
            V::F32(v) => b.extend(6u32.to_le_bytes().into_iter().chain(v.to_le_bytes())),
            V::Bool(v) => b.extend(7u32.to_le_bytes().into_iter().chain([*v as u8])),
            V::Str(s) => {
                b.extend(8u32.to_le_bytes());
                str(&mut b, s);
            }
            V::Strs(items) => {
                array(&mut b, 8, items.len());
                items.iter().for_each(|s| str(&mut b, s));
            }
            V::I32s(items) => {
                array(&mut b, 5, items.len());
                items.iter().for_each(|v| b.extend(v.to_le_bytes()));
            }
            V::F32s(items) => {
                array(&mut b, 6, items.len());
                items.iter().for_each(|v| b.extend(v.to_le_bytes()));
            }
        }
    }
    let mut offset = 0u64;
    for (name, dims, values) in tensors {
        str(&mut b, name);
        b.extend((dims.len() as u32).to_le_bytes());
        dims.iter().for_each(|d| b.extend(d.to_le_bytes()));
        b.extend(0u32.to_le_bytes());
        b.extend(offset.to_le_bytes());
        offset = (offset + 4 * values.len() as u64).next_multiple_of(32);
    }
    for (_, _, values) in tensors {
        b.resize(b.len().next_multiple_of(32), 0);
        values.iter().for_each(|v| b.extend(v.to_le_bytes()));
    }
    GgufFile::from_bytes(Path::new("model.gguf"), b).unwrap()
}

/// A two-layer model of `arch`: hidden 8, 2 heads of 4 (1 KV head), MLP 12, vocabulary
/// 6; every tensor's values count up from its own start so misplaced rows show.
fn model_tensors(arch: &str) -> Vec<(String, Vec<u64>, Vec<f32>)> {
    let mut names = vec![
        ("token_embd.weight".to_string(), vec![8, 6]),
        ("output_norm.weight".to_string(), vec![8]),
    ];
    for layer in 0..2 {
        let t = |n: &str, dims: Vec<u64>| (format!("blk.{layer}.{n}.weight"), dims);
        names.extend([
            t("attn_norm", vec![8]),
            t("attn_q", vec![8, 8]),
            t("attn_k", vec![8, 4]),
            t("attn_v", vec![8, 4]),
            t("attn_output", vec![8, 8]),
            t("ffn_norm", vec![8]),
            t("ffn_gate", vec![8, 12]),
            t("ffn_up", vec![8, 12]),
            t("ffn_down", vec![12, 8]),
        ]);
        if arch == "gemma3" {
            names.extend([
                t("attn_q_norm", vec![4]),
                t("attn_k_norm", vec![4]),
                t("post_attention_norm", vec![8]),
                t("post_ffw_norm", vec![8]),
            ]);
        }
    }
    names
        .into_iter()
        .enumerate()
        .map(|(i, (name, dims))| {
            let n = dims.iter().product::<u64>() as usize;
            let values = (0..n).map(|j| (i * 1000 + j) as f32).collect();
            (name, dims, values)
        })
        .collect()
}

fn model_meta(arch: &'static str) -> Vec<(String, V<'static>)> {
    let k = |n: &str| format!("{arch}.{n}");
    let mut meta = vec![
        ("general.architecture".to_string(), V::Str(arch)),
        (k("block_count"), V::U32(2)),
        (k("embedding_length"), V::U32(8)),
        (k("feed_forward_length"), V::U32(12)),
        (k("attention.head_count"), V::U32(2)),
        (k("attention.head_count_kv"), V::U32(1)),
        (k("attention.layer_norm_rms_epsilon"), V::F32(1e-5)),
        (k("rope.freq_base"), V::F32(5e5)),
        (k("context_length"), V::U32(64)),
        ("tokenizer.ggml.eos_token_id".to_string(), V::U32(2)),
    ];
    if arch == "gemma3" {
        meta.push((k("attention.sliding_window"), V::U32(16)));
        meta.push((k("attention.key_length"), V::U32(4)));
    }
    meta
}

#[test]
fn a_llama_file_is_the_config_and_tensors_it_was_converted_from() {
    let tensors = model_tensors("llama");
    let model = GgufModel::new(build(&model_meta("llama"), &tensors)).unwrap();
    let config = model.config_json();
    assert_eq!(config["architectures"], json!(["LlamaForCausalLM"]));
    assert_eq!(config["hidden_size"], 8);
    assert_eq!(config["num_key_value_heads"], 1);
    assert_eq!(config["head_dim"], 4);
    assert_eq!(config["vocab_size"], 6);
    assert_eq!(config["rope_theta"], 5e5);
    assert_eq!(config["tie_word_embeddings"], true);
    assert_eq!(config["eos_token_id"], 2);
    let q = &model.tensors()["model.layers.1.self_attn.q_proj.weight"];
    assert_eq!(
        (q.gguf_name.as_str(), q.shape.as_slice()),
        ("blk.1.attn_q.weight", &[8, 8][..])
    );
    assert!(model
        .tensors()
        .contains_key("model.layers.0.post_attention_layernorm.weight"));
    // Not rotated: as stored.
    let v = model
        .load("model.layers.0.self_attn.v_proj.weight")
        .unwrap();
    let stored = &tensors
        .iter()
        .find(|t| t.0 == "blk.0.attn_v.weight")
        .unwrap()
        .2;
    assert_eq!(&v, stored);
}

/// llama.cpp's converter: each head's rows viewed as (2, rows/2) and transposed to
/// (rows/2, 2), so rotate-half pair (i, i + half) lands on rows (2i, 2i + 1).
fn interleave(values: &[f32], heads: usize, rows: usize, width: usize) -> Vec<f32> {
    let (head_rows, half) = (rows / heads, rows / heads / 2);
    let mut out = vec![0.0; values.len()];
    for h in 0..heads {
        for t in 0..2 {
            for i in 0..half {
                let from = (h * head_rows + t * half + i) * width;
                let to = (h * head_rows + 2 * i + t) * width;
                out[to..to + width].copy_from_slice(&values[from..from + width]);
            }
        }
    }
    out
}

#[test]
fn llama_q_and_k_rows_are_put_back_in_rotate_half_order() {
    let mut tensors = model_tensors("llama");
    let original: Vec<f32> = (0..64).map(|v| v as f32).collect();
    let k_original: Vec<f32> = (0..32).map(|v| -(v as f32)).collect();
    for (name, _, values) in tensors.iter_mut() {
        match name.as_str() {
            "blk.0.attn_q.weight" => *values = interleave(&original, 2, 8, 8),
            "blk.0.attn_k.weight" => *values = interleave(&k_original, 1, 4, 8),
            _ => {}
        }
    }
    let model = GgufModel::new(build(&model_meta("llama"), &tensors)).unwrap();
    assert_eq!(
        model
            .load("model.layers.0.self_attn.q_proj.weight")
            .unwrap(),
        original
    );
    assert_eq!(
        model
            .load("model.layers.0.self_attn.k_proj.weight")
            .unwrap(),
        k_original
    );
    // Qwen files are converted without the reordering: loaded as stored.
    let model = GgufModel::new(build(&model_meta("qwen2"), &tensors)).unwrap();
    let q = model
        .load("model.layers.0.self_attn.q_proj.weight")
        .unwrap();
    assert_eq!(q, interleave(&original, 2, 8, 8));
}

#[test]
fn gemma3_norms_lose_the_one_the_converter_added_and_keep_their_roles() {
    let tensors = model_tensors("gemma3");
    let model = GgufModel::new(build(&model_meta("gemma3"), &tensors)).unwrap();
    let config = model.config_json();
    assert_eq!(config["model_type"], "gemma3_text");
    assert_eq!(config["sliding_window"], 16);
    assert_eq!(config["query_pre_attn_scalar"], 4);
    assert_eq!(config["rope_local_base_freq"], 10000.0);
    assert_eq!(
        config["layer_types"],
        json!(["sliding_attention", "sliding_attention"])
    );
    let stored = |gguf: &str| tensors.iter().find(|t| t.0 == gguf).unwrap().2.clone();
    for (hf, gguf) in [
        (
            "model.layers.0.pre_feedforward_layernorm.weight",
            "blk.0.ffn_norm.weight",
        ),
        (
            "model.layers.1.post_attention_layernorm.weight",
            "blk.1.post_attention_norm.weight",
        ),
        (
            "model.layers.1.post_feedforward_layernorm.weight",
            "blk.1.post_ffw_norm.weight",
        ),
        (
            "model.layers.0.self_attn.q_norm.weight",
            "blk.0.attn_q_norm.weight",
        ),
        ("model.norm.weight", "output_norm.weight"),
    ] {
        let shifted: Vec<f32> = stored(gguf).iter().map(|v| v - 1.0).collect();
        assert_eq!(model.load(hf).unwrap(), shifted, "{hf}");
    }
    assert_eq!(
        model.load("model.embed_tokens.weight").unwrap(),
        stored("token_embd.weight")
    );
}

#[test]
fn what_cannot_be_built_is_a_typed_error_naming_it() {
    let tensors = model_tensors("llama");
    let with = |key: &str, value: V<'static>| {
        let mut meta = model_meta("llama");
        meta.retain(|(k, _)| k != key);
        meta.push((key.to_string(), value));
        GgufModel::new(build(&meta, &tensors))
            .unwrap_err()
            .to_string()
    };
    let err = with("general.architecture", V::Str("mamba"));
    assert!(
        err.contains("`mamba`") && err.contains("llama, qwen2"),
        "{err}"
    );
    let err = with("llama.rope.dimension_count", V::U32(2));
    assert!(err.contains("RoPE over 2 of 4"), "{err}");
    let err = with("llama.rope.scaling.type", V::Str("yarn"));
    assert!(err.contains("`yarn`"), "{err}");
    // A layer count past what the file holds sizes nothing (the fuzzer's Gemma 3 file
    // of four billion layers).
    let err = with("llama.block_count", V::U32(u32::MAX));
    assert!(err.contains("4294967295 layers"), "{err}");
    let err = with("llama.attention.head_count", V::U32(0));
    assert!(err.contains("head_count"), "{err}");
    let err = with("llama.attention.head_count", V::U32(3));
    assert!(
        err.contains("blk.0.attn_q.weight") && err.contains("3 heads"),
        "{err}"
    );
    let mut extra = tensors.clone();
    extra.push(("rope_freqs.weight".into(), vec![2], vec![1.0, 1.0]));
    let err = GgufModel::new(build(&model_meta("llama"), &extra))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`rope_freqs.weight` has no counterpart"),
        "{err}"
    );
    let mut missing = model_meta("llama");
    missing.retain(|(k, _)| k != "llama.embedding_length");
    let err = GgufModel::new(build(&missing, &tensors))
        .unwrap_err()
        .to_string();
    assert!(err.contains("llama.embedding_length"), "{err}");
}

fn with_tokenizer(tokenizer: Vec<(String, V<'static>)>) -> GgufModel {
    let mut meta = model_meta("llama");
    meta.extend(tokenizer);
    GgufModel::new(build(&meta, &model_tensors("llama"))).unwrap()
}

fn strings(items: &[&str]) -> V<'static> {
    V::Strs(items.iter().map(|s| s.to_string()).collect())
}

fn encode(model: &GgufModel, text: &str, special: bool) -> Vec<u32> {
    let json = model.tokenizer_json().unwrap();
    let tokenizer = tokenizers::Tokenizer::from_bytes(json.as_bytes()).unwrap();
    tokenizer.encode(text, special).unwrap().get_ids().to_vec()
}

#[test]
fn a_byte_level_vocabulary_splits_by_its_pre_tokenizer_then_merges() {
    let tokens = [
        "<s>", "</s>", "a", "b", "Ġ", "1", "2", "ab", "Ġab", "Ġa", "<|x|>",
    ];
    let model = with_tokenizer(vec![
        ("tokenizer.ggml.model".into(), V::Str("gpt2")),
        ("tokenizer.ggml.pre".into(), V::Str("smollm")),
        ("tokenizer.ggml.tokens".into(), strings(&tokens)),
        (
            "tokenizer.ggml.token_type".into(),
            V::I32s(vec![3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3]),
        ),
        (
            "tokenizer.ggml.merges".into(),
            strings(&["Ġ a", "a b", "Ġa b"]),
        ),
        ("tokenizer.ggml.bos_token_id".into(), V::U32(0)),
        ("tokenizer.ggml.add_bos_token".into(), V::Bool(true)),
    ]);
    // `smollm` splits every digit apart before the byte-level split.
    assert_eq!(encode(&model, "ab ab12<|x|>", false), [7, 8, 5, 6, 10]);
    assert_eq!(encode(&model, "ab", true), [0, 7]);
    let config = model.tokenizer_config_json().unwrap();
    assert_eq!(config["bos_token"], "<s>");
    assert_eq!(config["add_bos_token"], true);
    let unknown = with_tokenizer(vec![
        ("tokenizer.ggml.model".into(), V::Str("gpt2")),
        ("tokenizer.ggml.pre".into(), V::Str("tekken")),
        ("tokenizer.ggml.tokens".into(), strings(&tokens)),
        ("tokenizer.ggml.merges".into(), strings(&[])),
    ]);
    let err = unknown.tokenizer_json().unwrap_err().to_string();
    assert!(err.contains("`tekken` is not supported"), "{err}");
}

#[test]
fn a_sentencepiece_vocabulary_merges_the_best_scoring_pair_first() {
    // "abc" can merge as (ab)c or a(bc): the better-scoring `bc` wins.
    let tokens = [
        "<unk>", "<s>", "</s>", "▁", "a", "b", "c", "ab", "bc", "▁a", "<0x21>",
    ];
    let scores = vec![0.0, 0.0, 0.0, -1.0, -2.0, -3.0, -4.0, -9.0, -5.0, -6.0, 0.0];
    let model = with_tokenizer(vec![
        ("tokenizer.ggml.model".into(), V::Str("llama")),
        ("tokenizer.ggml.tokens".into(), strings(&tokens)),
        ("tokenizer.ggml.scores".into(), V::F32s(scores)),
        (
            "tokenizer.ggml.token_type".into(),
            V::I32s(vec![2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 6]),
        ),
        ("tokenizer.ggml.bos_token_id".into(), V::U32(1)),
        ("tokenizer.ggml.unknown_token_id".into(), V::U32(0)),
    ]);
    // BOS by default; a space prefix by default; `!` by its byte.
    assert_eq!(encode(&model, "abc a!", true), [1, 9, 8, 9, 10]);
    let json = model.tokenizer_json().unwrap();
    let tokenizer = tokenizers::Tokenizer::from_bytes(json.as_bytes()).unwrap();
    assert_eq!(tokenizer.decode(&[9, 8, 9, 10], false).unwrap(), "abc a!");
    let short = with_tokenizer(vec![
        ("tokenizer.ggml.model".into(), V::Str("llama")),
        ("tokenizer.ggml.tokens".into(), strings(&tokens)),
        ("tokenizer.ggml.scores".into(), V::F32s(vec![0.0; 3])),
    ]);
    let err = short.tokenizer_json().unwrap_err().to_string();
    assert!(
        err.contains("tokenizer.ggml.scores") && err.contains("not 11 f32 scores"),
        "{err}"
    );
}
