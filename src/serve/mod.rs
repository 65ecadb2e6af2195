//! `oxrelax serve`: an OpenAI-compatible HTTP server over one loaded model.
//!
//! One worker thread owns the engine and serves the requests from a bounded queue in
//! one continuously batched decode ([`worker`], [`scheduler`]); a full queue is a 503
//! at once. Handlers ([`routes`]) check each
//! request ([`request`]), queue it, and answer with one JSON body or server-sent events
//! ([`reply`]); errors are OpenAI's error JSON ([`error`]). A client that disconnects
//! drops its job's receiver, which stops the generation. A connection must send each
//! request's headers within the header timeout (which also closes idle keep-alive
//! connections) and its body within the body timeout ([`connection`]). SIGTERM or Ctrl-C
//! stops accepting connections and lets the requests in flight finish for up to a grace
//! period; then streams end with an error event and `[DONE]`, waiting requests get a
//! 503, and [`run`] returns.

pub mod api;
pub mod body;
pub mod connection;
pub mod error;
pub mod fields;
pub mod reply;
pub mod request;
pub mod routes;
pub mod scheduler;
pub mod stats;
pub mod worker;

use oxrelax_runtime::artifact::LoadedEngine;
use oxrelax_runtime::engine::{BatchEngine, Engine, EngineError};
use oxrelax_runtime::kv_cache::PoolSize;
use oxrelax_runtime::memory::{format_bytes, MemoryError, MemoryEstimate};
use oxrelax_runtime::sampler::SamplingConfig;
use request::ModelInfo;
use routes::{router, unix_seconds, AppState};
use stats::Stats;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use worker::Model;

/// How long connections may take to send what is left to them (error events, 503s) once
/// the grace period is over.
const FLUSH_AFTER_CANCEL: Duration = Duration::from_secs(2);

/// How to serve.
#[derive(Debug, Clone, PartialEq)]
pub struct ServeOptions {
    /// The address (name or IP) to listen on.
    pub host: String,
    /// The port (0: any free one; the one bound is printed).
    pub port: u16,
    /// Requests that may wait for the engine (at least 1); more are answered 503.
    pub queue: usize,
    /// Requests decoded together at most (0: as many as the model's `batch_decode`
    /// takes).
    pub max_batch: usize,
    /// How many KV cache pages the requests share (`None`: room for `max_batch` requests
    /// at full context, or fewer pages where those would not fit in `max_memory` besides
    /// the model, as long as one full context does).
    pub kv_pages: Option<PoolSize>,
    /// Bytes the model and the page pool may take together.
    pub max_memory: u64,
    /// The largest request body accepted, in bytes (413 above).
    pub max_body: usize,
    /// Sampling of fields a request leaves out (a request's `seed` replaces the seed).
    pub sampling: SamplingConfig,
    /// The id of the model in requests and `GET /v1/models`.
    pub model_id: String,
    /// How long clients and the shutdown may take.
    pub timeouts: Timeouts,
}

/// How long each stage may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// How long the requests in flight may take to finish after SIGTERM or Ctrl-C.
    pub shutdown_grace: Duration,
    /// How long a connection may take to send a request's headers, from when it connects
    /// or its previous response ends.
    pub header: Duration,
    /// How long a request may take to send its body once its headers are in.
    pub body: Duration,
}

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The model has no `tokenizer.json`: requests carry text.
    #[error("the model has no tokenizer.json: serving needs one")]
    NoTokenizer,
    /// The queue's capacity is 0.
    #[error("the queue must hold at least one request")]
    EmptyQueue,
    /// Listening on the address failed.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// `host:port`.
        address: String,
        /// The socket's error.
        source: std::io::Error,
    },
    /// The model cannot decode a batch (it exports no `batch_decode`), or its page pool
    /// cannot be made.
    #[error("serving: {0}")]
    Engine(#[from] EngineError),
    /// The model and the page pool asked for exceed the memory limit.
    #[error("serving with a KV page pool of {pages} pages (--kv-pages, --kv-memory): {error}")]
    Memory {
        /// Pages asked for.
        pages: usize,
        /// The estimate, KV pages included, and the limit.
        error: MemoryError,
    },
    /// What the memory limit leaves for the default page pool is less than one request
    /// at full context.
    #[error(
        "the memory limit of {} leaves {} for the KV page pool besides the model ({model}), \
         less than one request at the full context of {context} positions needs ({}): \
         raise --max-memory, lower --max-context, or size the pool with --kv-pages",
        format_bytes(*limit), format_bytes(*left), format_bytes(*needed)
    )]
    NoRoomForPages {
        /// The limit in bytes.
        limit: u64,
        /// What the model takes.
        model: MemoryEstimate,
        /// Bytes left for pages.
        left: u64,
        /// The context window.
        context: usize,
        /// Bytes of the pages one full context takes.
        needed: u64,
    },
    /// Starting the async runtime or the worker thread, or serving, failed.
    #[error("serving: {0}")]
    Io(#[from] std::io::Error),
}

/// A batch engine over `engine` (estimated to take `memory`) with the page pool
/// `options` asks for, checked to fit the memory limit with it; and the batch bound.
fn batch_engine(
    engine: Engine,
    options: &ServeOptions,
    memory: MemoryEstimate,
) -> Result<(BatchEngine, usize), ServeError> {
    let max_batch = match options.max_batch {
        0 => BatchEngine::bound(&engine)?,
        n => n,
    };
    let left = options.max_memory.saturating_sub(memory.total());
    let default = PoolSize::ContextsWithin {
        contexts: max_batch,
        bytes: left,
    };
    let context = engine.config().context_window;
    let engine = BatchEngine::with_pool(engine, Some(options.kv_pages.unwrap_or(default)))?;
    let pages = engine.page_stats();
    let serving = MemoryEstimate {
        kv_pages: pages.bytes(),
        ..memory
    };
    let context_pages = pages.pages_for(context);
    if options.kv_pages.is_none() && pages.pages < context_pages {
        let needed = context_pages as u64 * pages.page_bytes as u64;
        return Err(ServeError::NoRoomForPages {
            limit: options.max_memory,
            model: memory,
            left,
            context,
            needed,
        });
    }
    serving
        .check(options.max_memory)
        .map_err(|error| ServeError::Memory {
            pages: pages.pages,
            error,
        })?;
    Ok((engine, max_batch))
}

/// Serves `model` (estimated to take `memory` besides the KV page pool) until SIGTERM or
/// Ctrl-C, then waits for the requests in flight.
pub fn run(
    options: ServeOptions,
    model: LoadedEngine,
    memory: MemoryEstimate,
) -> Result<(), ServeError> {
    let LoadedEngine { engine, tokenizer } = model;
    let tokenizer = tokenizer.ok_or(ServeError::NoTokenizer)?;
    if options.queue == 0 {
        return Err(ServeError::EmptyQueue);
    }
    let info = ModelInfo {
        id: options.model_id.clone(),
        created: unix_seconds(),
        context_window: engine.config().context_window,
        vocab_size: engine.config().vocab_size,
    };
    let template = tokenizer.chat_template().map_err(|e| e.to_string());
    let stats = Arc::new(Stats::default());
    let (engine, max_batch) = batch_engine(engine, &options, memory)?;
    let pages = engine.page_stats();
    eprintln!(
        "oxrelax serve: KV cache of {} pages of {} positions ({})",
        pages.pages,
        pages.page_positions,
        format_bytes(pages.bytes())
    );
    stats.set_pages(&pages);
    let model = Model {
        engine,
        tokenizer,
        template,
    };
    let (queue, worker) = worker::spawn(model, (options.queue, max_batch), stats.clone())?;
    let (cancel, cancelled) = watch::channel(false);
    let state = AppState {
        queue,
        model: Arc::new(info),
        defaults: Arc::new(options.sampling.clone()),
        stats,
        max_body: options.max_body,
        body_timeout: options.timeouts.body,
        next_id: Arc::new(AtomicU64::new(0)),
        cancelled,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let served = runtime.block_on(serve(&options, state, cancel));
    // Dropping the runtime drops the connections left after the grace period, and with
    // them every queue handle: the worker skips their jobs and ends.
    drop(runtime);
    if worker.join().is_err() {
        eprintln!("the engine's worker thread panicked");
    }
    served
}

async fn serve(
    options: &ServeOptions,
    state: AppState,
    cancel: watch::Sender<bool>,
) -> Result<(), ServeError> {
    let address = format!("{}:{}", options.host, options.port);
    let listener = TcpListener::bind(&address)
        .await
        .map_err(|source| ServeError::Bind {
            address: address.clone(),
            source,
        })?;
    let bound = listener.local_addr()?;
    eprintln!(
        "oxrelax serve: model `{}` listening on http://{bound} (queue {}, body limit {} bytes)",
        options.model_id, options.queue, options.max_body
    );
    let connections = connection::accept_until(
        listener,
        router(state),
        options.timeouts.header,
        shutdown_signal(),
    )
    .await;
    let grace = options.timeouts.shutdown_grace;
    let mut drained = std::pin::pin!(connections.shutdown());
    if tokio::time::timeout(grace, &mut drained).await.is_err() {
        eprintln!("oxrelax serve: requests still open after {grace:?} are cancelled");
        cancel.send_replace(true);
        if tokio::time::timeout(FLUSH_AFTER_CANCEL, drained)
            .await
            .is_err()
        {
            eprintln!("oxrelax serve: connections still open are closed");
        }
    }
    eprintln!("oxrelax serve: stopped");
    Ok(())
}

/// Resolves on SIGTERM or Ctrl-C (SIGINT).
async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
    eprintln!("oxrelax serve: shutting down, finishing the requests in flight");
}
