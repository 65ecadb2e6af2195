//! [`NpuDevice`]: the NPU as a device of its own. Graph calls run one at a time on the
//! device's thread, in the order they arrive from any number of CPU threads; a caller
//! blocks until its call is done (time that does not count as CPU busy time, see
//! [`crate::trace::waiting`]). Each call is recorded as a span on the caller's timeline's
//! [`OFFLOAD_LANE`].

use crate::trace::{self, Timeline, OFFLOAD_LANE};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

type Job = Box<dyn FnOnce() + Send>;

/// A thread that runs NPU graph calls one at a time; see the module documentation.
pub struct NpuDevice {
    jobs: Mutex<Option<Sender<Job>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// The device's thread is not running (it could not be started, or a call panicked on
/// it).
#[derive(Debug, Clone, thiserror::Error)]
#[error("the NPU device thread is not running{0}")]
pub struct DeviceGone(String);

impl NpuDevice {
    /// A device whose thread starts with the first call.
    pub fn new() -> Arc<NpuDevice> {
        Arc::new(NpuDevice {
            jobs: Mutex::new(None),
            thread: Mutex::new(None),
        })
    }

    /// The sender of the device's queue, starting its thread if needed.
    fn queue(&self) -> Result<Sender<Job>, DeviceGone> {
        let mut jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(jobs) = jobs.as_ref() {
            return Ok(jobs.clone());
        }
        let (sender, queue) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("oxrelax-npu".into())
            .spawn(move || queue.into_iter().for_each(|job| job()))
            .map_err(|e| DeviceGone(format!(": cannot start it: {e}")))?;
        *self.thread.lock().unwrap_or_else(PoisonError::into_inner) = Some(thread);
        *jobs = Some(sender.clone());
        Ok(sender)
    }

    /// Runs `work` (the call `name`) on the device after the calls queued before it and
    /// returns its result.
    pub fn run<T: Send + 'static>(
        &self,
        name: &str,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, DeviceGone> {
        let (reply, result) = mpsc::channel();
        let timeline: Option<Arc<Timeline>> = trace::current_timeline();
        let name = name.to_string();
        let job: Job = Box::new(move || {
            let start = Instant::now();
            let value = work();
            if let Some(timeline) = timeline {
                timeline.record(OFFLOAD_LANE, &name, start, Instant::now());
            }
            let _ = reply.send(value);
        });
        let gone = |_| DeviceGone(String::new());
        self.queue()?
            .send(job)
            .map_err(|_| DeviceGone(String::new()))?;
        trace::waiting(|| result.recv()).map_err(gone)
    }
}

impl Drop for NpuDevice {
    /// Lets the queued calls finish, then stops the thread.
    fn drop(&mut self) {
        let jobs = self.jobs.get_mut().unwrap_or_else(PoisonError::into_inner);
        drop(jobs.take());
        let thread = self
            .thread
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(thread) = thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn calls_from_many_threads_run_one_at_a_time_and_are_traced() {
        let device = NpuDevice::new();
        let running = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let timeline = Timeline::new();
        std::thread::scope(|s| {
            for t in 0..3 {
                let (device, running, timeline) = (&device, running.clone(), &timeline);
                s.spawn(move || {
                    let _lane = trace::enter_lane(timeline, &format!("cpu {t}"));
                    for _ in 0..4 {
                        let running = running.clone();
                        let overlap = device
                            .run("graph", move || {
                                let others =
                                    running.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                                // Long enough that the callers' own work (and their
                                // scheduling delays on a loaded or emulated machine) stays
                                // well below the device's 120 ms.
                                std::thread::sleep(Duration::from_millis(10));
                                running.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                                others
                            })
                            .unwrap();
                        assert_eq!(overlap, 0);
                    }
                });
            }
        });
        let npu = timeline
            .spans()
            .iter()
            .filter(|s| s.lane == OFFLOAD_LANE)
            .count();
        assert_eq!(npu, 12);
        assert!(timeline.busy("cpu") < timeline.busy(OFFLOAD_LANE));
    }
}
