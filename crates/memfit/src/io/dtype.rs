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
            Dtype::I32 | Dtype::F32 => 4,
            Dtype::I64 | Dtype::F64 => 8,
        }
    }

    /// NumPy's name for the type (`"float64"`, `"uint8"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Dtype::U8 => "uint8",
            Dtype::I16 => "int16",
            Dtype::I32 => "int32",
            Dtype::I64 => "int64",
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
}

/// Decodes element `i` of `raw` (stored as `dtype` in byte order `endian`)
/// as `f64`. Every supported type except `int64` beyond 2^53 converts exactly.
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
        Dtype::I64 => get!(i64, 8) as f64,
        Dtype::F16 => f16::from_bits(get!(u16, 2)).to_f64(),
        Dtype::F32 => f64::from(get!(f32, 4)),
        Dtype::F64 => get!(f64, 8),
    }
}
