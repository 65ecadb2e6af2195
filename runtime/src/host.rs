//! The machine this process runs on: its target triple and the CPU features the
//! microkernels and artifacts care about, probed once.

use std::sync::OnceLock;

/// The host's target triple (`x86_64-unknown-linux-gnu`, `aarch64-linux-android`,
/// `aarch64-apple-darwin`), from the architecture and OS this runtime was built for.
pub fn host_triple() -> String {
    let arch = std::env::consts::ARCH;
    match std::env::consts::OS {
        "linux" => format!("{arch}-unknown-linux-gnu"),
        "android" => format!("{arch}-linux-android"),
        "macos" => format!("{arch}-apple-darwin"),
        os => format!("{arch}-unknown-{os}"),
    }
}

/// The features of `probe`'s list this CPU has, probed once per process.
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

/// Whether this CPU has `feature` (one of those `probe` knows).
pub fn has_feature(feature: &str) -> bool {
    detected_features().contains(&feature)
}

/// Each x86-64 feature a kernel may require, and whether this CPU has it.
#[cfg(target_arch = "x86_64")]
fn probe() -> Vec<(&'static str, bool)> {
    macro_rules! probe {
        ($($name:tt),*) => { vec![$(($name, std::arch::is_x86_feature_detected!($name))),*] };
    }
    probe!(
        "sse4.1",
        "avx",
        "avx2",
        "fma",
        "f16c",
        "avx512f",
        "avx512bw",
        "avx512vnni",
        "avx512vbmi"
    )
}

/// Each aarch64 feature a kernel may require, and whether this CPU has it.
#[cfg(target_arch = "aarch64")]
fn probe() -> Vec<(&'static str, bool)> {
    macro_rules! probe {
        ($($name:tt),*) => { vec![$(($name, std::arch::is_aarch64_feature_detected!($name))),*] };
    }
    probe!("neon", "dotprod", "i8mm", "fp16")
}

/// No probing on other architectures.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn probe() -> Vec<(&'static str, bool)> {
    Vec::new()
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
