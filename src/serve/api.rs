//! The OpenAI API's bodies, as far as this server reads and writes them. Which fields a
//! request may have is checked before (`fields`).

use serde::{Deserialize, Serialize};

/// `prompt` of a completion request.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(
    untagged,
    expecting = "`prompt` must be a string, an array of one string or an array of token ids"
)]
pub enum PromptInput {
    /// The text.
    Text(String),
    /// A batch of texts (only one is served).
    Texts(Vec<String>),
    /// Token ids.
    Ids(Vec<u32>),
}

/// `stop` of a request.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged, expecting = "`stop` must be a string or an array of strings")]
pub enum StopInput {
    /// One stop string.
    One(String),
    /// Up to four stop strings.
    Many(Vec<String>),
}

/// The fields completions and chat completions share.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct GenerationParams {
    /// The model's id (`GET /v1/models`).
    pub model: String,
    /// Tokens to generate at most (`max_completion_tokens` in newer chat requests).
    #[serde(alias = "max_completion_tokens")]
    pub max_tokens: Option<i64>,
    /// 0 to 2; 0 is greedy.
    pub temperature: Option<f32>,
    /// Nucleus sampling mass, in (0, 1].
    pub top_p: Option<f32>,
    /// Choices to generate: only 1.
    pub n: Option<i64>,
    /// Strings that end generation (not included in the text).
    pub stop: Option<StopInput>,
    /// Seed of the sampler.
    pub seed: Option<i64>,
    /// Answer with server-sent events.
    pub stream: Option<bool>,
    /// Options of a stream.
    pub stream_options: Option<StreamOptions>,
    /// OpenAI's presence penalty, in -2 to 2: only 0 is served.
    pub presence_penalty: Option<f32>,
    /// OpenAI's frequency penalty, in -2 to 2: only 0 is served.
    pub frequency_penalty: Option<f32>,
}

/// `stream_options` of a request.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamOptions {
    /// Send a last chunk with the usage (and no choices) before `[DONE]`.
    pub include_usage: Option<bool>,
}

/// A chat message as a request gives it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text, or parts of it.
    pub content: MessageContent,
}

/// `content` of a chat message.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(
    untagged,
    expecting = "`content` must be a string or an array of parts with a `type`"
)]
pub enum MessageContent {
    /// The text.
    Text(String),
    /// Parts: the text ones are joined; others are refused.
    Parts(Vec<ContentPart>),
}

/// A part of a message's content: `{"type": "text", "text": ...}` (other types carry
/// other fields, which are not read).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ContentPart {
    /// `text`, `image_url`, `input_audio`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// The text of a `text` part.
    pub text: Option<String>,
}

/// `POST /v1/completions`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CompletionRequest {
    /// The prompt.
    pub prompt: PromptInput,
    /// Model and sampling.
    #[serde(flatten)]
    pub params: GenerationParams,
}

/// `POST /v1/chat/completions`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ChatRequest {
    /// The conversation (`role`: system, user or assistant; `content`: a string or parts).
    pub messages: Vec<ChatMessage>,
    /// Model and sampling.
    #[serde(flatten)]
    pub params: GenerationParams,
}

/// Token counts of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// Tokens of the prompt (rendered and encoded).
    pub prompt_tokens: usize,
    /// Tokens generated (an EOS token that ended generation included).
    pub completion_tokens: usize,
    /// The sum.
    pub total_tokens: usize,
}

impl Usage {
    /// The usage of a request with these counts.
    pub fn new(prompt_tokens: usize, completion_tokens: usize) -> Self {
        Usage {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens + completion_tokens,
        }
    }
}

/// A response or a streamed chunk: the envelope shared by completions and chat.
#[derive(Debug, Clone, Serialize)]
pub struct Envelope<C> {
    /// `cmpl-…` or `chatcmpl-…`, the same for every chunk of a stream.
    pub id: String,
    /// `text_completion`, `chat.completion` or `chat.completion.chunk`.
    pub object: &'static str,
    /// Unix seconds of the request.
    pub created: u64,
    /// The model's id.
    pub model: String,
    /// The single choice.
    pub choices: Vec<C>,
    /// Token counts (not in chunks but the usage chunk).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// A choice of a completion (and of a streamed completion chunk).
#[derive(Debug, Clone, Serialize)]
pub struct TextChoice {
    /// Always 0.
    pub index: u32,
    /// The text (of this chunk).
    pub text: String,
    /// `stop` or `length` at the end, otherwise null.
    pub finish_reason: Option<&'static str>,
    /// Not computed: null.
    pub logprobs: Option<()>,
}

/// The assistant's message in a chat completion, or the change a chunk brings.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ChatDelta {
    /// `assistant` (in a chunk, only the first).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    /// The text (of this chunk).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

/// A choice of a chat completion.
#[derive(Debug, Clone, Serialize)]
pub struct ChatChoice {
    /// Always 0.
    pub index: u32,
    /// The reply.
    pub message: ChatDelta,
    /// `stop` or `length`.
    pub finish_reason: Option<&'static str>,
    /// Not computed: null.
    pub logprobs: Option<()>,
}

/// A choice of a streamed chat chunk.
#[derive(Debug, Clone, Serialize)]
pub struct ChatChunkChoice {
    /// Always 0.
    pub index: u32,
    /// What this chunk adds.
    pub delta: ChatDelta,
    /// `stop` or `length` in the last chunk, otherwise null.
    pub finish_reason: Option<&'static str>,
    /// Not computed: null.
    pub logprobs: Option<()>,
}

/// `GET /v1/models`.
#[derive(Debug, Clone, Serialize)]
pub struct ModelList {
    /// `list`.
    pub object: &'static str,
    /// The one model served.
    pub data: Vec<ModelCard>,
}

/// A model in [`ModelList`].
#[derive(Debug, Clone, Serialize)]
pub struct ModelCard {
    /// The id requests name.
    pub id: String,
    /// `model`.
    pub object: &'static str,
    /// Unix seconds the server loaded it.
    pub created: u64,
    /// `oxrelax`.
    pub owned_by: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_with_their_variants() {
        let request: CompletionRequest = serde_json::from_str(
            r#"{"model":"m","prompt":[1,2],"stop":"x","max_tokens":3,"logprobs":null,"user":"u"}"#,
        )
        .unwrap();
        assert_eq!(request.prompt, PromptInput::Ids(vec![1, 2]));
        assert_eq!(request.params.stop, Some(StopInput::One("x".into())));
        assert_eq!(request.params.max_tokens, Some(3));
        let chat: ChatRequest = serde_json::from_str(
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":2,"temperature":0}"#,
        )
        .unwrap();
        assert_eq!(chat.messages[0].content, MessageContent::Text("hi".into()));
        assert_eq!(chat.params.max_tokens, Some(2));
        assert_eq!(chat.params.temperature, Some(0.0));
        let wrong = serde_json::from_str::<CompletionRequest>(r#"{"model":1,"prompt":"x"}"#);
        assert!(wrong.is_err());
    }

    #[test]
    fn responses_have_openai_shapes() {
        let chunk = Envelope {
            id: "chatcmpl-1".into(),
            object: "chat.completion.chunk",
            created: 7,
            model: "m".into(),
            choices: vec![ChatChunkChoice {
                index: 0,
                delta: ChatDelta {
                    role: Some("assistant"),
                    content: None,
                },
                finish_reason: None,
                logprobs: None,
            }],
            usage: None,
        };
        assert_eq!(
            serde_json::to_string(&chunk).unwrap(),
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null,"logprobs":null}]}"#
        );
        let completion = Envelope {
            id: "cmpl-2".into(),
            object: "text_completion",
            created: 7,
            model: "m".into(),
            choices: vec![TextChoice {
                index: 0,
                text: "hi".into(),
                finish_reason: Some("length"),
                logprobs: None,
            }],
            usage: Some(Usage::new(3, 1)),
        };
        assert_eq!(
            serde_json::to_string(&completion).unwrap(),
            r#"{"id":"cmpl-2","object":"text_completion","created":7,"model":"m","choices":[{"index":0,"text":"hi","finish_reason":"length","logprobs":null}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}"#
        );
    }
}
