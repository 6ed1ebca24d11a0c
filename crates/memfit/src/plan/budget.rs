//! The default memory limit: a fraction of the memory this process may use.

/// Fraction of available memory used when no limit is given.
pub const DEFAULT_LIMIT_FRACTION: f64 = 0.5;

/// Bytes of memory available to this process: the smaller of the kernel's
/// `MemAvailable` (from `/proc/meminfo`) and the room left under a cgroup v2
/// (`memory.max - memory.current`) or v1 (`memory.limit_in_bytes -
/// memory.usage_in_bytes`) limit. `None` when neither can be read.
pub fn available_memory_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("MemAvailable:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb * 1024)
    });
    let read = |p: &str| std::fs::read_to_string(p).ok().and_then(|s| s.trim().parse::<u64>().ok());
    let cgroup = match (read("/sys/fs/cgroup/memory.max"), read("/sys/fs/cgroup/memory.current")) {
        (Some(max), Some(cur)) => Some(max.saturating_sub(cur)),
        _ => match (
            read("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
            read("/sys/fs/cgroup/memory/memory.usage_in_bytes"),
        ) {
            // v1 reports "no limit" as a huge number.
            (Some(max), Some(cur)) if max < (1 << 60) => Some(max.saturating_sub(cur)),
            _ => None,
        },
    };
    match (meminfo, cgroup) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The default memory limit in bytes: [`DEFAULT_LIMIT_FRACTION`] of
/// [`available_memory_bytes`], or 1 GiB when that cannot be read.
pub fn default_limit_bytes() -> u64 {
    available_memory_bytes().map_or(1 << 30, |b| (b as f64 * DEFAULT_LIMIT_FRACTION) as u64)
}
