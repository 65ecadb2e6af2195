//! The thread that owns the engine: it takes jobs from a bounded queue one at a time,
//! reuses the KV cache's common prefix with the last request, and sends each job's text
//! as it is generated. A job whose receiver is gone (the client disconnected) stops.

use super::api::Usage;
use super::error::ApiError;
use super::request::{GenerationRequest, Prompt};
use super::stats::{Outcome, Stats};
use oxrelax_runtime::chat::{ChatTemplate, Tokenizer};
use oxrelax_runtime::engine::{Engine, EngineError, GenerateOptions, Step, StopReason, TextStream};
use oxrelax_runtime::sampler::Sampler;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;
use tokio::sync::mpsc::{self, error::TrySendError, UnboundedReceiver, UnboundedSender};

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
struct Job {
    id: String,
    request: GenerationRequest,
    events: UnboundedSender<Event>,
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
    /// The engine (its KV cache holds the last request's ids).
    pub engine: Engine,
    /// The tokenizer.
    pub tokenizer: Tokenizer,
    /// The chat template, or why there is none.
    pub template: Result<ChatTemplate, String>,
}

/// Starts the worker thread over `model` with a queue of `capacity` (at least 1) jobs.
/// The thread ends once every [`Queue`] is dropped and the queue is drained.
pub fn spawn(
    model: Model,
    capacity: usize,
    stats: Arc<Stats>,
) -> std::io::Result<(Queue, JoinHandle<()>)> {
    let (jobs, mut receiver) = mpsc::channel(capacity);
    let queue = Queue {
        jobs,
        capacity,
        stats: stats.clone(),
    };
    let mut worker = Worker { model, stats };
    let handle = std::thread::Builder::new()
        .name("oxrelax-serve-engine".into())
        .spawn(move || {
            while let Some(job) = receiver.blocking_recv() {
                worker.run_guarded(job);
            }
        })?;
    Ok((queue, handle))
}

struct Worker {
    model: Model,
    stats: Arc<Stats>,
}

/// What one generation did.
struct Generated {
    /// `None` when the client went away.
    finish_reason: Option<FinishReason>,
    usage: Usage,
    reused: usize,
}

impl Worker {
    /// Runs `job`; a panic fails it (its receiver sees the channel close) and empties the
    /// cache, and the worker goes on.
    fn run_guarded(&mut self, job: Job) {
        let id = job.id.clone();
        if catch_unwind(AssertUnwindSafe(|| self.run(job))).is_err() {
            self.stats.count(Outcome::Failed);
            eprintln!("{id}: failed (panicked); the KV cache is emptied");
            // The panic may have left the cache and its ids out of step.
            let _ = self.model.engine.reset();
        }
    }

    fn run(&mut self, job: Job) {
        let start = Instant::now();
        if job.events.is_closed() {
            self.stats.count(Outcome::Cancelled);
            eprintln!("{}: cancelled before it started", job.id);
            return;
        }
        let result = self
            .encode(&job.request.prompt)
            .and_then(|ids| self.generate(&ids, &job.request, &job.events));
        let (outcome, line) = match result {
            Ok(generated) => log_line(&generated, start),
            Err(error) => {
                let line = format!("failed: {error}");
                let _ = job.events.send(Event::Failed(error));
                (Outcome::Failed, line)
            }
        };
        self.stats.count(outcome);
        eprintln!("{}: {line}", job.id);
    }

    /// The prompt's ids, checked to be non-empty and to fit in the context window.
    fn encode(&self, prompt: &Prompt) -> Result<Vec<u32>, ApiError> {
        let tokenizer = &self.model.tokenizer;
        let ids = match prompt {
            Prompt::Ids(ids) => Ok(ids.clone()),
            Prompt::Text(text) => tokenizer.encode(text, true),
            Prompt::Chat(messages) => {
                let template = self.model.template.as_ref().map_err(|reason| {
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
        let window = self.model.engine.config().context_window;
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

    /// Generates after `ids`, prefilling only what the KV cache does not hold, and sends
    /// the text through `events`.
    fn generate(
        &mut self,
        ids: &[u32],
        request: &GenerationRequest,
        events: &UnboundedSender<Event>,
    ) -> Result<Generated, ApiError> {
        let Model {
            engine, tokenizer, ..
        } = &mut self.model;
        let reused = engine.reuse_prefix(ids).map_err(engine_error)?;
        let _ = events.send(Event::Accepted);
        let options = GenerateOptions {
            max_new_tokens: request.max_tokens,
            ignore_eos: false,
            keep_logits: false,
        };
        let mut sampler = Sampler::new(request.sampling.clone());
        let mut stream = TextStream::new(Some(tokenizer), ids, &request.stop);
        let send = |text: String| {
            if !text.is_empty() {
                // A closed receiver (the client went away) stops generation below.
                let _ = events.send(Event::Text(text));
            }
        };
        let generation = engine
            .generate(&ids[reused..], options, &mut sampler, |token| {
                send(stream.push(token.id, token.is_eos)?);
                Ok(if stream.stopped() {
                    Step::StopSequence
                } else if events.is_closed() {
                    Step::Stop
                } else {
                    Step::Continue
                })
            })
            .map_err(|e| {
                // A failed step may leave the cache holding part of a call.
                let _ = engine.reset();
                engine_error(e)
            })?;
        send(stream.finish().map_err(engine_error)?);
        let usage = Usage::new(ids.len(), generation.ids.len());
        let finish_reason = if events.is_closed() {
            None
        } else if stream.stopped() || generation.stop == Some(StopReason::Eos) {
            Some(FinishReason::Stop)
        } else {
            Some(FinishReason::Length)
        };
        if let Some(finish_reason) = finish_reason {
            let _ = events.send(Event::Done {
                finish_reason,
                usage,
            });
        }
        Ok(Generated {
            finish_reason,
            usage,
            reused,
        })
    }
}

fn engine_error(error: EngineError) -> ApiError {
    ApiError::Engine(error.to_string())
}

/// How a generation is counted, and its log line: tokens, speed, finish reason.
fn log_line(generated: &Generated, start: Instant) -> (Outcome, String) {
    let usage = generated.usage;
    let seconds = start.elapsed().as_secs_f64();
    let speed = if seconds > 0.0 {
        usage.completion_tokens as f64 / seconds
    } else {
        0.0
    };
    let (outcome, reason) = match generated.finish_reason {
        Some(reason) => (Outcome::Completed, reason.as_str()),
        None => (Outcome::Cancelled, "cancelled"),
    };
    let line = format!(
        "prompt {} tokens ({} cached), completion {} tokens, {speed:.1} tok/s, {reason}",
        usage.prompt_tokens, generated.reused, usage.completion_tokens
    );
    (outcome, line)
}
