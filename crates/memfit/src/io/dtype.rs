//! Per-block conversion of stored elements into the compute type.

use half::f16;

pub use crate::dtype::{Dtype, Endian};

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
/// `uint64` beyond 2^53, which round to the nearest `f64`; a `bool` byte
/// other than 0 is 1 (NumPy's `astype`, for bytes such as a `uint8` array
/// viewed as `bool` holds).
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
        Dtype::Bool => f64::from(u8::from(raw[i] != 0)),
        Dtype::U8 => f64::from(raw[i]),
        Dtype::I8 => f64::from(raw[i] as i8),
        Dtype::U16 => f64::from(get!(u16, 2)),
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
        Dtype::Bool => i128::from(raw[i] != 0),
        Dtype::U8 => i128::from(raw[i]),
        Dtype::I8 => i128::from(raw[i] as i8),
        Dtype::U16 => get!(u16, 2),
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
        // numpy.load reads these too: no byte order (this machine's), names.
        let native = Endian::NATIVE;
        assert_eq!(Dtype::from_descr("f8"), Some((Dtype::F64, native)));
        assert_eq!(Dtype::from_descr("float32"), Some((Dtype::F32, native)));
        assert_eq!(Dtype::from_descr("|b1"), Some((Dtype::Bool, native)));
        assert_eq!(Dtype::from_descr("d"), Some((Dtype::F64, native)));
        assert_eq!(Dtype::from_descr(">H"), Some((Dtype::U16, Endian::Big)));
        assert_eq!(Dtype::from_descr("?"), Some((Dtype::Bool, native)));
        assert_eq!(Dtype::from_descr("c16"), None);
        assert_eq!(Dtype::from_descr("D"), None);
        assert_eq!(Dtype::from_descr(""), None);
        assert_eq!(decode_integer(&raw, 0, Dtype::F32, Endian::Little), None);
    }

    #[test]
    fn a_bool_byte_other_than_zero_is_one() {
        // A uint8 array viewed as bool holds such bytes; NumPy's astype reads them as True.
        let raw = [0u8, 1, 2, 255];
        let got: Vec<f64> = (0..4).map(|i| decode(&raw, i, Dtype::Bool, Endian::Little)).collect();
        assert_eq!(got, [0.0, 1.0, 1.0, 1.0]);
        assert_eq!(decode_integer(&raw, 3, Dtype::Bool, Endian::Little), Some(1));
        assert_eq!(decode(&raw, 3, Dtype::U8, Endian::Little), 255.0);
    }
}
