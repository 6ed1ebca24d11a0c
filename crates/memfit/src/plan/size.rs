//! Memory sizes as users write them: `512MiB`, `2GB`, `1.5GiB` or plain bytes.

use crate::error::{Error, Result};
#[cfg(test)]
use crate::units::format_bytes;
use crate::units::quoted;

/// Parses a memory size: a number, then optionally a unit. Binary units
/// (`KiB`, `MiB`, `GiB`, `TiB`, `PiB`, `EiB`) are powers of 1024; decimal
/// units (`KB`/`K`, `MB`/`M`, `GB`/`G`, `TB`/`T`, `PB`/`P`, `EB`) are powers
/// of 1000; `B` or no unit is bytes. Units are case-insensitive and may
/// follow a space. The number is digits (`_` may group them) with an
/// optional fraction (`1.5GiB`) and an optional exponent (`1e9`, as NumPy
/// users write sizes, or `1.5e3MiB`); the result is rounded down to whole
/// bytes, and a bare number must be a whole number of bytes.
///
/// Anything else is refused rather than guessed: `1e` (an exponent without
/// digits, or exabytes?), `1..5GiB`, `5 GiBs`, `inf`, `nan`, signs, hex.
///
/// # Errors
/// [`Error::InvalidParameter`] naming `memory_limit` for an empty string, a
/// malformed number, an unknown unit, a zero or fractional number of bytes,
/// or 8 EiB or more.
pub fn parse_size(text: &str) -> Result<u64> {
    parse_size_as("memory_limit", text)
}

/// [`parse_size`] for the size given as parameter `name` (such as
/// `device_memory_limit`), which its errors name.
///
/// # Errors
/// As [`parse_size`], naming `name`.
pub fn parse_size_as(name: &'static str, text: &str) -> Result<u64> {
    let bad = |why: &str| {
        Error::param(
            name,
            format!("{why} in {}; hint: write e.g. 512MiB, 2GB, 1.5GiB, 1e9 or a number of bytes", quoted(text)),
        )
    };
    let t = text.trim();
    let (num, unit) = split_number(t);
    if num.is_empty() && t.starts_with('-') && !split_number(&t[1..]).0.is_empty() {
        return Err(bad("a negative size"));
    }
    if num.is_empty() {
        return Err(bad("no number"));
    }
    if num.ends_with(['e', 'E']) {
        return Err(bad("an exponent without digits (write 1e9 for 10^9 bytes, or 1EB for an exabyte)"));
    }
    let value: f64 = num.replace('_', "").parse().map_err(|_| bad("a malformed number"))?;
    let mult: f64 = match unit.trim_start().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "t" | "tb" => 1e12,
        "p" | "pb" => 1e15,
        "eb" => 1e18,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "tib" => 1024.0f64.powi(4),
        "pib" => 1024.0f64.powi(5),
        "eib" => 1024.0f64.powi(6),
        _ => return Err(bad("unknown unit (use B, KiB, MiB, GiB, TiB, PiB, EiB, KB, MB, GB, TB, PB or EB)")),
    };
    // Sizes are below 2^63 bytes (8 EiB), however they are written.
    let beyond = || bad("the size is beyond 8 EiB");
    // Whole numbers of bytes are read exactly (f64 rounds beyond 2^53).
    if mult == 1.0 && !num.contains(['.', 'e', 'E']) {
        let exact = num.replace('_', "").parse::<u64>().map_err(|_| beyond())?;
        return match exact {
            0 => Err(bad("the size must be at least 1 byte")),
            e if e >= 1 << 63 => Err(beyond()),
            e => Ok(e),
        };
    }
    let bytes = value * mult;
    if bytes >= 2f64.powi(63) {
        return Err(beyond());
    }
    if mult == 1.0 && bytes.fract() != 0.0 {
        return Err(bad("a number of bytes must be whole (did you forget a unit such as GiB?)"));
    }
    if bytes < 1.0 {
        return Err(bad("the size must be at least 1 byte"));
    }
    Ok(bytes as u64)
}

/// `text` split after its number: digits grouped by single `_`, at most one
/// `.` fraction, then an optional exponent (`e`, an optional sign, digits).
/// The number part may end in a bare `e` (an exponent without digits),
/// which the caller refuses.
fn split_number(text: &str) -> (&str, &str) {
    let b = text.as_bytes();
    let digits = |mut i: usize| {
        let start = i;
        while i < b.len() && (b[i].is_ascii_digit() || (b[i] == b'_' && i > start && b[i - 1].is_ascii_digit())) {
            i += 1;
        }
        // A trailing `_` is not part of the number.
        if i > start && b[i - 1] == b'_' {
            i -= 1;
        }
        i
    };
    let mut i = digits(0);
    if i == 0 {
        return ("", text);
    }
    if i < b.len() && b[i] == b'.' {
        i = digits(i + 1);
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        let end = digits(j);
        if end > j {
            i = end;
        } else if !text[i + 1..].trim_start().to_ascii_lowercase().starts_with(['b', 'i']) {
            // `1e`, `1e+`: an exponent without digits (not the unit `EB`/`EiB`).
            i += 1;
        }
    }
    text.split_at(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_size("512MiB").unwrap(), 512 << 20);
        assert_eq!(parse_size("2GB").unwrap(), 2_000_000_000);
        assert_eq!(parse_size("2G").unwrap(), 2_000_000_000);
        assert_eq!(parse_size("1.5GiB").unwrap(), 3 << 29);
        assert_eq!(parse_size("1048576").unwrap(), 1 << 20);
        assert_eq!(parse_size(" 64 mib ").unwrap(), 64 << 20);
        assert_eq!(parse_size("1_000kb").unwrap(), 1_000_000);
        assert!(parse_size("1.5").is_err());
        assert!(parse_size("18EiB").unwrap_err().to_string().contains("beyond 8 EiB"));
        // Up to 2^63 − 1 bytes, written as digits or not (Python's int limit too).
        assert_eq!(parse_size("9223372036854775807").unwrap(), (1 << 63) - 1);
        assert_eq!(parse_size("9_223_372_036_854_775_807B").unwrap(), (1 << 63) - 1);
        for beyond in ["9223372036854775808", "8EiB", "9.3e18", "9223372036854775808B"] {
            assert!(parse_size(beyond).unwrap_err().to_string().contains("beyond 8 EiB"), "{beyond}");
        }
        assert_eq!(parse_size("7.99EiB").unwrap(), (7.99 * 1024f64.powi(6)) as u64);
        // A unit's fraction of a byte is rounded down; a bare one is refused.
        assert_eq!(parse_size("0.3GiB").unwrap(), 322_122_547);
        assert!(parse_size("1.5B").unwrap_err().to_string().contains("must be whole"));
    }

    #[test]
    fn rejects_nonsense() {
        assert!(parse_size("-5MiB").unwrap_err().to_string().contains("a negative size in \"-5MiB\""));
        for bad in ["", "MiB", "-5MiB", "0", "12 parsecs", "1e999", "nan", "0.1"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    /// Malformed or ambiguous sizes are refused, never guessed (`1e` was
    /// read as 10^18 bytes); scientific notation is bytes, as NumPy users
    /// write it.
    #[test]
    fn refuses_malformed_and_ambiguous_sizes() {
        for bad in [
            "1e",
            "1E",
            "1e+",
            "1..5GiB",
            "1.5.GiB",
            "5 GiBs",
            "inf",
            "infinity",
            "+5GiB",
            "0x10",
            "1,000",
            "1e-3",
            "1.5e0",
            "5GiB extra",
            "_1",
            "1__0",
            "GiB5",
            "1 e9",
            ".5GiB",
            "1e9.5",
        ] {
            let e = parse_size(bad).unwrap_err().to_string();
            assert!(e.starts_with("invalid memory_limit: "), "{bad}: {e}");
        }
        assert!(parse_size("1e").unwrap_err().to_string().contains("an exponent without digits"));
        assert!(parse_size("5 GiBs").unwrap_err().to_string().contains("unknown unit"));
        assert_eq!(parse_size("1e9").unwrap(), 1_000_000_000);
        assert_eq!(parse_size("2.5E9").unwrap(), 2_500_000_000);
        assert_eq!(parse_size("1e+3KiB").unwrap(), 1_024_000);
        assert_eq!(parse_size("1EB").unwrap(), 1_000_000_000_000_000_000);
        assert_eq!(parse_size("1 EiB").unwrap(), 1 << 60);
        assert_eq!(parse_size("9007199254740993").unwrap(), 9_007_199_254_740_993);
        assert_eq!(parse_size("1_048_576 B").unwrap(), 1 << 20);
        let e = parse_size_as("device_memory_limit", "abc").unwrap_err().to_string();
        assert!(e.starts_with("invalid device_memory_limit: no number in \"abc\""), "{e}");
    }

    #[test]
    fn formats() {
        assert_eq!(format_bytes(100), "100 B");
        assert_eq!(format_bytes(3 << 29), "1.50 GiB");
    }
}
