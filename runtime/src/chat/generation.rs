//! A model's sampling defaults, as transformers reads them from `generation_config.json`.

use super::ChatError;
use crate::sampler::SamplingConfig;
use std::path::Path;

/// transformers' `GenerationConfig` defaults for the fields a file leaves out.
const TRANSFORMERS_DEFAULTS: SamplingConfig = SamplingConfig {
    temperature: 1.0,
    top_p: 1.0,
    top_k: 50,
    repetition_penalty: 1.0,
    seed: 0,
};

/// The JSON file at `path` parsed, or `None` when it does not exist.
pub(crate) fn read_model_json(path: &Path) -> Result<Option<serde_json::Value>, ChatError> {
    if !path.is_file() {
        return Ok(None);
    }
    let text = crate::files::read_text(path).map_err(|error| ChatError::Read {
        path: path.to_path_buf(),
        error,
    })?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|error| ChatError::ParseJson {
            path: path.to_path_buf(),
            error,
        })
}

/// The file of a model's generation defaults (sampling, end-of-sequence ids).
pub const GENERATION_CONFIG: &str = "generation_config.json";

/// How the model in `dir` samples by default, as transformers' `generate` does with its
/// `generation_config.json`: greedy unless `do_sample` is true, then `temperature`,
/// `top_p` and `top_k` (transformers' defaults 1.0, 1.0 and 50 for those left out);
/// `repetition_penalty` either way. Without the file: greedy. Values out of range are an
/// error naming the file.
pub fn sampling_defaults(dir: &Path) -> Result<SamplingConfig, ChatError> {
    let path = dir.join(GENERATION_CONFIG);
    let Some(json) = read_model_json(&path)? else {
        return Ok(SamplingConfig::default());
    };
    let number = |key: &str, default: f32| json[key].as_f64().map_or(default, |v| v as f32);
    let repetition_penalty = number("repetition_penalty", 1.0);
    let config = if json["do_sample"].as_bool() == Some(true) {
        SamplingConfig {
            temperature: number("temperature", TRANSFORMERS_DEFAULTS.temperature),
            top_p: number("top_p", TRANSFORMERS_DEFAULTS.top_p),
            top_k: json["top_k"]
                .as_u64()
                .map_or(TRANSFORMERS_DEFAULTS.top_k, |k| {
                    usize::try_from(k).unwrap_or(usize::MAX)
                }),
            repetition_penalty,
            seed: 0,
        }
    } else {
        SamplingConfig {
            repetition_penalty,
            ..SamplingConfig::default()
        }
    };
    config
        .check()
        .map_err(|invalid| ChatError::InvalidSampling {
            path: path.clone(),
            invalid,
        })?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults_of(json: &str) -> Result<SamplingConfig, ChatError> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("generation_config.json"), json).unwrap();
        sampling_defaults(dir.path())
    }

    #[test]
    fn do_sample_takes_the_files_values_and_transformers_defaults() {
        let config = defaults_of(r#"{"do_sample": true, "temperature": 0.6, "top_p": 0.9}"#);
        let config = config.unwrap();
        assert_eq!((config.temperature, config.top_p), (0.6, 0.9));
        assert_eq!(config.top_k, 50);
        let config = defaults_of(r#"{"do_sample": true, "top_k": 20, "repetition_penalty": 1.05}"#);
        let config = config.unwrap();
        assert_eq!((config.temperature, config.top_k), (1.0, 20));
        assert_eq!(config.repetition_penalty, 1.05);
    }

    #[test]
    fn without_do_sample_or_a_file_it_is_greedy() {
        let config = defaults_of(r#"{"temperature": 0.6, "repetition_penalty": 1.1}"#).unwrap();
        assert_eq!(config.temperature, 0.0);
        assert_eq!(config.repetition_penalty, 1.1);
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(
            sampling_defaults(empty.path()).unwrap(),
            SamplingConfig::default()
        );
    }

    #[test]
    fn out_of_range_values_name_the_file() {
        let err = defaults_of(r#"{"do_sample": true, "top_p": 3}"#).unwrap_err();
        let message = err.to_string();
        assert!(message.contains("generation_config.json"), "{message}");
        assert!(message.contains("top_p"), "{message}");
        assert!(defaults_of("{ nope").is_err());
    }
}
