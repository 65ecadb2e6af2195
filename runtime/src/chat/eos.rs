//! The end-of-sequence ids of a model folder or artifact, as transformers gathers them:
//! `eos_token_id` (a number or a list) of `generation_config.json` and of `config.json`,
//! and the tokenizer's EOS token.

use super::generation::{read_model_json, GENERATION_CONFIG};
use super::{ChatError, Tokenizer};
use std::path::{Path, PathBuf};

/// The files of a Hugging Face folder whose `eos_token_id` ends generation.
const EOS_FILES: [&str; 2] = [GENERATION_CONFIG, "config.json"];

/// Every EOS id of the model in `dir`, sorted and deduplicated: those of
/// `generation_config.json`, `config.json` (each read when present) and `tokenizer`.
pub fn eos_ids(dir: &Path, tokenizer: Option<&Tokenizer>) -> Result<Vec<u32>, ChatError> {
    eos_ids_of(EOS_FILES.map(|name| dir.join(name)), tokenizer)
}

/// Every EOS id of `files` (each read when present) and `tokenizer`, sorted and
/// deduplicated.
pub fn eos_ids_of(
    files: impl IntoIterator<Item = PathBuf>,
    tokenizer: Option<&Tokenizer>,
) -> Result<Vec<u32>, ChatError> {
    let mut ids = Vec::new();
    for file in files {
        ids.extend(eos_ids_in(&file)?);
    }
    ids.extend(tokenizer.iter().flat_map(|t| t.eos_ids().to_vec()));
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

/// `eos_token_id` (a number or a list) of the JSON file at `path`, if it exists.
fn eos_ids_in(path: &Path) -> Result<Vec<u32>, ChatError> {
    Ok(read_model_json(path)?.map_or_else(Vec::new, |json| eos_token_ids(&json)))
}

/// `eos_token_id` (a number or a list) of a parsed `config.json` or
/// `generation_config.json`.
pub fn eos_token_ids(json: &serde_json::Value) -> Vec<u32> {
    let ids = match &json["eos_token_id"] {
        serde_json::Value::Array(list) => list.iter().filter_map(|v| v.as_u64()).collect(),
        value => value.as_u64().into_iter().collect::<Vec<_>>(),
    };
    ids.into_iter()
        .filter_map(|id| u32::try_from(id).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_come_from_both_configs_as_numbers_or_lists_sorted_once_each() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("generation_config.json"),
            r#"{"eos_token_id": [7, 2]}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join("config.json"), r#"{"eos_token_id": 7}"#).unwrap();
        assert_eq!(eos_ids(dir.path(), None).unwrap(), [2, 7]);
        let empty = tempfile::tempdir().unwrap();
        assert!(eos_ids(empty.path(), None).unwrap().is_empty());
    }

    #[test]
    fn a_broken_config_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.json"), "{ nope").unwrap();
        let err = eos_ids(dir.path(), None).unwrap_err();
        assert!(matches!(err, ChatError::ParseJson { .. }), "{err}");
        assert!(err.to_string().contains("config.json"), "{err}");
    }
}
