//! `ScheduleKernels`: applies the default schedule to every primitive function.

use super::{Pass, PassError};
use oxrelax_dsl::IRModule;
use oxrelax_schedules::{default_schedule, ScheduleConfig};

/// Schedules every primitive function with the default rule.
#[derive(Default)]
pub struct ScheduleKernels {
    /// The default rule's knobs.
    pub config: ScheduleConfig,
}

impl Pass for ScheduleKernels {
    fn name(&self) -> &'static str {
        "schedule-kernels"
    }

    fn run(&self, mut module: IRModule) -> Result<IRModule, PassError> {
        for func in module.prim_funcs.values_mut() {
            *func = default_schedule(func, &self.config);
        }
        Ok(module)
    }
}
