//! The machine this process runs on: its target triple and the CPU features the
//! microkernels and tile tables distinguish, probed once.

use std::sync::OnceLock;

/// Declares [`KNOWN_FEATURES`] and the host probe from one list per architecture (the
/// probe macros need each name as a literal).
macro_rules! features {
    ($(($arch:literal, $probe:ident, [$($name:tt),*])),*) => {
        /// The CPU features a target may name, per architecture: those the tile tables and
        /// microkernels distinguish, and the host is probed for.
        pub const KNOWN_FEATURES: &[(&str, &[&str])] = &[$(($arch, &[$($name),*])),*];

        /// Each feature of the host's architecture, and whether this CPU has it.
        fn probe() -> Vec<(&'static str, bool)> {
            #[allow(unused_mut)]
            let mut found = Vec::new();
            $(
                #[cfg(target_arch = $arch)]
                found.extend([$(($name, std::arch::$probe!($name))),*]);
            )*
            found
        }
    };
}

features!(
    (
        "x86_64",
        is_x86_feature_detected,
        [
            "sse4.1",
            "avx",
            "avx2",
            "fma",
            "f16c",
            "avx512f",
            "avx512bw",
            "avx512vnni",
            "avx512vbmi"
        ]
    ),
    (
        "aarch64",
        is_aarch64_feature_detected,
        ["neon", "dotprod", "i8mm", "fp16"]
    )
);

/// The host's target triple (`x86_64-unknown-linux-gnu`, `aarch64-linux-android`,
/// `aarch64-apple-darwin`), from the architecture and OS this was built for.
pub fn host_triple() -> String {
    let arch = std::env::consts::ARCH;
    match std::env::consts::OS {
        "linux" => format!("{arch}-unknown-linux-gnu"),
        "android" => format!("{arch}-linux-android"),
        "macos" => format!("{arch}-apple-darwin"),
        os => format!("{arch}-unknown-{os}"),
    }
}

/// The features of [`KNOWN_FEATURES`] this CPU has, probed once per process.
pub fn detected_features() -> &'static [&'static str] {
    static DETECTED: OnceLock<Vec<&'static str>> = OnceLock::new();
    DETECTED.get_or_init(|| {
        probe()
            .into_iter()
            .filter(|(_, on)| *on)
            .map(|(f, _)| f)
            .collect()
    })
}

/// Whether this CPU has `feature` (one of [`KNOWN_FEATURES`]).
pub fn has_feature(feature: &str) -> bool {
    detected_features().contains(&feature)
}

/// The CPU's vendor as CPUID reports it (`GenuineIntel`, `AuthenticAMD`, ...); empty on
/// other architectures.
pub fn cpu_vendor() -> String {
    #[cfg(target_arch = "x86_64")]
    {
        let leaf = std::arch::x86_64::__cpuid(0);
        let bytes: Vec<u8> = [leaf.ebx, leaf.edx, leaf.ecx]
            .iter()
            .flat_map(|r| r.to_le_bytes())
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
    #[cfg(not(target_arch = "x86_64"))]
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_is_probed_for_its_architectures_known_features_only() {
        let arch = std::env::consts::ARCH;
        let known = KNOWN_FEATURES
            .iter()
            .find(|(a, _)| *a == arch)
            .map_or(&[][..], |(_, f)| *f);
        assert!(detected_features().iter().all(|f| known.contains(f)));
        assert_eq!(probe().len(), known.len());
    }
}
