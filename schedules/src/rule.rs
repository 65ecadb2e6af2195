//! Schedule rules, dlight-style: each rule recognizes a primitive function (by its
//! structure, or by the op identity and pattern legalization keeps on it) and returns it
//! scheduled for a target, or declines. [`rules_for`] is the ordered list, the same for
//! every target (the target matters inside the rules, e.g. the matmul rules' tile
//! tables); [`schedule_for`] applies the first rule that accepts.

use crate::attention_rule::AttentionRule;
use crate::default_rule::{default_schedule, ScheduleConfig};
use crate::matmul_rule::{GemvRule, MatmulRule};
use oxrelax_dsl::tir::PrimFunc;
use oxrelax_dsl::Target;

/// One schedule rule.
pub trait ScheduleRule {
    /// A stable name (recorded on the scheduled function as `schedule_rule`).
    fn name(&self) -> &'static str;

    /// `func` scheduled for `target`, or `None` when the rule does not apply.
    fn apply(&self, func: &PrimFunc, target: &Target) -> Option<PrimFunc>;
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

    fn apply(&self, func: &PrimFunc, _target: &Target) -> Option<PrimFunc> {
        Some(default_schedule(func, &self.config))
    }
}

/// The rules, tried in order; the last always applies. Every target gets the same list
/// (`target` is unused here): the target matters inside the rules it is applied with
/// (the matmul rules read its tile tables).
pub fn rules_for(_target: &Target) -> Vec<Box<dyn ScheduleRule>> {
    vec![
        Box::new(GemvRule),
        Box::new(MatmulRule),
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
pub fn schedule_for(func: &PrimFunc, target: &Target, rules: &[Box<dyn ScheduleRule>]) -> PrimFunc {
    for rule in rules {
        if let Some(mut scheduled) = rule.apply(func, target) {
            scheduled.attrs.insert(
                SCHEDULE_RULE_ATTR.to_string(),
                oxrelax_dsl::AttrValue::Str(rule.name().to_string()),
            );
            return scheduled;
        }
    }
    func.clone()
}
