//! `tokenizer_config.json`: the special tokens, BOS/EOS switches and the chat template.

use super::error::ChatError;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// What the runtime reads from a Hugging Face `tokenizer_config.json`.
///
/// Special tokens may be written as plain strings or as `AddedToken` objects
/// (`{"content": "<s>", "lstrip": false, ...}`); both give the token's text here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TokenizerConfig {
    /// The file this came from (`None` for a default config when the file is absent).
    pub path: Option<PathBuf>,
    /// The Jinja chat template; for configs listing named templates, the one named
    /// `default`.
    pub chat_template: Option<String>,
    /// The beginning-of-sequence token's text.
    pub bos_token: Option<String>,
    /// The end-of-sequence token's text.
    pub eos_token: Option<String>,
    /// The unknown token's text.
    pub unk_token: Option<String>,
    /// The padding token's text.
    pub pad_token: Option<String>,
    /// Whether transformers adds BOS when encoding with special tokens.
    pub add_bos_token: Option<bool>,
    /// Whether transformers adds EOS when encoding with special tokens.
    pub add_eos_token: Option<bool>,
}

/// A special token as the config writes it.
#[derive(Deserialize)]
#[serde(untagged)]
enum TokenSpec {
    Text(String),
    Added { content: String },
}

/// A chat template as the config writes it: one, or a list of named ones.
#[derive(Deserialize)]
#[serde(untagged)]
enum TemplateSpec {
    One(String),
    Named(Vec<NamedTemplate>),
}

#[derive(Deserialize)]
struct NamedTemplate {
    name: String,
    template: String,
}

/// The fields of the file, as written.
#[derive(Deserialize)]
struct RawConfig {
    chat_template: Option<TemplateSpec>,
    bos_token: Option<TokenSpec>,
    eos_token: Option<TokenSpec>,
    unk_token: Option<TokenSpec>,
    pad_token: Option<TokenSpec>,
    add_bos_token: Option<bool>,
    add_eos_token: Option<bool>,
}

impl TokenSpec {
    fn into_text(self) -> String {
        match self {
            TokenSpec::Text(text) | TokenSpec::Added { content: text } => text,
        }
    }
}

impl TemplateSpec {
    fn into_default(self) -> Option<String> {
        match self {
            TemplateSpec::One(template) => Some(template),
            TemplateSpec::Named(list) => list
                .into_iter()
                .find(|named| named.name == "default")
                .map(|named| named.template),
        }
    }
}

impl TokenizerConfig {
    /// Reads and parses a `tokenizer_config.json`.
    pub fn from_file(path: &Path) -> Result<Self, ChatError> {
        let text = crate::files::read_text(path).map_err(|error| ChatError::Read {
            path: path.to_path_buf(),
            error,
        })?;
        Self::from_json(&text, path)
    }

    /// Parses the text of a `tokenizer_config.json`; `path` names it in errors.
    pub fn from_json(text: &str, path: &Path) -> Result<Self, ChatError> {
        let raw: RawConfig =
            serde_json::from_str(text).map_err(|error| ChatError::ParseConfig {
                path: path.to_path_buf(),
                error,
            })?;
        Ok(TokenizerConfig {
            path: Some(path.to_path_buf()),
            chat_template: raw.chat_template.and_then(TemplateSpec::into_default),
            bos_token: raw.bos_token.map(TokenSpec::into_text),
            eos_token: raw.eos_token.map(TokenSpec::into_text),
            unk_token: raw.unk_token.map(TokenSpec::into_text),
            pad_token: raw.pad_token.map(TokenSpec::into_text),
            add_bos_token: raw.add_bos_token,
            add_eos_token: raw.add_eos_token,
        })
    }
}
