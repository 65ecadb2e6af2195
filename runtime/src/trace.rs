//! Busy time per device, and a Chrome trace of it: a [`Timeline`] collects spans on
//! named lanes (`cpu 0`, `cpu 1`, `npu`, ...). A thread that works for a lane enters it
//! ([`enter_lane`]): from then on its time counts as busy on that lane except while it
//! waits ([`waiting`]: for a device's result, for another chunk's KV cache append). A
//! device records its own spans ([`Timeline::record`]). Without a lane, [`waiting`] just
//! runs its closure.

use serde_json::json;
use std::cell::RefCell;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The lane of the graph calls an accelerator beside the CPU runs (the NPU's device).
pub const OFFLOAD_LANE: &str = "npu";

/// A span of work on a lane.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// The lane (a device, or one of its threads).
    pub lane: String,
    /// What ran.
    pub name: String,
    /// Start, from the timeline's origin.
    pub start: Duration,
    /// Length.
    pub duration: Duration,
}

/// Spans recorded from any thread.
#[derive(Debug)]
pub struct Timeline {
    origin: Instant,
    spans: Mutex<Vec<Span>>,
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline {
            origin: Instant::now(),
            spans: Mutex::new(Vec::new()),
        }
    }
}

impl Timeline {
    /// An empty timeline starting now.
    pub fn new() -> Arc<Timeline> {
        Arc::new(Timeline::default())
    }

    /// Records that `name` ran on `lane` from `start` to `end`.
    pub fn record(&self, lane: &str, name: &str, start: Instant, end: Instant) {
        let span = Span {
            lane: lane.to_string(),
            name: name.to_string(),
            start: start.saturating_duration_since(self.origin),
            duration: end.saturating_duration_since(start),
        };
        self.lock().push(span);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Span>> {
        self.spans.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every span recorded so far.
    pub fn spans(&self) -> Vec<Span> {
        self.lock().clone()
    }

    /// Total busy time of the lanes whose name starts with `prefix`.
    pub fn busy(&self, prefix: &str) -> Duration {
        let spans = self.lock();
        let on_lane = spans.iter().filter(|s| s.lane.starts_with(prefix));
        on_lane.map(|s| s.duration).sum()
    }

    /// The spans in Chrome's trace event format (`chrome://tracing`, Perfetto): one
    /// complete event per span, one thread row per lane, named.
    pub fn chrome_trace(&self) -> serde_json::Value {
        let spans = self.spans();
        let mut lanes: Vec<&str> = spans.iter().map(|s| s.lane.as_str()).collect();
        lanes.sort_unstable();
        lanes.dedup();
        let tid = |lane: &str| lanes.iter().position(|l| *l == lane).unwrap_or(0);
        let names = lanes.iter().enumerate().map(|(i, lane)| {
            json!({"name": "thread_name", "ph": "M", "pid": 1, "tid": i, "args": {"name": lane}})
        });
        let events = spans.iter().map(|s| {
            json!({
                "name": s.name, "ph": "X", "pid": 1, "tid": tid(&s.lane),
                "ts": s.start.as_secs_f64() * 1e6, "dur": s.duration.as_secs_f64() * 1e6,
            })
        });
        json!({ "traceEvents": names.chain(events).collect::<Vec<_>>() })
    }
}

/// The lane this thread works for, and since when it has been busy.
struct Lane {
    timeline: Arc<Timeline>,
    name: String,
    busy_since: Instant,
}

thread_local! {
    static LANE: RefCell<Option<Lane>> = const { RefCell::new(None) };
}

/// While alive, this thread's time counts as busy on a lane.
pub struct LaneGuard(());

/// Starts counting this thread's time as busy on `lane` of `timeline`, until the guard
/// is dropped (a lane entered earlier on this thread is left).
pub fn enter_lane(timeline: &Arc<Timeline>, lane: &str) -> LaneGuard {
    let entered = Lane {
        timeline: timeline.clone(),
        name: lane.to_string(),
        busy_since: Instant::now(),
    };
    LANE.with(|l| close_busy_span(l.borrow_mut().replace(entered)));
    LaneGuard(())
}

impl Drop for LaneGuard {
    fn drop(&mut self) {
        LANE.with(|l| close_busy_span(l.borrow_mut().take()));
    }
}

fn close_busy_span(lane: Option<Lane>) {
    if let Some(lane) = lane {
        let now = Instant::now();
        lane.timeline
            .record(&lane.name, "cpu", lane.busy_since, now);
    }
}

/// The timeline of this thread's lane, if it has entered one.
pub fn current_timeline() -> Option<Arc<Timeline>> {
    LANE.with(|l| l.borrow().as_ref().map(|lane| lane.timeline.clone()))
}

/// Runs `wait` (blocking on another thread or device) without counting it as busy on
/// this thread's lane.
pub fn waiting<T>(wait: impl FnOnce() -> T) -> T {
    LANE.with(|l| {
        if let Some(lane) = l.borrow().as_ref() {
            let now = Instant::now();
            lane.timeline
                .record(&lane.name, "cpu", lane.busy_since, now);
        }
    });
    let result = wait();
    LANE.with(|l| {
        if let Some(lane) = l.borrow_mut().as_mut() {
            lane.busy_since = Instant::now();
        }
    });
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_are_not_busy_and_lanes_become_trace_rows() {
        let timeline = Timeline::new();
        {
            let _lane = enter_lane(&timeline, "cpu 0");
            std::thread::sleep(Duration::from_millis(5));
            waiting(|| std::thread::sleep(Duration::from_millis(30)));
            std::thread::sleep(Duration::from_millis(5));
        }
        let start = Instant::now();
        timeline.record("npu", "graph", start, start + Duration::from_millis(7));
        let cpu = timeline.busy("cpu");
        assert!(
            cpu >= Duration::from_millis(10) && cpu < Duration::from_millis(30),
            "{cpu:?}"
        );
        assert_eq!(timeline.busy("npu"), Duration::from_millis(7));
        let trace = timeline.chrome_trace();
        let events = trace["traceEvents"].as_array().unwrap();
        let rows: std::collections::BTreeSet<u64> =
            events.iter().filter_map(|e| e["tid"].as_u64()).collect();
        assert_eq!(rows.len(), 2);
        assert!(current_timeline().is_none());
    }
}
