//! The model a command is given to compile: a Hugging Face folder (`config.json`,
//! safetensors, tokenizer files) or a GGUF file (the same, derived from its metadata).

use crate::artifact::ArtifactError;
use crate::model::LoadError;
use oxrelax_models::{ModelConfig, ModelError};
use oxrelax_runtime::files::{read_capped, read_text, TEXT_FILE_LIMIT};
use oxrelax_runtime::gguf::GgufModel;
use oxrelax_runtime::weights::{is_gguf, WeightError, WeightStore};
use std::path::{Path, PathBuf};

/// Tokenizer files an artifact carries (`tokenizer.json` is what the runtime reads).
const TOKENIZER_FILES: [&str; 3] = [
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
];
/// Generation defaults an artifact carries.
pub use oxrelax_runtime::chat::GENERATION_CONFIG;

/// A model's config and weights, opened from a folder or a GGUF file.
#[derive(Debug)]
pub struct Checkpoint {
    /// The folder or file.
    pub path: PathBuf,
    /// The `config.json` as written (for a GGUF file, as its metadata describes it).
    pub config_json: serde_json::Value,
    /// The parsed config.
    pub config: ModelConfig,
    /// The weights, by Hugging Face name.
    pub store: WeightStore,
}

impl Checkpoint {
    /// Opens the model at `path`: a GGUF file, else a Hugging Face folder.
    pub fn open(path: &Path) -> Result<Checkpoint, LoadError> {
        if is_gguf(path) {
            let model = GgufModel::open(path).map_err(WeightError::from)?;
            let config_json = model.config_json().clone();
            let config =
                ModelConfig::from_json(&config_json.to_string()).map_err(|e| in_file(path, e))?;
            return Ok(Checkpoint {
                path: path.to_path_buf(),
                config_json,
                config,
                store: WeightStore::from_gguf(model),
            });
        }
        let config_path = path.join("config.json");
        // The config's own checks first (a regular file of bounded size, valid fields),
        // then the same text kept as written.
        let config = ModelConfig::from_file(&config_path).map_err(ModelError::from)?;
        let text = read_text(&config_path).map_err(|source| ArtifactError::Io {
            path: config_path.clone(),
            source,
        })?;
        let config_json = serde_json::from_str(&text).map_err(|source| ArtifactError::Json {
            path: config_path.clone(),
            source,
        })?;
        Ok(Checkpoint {
            path: path.to_path_buf(),
            config_json,
            config,
            store: WeightStore::open(path)?,
        })
    }

    /// The tokenizer and generation files an artifact of this model carries, as (name,
    /// bytes): those of the folder that are present, or those a GGUF file's metadata
    /// describes.
    pub fn side_files(&self) -> Result<Vec<(String, Vec<u8>)>, LoadError> {
        if let Some(model) = self.store.gguf() {
            let gguf = |e| LoadError::from(WeightError::from(e));
            let files = [
                ("tokenizer.json", model.tokenizer_json().map_err(gguf)?),
                (
                    "tokenizer_config.json",
                    model.tokenizer_config_json().map_err(gguf)?.to_string(),
                ),
                (
                    GENERATION_CONFIG,
                    model.generation_config_json().map_err(gguf)?.to_string(),
                ),
            ];
            return Ok(files
                .map(|(n, text)| (n.to_string(), text.into_bytes()))
                .into());
        }
        let names = TOKENIZER_FILES.iter().chain([&GENERATION_CONFIG]);
        let present = names.filter(|name| self.path.join(name).is_file());
        present
            .map(|name| {
                let from = self.path.join(name);
                let bytes = read_capped(&from, TEXT_FILE_LIMIT)
                    .map_err(|source| ArtifactError::Io { path: from, source })?;
                Ok((name.to_string(), bytes))
            })
            .collect()
    }
}

/// A config error, naming the file it came from.
fn in_file(path: &Path, error: oxrelax_models::ConfigError) -> LoadError {
    let error = oxrelax_models::ConfigError::InFile {
        path: path.to_path_buf(),
        source: Box::new(error),
    };
    LoadError::Model(ModelError::from(error))
}
