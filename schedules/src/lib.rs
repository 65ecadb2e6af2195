//! Schedules: rewrites of TIR loop nests into fast ones for a target.
//!
//! [`Schedule`] holds a primitive function and applies loop primitives to loops named by
//! their loop variable (`split`, `fuse`, `vectorize`, `parallel`, `unroll`); rules such as
//! [`default_schedule`] decide which primitives to apply. Later rules (packed matmul
//! layouts, tensorized microkernels) are further primitives and rules on the same
//! representation.

mod accumulate;
mod default_rule;
mod hoist;
mod primitives;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_semantics;

pub use accumulate::accumulate_in_registers;
pub use default_rule::{default_schedule, ScheduleConfig};
pub use hoist::hoist_invariant_loads;
pub use primitives::{Schedule, ScheduleError};
