//! The HTTP routes: `POST /v1/completions`, `POST /v1/chat/completions`,
//! `GET /v1/models`, `GET /v1/models/{id}`, `GET /health`, `GET /stats`; anything else
//! is a JSON 404 or 405. Every route allows any origin (CORS), preflights included.

use super::api::{ChatRequest, CompletionRequest, GenerationParams, ModelCard, ModelList};
use super::body;
use super::error::ApiError;
use super::fields;
use super::reply::{Kind, Reply};
use super::request::{self, GenerationRequest, ModelInfo};
use super::stats::{Stats, StatsSnapshot};
use super::worker::Queue;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{Method, Uri};
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Json, Router};
use oxrelax_runtime::sampler::SamplingConfig;
use serde::de::DeserializeOwned;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;
use tower_http::cors::{Any, CorsLayer};

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
    /// How long a request may take to send its body.
    pub body_timeout: Duration,
    /// The number of the next response id.
    pub next_id: Arc<AtomicU64>,
    /// Becomes true when the shutdown's grace period is over: replies end at once.
    pub cancelled: watch::Receiver<bool>,
}

/// The router over `state`.
pub fn router(state: AppState) -> Router {
    let cors = CorsLayer::new()
        .allow_origin(Any)
        .allow_methods([Method::GET, Method::POST])
        .allow_headers(Any);
    Router::new()
        .route("/health", get(health))
        .route("/stats", get(stats))
        .route("/v1/models", get(models))
        .route("/v1/models/{id}", get(model))
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat_completions))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(cors)
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
        data: vec![card(&state.model)],
    })
}

async fn model(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<ModelCard>, ApiError> {
    if id == state.model.id {
        Ok(Json(card(&state.model)))
    } else {
        Err(ApiError::ModelNotFound(id))
    }
}

fn card(model: &ModelInfo) -> ModelCard {
    ModelCard {
        id: model.id.clone(),
        object: "model",
        created: model.created,
        owned_by: "oxrelax",
    }
}

async fn completions(State(state): State<AppState>, body: Body) -> Result<Response, ApiError> {
    let request: CompletionRequest = parse_body(&state, Kind::Completion, body).await?;
    let stream = is_stream(&request.params);
    let checked = request::completion(request, &state.model, &state.defaults)?;
    respond(&state, Kind::Completion, checked, stream).await
}

async fn chat_completions(State(state): State<AppState>, body: Body) -> Result<Response, ApiError> {
    let request: ChatRequest = parse_body(&state, Kind::Chat, body).await?;
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
    let include_usage = stream && request.include_usage;
    let number = state.next_id.fetch_add(1, Ordering::Relaxed);
    let id = format!("{}-{number}", kind.id_prefix());
    let events = state.queue.submit(id.clone(), request)?;
    let reply = Reply {
        kind,
        id,
        created: unix_seconds(),
        model: state.model.id.clone(),
        events,
        cancelled: state.cancelled.clone(),
        include_usage,
    }
    .accepted()
    .await?;
    if stream {
        Ok(reply.into_sse())
    } else {
        reply.into_json().await
    }
}

/// The body as `T`: unreadable bodies ([`body::read`]), invalid JSON, a field `kind` does
/// not serve and JSON of the wrong shape are each their own error.
async fn parse_body<T: DeserializeOwned>(
    state: &AppState,
    kind: Kind,
    body: Body,
) -> Result<T, ApiError> {
    let bytes = body::read(body, state.max_body, state.body_timeout).await?;
    let json: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| ApiError::BadJson(e.to_string()))?;
    fields::check(kind, &json)?;
    serde_json::from_value(json).map_err(|e| ApiError::BadShape(e.to_string()))
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
