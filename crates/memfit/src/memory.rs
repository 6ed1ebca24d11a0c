//! Resident-memory readings of this process (Linux `/proc/self/status`),
//! and how the process's allocator gives freed buffers back.

/// Buffers of at least this many bytes are mapped from the kernel on their
/// own and unmapped when freed (see [`return_freed_buffers`]).
pub const OWN_MAPPING_BYTES: usize = 1 << 20;

/// Makes the C allocator (glibc's malloc, which Rust's system allocator
/// calls) map each buffer of [`OWN_MAPPING_BYTES`] or more on its own and
/// give it back to the kernel when it is freed. By default glibc raises that
/// threshold to the size of each large buffer freed (up to 32 MiB), then
/// keeps later buffers of up to that size in its heaps, which keep freed
/// memory resident: the buffers of a finished phase (a k-means
/// initialisation before EM) then stayed resident beside the next phase's,
/// and a fit planned at 64 MiB peaked at 110 MiB. With a fixed threshold,
/// resident memory follows the plan. Front-ends call this once at start (the
/// CLI's `main`, the Python extension's import); it affects the whole
/// process. Elsewhere than Linux with glibc it does nothing.
pub fn return_freed_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a parameter of the allocator; called with a
    // valid option and value, it has no other effect.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, OWN_MAPPING_BYTES as libc::c_int);
    }
}

/// Peak resident set size (`VmHWM`) of this process in bytes, or `None` where
/// `/proc` is unavailable.
pub fn peak_rss_bytes() -> Option<u64> {
    status_kib("VmHWM:").map(|k| k * 1024)
}

/// Current resident set size (`VmRSS`) in bytes.
pub fn current_rss_bytes() -> Option<u64> {
    status_kib("VmRSS:").map(|k| k * 1024)
}

fn status_kib(key: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines().find(|l| l.starts_with(key))?.split_whitespace().nth(1)?.parse().ok()
}

/// Gives `v` room for `len` values, asking the kernel (Linux) to back the
/// room with huge pages before it is touched: buffers read or written at
/// random (the sparse kernel's transposed centres and per-cluster sums)
/// then miss the TLB far less. A hint: where it is refused nothing changes.
pub fn reserve_huge<T>(v: &mut Vec<T>, len: usize) {
    if v.capacity() >= len {
        return;
    }
    v.reserve_exact(len - v.len());
    #[cfg(target_os = "linux")]
    {
        // Smaller rooms cannot hold a huge page (2 MiB on x86-64).
        const PAGE: usize = 4096;
        const HUGE: usize = 2 << 20;
        let (start, end) = (v.as_ptr() as usize, v.as_ptr() as usize + v.capacity() * std::mem::size_of::<T>());
        let (lo, hi) = (start.next_multiple_of(PAGE), end / PAGE * PAGE);
        if hi >= lo + HUGE {
            // SAFETY: the range lies within `v`'s allocation; advice changes no contents.
            let _ =
                unsafe { rustix::mm::madvise(lo as *mut std::ffi::c_void, hi - lo, rustix::mm::Advice::LinuxHugepage) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserving_huge_pages_keeps_the_values_and_gives_the_room() {
        for len in [0, 10, 3 << 20] {
            let mut v = vec![1.5f64, -2.0];
            reserve_huge(&mut v, len);
            assert!(v.capacity() >= len);
            assert_eq!(v, [1.5, -2.0]);
            v.resize(len.max(2), 7.0);
            assert!(v[2..].iter().all(|&x| x == 7.0));
        }
    }
}
