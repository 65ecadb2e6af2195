//! Which software-prefetch hint the decode GEMVs use for the weights they stream, per CPU
//! vendor (a table), overridable with [`STREAM_PREFETCH_ENV`]. The same hint that helps
//! one vendor's memory system starves another's: AMD CPUs get the non-temporal hint,
//! which keeps streamed weights from evicting what the next kernels reread (plain
//! prefetches fill every cache level); Intel CPUs get `T0`, as the non-temporal hint slows
//! their decode down.

use std::sync::OnceLock;

/// How a decode GEMV asks for the weights it will read next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StreamPrefetch {
    /// `prefetchnta`: close to the core, keeping the outer caches for data that is reread.
    NonTemporal,
    /// `prefetcht0`: into every cache level.
    AllLevels,
}

/// The hint per CPU vendor (the CPUID vendor string); any other vendor gets
/// [`StreamPrefetch::AllLevels`], the plain prefetch.
const BY_VENDOR: &[(&str, StreamPrefetch)] = &[
    ("AuthenticAMD", StreamPrefetch::NonTemporal),
    ("GenuineIntel", StreamPrefetch::AllLevels),
];

/// The environment variable that picks the hint instead of the vendor table: `nta`
/// ([`StreamPrefetch::NonTemporal`]) or `t0` ([`StreamPrefetch::AllLevels`]); read once.
pub(crate) const STREAM_PREFETCH_ENV: &str = "OXRELAX_STREAM_PREFETCH";

/// The hint of this process: [`stream_prefetch_for`] its CPU's vendor and
/// [`STREAM_PREFETCH_ENV`], decided once.
#[inline(always)]
pub(crate) fn stream_prefetch() -> StreamPrefetch {
    static CHOSEN: OnceLock<StreamPrefetch> = OnceLock::new();
    *CHOSEN.get_or_init(|| {
        let setting = std::env::var(STREAM_PREFETCH_ENV).ok();
        stream_prefetch_for(&crate::host::cpu_vendor(), setting.as_deref())
    })
}

/// The hint for a CPU of `vendor` given the value of [`STREAM_PREFETCH_ENV`] (if set;
/// an unknown value is ignored).
pub(crate) fn stream_prefetch_for(vendor: &str, setting: Option<&str>) -> StreamPrefetch {
    let chosen = match setting.map(|s| s.trim().to_ascii_lowercase()).as_deref() {
        Some("nta") => Some(StreamPrefetch::NonTemporal),
        Some("t0") => Some(StreamPrefetch::AllLevels),
        _ => None,
    };
    let by_vendor = || {
        BY_VENDOR
            .iter()
            .find(|(v, _)| *v == vendor)
            .map_or(StreamPrefetch::AllLevels, |&(_, hint)| hint)
    };
    chosen.unwrap_or_else(by_vendor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vendor_table_picks_the_hint_and_the_setting_overrides_it() {
        use StreamPrefetch::*;
        assert_eq!(stream_prefetch_for("AuthenticAMD", None), NonTemporal);
        assert_eq!(stream_prefetch_for("GenuineIntel", None), AllLevels);
        assert_eq!(stream_prefetch_for("", None), AllLevels);
        assert_eq!(
            stream_prefetch_for("GenuineIntel", Some(" NTA ")),
            NonTemporal
        );
        assert_eq!(stream_prefetch_for("AuthenticAMD", Some("t0")), AllLevels);
        assert_eq!(
            stream_prefetch_for("AuthenticAMD", Some("fast")),
            NonTemporal
        );
    }
}
