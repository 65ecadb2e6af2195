//! Loading errors and `tokenizer_config.json` variants.

use super::{byte_fallback_json, byte_level_json, load, TempDir, LLAMA_CONFIG};
use crate::chat::{ChatError, Message, Tokenizer, TokenizerConfig};
use std::path::Path;

#[test]
fn missing_tokenizer_json_names_the_file() {
    let dir = TempDir::new("missing");
    let err = Tokenizer::from_dir(dir.path()).unwrap_err();
    let ChatError::Read { path, error } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(path, &dir.path().join("tokenizer.json"));
    assert_eq!(error.kind(), std::io::ErrorKind::NotFound);
    assert!(err.to_string().contains("tokenizer.json"), "{err}");
}

#[test]
fn malformed_tokenizer_json_names_the_file() {
    let dir = TempDir::new("bad-tokenizer");
    dir.write("tokenizer.json", "{\"model\": ");
    let err = Tokenizer::from_dir(dir.path()).unwrap_err();
    assert!(matches!(&err, ChatError::ParseTokenizer { path, .. }
        if path == &dir.path().join("tokenizer.json")));
    assert!(
        err.to_string().starts_with(&format!(
            "{}: not a valid tokenizer.json",
            dir.path().join("tokenizer.json").display()
        )),
        "{err}"
    );
}

#[test]
fn config_field_of_the_wrong_type_is_an_error() {
    let dir = TempDir::new("bad-config");
    dir.write("tokenizer.json", &byte_level_json());
    dir.write("tokenizer_config.json", r#"{"eos_token": 7}"#);
    assert!(matches!(
        Tokenizer::from_dir(dir.path()),
        Err(ChatError::ParseConfig { .. })
    ));
}

#[test]
fn malformed_config_json_names_the_file_and_line() {
    let dir = TempDir::new("bad-config");
    dir.write("tokenizer.json", &byte_level_json());
    dir.write(
        "tokenizer_config.json",
        "{\n  \"eos_token\": \"</s>\",\n  oops\n}",
    );
    let err = Tokenizer::from_dir(dir.path()).unwrap_err();
    let ChatError::ParseConfig { path, error } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(path, &dir.path().join("tokenizer_config.json"));
    assert_eq!(error.line(), 3);
}

#[test]
fn eos_token_outside_the_vocabulary_is_an_error() {
    let dir = TempDir::new("bad-eos");
    dir.write("tokenizer.json", &byte_level_json());
    dir.write("tokenizer_config.json", r#"{"eos_token": "<|im_end|>"}"#);
    let err = Tokenizer::from_dir(dir.path()).unwrap_err();
    assert!(
        matches!(&err, ChatError::UnknownSpecialToken { role: "eos_token", token, .. }
        if token == "<|im_end|>")
    );
    assert!(err.to_string().contains("tokenizer_config.json"), "{err}");
}

#[test]
fn config_without_template_reports_it_on_use() {
    let dir = TempDir::new("no-template");
    let tok = load(
        &dir,
        &byte_level_json(),
        Some(r#"{"eos_token": "<|end|>"}"#),
    );
    assert_eq!(tok.eos_ids(), &[258]);
    let err = tok.chat_template().unwrap_err();
    assert!(matches!(&err, ChatError::NoChatTemplate { path }
        if path == &dir.path().join("tokenizer_config.json")));
}

#[test]
fn config_reads_added_token_objects_and_named_templates() {
    let named = r#"{"eos_token": {"content": "</s>", "special": true},
        "chat_template": [{"name": "tool_use", "template": "T"},
                          {"name": "default", "template": "D"}]}"#;
    let config = TokenizerConfig::from_json(named, Path::new("cfg.json")).unwrap();
    assert_eq!(config.eos_token.as_deref(), Some("</s>"));
    assert_eq!(config.chat_template.as_deref(), Some("D"));
    let config = TokenizerConfig::from_json(LLAMA_CONFIG, Path::new("cfg.json")).unwrap();
    assert_eq!(config.bos_token.as_deref(), Some("<s>"));
    assert_eq!(config.unk_token.as_deref(), Some("<unk>"));
    assert_eq!(config.pad_token, None);
    assert_eq!(config.add_bos_token, Some(true));
    assert_eq!(config.add_eos_token, None);
}

#[test]
fn chat_template_jinja_file_wins_over_the_config() {
    let dir = TempDir::new("jinja-file");
    dir.write(
        "chat_template.jinja",
        "{{ eos_token }}{{ messages | length }}\n",
    );
    let tok = load(&dir, &byte_fallback_json(), Some(LLAMA_CONFIG));
    let template = tok.chat_template().unwrap();
    assert_eq!(
        template.name(),
        dir.path().join("chat_template.jinja").display().to_string()
    );
    let messages = [Message::new("user", "a"), Message::new("assistant", "b")];
    assert_eq!(template.render(&messages, false).unwrap(), "</s>2");
}

#[test]
fn config_template_sees_the_special_tokens() {
    let dir = TempDir::new("config-template");
    let tok = load(&dir, &byte_fallback_json(), Some(LLAMA_CONFIG));
    let rendered = tok
        .chat_template()
        .unwrap()
        .render(&[Message::new("user", "hi")], true)
        .unwrap();
    assert_eq!(rendered, "<s>[user] hi");
}

/// Found by the `tokenizer` fuzz target: invalid UTF-8 inside the `decoder` object made
/// `tokenizers` panic ("Helper") instead of returning an error.
#[test]
fn invalid_utf8_in_the_decoder_is_a_parse_error_not_a_panic() {
    let json = b"{\"version\": \"1.0\", \"decoder\": {\"type\xff\xfe\": \"Fuse\"}, \"model\": {\"type\": \"WordLevel\", \"vocab\": {}, \"unk_token\": \"x\"}}";
    let path = Path::new("fuzz/tokenizer.json");
    let err = Tokenizer::from_bytes(path, json, TokenizerConfig::default()).unwrap_err();
    assert!(
        matches!(&err, ChatError::ParseTokenizer { path: p, .. } if p == path),
        "{err:?}"
    );
}

/// Found by the `tokenizer` fuzz target: a template post-processor placing a special token
/// its `special_tokens` lacks loads in `tokenizers`, then panics when encoding.
#[test]
fn a_post_processor_placing_an_undefined_special_token_is_a_parse_error() {
    let json = include_bytes!("post_processor_undefined_special.json");
    let path = Path::new("fuzz/tokenizer.json");
    let err = Tokenizer::from_bytes(path, json, TokenizerConfig::default()).unwrap_err();
    assert!(err.to_string().contains("special token `<s>`"), "{err}");
    // With the key fixed, the same file loads and encodes.
    let fixed = String::from_utf8(json.to_vec())
        .unwrap()
        .replace("\"<s=\"", "\"<s>\"");
    let tokenizer =
        Tokenizer::from_bytes(path, fixed.as_bytes(), TokenizerConfig::default()).unwrap();
    assert!(!tokenizer.encode("hello", true).unwrap().is_empty());
}

/// Found by the `tokenizer` fuzz target: a BPE `continuing_subword_prefix` longer than a
/// merge's second token made `tokenizers` subtract past zero while loading.
#[test]
fn a_bpe_prefix_its_merges_do_not_carry_is_a_parse_error() {
    let json = include_bytes!("bpe_prefix_longer_than_merge.json");
    let path = Path::new("fuzz/tokenizer.json");
    let err = Tokenizer::from_bytes(path, json, TokenizerConfig::default()).unwrap_err();
    assert!(
        err.to_string().contains("continuing_subword_prefix"),
        "{err}"
    );
}
