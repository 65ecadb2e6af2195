//! Memory estimates: what a model allocates when it loads (weights, KV cache, VM arenas),
//! computed before anything large is allocated, and the limit it must fit in
//! (`--max-memory`; by default the machine's physical memory).

use crate::kv_cache::KvFormat;
use crate::vm::Executable;
use crate::weights::ExpectedTensor;
use std::fmt;

/// Bytes a model allocates, by bucket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryEstimate {
    /// The weight tensors the compiled functions take.
    pub weights: u64,
    /// K and V (and their scales) of every layer at the cache's capacity.
    pub kv_cache: u64,
    /// The VM's arenas (one per function, sized by its static memory plan).
    pub arena: u64,
    /// The KV page pool a server's sequences share (0 outside `serve`).
    pub kv_pages: u64,
}

impl MemoryEstimate {
    /// The sum of the buckets (saturating).
    pub fn total(&self) -> u64 {
        self.weights
            .saturating_add(self.kv_cache)
            .saturating_add(self.arena)
            .saturating_add(self.kv_pages)
    }

    /// An error naming the estimate and `limit` when the total exceeds `limit` bytes.
    pub fn check(&self, limit: u64) -> Result<(), MemoryError> {
        if self.total() > limit {
            return Err(MemoryError::TooLarge {
                estimate: *self,
                limit,
            });
        }
        Ok(())
    }
}

impl fmt::Display for MemoryEstimate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "weights {} + KV cache {} + arena {}",
            format_bytes(self.weights),
            format_bytes(self.kv_cache),
            format_bytes(self.arena),
        )?;
        if self.kv_pages > 0 {
            write!(f, " + KV pages {}", format_bytes(self.kv_pages))?;
        }
        write!(f, " = {}", format_bytes(self.total()))
    }
}

/// Why a model does not fit, or a memory size cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryError {
    /// The estimate exceeds the limit.
    #[error(
        "memory estimate {estimate} ({} bytes) exceeds the limit of {} ({limit} bytes; \
         --max-memory raises it, a smaller --max-context or --kv-dtype lowers the KV cache)",
        estimate.total(),
        format_bytes(*limit)
    )]
    TooLarge {
        /// What the model would allocate.
        estimate: MemoryEstimate,
        /// The limit in bytes.
        limit: u64,
    },
    /// A size that is not a number of bytes with an optional K, M, G or T suffix.
    #[error("invalid memory size `{text}`: {reason} (e.g. 512M, 8G, 1073741824)")]
    BadSize {
        /// The text given.
        text: String,
        /// What is wrong.
        reason: &'static str,
    },
}

/// Binary suffixes of [`parse_size`] and their multipliers.
const SUFFIXES: [(char, u64); 4] = [
    ('K', 1 << 10),
    ('M', 1 << 20),
    ('G', 1 << 30),
    ('T', 1 << 40),
];

/// Bytes written as a whole number with an optional binary suffix: `1073741824`, `512M`,
/// `8G`, `8GiB`, `2t` (K, M, G, T: powers of 1024; a trailing `B` or `iB` is allowed).
pub fn parse_size(text: &str) -> Result<u64, MemoryError> {
    let bad = |reason| MemoryError::BadSize {
        text: text.to_string(),
        reason,
    };
    let upper = text.trim().to_ascii_uppercase();
    let body = upper
        .strip_suffix("IB")
        .or_else(|| upper.strip_suffix('B'))
        .unwrap_or(&upper);
    let (digits, scale) = match SUFFIXES.iter().find(|(s, _)| body.ends_with(*s)) {
        Some(&(_, scale)) => (&body[..body.len() - 1], scale),
        None => (body, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad("not a whole number of bytes"));
    }
    let value: u64 = digits.parse().map_err(|_| bad("too large"))?;
    match value.checked_mul(scale) {
        Some(0) => Err(bad("must be positive")),
        Some(bytes) => Ok(bytes),
        None => Err(bad("too large")),
    }
}

/// The default memory limit: the physical memory (`MemTotal` of `/proc/meminfo`), or the
/// process's address-space limit (`ulimit -v`) when lower; no limit where neither can be
/// read.
pub fn default_limit() -> u64 {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| mem_total(&text));
    total.unwrap_or(u64::MAX).min(address_space_limit())
}

/// `MemTotal` of `/proc/meminfo` text, in bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The soft `RLIMIT_AS` of this process (`u64::MAX` when unlimited or unknown).
fn address_space_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given and has no other effect.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } == 0;
    match ok && limit.rlim_cur != libc::RLIM_INFINITY {
        true => limit.rlim_cur,
        false => u64::MAX,
    }
}

/// Bytes of a KV cache of `layers` layers holding `positions` positions of `kv_heads`
/// heads of `head_dim` elements for K and for V, stored as `format` says (saturating).
pub fn kv_cache_bytes(
    layers: u64,
    kv_heads: u64,
    head_dim: u64,
    positions: u64,
    format: KvFormat,
) -> u64 {
    let position: u64 = format
        .streams()
        .iter()
        .map(|s| {
            let elements = if s.per_element { head_dim } else { 1 };
            kv_heads
                .saturating_mul(elements)
                .saturating_mul(u64::from(s.dtype.bits()) / 8)
        })
        .fold(0, u64::saturating_add);
    layers.saturating_mul(positions).saturating_mul(position)
}

/// Bytes of `tensors` (saturating; shapes as given, negative extents as 0).
pub fn tensors_bytes(tensors: &[ExpectedTensor]) -> u64 {
    tensors
        .iter()
        .map(|t| {
            let elements = t
                .shape
                .iter()
                .map(|&d| u64::try_from(d).unwrap_or(0))
                .fold(1, u64::saturating_mul);
            elements
                .saturating_mul(u64::from(t.dtype.bits()))
                .div_ceil(8)
        })
        .fold(0, u64::saturating_add)
}

/// Bytes of the arenas of the functions of `executable` but those named in `retired`
/// (freed once they ran, see [`VirtualMachine::retire`](crate::VirtualMachine::retire)),
/// as its memory plan sizes them.
pub fn arena_bytes(executable: &Executable, retired: &[&str]) -> u64 {
    executable
        .functions
        .iter()
        .filter(|(name, _)| !retired.contains(&name.as_str()))
        .map(|(_, f)| f.arena_size)
        .fold(0, u64::saturating_add)
}

/// `bytes` for people: `512 B`, `88.0 MiB`, `1.02 GiB`.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    let decimals = if value < 10.0 { 2 } else { 1 };
    format!("{value:.decimals$} {}", UNITS[unit])
}

#[cfg(test)]
mod tests;
