//! Units: byte counts printed for people.

/// Formats bytes with a binary unit, e.g. `1.50 GiB`.
pub fn format_bytes(bytes: u64) -> String {
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
        format!("{v:.2} {}", UNITS[u])
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
}
