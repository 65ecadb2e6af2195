//! Timing loops: warmup, then timed runs, both capped by a time budget.

use std::time::{Duration, Instant};

/// How many times to run a kernel and for how long at most.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunPlan {
    /// Untimed runs first (capped by half the budget, at least one when nonzero). A
    /// warmup run that alone takes more than half the budget ends the warmup and counts
    /// as the first timed run (for kernels that slow, one run is warm enough).
    pub warmup: usize,
    /// Timed runs wanted.
    pub runs: usize,
    /// The time the timed runs may take; stops early (after at least one run) when the
    /// next run would go past it.
    pub budget: Duration,
}

/// The timed runs of one benchmark.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    /// Runs timed (fewer than asked when the budget ran out).
    pub runs: usize,
    /// Whether the budget cut the runs short.
    pub cut_short: bool,
    /// Median run time.
    pub median: Duration,
    /// Fastest run time.
    pub min: Duration,
}

impl Timing {
    /// Summarizes `times` (at least one) of `wanted` runs.
    pub fn from_times(mut times: Vec<Duration>, wanted: usize) -> Option<Timing> {
        times.sort_unstable();
        let min = *times.first()?;
        let mid = times.len() / 2;
        let median = if times.len().is_multiple_of(2) {
            (times[mid - 1] + times[mid]) / 2
        } else {
            times[mid]
        };
        Some(Timing {
            runs: times.len(),
            cut_short: times.len() < wanted,
            median,
            min,
        })
    }
}

/// Runs `body` per `plan` and times the runs after the warmup; `None` when `plan.runs`
/// is 0. Stops at the first error.
pub fn measure<E>(
    plan: &RunPlan,
    mut body: impl FnMut() -> Result<(), E>,
) -> Result<Option<Timing>, E> {
    measure_with(plan, || {
        let start = Instant::now();
        body()?;
        Ok(start.elapsed())
    })
}

/// [`measure`] with the timing done by `run`, which runs the body once and returns how
/// long it took.
pub fn measure_with<E>(
    plan: &RunPlan,
    mut run: impl FnMut() -> Result<Duration, E>,
) -> Result<Option<Timing>, E> {
    let warmup_budget = plan.budget / 2;
    let warmup = timed_loop(plan.warmup, warmup_budget, Vec::new(), &mut run)?;
    let first = warmup
        .last()
        .filter(|&&last| last > warmup_budget && plan.runs > 0);
    let times = timed_loop(
        plan.runs,
        plan.budget,
        first.copied().into_iter().collect(),
        &mut run,
    )?;
    Ok(Timing::from_times(times, plan.runs))
}

/// Calls `run` until `count` times are recorded (starting from `times`) and returns
/// them; stops before a run that would, at the last run's pace, end past `budget`
/// (always runs once if `count` is nonzero and `times` empty).
fn timed_loop<E>(
    count: usize,
    budget: Duration,
    mut times: Vec<Duration>,
    run: &mut impl FnMut() -> Result<Duration, E>,
) -> Result<Vec<Duration>, E> {
    let mut spent: Duration = times.iter().sum();
    while times.len() < count {
        if let Some(&last) = times.last() {
            if spent + last > budget {
                break;
            }
        }
        let time = run()?;
        spent += time;
        times.push(time);
    }
    Ok(times)
}
