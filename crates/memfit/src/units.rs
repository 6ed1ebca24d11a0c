//! Units: byte counts printed for people.

/// Formats bytes with a binary unit, e.g. `1.50 GiB` (to the nearest
/// hundredth).
pub fn format_bytes(bytes: u64) -> String {
    formatted(bytes, |v| v)
}

/// As [`format_bytes`], rounded up at the hundredth: for a size needed (a
/// limit raised to the printed figure then holds it; `55.51 KiB` for
/// 56,836 bytes, not `55.50 KiB`, which is 56,832).
pub fn format_bytes_up(bytes: u64) -> String {
    formatted(bytes, |v| (v * 100.0).ceil() / 100.0)
}

/// As [`format_bytes`], rounded down at the hundredth: for a size not to
/// exceed.
pub fn format_bytes_down(bytes: u64) -> String {
    formatted(bytes, |v| (v * 100.0).floor() / 100.0)
}

fn formatted(bytes: u64, round: impl Fn(f64) -> f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{:.2} {}", round(v), UNITS[u])
    }
}

/// `n` threads in words: "1 thread", "2 threads".
pub fn threads(n: impl std::fmt::Display) -> String {
    let n = n.to_string();
    if n == "1" {
        "1 thread".into()
    } else {
        format!("{n} threads")
    }
}

/// The characters of a user's text an error quotes ([`quoted`]).
pub const SHOWN_CHARS: usize = 40;

/// `text` quoted as Rust debug-formats a string, cut to its first
/// [`SHOWN_CHARS`] characters (then `…`), so an error never echoes a huge
/// argument whole.
pub fn quoted(text: &str) -> String {
    let shown: String = text.chars().take(SHOWN_CHARS).collect();
    let more = if shown.len() < text.len() { "…" } else { "" };
    format!("{shown:?}{more}")
}

#[cfg(test)]
mod quoted_tests {
    use super::*;

    #[test]
    fn long_texts_are_quoted_cut() {
        assert_eq!(quoted("abc"), "\"abc\"");
        assert_eq!(quoted(&"é".repeat(100)), format!("{:?}…", "é".repeat(SHOWN_CHARS)));
    }

    /// A size needed prints rounded up, a size not to exceed rounded down,
    /// so that a limit set to the printed figure does what the hint says.
    #[test]
    fn sizes_round_toward_what_holds() {
        assert_eq!(format_bytes(56_836), "55.50 KiB");
        assert_eq!(format_bytes_up(56_836), "55.51 KiB");
        assert_eq!(format_bytes_up(56_832), "55.50 KiB");
        assert_eq!(format_bytes_down(56_836), "55.50 KiB");
        assert_eq!(format_bytes_down(11_286_911), "10.76 MiB");
        assert_eq!(format_bytes_up(11_286_912), "10.77 MiB");
        assert_eq!(format_bytes_up(512), "512 B");
    }
}
