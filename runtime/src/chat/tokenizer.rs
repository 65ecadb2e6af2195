//! The tokenizer: a Hugging Face `tokenizer.json` run by the `tokenizers` library, with the
//! special tokens and chat template of `tokenizer_config.json`.

use super::config::TokenizerConfig;
use super::detokenizer::Detokenizer;
use super::error::ChatError;
use super::template::{ChatTemplate, SpecialTokens};
use crate::gguf::GgufModel;
use std::path::{Path, PathBuf};

/// File names in a model folder.
const TOKENIZER_JSON: &str = "tokenizer.json";
const CONFIG_JSON: &str = "tokenizer_config.json";
/// transformers 5 saves the chat template in its own file; it wins over the config's.
const TEMPLATE_JINJA: &str = "chat_template.jinja";

/// A loaded tokenizer.
#[derive(Debug)]
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    path: PathBuf,
    config: TokenizerConfig,
    bos_id: Option<u32>,
    eos_ids: Vec<u32>,
    /// The file the chat template came from, which names it in errors.
    template_origin: PathBuf,
}

fn read(path: &Path) -> Result<Vec<u8>, ChatError> {
    crate::files::read_capped(path, crate::files::TEXT_FILE_LIMIT).map_err(|error| {
        ChatError::Read {
            path: path.to_path_buf(),
            error,
        }
    })
}

impl Tokenizer {
    /// Loads `tokenizer.json` from a model folder, with `tokenizer_config.json` and
    /// `chat_template.jinja` when present.
    pub fn from_dir(dir: &Path) -> Result<Self, ChatError> {
        Self::from_listed(dir, |name| dir.join(name).is_file())
    }

    /// Loads `tokenizer.json` from `dir`, with `tokenizer_config.json` and
    /// `chat_template.jinja` when `listed` names them (an artifact reads only the files
    /// its manifest lists and hashes).
    pub fn from_listed(dir: &Path, listed: impl Fn(&str) -> bool) -> Result<Self, ChatError> {
        let config_path = dir.join(CONFIG_JSON);
        let mut config = if listed(CONFIG_JSON) {
            TokenizerConfig::from_file(&config_path)?
        } else {
            TokenizerConfig::default()
        };
        let template_path = dir.join(TEMPLATE_JINJA);
        let jinja = listed(TEMPLATE_JINJA);
        if jinja {
            let bytes = read(&template_path)?;
            config.chat_template = Some(String::from_utf8_lossy(&bytes).into_owned());
        }
        let mut tokenizer = Self::from_file(&dir.join(TOKENIZER_JSON), config)?;
        if jinja {
            tokenizer.template_origin = template_path;
        }
        Ok(tokenizer)
    }

    /// The tokenizer of the model at `path`: a GGUF file's (from its metadata), or a
    /// folder's [`Tokenizer::from_dir`] when it has a `tokenizer.json` (`None` when not).
    pub fn for_model(path: &Path) -> Result<Option<Self>, ChatError> {
        if crate::weights::is_gguf(path) {
            return Self::from_gguf(&GgufModel::open(path)?).map(Some);
        }
        match path.join(TOKENIZER_JSON).is_file() {
            true => Self::from_dir(path).map(Some),
            false => Ok(None),
        }
    }

    /// The tokenizer a GGUF model's metadata describes ([`GgufModel::tokenizer_json`],
    /// [`GgufModel::tokenizer_config_json`]); generation also ends at its end-of-turn
    /// token when it names one.
    pub fn from_gguf(model: &GgufModel) -> Result<Self, ChatError> {
        let config_text = model.tokenizer_config_json()?.to_string();
        let config = TokenizerConfig::from_json(&config_text, model.path())?;
        let json = model.tokenizer_json()?;
        let mut tokenizer = Self::from_bytes(model.path(), json.as_bytes(), config)?;
        let generation = model.generation_config_json()?;
        let ends = generation["eos_token_id"].as_array().into_iter().flatten();
        for id in ends.filter_map(|id| u32::try_from(id.as_u64()?).ok()) {
            if !tokenizer.eos_ids.contains(&id) {
                tokenizer.eos_ids.push(id);
            }
        }
        Ok(tokenizer)
    }

    /// Loads a `tokenizer.json` with an already parsed config.
    pub fn from_file(path: &Path, config: TokenizerConfig) -> Result<Self, ChatError> {
        Self::from_bytes(path, &read(path)?, config)
    }

    /// Parses `tokenizer.json` `bytes` already in memory, with an already parsed config;
    /// `path` names them in errors. What [`Tokenizer::from_file`] does once it has read
    /// the file.
    pub fn from_bytes(
        path: &Path,
        bytes: &[u8],
        config: TokenizerConfig,
    ) -> Result<Self, ChatError> {
        let parse_error = |message: String| ChatError::ParseTokenizer {
            path: path.to_path_buf(),
            message,
        };
        // Well-formed JSON first: `tokenizers` panics (instead of returning an error) on a
        // syntax error inside its `decoder` object, such as invalid UTF-8 in a string.
        let json = serde_json::from_slice::<serde_json::Value>(bytes)
            .map_err(|e| parse_error(e.to_string()))?;
        check_post_processor(&json["post_processor"]).map_err(parse_error)?;
        check_bpe_merges(&json["model"]).map_err(parse_error)?;
        let inner =
            tokenizers::Tokenizer::from_bytes(bytes).map_err(|e| parse_error(e.to_string()))?;
        let template_origin = config.path.clone().unwrap_or_else(|| path.to_path_buf());
        let mut tokenizer = Tokenizer {
            inner,
            path: path.to_path_buf(),
            config,
            bos_id: None,
            eos_ids: Vec::new(),
            template_origin,
        };
        tokenizer.bos_id = tokenizer.special_id("bos_token", &tokenizer.config.bos_token)?;
        tokenizer.eos_ids = tokenizer
            .special_id("eos_token", &tokenizer.config.eos_token)?
            .into_iter()
            .collect();
        Ok(tokenizer)
    }

    fn special_id(
        &self,
        role: &'static str,
        token: &Option<String>,
    ) -> Result<Option<u32>, ChatError> {
        let Some(token) = token else { return Ok(None) };
        match self.token_to_id(token) {
            Some(id) => Ok(Some(id)),
            None => Err(ChatError::UnknownSpecialToken {
                path: self.config_path(),
                role,
                token: token.clone(),
            }),
        }
    }

    fn config_path(&self) -> PathBuf {
        match &self.config.path {
            Some(path) => path.clone(),
            None => self.path.clone(),
        }
    }

    /// The `tokenizer.json` this was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The parsed `tokenizer_config.json` (a default one when the file was absent).
    pub fn config(&self) -> &TokenizerConfig {
        &self.config
    }

    /// Encodes text. With `add_special_tokens` the `tokenizer.json` post-processor runs
    /// (for Llama it prepends BOS); without it the ids are those of the text alone. Special
    /// tokens written inside the text (`<|im_start|>`, `<s>`) are always recognized.
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>, ChatError> {
        let encoding = self
            .inner
            .encode_fast(text, add_special_tokens)
            .map_err(|e| ChatError::Encode {
                path: self.path.clone(),
                bytes: text.len(),
                message: e.to_string(),
            })?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Decodes ids to text; with `skip_special_tokens` special tokens are left out.
    /// Incomplete UTF-8 sequences (from byte tokens) become U+FFFD.
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String, ChatError> {
        self.inner
            .decode(ids, skip_special_tokens)
            .map_err(|e| ChatError::Decode {
                path: self.path.clone(),
                count: ids.len(),
                message: e.to_string(),
            })
    }

    /// The id of a token (a vocabulary entry or an added token), if it has one.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// The text of a token as the vocabulary writes it (`▁Hello`, `Ġworld`, `<0x0A>`).
    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    /// The number of ids, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// The id of the config's `bos_token`.
    pub fn bos_id(&self) -> Option<u32> {
        self.bos_id
    }

    /// The ids that end generation: the config's `eos_token` (empty without a config).
    pub fn eos_ids(&self) -> &[u32] {
        &self.eos_ids
    }

    /// Whether `id` ends generation.
    pub fn is_eos(&self, id: u32) -> bool {
        self.eos_ids.contains(&id)
    }

    /// The special tokens a chat template sees.
    pub fn special_tokens(&self) -> SpecialTokens {
        SpecialTokens {
            bos_token: self.config.bos_token.clone(),
            eos_token: self.config.eos_token.clone(),
            unk_token: self.config.unk_token.clone(),
            pad_token: self.config.pad_token.clone(),
        }
    }

    /// Compiles the chat template of the config (or of `chat_template.jinja`).
    pub fn chat_template(&self) -> Result<ChatTemplate, ChatError> {
        let Some(source) = &self.config.chat_template else {
            return Err(ChatError::NoChatTemplate {
                path: self.config_path(),
            });
        };
        ChatTemplate::new(
            self.template_origin.display().to_string(),
            source.clone(),
            self.special_tokens(),
        )
    }

    /// A streaming detokenizer over this tokenizer.
    pub fn detokenizer(&self, skip_special_tokens: bool) -> Detokenizer<'_> {
        Detokenizer::new(self, skip_special_tokens)
    }
}

/// Checks that every special token a template post-processor (or one nested in a
/// sequence) places is one its `special_tokens` defines: `tokenizers` loads such a
/// template and then panics on an out-of-range index when it encodes.
fn check_post_processor(processor: &serde_json::Value) -> Result<(), String> {
    if let Some(nested) = processor["processors"].as_array() {
        return nested.iter().try_for_each(check_post_processor);
    }
    let defined = processor["special_tokens"].as_object();
    let templates = ["single", "pair"].map(|key| processor[key].as_array());
    for piece in templates.into_iter().flatten().flatten() {
        let Some(id) = piece["SpecialToken"]["id"].as_str() else {
            continue;
        };
        let entry = defined.and_then(|d| d.get(id));
        let ids = entry.and_then(|e| e["ids"].as_array()).map_or(0, Vec::len);
        let tokens = entry
            .and_then(|e| e["tokens"].as_array())
            .map_or(0, Vec::len);
        if entry.is_none() || ids == 0 || ids != tokens {
            return Err(format!(
                "post_processor places special token `{id}`, which its special_tokens do not define (with as many ids as tokens)"
            ));
        }
    }
    Ok(())
}

/// Checks that with a BPE `continuing_subword_prefix`, every merge's second token starts
/// with it: `tokenizers` strips the prefix's length from it unchecked (a subtraction
/// overflow, then a slice past its end).
fn check_bpe_merges(model: &serde_json::Value) -> Result<(), String> {
    let prefix = model["continuing_subword_prefix"].as_str().unwrap_or("");
    let Some(merges) = model["merges"].as_array().filter(|_| !prefix.is_empty()) else {
        return Ok(());
    };
    for merge in merges {
        let second = match merge {
            serde_json::Value::Array(pair) => pair.get(1).and_then(|b| b.as_str()),
            serde_json::Value::String(text) => text.split_once(' ').map(|(_, b)| b),
            _ => None,
        };
        if !second.is_some_and(|b| b.starts_with(prefix)) {
            return Err(format!(
                "merge {merge} does not continue with the continuing_subword_prefix `{prefix}`"
            ));
        }
    }
    Ok(())
}
