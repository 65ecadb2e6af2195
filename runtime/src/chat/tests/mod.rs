//! Unit tests of the chat module on small handwritten tokenizers and templates.

mod detokenizer;
mod loading;
mod template;

use super::{Tokenizer, TokenizerConfig};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// A folder under the system temp dir, removed when dropped.
pub(super) struct TempDir(PathBuf);

impl TempDir {
    pub(super) fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!("oxrelax-chat-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub(super) fn path(&self) -> &Path {
        &self.0
    }

    pub(super) fn write(&self, file: &str, contents: &str) -> PathBuf {
        let path = self.0.join(file);
        std::fs::write(&path, contents).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn added_token(id: u32, content: &str) -> Value {
    json!({"id": id, "content": content, "single_word": false, "lstrip": false,
           "rstrip": false, "normalized": false, "special": true})
}

/// GPT-2's byte-to-character table of byte-level BPE: printable bytes stand for
/// themselves, the others for U+0100 onwards in order.
fn byte_level_char(byte: u8) -> char {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    if printable(byte) {
        return char::from(byte);
    }
    let rank = (0..byte).filter(|&b| !printable(b)).count() as u32;
    char::from_u32(256 + rank).unwrap()
}

/// A Qwen-style byte-level BPE: ids 0..=255 are the bytes, 256 = `he`, 257 = `Ġw`, and the
/// special token `<|end|>` = 258.
pub(super) fn byte_level_json() -> String {
    let mut vocab: serde_json::Map<String, Value> = (0..=255u8)
        .map(|b| (byte_level_char(b).to_string(), json!(b)))
        .collect();
    vocab.insert("he".into(), json!(256));
    vocab.insert("Ġw".into(), json!(257));
    let byte_level = json!({"type": "ByteLevel", "add_prefix_space": false,
                            "trim_offsets": false, "use_regex": true});
    json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [added_token(258, "<|end|>")],
        "normalizer": null, "pre_tokenizer": byte_level, "post_processor": null,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": null, "unk_token": null,
                  "continuing_subword_prefix": null, "end_of_word_suffix": null,
                  "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                  "vocab": vocab, "merges": [["h", "e"], ["Ġ", "w"]]}
    })
    .to_string()
}

/// A Llama-style SentencePiece BPE with byte fallback: `<unk>` 0, `<s>` 1, `</s>` 2,
/// `<0x00>`..`<0xFF>` 3..=258, `▁` 259, `a` 260, `h` 261, `▁h` 262; BOS added by the
/// post-processor.
pub(super) fn byte_fallback_json() -> String {
    let mut vocab: serde_json::Map<String, Value> = ["<unk>", "<s>", "</s>"]
        .iter()
        .enumerate()
        .map(|(i, t)| (t.to_string(), json!(i)))
        .collect();
    for b in 0..=255u32 {
        vocab.insert(format!("<0x{b:02X}>"), json!(3 + b));
    }
    for (i, piece) in ["▁", "a", "h", "▁h"].iter().enumerate() {
        vocab.insert(piece.to_string(), json!(259 + i));
    }
    let bos = json!({"SpecialToken": {"id": "<s>", "type_id": 0}});
    let seq = json!({"Sequence": {"id": "A", "type_id": 0}});
    json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [added_token(0, "<unk>"), added_token(1, "<s>"), added_token(2, "</s>")],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
        "pre_tokenizer": null,
        "post_processor": {"type": "TemplateProcessing", "single": [bos, seq],
            "pair": [bos, seq, bos, seq],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>",
                  "continuing_subword_prefix": null, "end_of_word_suffix": null,
                  "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
                  "vocab": vocab, "merges": ["▁ h"]}
    })
    .to_string()
}

/// A Llama-style `tokenizer_config.json` with the tokens written as AddedToken objects.
pub(super) const LLAMA_CONFIG: &str = r#"{
  "add_bos_token": true,
  "bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": false},
  "eos_token": "</s>",
  "unk_token": {"content": "<unk>"},
  "pad_token": null,
  "chat_template": "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}{% endfor %}"
}"#;

/// Writes a tokenizer folder and loads it.
pub(super) fn load(dir: &TempDir, tokenizer_json: &str, config: Option<&str>) -> Tokenizer {
    dir.write("tokenizer.json", tokenizer_json);
    if let Some(config) = config {
        dir.write("tokenizer_config.json", config);
    }
    Tokenizer::from_dir(dir.path()).unwrap()
}

#[test]
fn byte_level_tokenizer_encodes_and_decodes() {
    let dir = TempDir::new("bl-roundtrip");
    let tok = load(&dir, &byte_level_json(), None);
    assert_eq!(tok.vocab_size(), 259);
    // "he" merges; " w" merges to "Ġw"; "!" is byte 0x21.
    assert_eq!(tok.encode("he w!", false).unwrap(), vec![256, 257, 0x21]);
    assert_eq!(
        tok.encode("x<|end|>", false).unwrap(),
        vec![b'x' as u32, 258]
    );
    assert_eq!(tok.decode(&[256, 257, 258], false).unwrap(), "he w<|end|>");
    assert_eq!(tok.decode(&[256, 257, 258], true).unwrap(), "he w");
    assert_eq!(tok.token_to_id("<|end|>"), Some(258));
    assert_eq!(tok.id_to_token(257).as_deref(), Some("Ġw"));
    assert_eq!(tok.config(), &TokenizerConfig::default());
    assert!(tok.eos_ids().is_empty());
}

#[test]
fn byte_fallback_tokenizer_adds_bos_only_with_special_tokens() {
    let dir = TempDir::new("bf-bos");
    let tok = load(&dir, &byte_fallback_json(), Some(LLAMA_CONFIG));
    // "▁h" merges, "é" = C3 A9 falls back to bytes 3 + 0xC3 and 3 + 0xA9.
    let text_ids = vec![262, 259, 3 + 0xC3, 3 + 0xA9];
    assert_eq!(tok.encode("h é", false).unwrap(), text_ids);
    let mut with_bos = vec![1];
    with_bos.extend(&text_ids);
    assert_eq!(tok.encode("h é", true).unwrap(), with_bos);
    assert_eq!(tok.decode(&with_bos, false).unwrap(), "<s> h é");
    assert_eq!(tok.decode(&with_bos, true).unwrap(), "h é");
    assert_eq!(tok.bos_id(), Some(1));
    assert_eq!(tok.eos_ids(), &[2]);
    assert!(tok.is_eos(2) && !tok.is_eos(1));
}
