//! The HTTP routes: `POST /v1/completions`, `POST /v1/chat/completions`,
//! `GET /v1/models`, `GET /health`, `GET /stats`; anything else is a JSON 404 or 405.

use super::api::{ChatRequest, CompletionRequest, GenerationParams, ModelCard, ModelList};
use super::error::ApiError;
use super::reply::{Kind, Reply};
use super::request::{self, GenerationRequest, ModelInfo};
use super::stats::{Stats, StatsSnapshot};
use super::worker::Queue;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Json, Router};
use oxrelax_runtime::sampler::SamplingConfig;
use serde::de::DeserializeOwned;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    /// The worker's queue.
    pub queue: Queue,
    /// The model served.
    pub model: Arc<ModelInfo>,
    /// Sampling settings of fields a request leaves out.
    pub defaults: Arc<SamplingConfig>,
    /// Request counters.
    pub stats: Arc<Stats>,
    /// The largest request body accepted, in bytes.
    pub max_body: usize,
    /// The number of the next response id.
    pub next_id: Arc<AtomicU64>,
}

/// The router over `state`.
pub fn router(state: AppState) -> Router {
    let max_body = state.max_body;
    Router::new()
        .route("/health", get(health))
        .route("/stats", get(stats))
        .route("/v1/models", get(models))
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat_completions))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(state)
}

async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

async fn stats(State(state): State<AppState>) -> Json<StatsSnapshot> {
    Json(state.stats.snapshot())
}

async fn models(State(state): State<AppState>) -> Json<ModelList> {
    Json(ModelList {
        object: "list",
        data: vec![ModelCard {
            id: state.model.id.clone(),
            object: "model",
            created: state.model.created,
            owned_by: "oxrelax",
        }],
    })
}

async fn completions(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let request: CompletionRequest = parse_body(body, state.max_body)?;
    let stream = is_stream(&request.params);
    let checked = request::completion(request, &state.model, &state.defaults)?;
    respond(&state, Kind::Completion, checked, stream).await
}

async fn chat_completions(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let request: ChatRequest = parse_body(body, state.max_body)?;
    let stream = is_stream(&request.params);
    let checked = request::chat(request, &state.model, &state.defaults)?;
    respond(&state, Kind::Chat, checked, stream).await
}

async fn not_found(uri: Uri) -> ApiError {
    ApiError::NotFound(uri.path().to_string())
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

fn is_stream(params: &GenerationParams) -> bool {
    params.stream.unwrap_or(false)
}

/// Queues `request`, waits until the worker accepts it, then answers as a stream or
/// once generation has ended.
async fn respond(
    state: &AppState,
    kind: Kind,
    request: GenerationRequest,
    stream: bool,
) -> Result<Response, ApiError> {
    let number = state.next_id.fetch_add(1, Ordering::Relaxed);
    let id = format!("{}-{number}", kind.id_prefix());
    let events = state.queue.submit(id.clone(), request)?;
    let reply = Reply {
        kind,
        id,
        created: unix_seconds(),
        model: state.model.id.clone(),
        events,
    }
    .accepted()
    .await?;
    if stream {
        Ok(reply.into_sse())
    } else {
        reply.into_json().await
    }
}

/// The body as `T`: a body over the limit, invalid JSON and JSON of the wrong shape are
/// each their own error.
fn parse_body<T: DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
    limit: usize,
) -> Result<T, ApiError> {
    let bytes = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::BodyTooLarge { limit }
        } else {
            ApiError::BadBody(rejection.body_text())
        }
    })?;
    let json: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| ApiError::BadJson(e.to_string()))?;
    serde_json::from_value(json).map_err(|e| ApiError::BadShape(e.to_string()))
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
