//! The thread that owns the engine: it takes jobs from a bounded queue into the running
//! batch while it has room ([`scheduler`](super::scheduler)), each starting from the
//! longest prefix of its prompt an ended request left in the engine, and sends each
//! job's text as it is generated. A job whose receiver is gone (the client disconnected)
//! stops.

use super::api::Usage;
use super::error::ApiError;
use super::request::{GenerationRequest, Prompt};
use super::scheduler::{Active, Batch, Finished};
use super::stats::{Outcome, Stats};
use oxrelax_runtime::chat::{ChatTemplate, Tokenizer};
use oxrelax_runtime::engine::{BatchEngine, EngineError};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::JoinHandle;
use tokio::sync::mpsc::error::{TryRecvError, TrySendError};
use tokio::sync::mpsc::{self, Receiver, UnboundedReceiver, UnboundedSender};

/// Why a generation ended, as OpenAI names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// EOS or a stop string.
    Stop,
    /// The token budget or the context window.
    Length,
}

impl FinishReason {
    /// `stop` or `length`.
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
        }
    }
}

/// What a job sends back, in order: `Accepted`, `Text`s, then `Done`; or `Failed`.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The prompt was encoded and fits: generation starts.
    Accepted,
    /// A piece of generated text.
    Text(String),
    /// Generation ended.
    Done {
        /// Why.
        finish_reason: FinishReason,
        /// Token counts.
        usage: Usage,
    },
    /// The request cannot be served (prompt too long, ...) or the engine failed.
    Failed(ApiError),
}

/// A request waiting for the worker.
pub struct Job {
    /// Its id in logs.
    pub id: String,
    /// What to generate.
    pub request: GenerationRequest,
    /// Where its events go.
    pub events: UnboundedSender<Event>,
}

/// The sending side of the worker's bounded queue.
#[derive(Clone)]
pub struct Queue {
    jobs: mpsc::Sender<Job>,
    capacity: usize,
    stats: Arc<Stats>,
}

impl Queue {
    /// Queues `request` under `id`; its events arrive on the receiver returned. A full
    /// queue is [`ApiError::QueueFull`] at once.
    pub fn submit(
        &self,
        id: String,
        request: GenerationRequest,
    ) -> Result<UnboundedReceiver<Event>, ApiError> {
        let (events, receiver) = mpsc::unbounded_channel();
        match self.jobs.try_send(Job {
            id: id.clone(),
            request,
            events,
        }) {
            Ok(()) => Ok(receiver),
            Err(TrySendError::Full(_)) => {
                self.stats.count(Outcome::Rejected);
                eprintln!("{id}: rejected, the queue is full");
                Err(ApiError::QueueFull {
                    capacity: self.capacity,
                })
            }
            Err(TrySendError::Closed(_)) => Err(ApiError::Unavailable),
        }
    }
}

/// The engine and what turns text into its ids and back.
pub struct Model {
    /// The engine: its sequences are the requests in flight (and ended ones kept for
    /// their prefixes).
    pub engine: BatchEngine,
    /// The tokenizer.
    pub tokenizer: Tokenizer,
    /// The chat template, or why there is none.
    pub template: Result<ChatTemplate, String>,
}

/// Starts the worker thread over `model` with a queue of `capacity` (at least 1) jobs,
/// decoding up to `max_batch` requests together. The thread ends once every [`Queue`]
/// is dropped and the queue is drained.
pub fn spawn(
    model: Model,
    (capacity, max_batch): (usize, usize),
    stats: Arc<Stats>,
) -> std::io::Result<(Queue, JoinHandle<()>)> {
    let (jobs, receiver) = mpsc::channel(capacity);
    let queue = Queue {
        jobs,
        capacity,
        stats: stats.clone(),
    };
    let handle = std::thread::Builder::new()
        .name("oxrelax-serve-engine".into())
        .spawn(move || {
            let Model {
                engine,
                tokenizer,
                template,
            } = model;
            let mut worker = Worker {
                batch: Batch::new(engine, max_batch, stats.clone()),
                tokenizer: &tokenizer,
                template: &template,
                stats,
            };
            worker.serve(receiver);
        })?;
    Ok((queue, handle))
}

struct Worker<'t> {
    batch: Batch<'t>,
    tokenizer: &'t Tokenizer,
    template: &'t Result<ChatTemplate, String>,
    stats: Arc<Stats>,
}

impl<'t> Worker<'t> {
    /// Admits queued jobs while the batch has room and steps the batch, until the queue
    /// is closed and drained and the batch is empty. A panic in a step fails the
    /// requests in flight (their receivers see the channels close) and the worker goes on.
    fn serve(&mut self, mut receiver: Receiver<Job>) {
        let mut open = true;
        loop {
            while open && self.batch.has_room() {
                let job = if self.batch.is_empty() {
                    receiver.blocking_recv()
                } else {
                    match receiver.try_recv() {
                        Ok(job) => Some(job),
                        Err(TryRecvError::Empty) => break,
                        Err(TryRecvError::Disconnected) => None,
                    }
                };
                match job {
                    Some(job) => self.admit(job),
                    None => open = false,
                }
            }
            if self.batch.is_empty() {
                if open {
                    continue;
                }
                return;
            }
            match catch_unwind(AssertUnwindSafe(|| self.batch.step())) {
                Ok(finished) => {
                    let running = self.batch.running();
                    let waiting = self.batch.len() - running + receiver.len();
                    self.stats.set_batch(running + finished.len(), waiting);
                    self.stats.set_pages(&self.batch.page_stats());
                    finished.iter().for_each(|f| self.log(f));
                }
                Err(_) => {
                    eprintln!("a batched step panicked: its requests fail");
                    let failed = self.batch.clear();
                    (0..failed).for_each(|_| self.stats.count(Outcome::Failed));
                }
            }
        }
    }

    /// Encodes `job`'s prompt and adds it to the batch, or fails it.
    fn admit(&mut self, job: Job) {
        if job.events.is_closed() {
            self.stats.count(Outcome::Cancelled);
            eprintln!("{}: cancelled before it started", job.id);
            return;
        }
        let encoded = self.encode(&job.request.prompt).and_then(|ids| {
            let positions = ids.len().saturating_add(job.request.max_tokens);
            let fits = self.batch.check_fits(positions);
            fits.map_err(|e| ApiError::invalid("max_tokens", e.to_string()))?;
            Ok(ids)
        });
        match encoded {
            Ok(ids) => {
                let active = Active::new(job, ids, self.tokenizer);
                self.batch.push(active);
            }
            Err(error) => {
                eprintln!("{}: failed: {error}", job.id);
                let _ = job.events.send(Event::Failed(error));
                self.stats.count(Outcome::Failed);
            }
        }
    }

    /// Counts and logs a request that ended.
    fn log(&self, finished: &Finished<'_>) {
        let active = &finished.active;
        let (outcome, line) = match &finished.result {
            Ok(reason) => log_line(*reason, active),
            Err(error) => (Outcome::Failed, format!("failed: {error}")),
        };
        // Tokens first: a client that saw the request counted sees its tokens too.
        self.stats.add_tokens(active.usage().completion_tokens);
        self.stats.count(outcome);
        eprintln!("{}: {line}", active.job.id);
    }
    /// The prompt's ids, checked to be non-empty and to fit in the context window.
    fn encode(&self, prompt: &Prompt) -> Result<Vec<u32>, ApiError> {
        let tokenizer = self.tokenizer;
        let ids = match prompt {
            Prompt::Ids(ids) => Ok(ids.clone()),
            Prompt::Text(text) => tokenizer.encode(text, true),
            Prompt::Chat(messages) => {
                let template = self.template.as_ref().map_err(|reason| {
                    ApiError::invalid(
                        "messages",
                        format!("the model has no chat template: {reason}"),
                    )
                })?;
                template
                    .render(messages, true)
                    .and_then(|rendered| tokenizer.encode(&rendered, false))
            }
        }
        .map_err(|e| ApiError::invalid("prompt", e.to_string()))?;
        let window = self.batch.config().context_window;
        if ids.is_empty() {
            return Err(ApiError::invalid("prompt", "encodes to no tokens"));
        }
        if ids.len() > window {
            return Err(ApiError::ContextLengthExceeded {
                prompt_tokens: ids.len(),
                window,
            });
        }
        Ok(ids)
    }
}

/// An engine failure as the API reports it.
pub fn engine_error(error: EngineError) -> ApiError {
    ApiError::Engine(error.to_string())
}

/// How a request that ended is counted, and its log line: tokens, speed, finish reason.
fn log_line(reason: Option<FinishReason>, active: &Active<'_>) -> (Outcome, String) {
    let usage = active.usage();
    let seconds = active.start.elapsed().as_secs_f64();
    let speed = if seconds > 0.0 {
        usage.completion_tokens as f64 / seconds
    } else {
        0.0
    };
    let (outcome, reason) = match reason {
        Some(reason) => (Outcome::Completed, reason.as_str()),
        None => (Outcome::Cancelled, "cancelled"),
    };
    let line = format!(
        "prompt {} tokens ({} cached), completion {} tokens, {speed:.1} tok/s, {reason}",
        usage.prompt_tokens, active.reused, usage.completion_tokens
    );
    (outcome, line)
}
