//! The default number of worker threads: the CPUs this process may use,
//! within the thread limits its environment gives it.

/// CPUs this process may run on: those in its affinity mask
/// (`sched_getaffinity`, as `taskset` or a batch scheduler sets it), within
/// its cgroup's CPU quota (`cpu.max`, rounded down, at least 1), as
/// [`std::thread::available_parallelism`] reads them; 1 when unknown.
pub fn available_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The most worker threads a job takes: 4 per CPU this process may use,
/// and at least 64 (more only add threads that wait, each with its planned
/// buffers).
pub fn most_threads() -> usize {
    most_of(available_cpus())
}

fn most_of(cpus: usize) -> usize {
    cpus.saturating_mul(4).max(64)
}

/// The default number of worker threads (at least 1): `RAYON_NUM_THREADS`
/// when set to a positive integer (at most [`most_threads`]), else
/// [`available_cpus`]; in both cases at most `OMP_NUM_THREADS` when that is
/// set (its first entry, a positive integer), the limit that joblib's
/// process workers, `threadpoolctl`-aware tools and batch schedulers give a
/// process.
pub fn default_threads() -> usize {
    let var = |name: &str| std::env::var(name).ok();
    threads_from(var("RAYON_NUM_THREADS").as_deref(), var("OMP_NUM_THREADS").as_deref(), available_cpus())
}

/// [`default_threads`] from the two variables' values and the CPU count.
fn threads_from(rayon: Option<&str>, omp: Option<&str>, cpus: usize) -> usize {
    let start = rayon.and_then(thread_count).map_or(cpus, |n| n.min(most_of(cpus)));
    omp.and_then(thread_count).map_or(start, |limit| start.min(limit)).max(1)
}

/// A thread-count variable's value as a positive integer: its first
/// comma-separated entry (OpenMP's list gives one per nesting level); None
/// for anything else (unset, empty, 0, not a number), which sets no limit.
fn thread_count(value: &str) -> Option<usize> {
    value.split(',').next()?.trim().parse::<usize>().ok().filter(|&n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn omp_num_threads_caps_the_cpus() {
        assert_eq!(threads_from(None, None, 8), 8);
        assert_eq!(threads_from(None, Some("1"), 8), 1);
        assert_eq!(threads_from(None, Some("3,2"), 8), 3);
        assert_eq!(threads_from(None, Some(" 2 "), 8), 2);
        // A limit above the CPUs does not add threads.
        assert_eq!(threads_from(None, Some("64"), 8), 8);
    }

    #[test]
    fn rayon_num_threads_sets_the_count_within_omp_num_threads() {
        assert_eq!(threads_from(Some("16"), None, 8), 16);
        assert_eq!(threads_from(Some("16"), Some("2"), 8), 2);
        assert_eq!(threads_from(Some("0"), None, 8), 8);
        // Beyond most_threads it is capped there (it would start them all).
        assert_eq!(threads_from(Some("100000"), None, 2), 64);
        assert_eq!(threads_from(Some("100000"), None, 32), 128);
        assert_eq!(threads_from(Some("99999999999999999999999"), None, 2), 2);
    }

    #[test]
    fn values_that_are_not_positive_integers_set_no_limit() {
        for v in ["", "0", "-1", "two", "1.5", ",4"] {
            assert_eq!(threads_from(None, Some(v), 4), 4, "{v:?}");
        }
        assert_eq!(threads_from(None, None, 1), 1);
    }

    #[test]
    fn the_process_default_is_within_its_cpus_and_omp_num_threads() {
        let n = default_threads();
        assert!(n >= 1);
        if std::env::var_os("RAYON_NUM_THREADS").is_none() {
            assert!(n <= available_cpus());
        }
        if let Some(limit) = std::env::var("OMP_NUM_THREADS").ok().as_deref().and_then(thread_count) {
            assert!(n <= limit);
        }
    }
}
