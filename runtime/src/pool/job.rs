//! The state the launching thread and the workers share: the current job, whether it is
//! open for joining, and the counters that hand out its tasks and track who is in it.
//!
//! Handshake: the launcher writes the job, then opens it (`state` = launch count, open). A
//! worker that sees an open state joins (`active += 1`) and re-reads `state`: only if it is
//! still the state it saw does it read the job. When no task is left, the launcher closes
//! the state and waits for `active` to drop to 0. Both sides use sequentially consistent
//! operations, so either the launcher sees the worker's join and waits for it, or the
//! worker sees the close and leaves without touching the job. The launcher therefore never
//! waits for a worker that is asleep or descheduled, only for those inside the job.

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
    /// Each grab takes the remaining tasks divided by this (at least one).
    share: i64,
}

type TaskRef<'a> = &'a (dyn Fn(i64) -> i32 + Sync);

impl Job {
    /// A job running `task` for `0..n_tasks`, each grab taking `1 / share` of the tasks
    /// left (guided scheduling: big chunks first, single tasks at the end, so the
    /// participants finish together).
    pub(super) fn new(task: &TaskRef<'_>, n_tasks: i64, share: i64) -> Job {
        Job {
            task: (task as *const TaskRef<'_>).cast(),
            n_tasks,
            share: share.max(1),
        }
    }

    const IDLE: Job = Job {
        task: std::ptr::null(),
        n_tasks: 0,
        share: 1,
    };
}

/// The low bit of `state`: the job may be joined.
const OPEN: u64 = 1;

/// Shared between a pool's handle and its workers.
pub(super) struct Shared {
    /// `launch_count << 1 | OPEN` while a job is open, `launch_count << 1` when closed.
    state: AtomicU64,
    /// Workers inside the current job.
    active: AtomicUsize,
    /// The first nonzero task code of the current launch.
    result: AtomicI32,
    /// The next task index to hand out.
    next: AtomicI64,
    /// Written only by the launcher while the state is closed (see the module docs).
    job: UnsafeCell<Job>,
    /// Workers parked (or about to park) on `wake`.
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    wake: Condvar,
    shutdown: AtomicBool,
}

// SAFETY: every field but `job` is Sync. `job` is written by `open` only while the state is
// closed, so no worker reads it (a worker reads it only after joining and confirming the
// open state it saw, which `open` publishes with release ordering after the write), and it
// is not rewritten before `close` has waited out every worker that joined. The task pointer
// it holds is a `&(dyn Fn + Sync)`, so calling it from workers is sound.
unsafe impl Sync for Shared {}
// SAFETY: as above; the raw pointer in `job` is only dereferenced during a launch.
unsafe impl Send for Shared {}

impl Shared {
    pub(super) fn new() -> Shared {
        Shared {
            state: AtomicU64::new(0),
            active: AtomicUsize::new(0),
            result: AtomicI32::new(0),
            next: AtomicI64::new(0),
            job: UnsafeCell::new(Job::IDLE),
            sleepers: AtomicUsize::new(0),
            lock: Mutex::new(()),
            wake: Condvar::new(),
            shutdown: AtomicBool::new(false),
        }
    }

    /// Publishes `job`, opens it for workers and wakes parked ones.
    ///
    /// # Safety
    /// Launches must be serialized, the previous one closed with `close`, and the job's task
    /// must stay alive until `close` returns.
    pub(super) unsafe fn open(&self, job: Job) {
        // SAFETY: the state is closed, so no worker reads the slot (module docs).
        unsafe { *self.job.get() = job };
        self.next.store(0, Ordering::Relaxed);
        self.result.store(0, Ordering::Relaxed);
        let launch = (self.state.load(Ordering::Relaxed) >> 1) + 1;
        self.state.store(launch << 1 | OPEN, Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            // Taking the lock orders this wake-up after a parking worker's state check.
            drop(self.lock.lock().unwrap_or_else(PoisonError::into_inner));
            self.wake.notify_all();
        }
    }

    /// Closes the current job, waits for the workers inside it, and returns its result.
    pub(super) fn close(&self) -> i32 {
        self.state.fetch_and(!OPEN, Ordering::SeqCst);
        let mut spins = 0u32;
        while self.active.load(Ordering::SeqCst) != 0 {
            if spins < 1 << 10 {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        self.result.load(Ordering::Acquire)
    }

    /// A worker's part in the job it saw open as `state`: join, and if it is still open,
    /// run tasks; then leave.
    pub(super) fn join(&self, state: u64) {
        self.active.fetch_add(1, Ordering::SeqCst);
        if self.state.load(Ordering::SeqCst) == state {
            self.run_tasks();
        }
        self.active.fetch_sub(1, Ordering::SeqCst);
    }

    /// Runs chunks of the current job's tasks until none are left or one failed.
    ///
    /// Called by the launcher between `open` and `close`, or by a worker inside `join`.
    pub(super) fn run_tasks(&self) {
        // SAFETY: the job is open and the caller is its launcher or a joined worker, so
        // the slot is written and not rewritten until every participant left.
        let job = unsafe { *self.job.get() };
        // SAFETY: `job.task` points to the launcher's `&dyn Fn`, alive during the launch.
        let task: TaskRef<'_> = unsafe { *job.task.cast::<TaskRef<'_>>() };
        while self.result.load(Ordering::Relaxed) == 0 {
            let Some(chunk) = self.grab(&job) else {
                return;
            };
            for index in chunk {
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

    /// The next chunk of `job`'s tasks (`1 / share` of those left, at least one), or
    /// `None` when every task is handed out.
    pub(super) fn grab(&self, job: &Job) -> Option<std::ops::Range<i64>> {
        let mut start = self.next.load(Ordering::Relaxed);
        while start < job.n_tasks {
            let end = start + ((job.n_tasks - start) / job.share).max(1);
            match self
                .next
                .compare_exchange_weak(start, end, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Some(start..end),
                Err(now) => start = now,
            }
        }
        None
    }

    /// An open state other than `seen`, if there is one now; `Err(())` on shutdown.
    pub(super) fn poll(&self, seen: u64) -> Result<Option<u64>, ()> {
        if self.shutdown.load(Ordering::Acquire) {
            return Err(());
        }
        let state = self.state.load(Ordering::SeqCst);
        Ok((state != seen && state & OPEN != 0).then_some(state))
    }

    /// Parks until a job other than `seen` opens; `None` on shutdown.
    pub(super) fn park_until_open(&self, seen: u64) -> Option<u64> {
        let mut guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        let outcome = loop {
            match self.poll(seen) {
                Err(()) => break None,
                Ok(Some(state)) => break Some(state),
                Ok(None) => {
                    guard = self
                        .wake
                        .wait(guard)
                        .unwrap_or_else(PoisonError::into_inner)
                }
            }
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
