//! Schedule rules, dlight-style: each rule recognizes a primitive function (by its
//! structure, or by the op identity and pattern legalization keeps on it) and returns it
//! scheduled, or declines. A rule is built for one target: the tensorizing rules carry the
//! target's tile tables (which microkernel, which blocks), so [`rules_for`] gives each
//! target its own list; [`schedule_for`] applies the first rule that accepts.

use crate::attention_rule::AttentionRule;
use crate::default_rule::{default_schedule, ScheduleConfig};
use crate::matmul_rule::{GemvRule, MatmulRule};
use oxrelax_dsl::tir::PrimFunc;
use oxrelax_dsl::Target;

/// One schedule rule, built for a target.
pub trait ScheduleRule {
    /// A stable name (recorded on the scheduled function as `schedule_rule`).
    fn name(&self) -> &'static str;

    /// One line naming the rule and what it was built with (its kernels and blocks).
    fn describe(&self) -> String {
        self.name().to_string()
    }

    /// `func` scheduled, or `None` when the rule does not apply.
    fn apply(&self, func: &PrimFunc) -> Option<PrimFunc>;
}

/// The fallback: the default schedule, which applies to every function.
pub struct FallbackRule {
    /// The default schedule's knobs.
    pub config: ScheduleConfig,
}

impl ScheduleRule for FallbackRule {
    fn name(&self) -> &'static str {
        "fallback"
    }

    fn describe(&self) -> String {
        let work = self.config.parallel_min_work;
        format!("fallback: the default schedule (parallel from {work} innermost iterations)")
    }

    fn apply(&self, func: &PrimFunc) -> Option<PrimFunc> {
        Some(default_schedule(func, &self.config))
    }
}

/// The rules for `target`, tried in order; the last always applies. The matmul rules take
/// the target's tile tables.
pub fn rules_for(target: &Target) -> Vec<Box<dyn ScheduleRule>> {
    vec![
        Box::new(GemvRule::for_target(target)),
        Box::new(MatmulRule::for_target(target)),
        Box::new(AttentionRule),
        Box::new(FallbackRule {
            config: ScheduleConfig::default(),
        }),
    ]
}

/// The attribute naming the rule that scheduled a function.
pub const SCHEDULE_RULE_ATTR: &str = "schedule_rule";

/// `func` scheduled by the first of `rules` that applies (none applying leaves it as
/// it is); the rule's name is recorded in [`SCHEDULE_RULE_ATTR`].
pub fn schedule_for(func: &PrimFunc, rules: &[Box<dyn ScheduleRule>]) -> PrimFunc {
    for rule in rules {
        if let Some(mut scheduled) = rule.apply(func) {
            scheduled.attrs.insert(
                SCHEDULE_RULE_ATTR.to_string(),
                oxrelax_dsl::AttrValue::Str(rule.name().to_string()),
            );
            return scheduled;
        }
    }
    func.clone()
}
