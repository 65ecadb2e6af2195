//! Schedules: rewrites of TIR loop nests into fast ones for a target.
//!
//! [`Schedule`] holds a primitive function and applies loop primitives to loops named by
//! their loop variable (`split`, `fuse`, `vectorize`, `parallel`, `unroll`). Rules decide
//! what to do with a function: [`rules_for`] builds a target's list in order (the matmul
//! rules tensorizing packed matmuls onto the microkernels of the target's tile tables,
//! the attention rule tensorizing fused attention onto its row microkernel, then the
//! [`default_schedule`] fallback) and [`schedule_for`] applies the first that accepts.

mod accumulate;
mod attention_rule;
mod default_rule;
mod epilogue;
mod hoist;
mod lane_reduce;
mod matmul_rule;
mod primitives;
mod rule;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_semantics;
mod tir_build;
mod window_lanes;

pub use accumulate::accumulate_in_registers;
pub use attention_rule::AttentionRule;
pub use default_rule::{default_schedule, ScheduleConfig};
pub use hoist::hoist_invariant_loads;
pub use lane_reduce::{reduce_across_lanes, PARTIALS};
pub use matmul_rule::{GemvRule, MatmulRule};
pub use primitives::{Schedule, ScheduleError};
pub use rule::{rules_for, schedule_for, FallbackRule, ScheduleRule, SCHEDULE_RULE_ATTR};
