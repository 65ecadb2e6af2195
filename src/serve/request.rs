//! Checking a request's fields against the model and OpenAI's ranges, and turning it into
//! what the worker runs ([`GenerationRequest`]).

use super::api::{
    ChatMessage, ChatRequest, CompletionRequest, GenerationParams, MessageContent, PromptInput,
    StopInput,
};
use super::error::ApiError;
use oxrelax_runtime::chat::Message;
use oxrelax_runtime::sampler::SamplingConfig;

/// Tokens a completion generates when `max_tokens` is absent (OpenAI's default).
const DEFAULT_COMPLETION_TOKENS: usize = 16;
/// Stop strings a request may give at most.
const MAX_STOPS: usize = 4;
/// Roles a chat message may have.
const ROLES: [&str; 3] = ["system", "user", "assistant"];

/// The model a server runs, as requests see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    /// The id requests name (the model folder's name).
    pub id: String,
    /// Unix seconds the server loaded it.
    pub created: u64,
    /// Positions of its KV cache.
    pub context_window: usize,
    /// Rows of its logits (token ids must be below).
    pub vocab_size: usize,
}

/// What to generate from.
#[derive(Debug, Clone, PartialEq)]
pub enum Prompt {
    /// Text, encoded with the tokenizer's special tokens (as `oxrelax generate` does).
    Text(String),
    /// Token ids as given.
    Ids(Vec<u32>),
    /// A conversation, rendered with the chat template and a generation prompt.
    Chat(Vec<Message>),
}

/// A checked request, ready for the worker.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerationRequest {
    /// The prompt.
    pub prompt: Prompt,
    /// Tokens to generate at most (1 to the context window).
    pub max_tokens: usize,
    /// Strings that end generation.
    pub stop: Vec<String>,
    /// The sampler's settings (checked).
    pub sampling: SamplingConfig,
    /// A stream ends with a chunk of the usage (`stream_options.include_usage`).
    pub include_usage: bool,
}

/// An OpenAI number field's name, its value if given, the test it must pass, and what
/// it must be.
type FieldRule = (&'static str, Option<f32>, fn(f32) -> bool, &'static str);

/// A completion request checked against `model`; absent sampling fields take `defaults`.
pub fn completion(
    request: CompletionRequest,
    model: &ModelInfo,
    defaults: &SamplingConfig,
) -> Result<GenerationRequest, ApiError> {
    let prompt = completion_prompt(request.prompt, model)?;
    checked(
        prompt,
        &request.params,
        model,
        defaults,
        DEFAULT_COMPLETION_TOKENS,
    )
}

/// A chat request checked against `model`; without `max_tokens` the reply may fill the
/// context window.
pub fn chat(
    request: ChatRequest,
    model: &ModelInfo,
    defaults: &SamplingConfig,
) -> Result<GenerationRequest, ApiError> {
    if request.messages.is_empty() {
        return Err(ApiError::invalid("messages", "must not be empty"));
    }
    let messages = request
        .messages
        .into_iter()
        .map(message)
        .collect::<Result<_, _>>()?;
    let prompt = Prompt::Chat(messages);
    checked(
        prompt,
        &request.params,
        model,
        defaults,
        model.context_window,
    )
}

/// A message with a known role, its content's text parts joined by newlines.
fn message(message: ChatMessage) -> Result<Message, ApiError> {
    if !ROLES.contains(&message.role.as_str()) {
        return Err(ApiError::invalid(
            "messages",
            format!(
                "unknown role `{}` (expected one of {})",
                message.role,
                ROLES.join(", ")
            ),
        ));
    }
    let content = match message.content {
        MessageContent::Text(text) => text,
        MessageContent::Parts(parts) => {
            let texts = parts
                .into_iter()
                .map(|part| match (part.kind.as_str(), part.text) {
                    ("text", Some(text)) => Ok(text),
                    ("text", None) => {
                        Err(ApiError::invalid("messages", "a text part has no `text`"))
                    }
                    (kind, _) => Err(ApiError::invalid(
                        "messages",
                        format!("content parts of type `{kind}` are not supported (only `text`)"),
                    )),
                });
            texts.collect::<Result<Vec<_>, _>>()?.join("\n")
        }
    };
    Ok(Message::new(message.role, content))
}

fn completion_prompt(prompt: PromptInput, model: &ModelInfo) -> Result<Prompt, ApiError> {
    match prompt {
        PromptInput::Text(text) => Ok(Prompt::Text(text)),
        PromptInput::Texts(texts) => match <[String; 1]>::try_from(texts) {
            Ok([text]) => Ok(Prompt::Text(text)),
            Err(_) => Err(ApiError::invalid(
                "prompt",
                "an array of prompts must hold exactly one (batches are not supported)",
            )),
        },
        PromptInput::Ids(ids) => {
            if ids.is_empty() {
                return Err(ApiError::invalid("prompt", "must not be empty"));
            }
            match ids.iter().find(|&&id| id as usize >= model.vocab_size) {
                Some(id) => Err(ApiError::invalid(
                    "prompt",
                    format!(
                        "token id {id} is out of range for a vocabulary of {}",
                        model.vocab_size
                    ),
                )),
                None => Ok(Prompt::Ids(ids)),
            }
        }
    }
}

fn checked(
    prompt: Prompt,
    params: &GenerationParams,
    model: &ModelInfo,
    defaults: &SamplingConfig,
    default_max_tokens: usize,
) -> Result<GenerationRequest, ApiError> {
    if params.model != model.id {
        return Err(ApiError::ModelNotFound(params.model.clone()));
    }
    if params.n.is_some_and(|n| n != 1) {
        return Err(ApiError::invalid("n", "only n = 1 is supported"));
    }
    Ok(GenerationRequest {
        prompt,
        max_tokens: max_tokens(params.max_tokens, model, default_max_tokens)?,
        stop: stop_strings(params.stop.clone())?,
        sampling: sampling(params, defaults)?,
        include_usage: params
            .stream_options
            .as_ref()
            .and_then(|options| options.include_usage)
            .unwrap_or(false),
    })
}

fn max_tokens(given: Option<i64>, model: &ModelInfo, default: usize) -> Result<usize, ApiError> {
    let Some(given) = given else {
        return Ok(default.min(model.context_window));
    };
    let window = model.context_window;
    match usize::try_from(given) {
        Ok(tokens) if (1..=window).contains(&tokens) => Ok(tokens),
        _ => Err(ApiError::invalid(
            "max_tokens",
            format!("{given} is not in 1 to {window} (the context window)"),
        )),
    }
}

fn stop_strings(stop: Option<StopInput>) -> Result<Vec<String>, ApiError> {
    match stop {
        None => Ok(Vec::new()),
        Some(StopInput::One(stop)) => Ok(vec![stop]),
        Some(StopInput::Many(stops)) if stops.len() <= MAX_STOPS => Ok(stops),
        Some(StopInput::Many(stops)) => Err(ApiError::invalid(
            "stop",
            format!("{} strings given, at most {MAX_STOPS} allowed", stops.len()),
        )),
    }
}

/// The sampler's settings: OpenAI's ranges (temperature 0 to 2, top_p in (0, 1], the
/// penalties only 0), then the sampler's own check. A negative seed is taken as its
/// two's-complement bits.
fn sampling(
    params: &GenerationParams,
    defaults: &SamplingConfig,
) -> Result<SamplingConfig, ApiError> {
    let rules: [FieldRule; 4] = [
        (
            "temperature",
            params.temperature,
            |t| (0.0..=2.0).contains(&t),
            "a number in 0 to 2",
        ),
        (
            "top_p",
            params.top_p,
            |p| p > 0.0 && p <= 1.0,
            "a number in (0, 1]",
        ),
        (
            "presence_penalty",
            params.presence_penalty,
            |p| p == 0.0,
            "0 (other penalties are not supported)",
        ),
        (
            "frequency_penalty",
            params.frequency_penalty,
            |p| p == 0.0,
            "0 (other penalties are not supported)",
        ),
    ];
    let broken = rules.into_iter().find_map(|(field, value, ok, expected)| {
        value.filter(|v| !ok(*v)).map(|v| (field, v, expected))
    });
    if let Some((field, value, expected)) = broken {
        return Err(ApiError::invalid(
            field,
            format!("{value} is not {expected}"),
        ));
    }
    let config = SamplingConfig {
        temperature: params.temperature.unwrap_or(defaults.temperature),
        top_p: params.top_p.unwrap_or(defaults.top_p),
        seed: params.seed.map_or(defaults.seed, |seed| seed as u64),
        ..defaults.clone()
    };
    config
        .check()
        .map_err(|e| ApiError::invalid(e.option, e.to_string()))?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> ModelInfo {
        ModelInfo {
            id: "m".into(),
            created: 0,
            context_window: 64,
            vocab_size: 100,
        }
    }

    fn completion_of(json: &str) -> Result<GenerationRequest, ApiError> {
        let request: CompletionRequest = serde_json::from_str(json).unwrap();
        completion(request, &model(), &SamplingConfig::default())
    }

    fn param_of(json: &str) -> Option<&'static str> {
        match completion_of(json) {
            Err(ApiError::Invalid { param, .. }) => Some(param),
            _ => None,
        }
    }

    #[test]
    fn fields_are_checked_against_openai_ranges_and_the_model() {
        let ok = completion_of(
            r#"{"model":"m","prompt":["hi"],"temperature":0.7,"seed":-1,"stop":["a","b"]}"#,
        )
        .unwrap();
        assert_eq!(ok.prompt, Prompt::Text("hi".into()));
        assert_eq!(ok.max_tokens, DEFAULT_COMPLETION_TOKENS);
        assert_eq!(ok.sampling.seed, u64::MAX);
        assert_eq!(ok.stop, ["a", "b"]);
        let cases = [
            (
                r#"{"model":"m","prompt":"x","max_tokens":-5}"#,
                "max_tokens",
            ),
            (r#"{"model":"m","prompt":"x","max_tokens":0}"#, "max_tokens"),
            (
                r#"{"model":"m","prompt":"x","max_tokens":65}"#,
                "max_tokens",
            ),
            (r#"{"model":"m","prompt":"x","n":2}"#, "n"),
            (
                r#"{"model":"m","prompt":"x","temperature":5}"#,
                "temperature",
            ),
            (r#"{"model":"m","prompt":"x","top_p":0}"#, "top_p"),
            // Finite in JSON, infinite as an f32.
            (r#"{"model":"m","prompt":"x","top_p":1e39}"#, "top_p"),
            (
                r#"{"model":"m","prompt":"x","temperature":-1e39}"#,
                "temperature",
            ),
            (
                r#"{"model":"m","prompt":"x","presence_penalty":1e39}"#,
                "presence_penalty",
            ),
            (
                r#"{"model":"m","prompt":"x","frequency_penalty":0.5}"#,
                "frequency_penalty",
            ),
            (
                r#"{"model":"m","prompt":"x","stop":["1","2","3","4","5"]}"#,
                "stop",
            ),
            (r#"{"model":"m","prompt":["x","y"]}"#, "prompt"),
            (r#"{"model":"m","prompt":[]}"#, "prompt"),
            (r#"{"model":"m","prompt":[1,100]}"#, "prompt"),
        ];
        for (json, param) in cases {
            assert_eq!(param_of(json), Some(param), "{json}");
        }
        assert!(matches!(
            completion_of(r#"{"model":"other","prompt":"x"}"#),
            Err(ApiError::ModelNotFound(_))
        ));
    }

    #[test]
    fn chats_need_messages_with_known_roles() {
        let of = |json: &str| {
            let request: ChatRequest = serde_json::from_str(json).unwrap();
            chat(request, &model(), &SamplingConfig::default())
        };
        let ok = of(r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#).unwrap();
        assert_eq!(ok.max_tokens, 64);
        assert!(of(r#"{"model":"m","messages":[]}"#).is_err());
        assert!(of(r#"{"model":"m","messages":[{"role":"tool","content":"x"}]}"#).is_err());
        let parts = of(r#"{"model":"m","messages":[{"role":"user","content":[
            {"type":"text","text":"a"},{"type":"text","text":"b"}]}]}"#)
        .unwrap();
        assert_eq!(
            parts.prompt,
            Prompt::Chat(vec![Message::new("user", "a\nb")])
        );
        let image = of(r#"{"model":"m","messages":[{"role":"user","content":[
            {"type":"image_url","image_url":{"url":"x"}}]}]}"#);
        assert!(
            matches!(
                image,
                Err(ApiError::Invalid {
                    param: "messages",
                    ..
                })
            ),
            "{image:?}"
        );
    }
}
