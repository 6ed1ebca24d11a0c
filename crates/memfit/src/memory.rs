//! Resident-memory readings of this process (Linux `/proc/self/status`).

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
