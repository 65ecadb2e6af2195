//! A persistent thread pool for kernels' parallel loops.
//!
//! `threads` participants: the calling thread plus `threads - 1` workers. A launch publishes
//! one job; workers that notice it join in, grabbing chunks of tasks from a shared counter
//! together with the caller (each chunk a share of the tasks left, so chunks shrink to
//! single tasks and everyone finishes together). The caller returns once every task is
//! done and no worker is inside the job: it never waits for a worker that is parked or
//! descheduled, it just runs the tasks that are left itself. Between launches workers
//! spin for [`SPIN_TIME`] (so back-to-back kernel launches do not pay a wake-up), then
//! park on a condition variable.
//!
//! A task returns an `i32` code; the launch returns the first nonzero code recorded (in
//! time), and tasks not yet started are skipped once one is recorded. A panicking task is
//! caught and reported as [`TASK_PANICKED`]; the pool stays usable. A launch from inside a
//! task (nested parallelism) runs its tasks serially on the calling thread.

mod job;
#[cfg(test)]
mod tests;

use crate::abi::TASK_PANICKED;
use job::{Job, Shared};
use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// How long an idle worker spins before parking.
pub const SPIN_TIME: Duration = Duration::from_micros(200);

/// Environment variable that sets the size of the [`ThreadPool::global`] pool.
pub const THREADS_ENV: &str = "OXRELAX_NUM_THREADS";

thread_local! {
    /// Whether this thread is running pool tasks (so a launch from here must not wait on
    /// the pool).
    static IN_POOL: Cell<bool> = const { Cell::new(false) };
}

/// A persistent pool of worker threads; see the module documentation.
pub struct ThreadPool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// Serializes launches from different threads.
    launch: Mutex<()>,
}

impl ThreadPool {
    /// A pool of `threads` participants (the caller and `threads - 1` workers; at least 1).
    pub fn new(threads: usize) -> std::io::Result<ThreadPool> {
        let shared = Arc::new(Shared::new());
        let workers = (1..threads.max(1))
            .map(|i| {
                let shared = shared.clone();
                thread::Builder::new()
                    .name(format!("oxrelax-pool-{i}"))
                    .spawn(move || worker_loop(&shared))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ThreadPool {
            shared,
            workers,
            launch: Mutex::new(()),
        })
    }

    /// The machine's core count, or [`THREADS_ENV`] when set to a positive number.
    pub fn default_threads() -> usize {
        std::env::var(THREADS_ENV)
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|&n| n > 0)
            .or_else(|| thread::available_parallelism().ok().map(|n| n.get()))
            .unwrap_or(1)
    }

    /// The process-wide pool of [`ThreadPool::default_threads`] participants (serial if no
    /// worker thread can be spawned).
    pub fn global() -> Arc<ThreadPool> {
        static GLOBAL: OnceLock<Arc<ThreadPool>> = OnceLock::new();
        GLOBAL
            .get_or_init(|| {
                let pool = ThreadPool::new(ThreadPool::default_threads());
                Arc::new(pool.unwrap_or_else(|_| ThreadPool::serial()))
            })
            .clone()
    }

    /// A pool without workers: every launch runs on the caller.
    fn serial() -> ThreadPool {
        ThreadPool {
            shared: Arc::new(Shared::new()),
            workers: Vec::new(),
            launch: Mutex::new(()),
        }
    }

    /// Participants per launch (workers plus the caller).
    pub fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// Runs `task(i)` for `i` in `0..n_tasks` across the pool; returns 0 or the first
    /// nonzero code (a panic counts as [`TASK_PANICKED`]).
    pub fn parallel_for(&self, n_tasks: i64, task: &(dyn Fn(i64) -> i32 + Sync)) -> i32 {
        if n_tasks <= 0 {
            return 0;
        }
        if n_tasks == 1 || self.workers.is_empty() || IN_POOL.get() {
            return (0..n_tasks)
                .map(|i| run_caught(task, i))
                .find(|&code| code != 0)
                .unwrap_or(0);
        }
        let _launch = self.launch.lock().unwrap_or_else(PoisonError::into_inner);
        let job = Job::new(&task, n_tasks, 2 * self.threads() as i64);
        // SAFETY: we hold the launch lock, every earlier launch was closed, and `task`
        // outlives this call, which closes the job before returning.
        unsafe { self.shared.open(job) };
        IN_POOL.set(true);
        self.shared.run_tasks();
        IN_POOL.set(false);
        self.shared.close()
    }
}

impl std::fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ThreadPool({} threads)", self.threads())
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        self.shared.shut_down();
        for worker in self.workers.drain(..) {
            // A worker never panics (tasks are caught), so joining only waits for it.
            let _ = worker.join();
        }
    }
}

/// Runs one task, turning a panic into [`TASK_PANICKED`].
fn run_caught(task: &(dyn Fn(i64) -> i32 + Sync), index: i64) -> i32 {
    panic::catch_unwind(AssertUnwindSafe(|| task(index))).unwrap_or(TASK_PANICKED)
}

/// A worker: wait for each new job and take part in it, until shut down.
fn worker_loop(shared: &Shared) {
    IN_POOL.set(true);
    let mut seen = 0;
    while let Some(state) = wait_for_job(shared, seen) {
        seen = state;
        shared.join(state);
    }
}

/// Waits until a job other than `seen` is open (spinning, then parked); `None` on shutdown.
/// The spin yields the core every few microseconds, so a worker woken onto the launcher's
/// core does not keep the launcher off it.
fn wait_for_job(shared: &Shared, seen: u64) -> Option<u64> {
    let start = Instant::now();
    while start.elapsed() < SPIN_TIME {
        for _ in 0..64 {
            match shared.poll(seen) {
                Err(()) => return None,
                Ok(Some(state)) => return Some(state),
                Ok(None) => std::hint::spin_loop(),
            }
        }
        thread::yield_now();
    }
    shared.park_until_open(seen)
}
