//! Time per kernel, per function (switched on with `VirtualMachine::set_profiling`).

use super::exec::KernelDecl;
use std::time::Duration;

/// Accumulated calls and time of one kernel in one function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct KernelStat {
    calls: u64,
    total: Duration,
}

impl KernelStat {
    pub(super) fn record(&mut self, elapsed: Duration) {
        self.calls += 1;
        self.total += elapsed;
    }
}

/// One kernel's line in a function's profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelProfile {
    /// The kernel's name.
    pub kernel: String,
    /// How many times it was called.
    pub calls: u64,
    /// Total time inside it.
    pub total: Duration,
}

impl KernelProfile {
    /// The called kernels of `stats` (indexed like `decls`), slowest first.
    pub(super) fn report(stats: &[KernelStat], decls: &[KernelDecl]) -> Vec<KernelProfile> {
        let mut lines: Vec<KernelProfile> = stats
            .iter()
            .zip(decls)
            .filter(|(s, _)| s.calls > 0)
            .map(|(s, d)| KernelProfile {
                kernel: d.name.clone(),
                calls: s.calls,
                total: s.total,
            })
            .collect();
        lines.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.kernel.cmp(&b.kernel)));
        lines
    }
}
