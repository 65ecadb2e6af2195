//! The tokenizer a GGUF file's metadata describes, written as Hugging Face's
//! `tokenizer.json` (run by the `tokenizers` library) and `tokenizer_config.json`:
//! - `gpt2`: byte-level BPE with the vocabulary and merges of the file, split first by the
//!   regular expressions of the pre-tokenizer the file names (`tokenizer.ggml.pre`);
//! - `llama`: SentencePiece BPE, merging the pair whose result scores highest
//!   (`tokenizer.ggml.scores`), spaces written `▁`, unknown bytes as `<0xXX>` tokens.
//!
//! Control tokens are special; user-defined ones are matched in the text before
//! tokenizing, as llama.cpp does.

use super::config::optional;
use crate::gguf::{GgufError, GgufFile, MetaArray, MetaValue};
use serde_json::{json, Value};
use std::collections::HashMap;

/// llama.cpp's token types (`tokenizer.ggml.token_type`).
const NORMAL: i32 = 1;
const UNKNOWN: i32 = 2;
const CONTROL: i32 = 3;
const USER_DEFINED: i32 = 4;

/// GPT-2's split: contractions, letters, digits, other symbols, whitespace.
const GPT2_SPLIT: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
/// Llama 3's split: digits in runs of at most three, newlines kept apart.
const LLAMA3_SPLIT: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen 2's split: as Llama 3's with single digits.
const QWEN2_SPLIT: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// A byte-level BPE pre-tokenizer: the `tokenizer.ggml.pre` names that select it, its
/// splits (applied in turn, each match kept as a piece) and whether a piece that is a
/// whole vocabulary entry skips the merges.
struct PreTokenizer {
    names: &'static [&'static str],
    splits: &'static [&'static str],
    ignore_merges: bool,
}

/// The byte-level pre-tokenizers, as llama.cpp selects them.
const PRE_TOKENIZERS: &[PreTokenizer] = &[
    PreTokenizer {
        names: &["gpt-2", "gpt2", "phi-2", "olmo", "mpt", "roberta-bpe"],
        splits: &[GPT2_SPLIT],
        ignore_merges: false,
    },
    PreTokenizer {
        names: &["llama3", "llama-v3", "llama-bpe", "falcon3"],
        splits: &[LLAMA3_SPLIT],
        ignore_merges: true,
    },
    PreTokenizer {
        names: &["smollm", "starcoder", "refact", "command-r"],
        splits: &[r"\p{N}", GPT2_SPLIT],
        ignore_merges: false,
    },
    PreTokenizer {
        names: &["qwen2", "deepseek-r1-qwen", "stablelm2"],
        splits: &[QWEN2_SPLIT],
        ignore_merges: false,
    },
    PreTokenizer {
        names: &["default"],
        splits: &[
            r"[\p{P}\$\+<=>\^~\|]+",
            GPT2_SPLIT,
            r"\p{N}+",
            "[0-9][0-9][0-9]",
        ],
        ignore_merges: false,
    },
];

/// The vocabulary of a file: token texts, their types and (SentencePiece) scores.
struct Vocab<'a> {
    tokens: &'a [String],
    types: Vec<i32>,
}

impl<'a> Vocab<'a> {
    fn read(file: &'a GgufFile) -> Result<Vocab<'a>, GgufError> {
        let tokens = file.get_str_array("tokenizer.ggml.tokens")?;
        let types = match file.metadata().get("tokenizer.ggml.token_type") {
            None => vec![NORMAL; tokens.len()],
            Some(MetaValue::Array(MetaArray::I32(t))) if t.len() == tokens.len() => t.clone(),
            Some(other) => {
                return Err(bad_value(
                    file,
                    "tokenizer.ggml.token_type",
                    format!("{other}, not {} i32 token types", tokens.len()),
                ))
            }
        };
        Ok(Vocab { tokens, types })
    }

    /// The vocabulary as `tokenizer.json` writes it (text to id; the first id of a text
    /// written twice).
    fn ids(&self) -> HashMap<&str, u32> {
        let mut ids = HashMap::with_capacity(self.tokens.len());
        for (id, token) in self.tokens.iter().enumerate() {
            ids.entry(token.as_str()).or_insert(id as u32);
        }
        ids
    }

    /// The tokens matched in the text before tokenizing: control (special) and
    /// user-defined ones.
    fn added_tokens(&self) -> Vec<Value> {
        let added = self
            .types
            .iter()
            .enumerate()
            .filter(|(_, t)| matches!(**t, UNKNOWN | CONTROL | USER_DEFINED));
        added
            .map(|(id, &ty)| {
                json!({
                    "id": id, "content": self.tokens[id], "single_word": false,
                    "lstrip": false, "rstrip": false, "normalized": false,
                    "special": ty != USER_DEFINED,
                })
            })
            .collect()
    }
}

fn bad_value(file: &GgufFile, key: &str, reason: String) -> GgufError {
    GgufError::BadValue {
        path: file.path().to_path_buf(),
        key: key.to_string(),
        reason,
    }
}

/// The `tokenizer.json` of `file`.
pub(super) fn tokenizer_json(file: &GgufFile) -> Result<String, GgufError> {
    let vocab = Vocab::read(file)?;
    let kind = file.get_str("tokenizer.ggml.model")?;
    let mut json = match kind {
        "gpt2" => byte_level_bpe(file, &vocab)?,
        "llama" => sentencepiece_bpe(file, &vocab)?,
        other => {
            let reason = format!("tokenizer `{other}` is not supported (only gpt2 and llama)");
            return Err(bad_value(file, "tokenizer.ggml.model", reason));
        }
    };
    json["version"] = json!("1.0");
    json["truncation"] = Value::Null;
    json["padding"] = Value::Null;
    json["added_tokens"] = json!(vocab.added_tokens());
    json["post_processor"] = post_processor(file, &vocab)?;
    Ok(json.to_string())
}

/// Byte-level BPE: the file's merges, its pre-tokenizer's splits, byte-level decoding.
fn byte_level_bpe(file: &GgufFile, vocab: &Vocab) -> Result<Value, GgufError> {
    let key = "tokenizer.ggml.pre";
    let pre_name = optional(file, key, GgufFile::get_str)?.unwrap_or("default");
    let pre = PRE_TOKENIZERS
        .iter()
        .find(|p| p.names.contains(&pre_name))
        .ok_or_else(|| {
            let known: Vec<&str> = PRE_TOKENIZERS
                .iter()
                .flat_map(|p| p.names)
                .copied()
                .collect();
            let reason = format!(
                "pre-tokenizer `{pre_name}` is not supported (supported: {})",
                known.join(", ")
            );
            bad_value(file, key, reason)
        })?;
    let merges = file.get_str_array("tokenizer.ggml.merges")?;
    let pairs = merges
        .iter()
        .map(|m| {
            m.split_once(' ')
                .map(|(a, b)| json!([a, b]))
                .ok_or_else(|| {
                    bad_value(
                        file,
                        "tokenizer.ggml.merges",
                        format!("merge {m:?} is not two tokens"),
                    )
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let splits = pre.splits.iter().map(|regex| {
        json!({"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": false})
    });
    let byte_level = json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false});
    Ok(json!({
        "normalizer": null,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": splits.chain([byte_level.clone()]).collect::<Vec<_>>()},
        "decoder": byte_level,
        "model": {
            "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
            "ignore_merges": pre.ignore_merges, "vocab": vocab.ids(), "merges": pairs,
        },
    }))
}

/// SentencePiece BPE: merges ranked by the score of the token they make, spaces as `▁`
/// (one prepended when `tokenizer.ggml.add_space_prefix`), byte fallback.
fn sentencepiece_bpe(file: &GgufFile, vocab: &Vocab) -> Result<Value, GgufError> {
    let scores = match file.get("tokenizer.ggml.scores")? {
        MetaValue::Array(MetaArray::F32(s)) if s.len() == vocab.tokens.len() => s,
        other => {
            let reason = format!("{other}, not {} f32 scores", vocab.tokens.len());
            return Err(bad_value(file, "tokenizer.ggml.scores", reason));
        }
    };
    let prefix =
        optional(file, "tokenizer.ggml.add_space_prefix", GgufFile::get_bool)?.unwrap_or(true);
    let unk = optional(file, "tokenizer.ggml.unknown_token_id", GgufFile::get_u32)?
        .and_then(|id| vocab.tokens.get(id as usize));
    let mut normalizers =
        vec![json!({"type": "Replace", "pattern": {"String": " "}, "content": "▁"})];
    let mut decoders = vec![
        json!({"type": "Replace", "pattern": {"String": "▁"}, "content": " "}),
        json!({"type": "ByteFallback"}),
        json!({"type": "Fuse"}),
    ];
    if prefix {
        normalizers.insert(0, json!({"type": "Prepend", "prepend": "▁"}));
        decoders.push(json!({"type": "Strip", "content": " ", "start": 1, "stop": 0}));
    }
    Ok(json!({
        "normalizer": {"type": "Sequence", "normalizers": normalizers},
        "pre_tokenizer": null,
        "decoder": {"type": "Sequence", "decoders": decoders},
        "model": {
            "type": "BPE", "dropout": null, "unk_token": unk, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true,
            "ignore_merges": false, "vocab": vocab.ids(), "merges": score_merges(vocab, scores),
        },
    }))
}

/// The merges that make every normal token from two normal tokens, the best-scoring
/// result first (ties: the lower token id, then the shorter left piece).
fn score_merges(vocab: &Vocab, scores: &[f32]) -> Vec<Value> {
    let normal: HashMap<&str, u32> = vocab
        .tokens
        .iter()
        .enumerate()
        .filter(|(id, _)| vocab.types[*id] == NORMAL)
        .map(|(id, t)| (t.as_str(), id as u32))
        .collect();
    let mut merges: Vec<(f32, u32, usize)> = Vec::new();
    for (&token, &id) in &normal {
        for (split, _) in token.char_indices().skip(1) {
            let (left, right) = token.split_at(split);
            if normal.contains_key(left) && normal.contains_key(right) {
                merges.push((scores[id as usize], id, split));
            }
        }
    }
    merges.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    merges
        .into_iter()
        .map(|(_, id, split)| {
            let (left, right) = vocab.tokens[id as usize].split_at(split);
            json!([left, right])
        })
        .collect()
}

/// BOS (and EOS) placed around the text when the file asks for them
/// (`tokenizer.ggml.add_bos_token`; SentencePiece files add BOS unless told not to).
fn post_processor(file: &GgufFile, vocab: &Vocab) -> Result<Value, GgufError> {
    let (bos, eos) = (special(file, vocab, "bos")?, special(file, vocab, "eos")?);
    let add_bos = add_bos(file)? && bos.is_some();
    let add_eos = optional(file, "tokenizer.ggml.add_eos_token", GgufFile::get_bool)?
        .unwrap_or(false)
        && eos.is_some();
    if !add_bos && !add_eos {
        return Ok(Value::Null);
    }
    let piece = |token: &str| json!({"SpecialToken": {"id": token, "type_id": 0}});
    let mut single = Vec::new();
    let mut specials = serde_json::Map::new();
    let mut place = |on: bool, token: Option<(u32, &String)>, single: &mut Vec<Value>| {
        if let (true, Some((id, text))) = (on, token) {
            single.push(piece(text));
            specials.insert(
                text.clone(),
                json!({"id": text, "ids": [id], "tokens": [text]}),
            );
        }
    };
    place(add_bos, bos, &mut single);
    single.push(json!({"Sequence": {"id": "A", "type_id": 0}}));
    place(add_eos, eos, &mut single);
    let mut pair = single.clone();
    pair.extend(single.iter().map(|p| match p.get("Sequence") {
        Some(_) => json!({"Sequence": {"id": "B", "type_id": 1}}),
        None => p.clone(),
    }));
    Ok(
        json!({"type": "TemplateProcessing", "single": single, "pair": pair, "special_tokens": specials}),
    )
}

/// Whether BOS is added: `tokenizer.ggml.add_bos_token`, by default for SentencePiece
/// vocabularies only.
fn add_bos(file: &GgufFile) -> Result<bool, GgufError> {
    let default = file.get_str("tokenizer.ggml.model")? == "llama";
    Ok(optional(file, "tokenizer.ggml.add_bos_token", GgufFile::get_bool)?.unwrap_or(default))
}

/// The id and text of special token `role` (`bos`, `eos`, `unknown`, `padding`, `eot`)
/// when the file names one; an error for an id past the vocabulary.
fn special<'a>(
    file: &GgufFile,
    vocab: &Vocab<'a>,
    role: &str,
) -> Result<Option<(u32, &'a String)>, GgufError> {
    let key = format!("tokenizer.ggml.{role}_token_id");
    let Some(id) = optional(file, &key, GgufFile::get_u32)? else {
        return Ok(None);
    };
    match vocab.tokens.get(id as usize) {
        Some(text) => Ok(Some((id, text))),
        None => Err(bad_value(
            file,
            &key,
            format!("id {id} is past the vocabulary of {}", vocab.tokens.len()),
        )),
    }
}

/// The `tokenizer_config.json` of `file`.
pub(super) fn tokenizer_config(file: &GgufFile) -> Result<Value, GgufError> {
    let vocab = Vocab::read(file)?;
    let text = |role| Ok::<_, GgufError>(special(file, &vocab, role)?.map(|(_, t)| t.clone()));
    let add_eos = optional(file, "tokenizer.ggml.add_eos_token", GgufFile::get_bool)?;
    let template = optional(file, "tokenizer.chat_template", GgufFile::get_str)?;
    Ok(json!({
        "bos_token": text("bos")?, "eos_token": text("eos")?, "unk_token": text("unknown")?,
        "pad_token": text("padding")?, "add_bos_token": add_bos(file)?,
        "add_eos_token": add_eos.unwrap_or(false), "chat_template": template,
    }))
}

/// The `generation_config.json` of `file`: BOS, and the ids that end a reply (EOS and,
/// when the file names one, the end-of-turn token).
pub(super) fn generation_config(file: &GgufFile) -> Result<Value, GgufError> {
    let vocab = Vocab::read(file)?;
    let id = |role| Ok::<_, GgufError>(special(file, &vocab, role)?.map(|(id, _)| id));
    let mut eos: Vec<u32> = [id("eos")?, id("eot")?].into_iter().flatten().collect();
    eos.dedup();
    Ok(json!({"bos_token_id": id("bos")?, "eos_token_id": eos}))
}
