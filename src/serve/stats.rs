//! Counters of what the server did, for `GET /stats` and the tests.

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};

/// Requests by outcome since the server started.
#[derive(Debug, Default)]
pub struct Stats {
    completed: AtomicU64,
    cancelled: AtomicU64,
    rejected: AtomicU64,
    failed: AtomicU64,
}

/// How a request ended, as counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Generation ran to a stop string, EOS or its budget.
    Completed,
    /// The client went away before generation ended.
    Cancelled,
    /// The queue was full.
    Rejected,
    /// The request was invalid for the model, or the engine failed.
    Failed,
}

/// The counters at one moment (the body of `GET /stats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StatsSnapshot {
    /// Requests that generated to the end.
    pub completed: u64,
    /// Requests whose client disconnected (generation stopped).
    pub cancelled: u64,
    /// Requests answered 503 because the queue was full.
    pub rejected: u64,
    /// Requests the worker refused (prompt too long, ...) or the engine failed.
    pub failed: u64,
}

impl Stats {
    /// Counts one request ending with `outcome`.
    pub fn count(&self, outcome: Outcome) {
        let counter = match outcome {
            Outcome::Completed => &self.completed,
            Outcome::Cancelled => &self.cancelled,
            Outcome::Rejected => &self.rejected,
            Outcome::Failed => &self.failed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            completed: self.completed.load(Ordering::Relaxed),
            cancelled: self.cancelled.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
        }
    }
}
