//! The state the launching thread and the workers share: the current job and the
//! counters that hand out its tasks and track who is done.

use super::run_caught;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};

/// The task closure of a launch, type-erased to a thin pointer to the caller's
/// `&dyn Fn` (which lives on the launching thread's stack for the whole launch).
#[derive(Clone, Copy)]
pub(super) struct Job {
    task: *const (),
    n_tasks: i64,
    chunk: i64,
}

type TaskRef<'a> = &'a (dyn Fn(i64) -> i32 + Sync);

impl Job {
    /// A job running `task` for `0..n_tasks`, handed out `chunk` tasks at a time.
    pub(super) fn new(task: &TaskRef<'_>, n_tasks: i64, chunk: i64) -> Job {
        Job {
            task: (task as *const TaskRef<'_>).cast(),
            n_tasks,
            chunk,
        }
    }

    const IDLE: Job = Job {
        task: std::ptr::null(),
        n_tasks: 0,
        chunk: 1,
    };
}

/// Shared between a pool's handle and its workers.
pub(super) struct Shared {
    /// Bumped once per launch; workers wait for it to move.
    pub(super) epoch: AtomicU64,
    /// Workers that have not finished the current launch.
    pub(super) pending: AtomicUsize,
    /// The first nonzero task code of the current launch.
    pub(super) result: AtomicI32,
    /// The next task index to hand out.
    next: AtomicI64,
    /// Written only by the launching thread while no worker reads it (see `publish`).
    job: UnsafeCell<Job>,
    /// Workers parked (or about to park) on `wake`.
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    wake: Condvar,
    pub(super) shutdown: AtomicBool,
}

// SAFETY: every field but `job` is Sync. `job` is written by `publish` only while no worker
// reads it (launches are serialized and each waits until all workers are done), and read
// by workers only after observing the epoch bump that follows the write (acquire/release).
// The task pointer it holds is a `&(dyn Fn + Sync)`, so calling it from workers is sound.
unsafe impl Sync for Shared {}
// SAFETY: as above; the raw pointer in `job` is only dereferenced during a launch.
unsafe impl Send for Shared {}

impl Shared {
    pub(super) fn new() -> Shared {
        Shared {
            epoch: AtomicU64::new(0),
            pending: AtomicUsize::new(0),
            result: AtomicI32::new(0),
            next: AtomicI64::new(0),
            job: UnsafeCell::new(Job::IDLE),
            sleepers: AtomicUsize::new(0),
            lock: Mutex::new(()),
            wake: Condvar::new(),
            shutdown: AtomicBool::new(false),
        }
    }

    /// Publishes `job` to `workers` workers and wakes parked ones.
    ///
    /// # Safety
    /// No worker may be reading the previous job (all finished it), launches must be
    /// serialized, and the job's task must stay alive until `wait_for_workers` returns.
    pub(super) unsafe fn publish(&self, job: Job, workers: usize) {
        // SAFETY: no reader exists (caller's contract); the epoch bump below publishes it.
        unsafe { *self.job.get() = job };
        self.next.store(0, Ordering::Relaxed);
        self.result.store(0, Ordering::Relaxed);
        self.pending.store(workers, Ordering::Relaxed);
        self.epoch.fetch_add(1, Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            // Taking the lock orders this wake-up after a parking worker's epoch check.
            drop(self.lock.lock().unwrap_or_else(PoisonError::into_inner));
            self.wake.notify_all();
        }
    }

    /// Runs chunks of the current job's tasks until none are left or one failed.
    pub(super) fn run_tasks(&self) {
        // SAFETY: called by the launcher after `publish`, or by a worker after observing
        // the epoch bump; the job is not rewritten before every participant is done.
        let job = unsafe { *self.job.get() };
        // SAFETY: `job.task` points to the launcher's `&dyn Fn`, alive during the launch.
        let task: TaskRef<'_> = unsafe { *job.task.cast::<TaskRef<'_>>() };
        while self.result.load(Ordering::Relaxed) == 0 {
            let start = self.next.fetch_add(job.chunk, Ordering::Relaxed);
            if start >= job.n_tasks {
                return;
            }
            for index in start..(start + job.chunk).min(job.n_tasks) {
                let code = run_caught(task, index);
                if code != 0 {
                    let _ =
                        self.result
                            .compare_exchange(0, code, Ordering::AcqRel, Ordering::Relaxed);
                    return;
                }
            }
        }
    }

    /// Waits (spinning, then yielding) until every worker finished the current launch.
    pub(super) fn wait_for_workers(&self) {
        let mut spins = 0u32;
        while self.pending.load(Ordering::Acquire) != 0 {
            if spins < 1 << 12 {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Parks until the epoch moves past `seen`; `None` on shutdown.
    pub(super) fn park_until_new_epoch(&self, seen: u64) -> Option<u64> {
        let mut guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        let outcome = loop {
            if self.shutdown.load(Ordering::SeqCst) {
                break None;
            }
            let epoch = self.epoch.load(Ordering::SeqCst);
            if epoch != seen {
                break Some(epoch);
            }
            guard = self
                .wake
                .wait(guard)
                .unwrap_or_else(PoisonError::into_inner);
        };
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        outcome
    }

    /// Tells every worker to exit.
    pub(super) fn shut_down(&self) {
        let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.shutdown.store(true, Ordering::SeqCst);
        self.wake.notify_all();
    }
}
