//! Element types memfit reads, and per-block conversion into the compute type.

use half::f16;

/// An element type of an input array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    /// `uint8`
    U8,
    /// `int16`
    I16,
    /// `int32`
    I32,
    /// `int64`
    I64,
    /// `uint32`
    U32,
    /// `uint64`
    U64,
    /// `float16` (IEEE half)
    F16,
    /// `float32`
    F32,
    /// `float64`
    F64,
}

/// Byte order of stored elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endian {
    /// Least significant byte first (what NumPy writes on x86 and ARM).
    Little,
    /// Most significant byte first.
    Big,
}

impl Dtype {
    /// Size of one element in bytes.
    pub fn itemsize(self) -> usize {
        match self {
            Dtype::U8 => 1,
            Dtype::I16 | Dtype::F16 => 2,
            Dtype::I32 | Dtype::U32 | Dtype::F32 => 4,
            Dtype::I64 | Dtype::U64 | Dtype::F64 => 8,
        }
    }

    /// NumPy's name for the type (`"float64"`, `"uint8"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Dtype::U8 => "uint8",
            Dtype::I16 => "int16",
            Dtype::I32 => "int32",
            Dtype::I64 => "int64",
            Dtype::U32 => "uint32",
            Dtype::U64 => "uint64",
            Dtype::F16 => "float16",
            Dtype::F32 => "float32",
            Dtype::F64 => "float64",
        }
    }

    /// The little-endian `.npy` descriptor (`"<f8"`, `"|u1"`, ...).
    pub fn descr(self) -> &'static str {
        match self {
            Dtype::U8 => "|u1",
            Dtype::I16 => "<i2",
            Dtype::I32 => "<i4",
            Dtype::I64 => "<i8",
            Dtype::U32 => "<u4",
            Dtype::U64 => "<u8",
            Dtype::F16 => "<f2",
            Dtype::F32 => "<f4",
            Dtype::F64 => "<f8",
        }
    }

    /// Parses a `.npy` descriptor such as `"<f4"`; `None` when unsupported.
    pub fn from_descr(descr: &str) -> Option<(Dtype, Endian)> {
        let (order, code) = descr.split_at_checked(1)?;
        let endian = match order {
            "<" | "=" | "|" => Endian::Little,
            ">" => Endian::Big,
            _ => return None,
        };
        let dtype = match code {
            "u1" => Dtype::U8,
            "i2" => Dtype::I16,
            "i4" => Dtype::I32,
            "i8" => Dtype::I64,
            "u4" => Dtype::U32,
            "u8" => Dtype::U64,
            "f2" => Dtype::F16,
            "f4" => Dtype::F32,
            "f8" => Dtype::F64,
            _ => return None,
        };
        Some((dtype, endian))
    }

    /// `true` for the floating-point types.
    pub fn is_float(self) -> bool {
        matches!(self, Dtype::F16 | Dtype::F32 | Dtype::F64)
    }

    /// The magnitude up to which every integer is exact in this compute type:
    /// 2^24 for float32, 2^53 for float64 (`None` for the other types).
    pub fn exact_integer_limit(self) -> Option<u64> {
        match self {
            Dtype::F32 => Some(1 << 24),
            Dtype::F64 => Some(1 << 53),
            _ => None,
        }
    }

    /// The largest magnitude a value of this type can have, for integer types.
    fn integer_max_magnitude(self) -> Option<u64> {
        match self {
            Dtype::U8 => Some(u8::MAX.into()),
            Dtype::I16 => Some(1 << 15),
            Dtype::I32 => Some(1 << 31),
            Dtype::U32 => Some(u32::MAX.into()),
            Dtype::I64 => Some(1 << 63),
            Dtype::U64 => Some(u64::MAX),
            _ => None,
        }
    }

    /// When integers stored as `self` can lose exactness in the compute type
    /// `compute`: the magnitude beyond which they do (2^24 for float32, 2^53
    /// for float64). `None` when every value converts exactly (`uint8`,
    /// `int16`, `int32` and `uint32` in float64, floating-point types).
    pub fn inexact_beyond(self, compute: Dtype) -> Option<u64> {
        let limit = compute.exact_integer_limit()?;
        (self.integer_max_magnitude()? > limit).then_some(limit)
    }
}

/// The first integer of an input that its compute type cannot represent
/// exactly, found while the input was converted (see
/// [`Source::inexact_integer`](super::Source::inexact_integer)): its
/// magnitude exceeds 2^24 in float32 or 2^53 in float64.
///
/// "First" is in row-major order over the rows read in that compute type.
/// The message (`Display`) names the column and the value; front ends add
/// the input's name and what to do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct InexactInteger {
    /// Zero-based row of the value.
    pub row: usize,
    /// Zero-based column of the value.
    pub column: usize,
    /// The value as stored.
    pub value: i128,
    /// The stored integer dtype.
    pub dtype: Dtype,
    /// The compute dtype (`float32` or `float64`).
    pub compute: Dtype,
    /// Magnitude up to which integers are exact in `compute` (2^24 or 2^53).
    pub exact_up_to: u64,
}

impl std::fmt::Display for InexactInteger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "column {} holds {} values beyond 2^{} in magnitude (first: {} at row {}), which {} cannot represent exactly: results computed from them may be rounded",
            self.column,
            self.dtype.name(),
            self.exact_up_to.trailing_zeros(),
            self.value,
            self.row,
            self.compute.name()
        )
    }
}

/// Decodes element `i` of `raw` (stored as `dtype` in byte order `endian`)
/// as `f64`. Every supported type converts exactly except `int64` and
/// `uint64` beyond 2^53, which round to the nearest `f64`.
///
/// # Panics
/// If `raw` holds fewer than `(i + 1) * dtype.itemsize()` bytes.
#[inline]
pub fn decode(raw: &[u8], i: usize, dtype: Dtype, endian: Endian) -> f64 {
    macro_rules! get {
        ($t:ty, $n:literal) => {{
            let b: [u8; $n] = raw[i * $n..i * $n + $n].try_into().expect("slice of length n");
            match endian {
                Endian::Little => <$t>::from_le_bytes(b),
                Endian::Big => <$t>::from_be_bytes(b),
            }
        }};
    }
    match dtype {
        Dtype::U8 => f64::from(raw[i]),
        Dtype::I16 => f64::from(get!(i16, 2)),
        Dtype::I32 => f64::from(get!(i32, 4)),
        Dtype::U32 => f64::from(get!(u32, 4)),
        Dtype::I64 => get!(i64, 8) as f64,
        Dtype::U64 => get!(u64, 8) as f64,
        Dtype::F16 => f16::from_bits(get!(u16, 2)).to_f64(),
        Dtype::F32 => f64::from(get!(f32, 4)),
        Dtype::F64 => get!(f64, 8),
    }
}

/// Decodes element `i` of `raw` exactly, for integer dtypes (`None` for
/// floating-point ones).
///
/// # Panics
/// As [`decode`].
#[inline]
pub fn decode_integer(raw: &[u8], i: usize, dtype: Dtype, endian: Endian) -> Option<i128> {
    macro_rules! get {
        ($t:ty, $n:literal) => {{
            let b: [u8; $n] = raw[i * $n..i * $n + $n].try_into().expect("slice of length n");
            i128::from(match endian {
                Endian::Little => <$t>::from_le_bytes(b),
                Endian::Big => <$t>::from_be_bytes(b),
            })
        }};
    }
    Some(match dtype {
        Dtype::U8 => i128::from(raw[i]),
        Dtype::I16 => get!(i16, 2),
        Dtype::I32 => get!(i32, 4),
        Dtype::U32 => get!(u32, 4),
        Dtype::I64 => get!(i64, 8),
        Dtype::U64 => get!(u64, 8),
        Dtype::F16 | Dtype::F32 | Dtype::F64 => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inexact_beyond_follows_the_compute_type() {
        for (stored, f32_limit, f64_limit) in [
            (Dtype::U8, None, None),
            (Dtype::I16, None, None),
            (Dtype::I32, Some(1 << 24), None),
            (Dtype::U32, Some(1 << 24), None),
            (Dtype::I64, Some(1 << 24), Some(1 << 53)),
            (Dtype::U64, Some(1 << 24), Some(1 << 53)),
            (Dtype::F16, None, None),
            (Dtype::F32, None, None),
            (Dtype::F64, None, None),
        ] {
            assert_eq!(stored.inexact_beyond(Dtype::F32), f32_limit, "{stored:?}");
            assert_eq!(stored.inexact_beyond(Dtype::F64), f64_limit, "{stored:?}");
        }
    }

    #[test]
    fn decodes_unsigned_and_big_endian_integers_exactly() {
        let raw = [u64::MAX.to_be_bytes(), (1u64 << 53 | 1).to_be_bytes()].concat();
        assert_eq!(decode_integer(&raw, 0, Dtype::U64, Endian::Big), Some(i128::from(u64::MAX)));
        assert_eq!(decode_integer(&raw, 1, Dtype::U64, Endian::Big), Some((1 << 53) + 1));
        assert_eq!(decode(&raw, 1, Dtype::U64, Endian::Big), 9_007_199_254_740_992.0);
        let raw = u32::MAX.to_le_bytes();
        assert_eq!(decode(&raw, 0, Dtype::U32, Endian::Little), 4_294_967_295.0);
        assert_eq!(Dtype::from_descr(">u4"), Some((Dtype::U32, Endian::Big)));
        assert_eq!(Dtype::from_descr("<u8"), Some((Dtype::U64, Endian::Little)));
        assert_eq!(decode_integer(&raw, 0, Dtype::F32, Endian::Little), None);
    }
}
