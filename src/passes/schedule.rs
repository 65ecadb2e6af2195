//! `ScheduleKernels`: schedules every primitive function for the target with the ordered
//! rule list ([`rules_for`], the same list for every target; the first rule that accepts
//! a function schedules it; the matmul rules read the target's tile tables).

use super::{Pass, PassError};
use oxrelax_dsl::{IRModule, Target};
use oxrelax_schedules::{rules_for, schedule_for};

/// Schedules every primitive function for a target.
pub struct ScheduleKernels {
    /// What to schedule for.
    pub target: Target,
}

impl Pass for ScheduleKernels {
    fn name(&self) -> &'static str {
        "schedule-kernels"
    }

    fn run(&self, mut module: IRModule) -> Result<IRModule, PassError> {
        let rules = rules_for(&self.target);
        for func in module.prim_funcs.values_mut() {
            *func = schedule_for(func, &self.target, &rules);
        }
        Ok(module)
    }
}
