//! Element types: the dtypes memfit reads ([`Dtype`], [`Endian`]) and the
//! compute types its kernels run in ([`Real`]: `f32` or `f64`).

/// An element type of an input array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    /// `bool` (one byte, 0 or 1)
    Bool,
    /// `int8`
    I8,
    /// `uint8`
    U8,
    /// `uint16`
    U16,
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

impl Endian {
    /// This machine's byte order.
    pub const NATIVE: Endian = if cfg!(target_endian = "big") { Endian::Big } else { Endian::Little };
}

impl Dtype {
    /// Size of one element in bytes.
    pub fn itemsize(self) -> usize {
        match self {
            Dtype::Bool | Dtype::I8 | Dtype::U8 => 1,
            Dtype::I16 | Dtype::U16 | Dtype::F16 => 2,
            Dtype::I32 | Dtype::U32 | Dtype::F32 => 4,
            Dtype::I64 | Dtype::U64 | Dtype::F64 => 8,
        }
    }

    /// NumPy's name for the type (`"float64"`, `"uint8"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Dtype::Bool => "bool",
            Dtype::I8 => "int8",
            Dtype::U8 => "uint8",
            Dtype::U16 => "uint16",
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
            Dtype::Bool => "|b1",
            Dtype::I8 => "|i1",
            Dtype::U8 => "|u1",
            Dtype::U16 => "<u2",
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

    /// Parses a `.npy` descriptor such as `"<f4"`; as `numpy.load`, also
    /// one without a byte order (`"f4"`: this machine's) or a dtype's name
    /// (`"float32"`). `None` when unsupported.
    pub fn from_descr(descr: &str) -> Option<(Dtype, Endian)> {
        let native = Endian::NATIVE;
        if let Some(dtype) = Dtype::from_name(descr) {
            return Some((dtype, native));
        }
        let (order, code) = match descr.split_at_checked(1)? {
            (o, code) if matches!(o, "<" | ">" | "=" | "|") => (o, code),
            _ => ("=", descr),
        };
        let endian = match order {
            "<" => Endian::Little,
            ">" => Endian::Big,
            _ => native,
        };
        let dtype = match code {
            "b1" => Dtype::Bool,
            "i1" => Dtype::I8,
            "u1" => Dtype::U8,
            "u2" => Dtype::U16,
            "i2" => Dtype::I16,
            "i4" => Dtype::I32,
            "i8" => Dtype::I64,
            "u4" => Dtype::U32,
            "u8" => Dtype::U64,
            "f2" => Dtype::F16,
            "f4" => Dtype::F32,
            "f8" => Dtype::F64,
            // NumPy's one-character type codes (`np.dtype("d")`), C's sizes
            // on 64-bit Linux and macOS (`long` of 8 bytes).
            "?" => Dtype::Bool,
            "b" => Dtype::I8,
            "B" => Dtype::U8,
            "h" => Dtype::I16,
            "H" => Dtype::U16,
            "i" => Dtype::I32,
            "I" => Dtype::U32,
            "l" | "q" if cfg!(not(windows)) => Dtype::I64,
            "L" | "Q" if cfg!(not(windows)) => Dtype::U64,
            "e" => Dtype::F16,
            "f" => Dtype::F32,
            "d" => Dtype::F64,
            _ => return None,
        };
        Some((dtype, endian))
    }

    /// Every dtype, in NumPy's order of kinds and sizes.
    pub const ALL: [Dtype; 12] = [
        Dtype::Bool,
        Dtype::I8,
        Dtype::I16,
        Dtype::I32,
        Dtype::I64,
        Dtype::U8,
        Dtype::U16,
        Dtype::U32,
        Dtype::U64,
        Dtype::F16,
        Dtype::F32,
        Dtype::F64,
    ];

    /// The dtype NumPy calls `name` (`"float64"`, `"bool"`, ...).
    pub fn from_name(name: &str) -> Option<Dtype> {
        Dtype::ALL.into_iter().find(|d| d.name() == name)
    }

    /// `true` for the signed integer types.
    pub fn is_signed_int(self) -> bool {
        matches!(self, Dtype::I8 | Dtype::I16 | Dtype::I32 | Dtype::I64)
    }

    /// `true` for the unsigned integer types.
    pub fn is_unsigned_int(self) -> bool {
        matches!(self, Dtype::U8 | Dtype::U16 | Dtype::U32 | Dtype::U64)
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
            Dtype::Bool => Some(1),
            Dtype::I8 => Some(1 << 7),
            Dtype::U8 => Some(u8::MAX.into()),
            Dtype::U16 => Some(u16::MAX.into()),
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

/// A floating-point type the kernels compute in (`f32` or `f64`).
///
/// Statistics (sums, inertia, weights) are always accumulated in `f64`,
/// whatever the compute type.
pub trait Real:
    faer::traits::RealField
    + Copy
    + Default
    + PartialOrd
    + Send
    + Sync
    + std::fmt::Debug
    + serde::Serialize
    + serde::de::DeserializeOwned
    + 'static
{
    /// The matching `.npy` dtype.
    const DTYPE: Dtype;
    /// Unit roundoff `u` (half the machine epsilon): round-to-nearest
    /// errs by at most `u` relative.
    const UNIT_ROUNDOFF: f64;
    /// Smallest positive normal value, as `f64`.
    const MIN_POSITIVE: f64;
    /// Largest finite value, as `f64`.
    const MAX: f64;
    /// Rounds an `f64` to this type (round to nearest).
    fn from_f64(v: f64) -> Self;
    /// Rounds the double word `hi + lo` (`hi` the `f64` rounding of the
    /// value, `lo` the sign and size of what it dropped) once to this type:
    /// where `hi` lies exactly halfway between two values of this type,
    /// `lo` breaks the tie instead of ties-to-even (which would round twice).
    fn from_double_word(hi: f64, lo: f64) -> Self;
    /// Widens to `f64` (exact).
    fn to_f64(self) -> f64;
    /// `values` as values of this type when it is `f64` (to read them in
    /// place), else `None`.
    fn of_f64(values: &[f64]) -> Option<&[Self]>;
    /// `values` as values of this type when it is `f32`, else `None`.
    fn of_f32(values: &[f32]) -> Option<&[Self]>;
    /// Little-endian bytes of the value, for `.npy` output.
    fn write_le(self, out: &mut Vec<u8>);
    /// The bytes of `values` in this machine's order, to read them into.
    fn bytes_mut(values: &mut [Self]) -> &mut [u8];
}

impl Real for f32 {
    const DTYPE: Dtype = Dtype::F32;
    const UNIT_ROUNDOFF: f64 = f32::EPSILON as f64 / 2.0;
    const MIN_POSITIVE: f64 = f32::MIN_POSITIVE as f64;
    const MAX: f64 = f32::MAX as f64;
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn from_double_word(hi: f64, lo: f64) -> Self {
        let t = hi as f32;
        let dropped = hi - f64::from(t);
        if dropped != 0.0 && lo != 0.0 && (dropped > 0.0) == (lo > 0.0) {
            // `hi` is past `t`; a tie (the other neighbour as far) goes on.
            let other = if dropped > 0.0 { t.next_up() } else { t.next_down() };
            if f64::from(other) - hi == dropped {
                return other;
            }
        }
        t
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn write_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn bytes_mut(values: &mut [Self]) -> &mut [u8] {
        bytemuck::cast_slice_mut(values)
    }
    fn of_f64(_: &[f64]) -> Option<&[Self]> {
        None
    }
    fn of_f32(values: &[f32]) -> Option<&[Self]> {
        Some(values)
    }
}

impl Real for f64 {
    const DTYPE: Dtype = Dtype::F64;
    const UNIT_ROUNDOFF: f64 = f64::EPSILON / 2.0;
    const MIN_POSITIVE: f64 = f64::MIN_POSITIVE;
    const MAX: f64 = f64::MAX;
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v
    }
    fn from_double_word(hi: f64, _lo: f64) -> Self {
        hi
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self
    }
    fn write_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn bytes_mut(values: &mut [Self]) -> &mut [u8] {
        bytemuck::cast_slice_mut(values)
    }
    fn of_f64(values: &[f64]) -> Option<&[Self]> {
        Some(values)
    }
    fn of_f32(_: &[f32]) -> Option<&[Self]> {
        None
    }
}
