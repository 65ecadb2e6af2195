//! Turning a job's events into an OpenAI response: one JSON body, or server-sent events
//! (a chunk per piece of text, a last chunk with the finish reason, a chunk with the
//! usage if asked, then `[DONE]`; an error is an `{"error": ...}` event, then `[DONE]`).
//! Dropping a [`Reply`] (the client went away, or the shutdown's grace period is over)
//! drops the job's receiver, which stops its generation.

use super::api::{ChatChoice, ChatChunkChoice, ChatDelta, Envelope, TextChoice, Usage};
use super::error::ApiError;
use super::worker::{Event, FinishReason};
use axum::response::sse::{self, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::stream::{self, Stream, StreamExt};
use serde::Serialize;
use std::convert::Infallible;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::watch;

/// Which endpoint answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `/v1/completions`.
    Completion,
    /// `/v1/chat/completions`.
    Chat,
}

impl Kind {
    /// The prefix of response ids.
    pub fn id_prefix(self) -> &'static str {
        match self {
            Kind::Completion => "cmpl",
            Kind::Chat => "chatcmpl",
        }
    }
}

/// An accepted job's response in the making.
pub struct Reply {
    /// The endpoint.
    pub kind: Kind,
    /// The response id.
    pub id: String,
    /// Unix seconds of the request.
    pub created: u64,
    /// The model's id.
    pub model: String,
    /// The job's events, after [`Event::Accepted`].
    pub events: UnboundedReceiver<Event>,
    /// Becomes true when the shutdown's grace period is over: the reply ends with a 503.
    pub cancelled: watch::Receiver<bool>,
    /// A stream sends a chunk with the usage before `[DONE]`.
    pub include_usage: bool,
}

/// What a streamed chunk carries.
enum Piece {
    /// The chat's opening `role`.
    Role,
    /// Generated text.
    Text(String),
    /// Nothing: the last chunk, with the finish reason.
    End,
}

impl Piece {
    fn into_text(self) -> String {
        match self {
            Piece::Text(text) => text,
            Piece::Role | Piece::End => String::new(),
        }
    }

    fn into_delta(self) -> ChatDelta {
        match self {
            Piece::Role => ChatDelta {
                role: Some("assistant"),
                content: Some(String::new()),
            },
            Piece::Text(text) => ChatDelta {
                role: None,
                content: Some(text),
            },
            Piece::End => ChatDelta::default(),
        }
    }
}

/// What the stream sends next.
enum Phase {
    Generating,
    Usage(Usage),
    Finished,
    Closed,
}

impl Reply {
    /// Waits for the worker to accept the job: a request it refuses (a prompt too long
    /// for the context) is an error before any response is started.
    pub async fn accepted(mut self) -> Result<Reply, ApiError> {
        match self.next().await? {
            Event::Accepted => Ok(self),
            Event::Failed(error) => Err(error),
            _ => Err(worker_stopped()),
        }
    }

    /// The job's next event; a worker that stopped, or the end of the shutdown's grace
    /// period, is an error.
    async fn next(&mut self) -> Result<Event, ApiError> {
        tokio::select! {
            event = self.events.recv() => event.ok_or_else(worker_stopped),
            _ = self.cancelled.wait_for(|&cancelled| cancelled) => Err(ApiError::Unavailable),
        }
    }

    /// The whole response as one JSON body, once generation has ended.
    pub async fn into_json(mut self) -> Result<Response, ApiError> {
        let mut text = String::new();
        loop {
            match self.next().await? {
                Event::Text(piece) => text.push_str(&piece),
                Event::Done {
                    finish_reason,
                    usage,
                } => return Ok(self.body(text, finish_reason, usage)),
                Event::Failed(error) => return Err(error),
                Event::Accepted => {}
            }
        }
    }

    /// The response as server-sent events.
    pub fn into_sse(self) -> Response {
        // A chat stream opens with the assistant's role.
        let opening = match self.kind {
            Kind::Chat => Some(self.chunk(Piece::Role, None)),
            Kind::Completion => None,
        };
        let rest = stream::unfold((self, Phase::Generating), |(mut reply, phase)| async move {
            let (event, next) = match phase {
                Phase::Closed => return None,
                Phase::Finished => (sse::Event::default().data("[DONE]"), Phase::Closed),
                Phase::Usage(usage) => (reply.usage_chunk(usage), Phase::Finished),
                Phase::Generating => reply.next_event().await,
            };
            Some((event, (reply, next)))
        });
        let events: std::pin::Pin<Box<dyn Stream<Item = sse::Event> + Send>> =
            Box::pin(stream::iter(opening).chain(rest));
        Sse::new(events.map(Ok::<_, Infallible>)).into_response()
    }

    /// The event after the next text piece or the end of generation.
    async fn next_event(&mut self) -> (sse::Event, Phase) {
        loop {
            match self.next().await {
                Ok(Event::Text(piece)) => {
                    return (self.chunk(Piece::Text(piece), None), Phase::Generating)
                }
                Ok(Event::Done {
                    finish_reason,
                    usage,
                }) => {
                    let next = if self.include_usage {
                        Phase::Usage(usage)
                    } else {
                        Phase::Finished
                    };
                    return (self.chunk(Piece::End, Some(finish_reason)), next);
                }
                Ok(Event::Failed(error)) | Err(error) => {
                    return (json_event(&error.body()), Phase::Finished)
                }
                Ok(Event::Accepted) => {}
            }
        }
    }

    /// The chunk with no choices and the usage (`stream_options.include_usage`).
    fn usage_chunk(&self, usage: Usage) -> sse::Event {
        let object = match self.kind {
            Kind::Completion => "text_completion",
            Kind::Chat => "chat.completion.chunk",
        };
        json_event(&Envelope::<TextChoice> {
            id: self.id.clone(),
            object,
            created: self.created,
            model: self.model.clone(),
            choices: Vec::new(),
            usage: Some(usage),
        })
    }

    fn envelope<C>(&self, object: &'static str, choice: C, usage: Option<Usage>) -> Envelope<C> {
        Envelope {
            id: self.id.clone(),
            object,
            created: self.created,
            model: self.model.clone(),
            choices: vec![choice],
            usage,
        }
    }

    fn body(&self, text: String, finish_reason: FinishReason, usage: Usage) -> Response {
        let finish_reason = Some(finish_reason.as_str());
        match self.kind {
            Kind::Completion => Json(self.envelope(
                "text_completion",
                TextChoice {
                    index: 0,
                    text,
                    finish_reason,
                    logprobs: None,
                },
                Some(usage),
            ))
            .into_response(),
            Kind::Chat => Json(self.envelope(
                "chat.completion",
                ChatChoice {
                    index: 0,
                    message: ChatDelta {
                        role: Some("assistant"),
                        content: Some(text),
                    },
                    finish_reason,
                    logprobs: None,
                },
                Some(usage),
            ))
            .into_response(),
        }
    }

    fn chunk(&self, piece: Piece, finish_reason: Option<FinishReason>) -> sse::Event {
        let finish_reason = finish_reason.map(FinishReason::as_str);
        match self.kind {
            Kind::Completion => json_event(&self.envelope(
                "text_completion",
                TextChoice {
                    index: 0,
                    text: piece.into_text(),
                    finish_reason,
                    logprobs: None,
                },
                None,
            )),
            Kind::Chat => json_event(&self.envelope(
                "chat.completion.chunk",
                ChatChunkChoice {
                    index: 0,
                    delta: piece.into_delta(),
                    finish_reason,
                    logprobs: None,
                },
                None,
            )),
        }
    }
}

/// An event whose data is `value` as JSON.
fn json_event(value: &impl Serialize) -> sse::Event {
    sse::Event::default()
        .json_data(value)
        .unwrap_or_else(|e| sse::Event::default().data(format!("{{\"error\":\"{e}\"}}")))
}

/// The error of a job whose events ended without [`Event::Done`] (the worker panicked
/// or stopped).
fn worker_stopped() -> ApiError {
    ApiError::Engine("the worker stopped before the request ended".into())
}
