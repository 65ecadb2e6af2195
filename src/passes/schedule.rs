//! `ScheduleKernels`: schedules every primitive function with the target's ordered rule
//! list ([`rules_for`]: the matmul rules built from its tile tables; the first rule that
//! accepts a function schedules it).

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
            *func = schedule_for(func, &rules);
        }
        Ok(module)
    }
}
