//! Memory sizes as users write them: `512MiB`, `2GB`, `1.5GiB` or plain bytes.

use crate::error::{Error, Result};
#[cfg(test)]
use crate::units::format_bytes;

/// Parses a memory size. Binary units (`KiB`, `MiB`, `GiB`, `TiB`, `PiB`) are
/// powers of 1024; decimal units (`KB`/`K`, `MB`/`M`, `GB`/`G`, `TB`/`T`,
/// `PB`/`P`) are powers of 1000; a bare number is bytes. Case-insensitive; a fraction is allowed
/// (`1.5GiB`), spaces between number and unit too. The result is rounded down to
/// whole bytes.
///
/// # Errors
/// [`Error::InvalidParameter`] naming `memory_limit` for an empty string, an
/// unknown unit, a negative, zero or non-finite value, or 8 EiB or more.
pub fn parse_size(text: &str) -> Result<u64> {
    let bad = |why: &str| {
        Error::param(
            "memory_limit",
            format!("{why} in {text:?}; hint: write e.g. 512MiB, 2GB, 1.5GiB or a number of bytes"),
        )
    };
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let num = num.replace('_', "");
    let value: f64 = num.parse().map_err(|_| bad("no number"))?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "t" | "tb" => 1e12,
        "p" | "pb" => 1e15,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "tib" => 1024.0f64.powi(4),
        "pib" => 1024.0f64.powi(5),
        "e" | "eb" => 1e18,
        "eib" => 1024.0f64.powi(6),
        _ => return Err(bad("unknown unit")),
    };
    if mult == 1.0 && value.fract() != 0.0 {
        return Err(bad("a number of bytes must be whole (did you forget a unit such as GiB?)"));
    }
    let bytes = value * mult;
    if bytes.is_nan() || bytes < 1.0 {
        return Err(bad("the size must be at least 1 byte"));
    }
    if bytes >= 9.2e18 {
        return Err(bad("the size is beyond 8 EiB"));
    }
    Ok(bytes as u64)
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
    }

    #[test]
    fn rejects_nonsense() {
        for bad in ["", "MiB", "-5MiB", "0", "12 parsecs", "1e999", "nan", "0.1"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn formats() {
        assert_eq!(format_bytes(100), "100 B");
        assert_eq!(format_bytes(3 << 29), "1.50 GiB");
    }
}
