//! Errors of loading tokenizers, rendering chat templates, encoding and decoding.

use std::path::PathBuf;

/// A tokenizer or chat-template failure; every variant names the file or template involved.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    /// A file that could not be read.
    #[error("cannot read {}: {error}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        error: std::io::Error,
    },
    /// A `tokenizer.json` the `tokenizers` library rejects.
    #[error("{}: not a valid tokenizer.json: {message}", path.display())]
    ParseTokenizer {
        /// The file.
        path: PathBuf,
        /// The library's message.
        message: String,
    },
    /// A `tokenizer_config.json` that is not valid JSON or has fields of the wrong type.
    #[error("{}: not a valid tokenizer_config.json: {error}", path.display())]
    ParseConfig {
        /// The file.
        path: PathBuf,
        /// The JSON error, with line and column.
        error: serde_json::Error,
    },
    /// A model JSON file (`config.json`, `generation_config.json`) that does not parse.
    #[error("{}: not valid JSON: {error}", path.display())]
    ParseJson {
        /// The file.
        path: PathBuf,
        /// The JSON error, with line and column.
        error: serde_json::Error,
    },
    /// A `generation_config.json` sampling value out of its range.
    #[error("{}: {invalid}", path.display())]
    InvalidSampling {
        /// The file.
        path: PathBuf,
        /// The option, its value and its range.
        invalid: crate::sampler::InvalidSampling,
    },
    /// A special token named by the config that the vocabulary does not have.
    #[error("{}: {role} `{token}` is not in the tokenizer's vocabulary", path.display())]
    UnknownSpecialToken {
        /// The config file.
        path: PathBuf,
        /// Which token: `eos_token`, `bos_token`, ...
        role: &'static str,
        /// The token's text.
        token: String,
    },
    /// A chat template was asked for but the config has none.
    #[error("{}: no chat_template (and no chat_template.jinja beside it)", path.display())]
    NoChatTemplate {
        /// The config file, or the folder when there is no config.
        path: PathBuf,
    },
    /// A chat template that does not parse.
    #[error("chat template `{name}` does not compile: {error:#}")]
    TemplateSyntax {
        /// The template's name (the file it came from).
        name: String,
        /// minijinja's error, with the line.
        error: minijinja::Error,
    },
    /// A chat template that fails while rendering (not through `raise_exception`).
    #[error("chat template `{name}` failed to render: {error:#}")]
    TemplateRender {
        /// The template's name.
        name: String,
        /// minijinja's error, with the line.
        error: minijinja::Error,
    },
    /// A chat template whose output grew past [`TEMPLATE_OUTPUT_LIMIT`](super::TEMPLATE_OUTPUT_LIMIT)
    /// bytes: far more than any context window holds.
    #[error("chat template `{name}` rendered more than {limit} bytes: stopped")]
    TemplateTooLong {
        /// The template's name.
        name: String,
        /// The limit, in bytes.
        limit: usize,
    },
    /// A chat template that called `raise_exception(message)`, as templates do to reject a
    /// conversation (for example roles that do not alternate).
    #[error("chat template `{name}` rejected the conversation: {message}")]
    TemplateRaised {
        /// The template's name.
        name: String,
        /// The message the template passed to `raise_exception`.
        message: String,
    },
    /// Text the tokenizer could not encode.
    #[error("{}: cannot encode text of {bytes} bytes: {message}", path.display())]
    Encode {
        /// The tokenizer file.
        path: PathBuf,
        /// The text's length in bytes.
        bytes: usize,
        /// The library's message.
        message: String,
    },
    /// Ids the tokenizer could not decode.
    #[error("{}: cannot decode {count} ids: {message}", path.display())]
    Decode {
        /// The tokenizer file.
        path: PathBuf,
        /// How many ids were given.
        count: usize,
        /// The library's message.
        message: String,
    },
    /// A GGUF file whose tokenizer could not be read.
    #[error(transparent)]
    Gguf(Box<crate::gguf::GgufError>),
}

impl From<crate::gguf::GgufError> for ChatError {
    fn from(error: crate::gguf::GgufError) -> Self {
        ChatError::Gguf(Box::new(error))
    }
}
