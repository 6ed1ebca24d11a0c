//! NumPy's type rules for array expressions: scalars, promotion
//! (`numpy.result_type` with NEP 50's weak Python scalars) and the loop
//! dtype each elementwise operation computes in.

use crate::dtype::Dtype;
use crate::error::{Error, ExpressionFault};

/// A single value: a Python or NumPy scalar, a fill value, a folded constant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    /// `True` / `False`.
    Bool(bool),
    /// A signed integer.
    Int(i64),
    /// An unsigned integer beyond `i64::MAX`.
    UInt(u64),
    /// A floating-point value.
    Float(f64),
}

impl Scalar {
    /// The value as `f64` (rounded for integers beyond 2^53).
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => f64::from(u8::from(b)),
            Scalar::Int(i) => i as f64,
            Scalar::UInt(u) => u as f64,
            Scalar::Float(x) => x,
        }
    }

    /// The dtype NumPy gives a Python scalar of this kind on its own
    /// (`bool`, `int64`, `uint64` beyond `i64::MAX`, `float64`).
    pub fn default_dtype(self) -> Dtype {
        match self {
            Scalar::Bool(_) => Dtype::Bool,
            Scalar::Int(_) => Dtype::I64,
            Scalar::UInt(_) => Dtype::U64,
            Scalar::Float(_) => Dtype::F64,
        }
    }
}

/// The kind of a dtype, in NumPy's order (`b < u/i < f`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// `bool`
    Bool,
    /// Signed or unsigned integers.
    Int,
    /// Floating point.
    Float,
}

/// The kind of `d`.
pub fn kind(d: Dtype) -> Kind {
    if d == Dtype::Bool {
        Kind::Bool
    } else if d.is_float() {
        Kind::Float
    } else {
        Kind::Int
    }
}

/// Bits of an integer dtype (8 to 64).
fn bits(d: Dtype) -> usize {
    d.itemsize() * 8
}

/// The smallest float that holds every value of integer dtype `d` as NumPy
/// promotes it (`int8` → `float16`, `int16` → `float32`, wider → `float64`).
pub fn float_for(d: Dtype) -> Dtype {
    match d {
        Dtype::Bool | Dtype::I8 | Dtype::U8 => Dtype::F16,
        Dtype::I16 | Dtype::U16 => Dtype::F32,
        Dtype::F16 | Dtype::F32 | Dtype::F64 => d,
        _ => Dtype::F64,
    }
}

fn signed_of_bits(b: usize) -> Dtype {
    match b {
        8 => Dtype::I8,
        16 => Dtype::I16,
        32 => Dtype::I32,
        _ => Dtype::I64,
    }
}

/// `numpy.promote_types(a, b)` for the twelve dtypes.
pub fn promote(a: Dtype, b: Dtype) -> Dtype {
    if a == b {
        return a;
    }
    match (kind(a), kind(b)) {
        (Kind::Bool, _) => b,
        (_, Kind::Bool) => a,
        (Kind::Float, Kind::Float) => {
            if a.itemsize() >= b.itemsize() {
                a
            } else {
                b
            }
        }
        (Kind::Float, Kind::Int) => promote(a, float_for(b)),
        (Kind::Int, Kind::Float) => promote(float_for(a), b),
        (Kind::Int, Kind::Int) => {
            let (sa, sb) = (a.is_signed_int(), b.is_signed_int());
            if sa == sb {
                if bits(a) >= bits(b) {
                    a
                } else {
                    b
                }
            } else {
                let (s, u) = if sa { (a, b) } else { (b, a) };
                if bits(u) >= 64 {
                    Dtype::F64
                } else if bits(s) > bits(u) {
                    s
                } else {
                    signed_of_bits(bits(u) * 2)
                }
            }
        }
    }
}

/// An operand as type promotion sees it: its dtype and whether it is a weak
/// Python scalar (NEP 50: a Python `int`/`float`/`bool` takes the other
/// operand's dtype when that has the same or a higher kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Operand {
    /// The operand's dtype (a weak scalar's default dtype).
    pub dtype: Dtype,
    /// `true` for a Python scalar.
    pub weak: bool,
}

/// `numpy.result_type` of the operands, NEP 50 rules for weak scalars.
///
/// # Panics
/// If `ops` is empty.
pub fn result_type(ops: &[Operand]) -> Dtype {
    let strong: Vec<Dtype> = ops.iter().filter(|o| !o.weak).map(|o| o.dtype).collect();
    let weak: Vec<Dtype> = ops.iter().filter(|o| o.weak).map(|o| o.dtype).collect();
    let Some(mut t) = strong.iter().copied().reduce(promote) else {
        return weak.into_iter().reduce(promote).expect("at least one operand");
    };
    for w in weak {
        if kind(w) > kind(t) {
            // A Python int with a bool array gives int64, a Python float
            // with an integer array float64.
            t = promote(t, w);
        }
    }
    t
}

/// The error NumPy raises when a ufunc has no loop for the operand types.
pub fn no_loop(op: &str, dtypes: &[Dtype]) -> Error {
    // NumPy's words: `sign` of booleans finds no loop; the others (bitwise
    // operations and shifts of floats) no safe cast to one.
    let message = if op == "sign" {
        let names: Vec<String> = dtypes.iter().map(|d| dtype_class(*d)).collect();
        format!("ufunc 'sign' did not contain a loop with signature matching types {} -> None", names.join(", "))
    } else {
        format!(
            "ufunc '{op}' not supported for the input types, and the inputs could not be safely coerced to any supported types according to the casting rule ''safe''"
        )
    };
    Error::Expression { kind: ExpressionFault::Type, message }
}

/// NumPy's DType class of `dtype`, as its messages print it
/// (`<class 'numpy.dtypes.BoolDType'>`).
fn dtype_class(dtype: Dtype) -> String {
    let name = dtype.name();
    let class = match name.strip_prefix("uint") {
        Some(bits) => format!("UInt{bits}"),
        None => {
            let mut c = name.chars();
            c.next().map_or_else(String::new, |f| f.to_ascii_uppercase().to_string() + c.as_str())
        }
    };
    format!("<class 'numpy.dtypes.{class}DType'>")
}

/// Casts `value` to `dtype` as NumPy's `astype` does (floats truncate
/// towards zero into integers, integers wrap).
pub fn cast_scalar(value: Scalar, dtype: Dtype) -> Scalar {
    match kind(dtype) {
        Kind::Bool => Scalar::Bool(value.to_f64() != 0.0),
        Kind::Float => Scalar::Float(match value {
            Scalar::Int(i) => float_of_int(i, dtype),
            Scalar::UInt(u) => float_of_uint(u, dtype),
            other => round_float(other.to_f64(), dtype),
        }),
        Kind::Int => {
            let bits: u64 = match value {
                Scalar::Bool(b) => u64::from(b),
                Scalar::Int(i) => i as u64,
                Scalar::UInt(u) => u,
                Scalar::Float(x) if dtype.is_unsigned_int() && x >= 0.0 => x as u64,
                Scalar::Float(x) => x as i64 as u64,
            };
            if dtype.is_signed_int() {
                Scalar::Int(wrap_signed(bits as i64, dtype))
            } else {
                let w = wrap_unsigned(bits, dtype);
                i64::try_from(w).map_or(Scalar::UInt(w), Scalar::Int)
            }
        }
    }
}

/// Rounds an `f64` to `dtype`'s precision (float16 or float32; float64 as
/// is), once, to nearest with ties to even, as NumPy's casts do.
#[inline]
pub fn round_float(x: f64, dtype: Dtype) -> f64 {
    match dtype {
        Dtype::F32 => f64::from(x as f32),
        Dtype::F16 => to_f16(x).to_f64(),
        _ => x,
    }
}

/// `x` rounded once to the nearest float16, ties to even (NumPy's
/// `npy_double_to_half`). `half::f16::from_f64` rounds through float32 on
/// x86 with F16C, which rounds twice (a value just above a float16 halfway
/// point can land on it, then round to even). Here the float32 step rounds
/// to odd instead (an inexact result keeps an odd last bit), after which
/// rounding float32 to float16 is exact: float32 has at least two more bits
/// than float16 needs (Boldo and Melquiond, "When double rounding is odd").
#[inline]
pub fn to_f16(x: f64) -> half::f16 {
    let mut y = x as f32;
    if y.is_finite() && f64::from(y) != x && y.to_bits() & 1 == 0 {
        // The odd neighbour of y on x's side.
        let bits = y.to_bits();
        y = f32::from_bits(if f64::from(y).abs() > x.abs() { bits - 1 } else { bits + 1 });
    }
    half::f16::from_f32(y)
}

/// Signed integer `x` as float `dtype`, rounded once (not through `f64`,
/// which rounds integers beyond 2^53 first).
#[inline]
pub fn float_of_int(x: i64, dtype: Dtype) -> f64 {
    if dtype == Dtype::F32 {
        f64::from(x as f32)
    } else {
        round_float(x as f64, dtype)
    }
}

/// Unsigned integer `x` as float `dtype`, rounded once.
#[inline]
pub fn float_of_uint(x: u64, dtype: Dtype) -> f64 {
    if dtype == Dtype::F32 {
        f64::from(x as f32)
    } else {
        round_float(x as f64, dtype)
    }
}

/// Wraps a signed value to the width of `dtype` (two's complement).
#[inline]
pub fn wrap_signed(x: i64, dtype: Dtype) -> i64 {
    match dtype {
        Dtype::I8 => i64::from(x as i8),
        Dtype::I16 => i64::from(x as i16),
        Dtype::I32 => i64::from(x as i32),
        _ => x,
    }
}

/// Wraps an unsigned value to the width of `dtype`.
#[inline]
pub fn wrap_unsigned(x: u64, dtype: Dtype) -> u64 {
    match dtype {
        Dtype::U8 | Dtype::Bool => u64::from(x as u8),
        Dtype::U16 => u64::from(x as u16),
        Dtype::U32 => u64::from(x as u32),
        _ => x,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Dtype::*;

    #[test]
    fn promotion_matches_numpy() {
        for (a, b, want) in [
            (U8, I8, I16),
            (U16, I8, I32),
            (U32, I32, I64),
            (U64, I64, F64),
            (I8, F16, F16),
            (I16, F16, F32),
            (I32, F32, F64),
            (U8, F32, F32),
            (Bool, I8, I8),
            (F16, F64, F64),
            (I64, U8, I64),
        ] {
            assert_eq!(promote(a, b), want, "{a:?} {b:?}");
            assert_eq!(promote(b, a), want, "{b:?} {a:?}");
        }
    }

    #[test]
    fn weak_scalars_follow_nep50() {
        let strong = |dtype| Operand { dtype, weak: false };
        let weak = |dtype| Operand { dtype, weak: true };
        assert_eq!(result_type(&[strong(F32), weak(F64)]), F32);
        assert_eq!(result_type(&[strong(I8), weak(I64)]), I8);
        assert_eq!(result_type(&[strong(I32), weak(F64)]), F64);
        assert_eq!(result_type(&[strong(Bool), weak(I64)]), I64);
        assert_eq!(result_type(&[strong(F16), weak(Bool)]), F16);
        assert_eq!(result_type(&[weak(I64), weak(F64)]), F64);
    }

    #[test]
    fn casts_wrap_and_truncate() {
        assert_eq!(cast_scalar(Scalar::Int(300), U8), Scalar::Int(44));
        assert_eq!(cast_scalar(Scalar::Float(-2.7), I16), Scalar::Int(-2));
        assert_eq!(cast_scalar(Scalar::Int(-1), U64), Scalar::UInt(u64::MAX));
        assert_eq!(cast_scalar(Scalar::Float(0.1), F32), Scalar::Float(f64::from(0.1f32)));
        // One rounding from the integer: 2^60 + 2^36 + 1 is above the float32
        // halfway point 2^60 + 2^36, which float64 rounds it to first.
        let x = (1i64 << 60) + (1 << 36) + 1;
        assert_eq!(cast_scalar(Scalar::Int(x), F32), Scalar::Float(((1u64 << 60) + (1 << 37)) as f64));
        assert_eq!(cast_scalar(Scalar::UInt(x as u64), F32), Scalar::Float(((1u64 << 60) + (1 << 37)) as f64));
    }

    #[test]
    fn float16_rounds_once_to_nearest_even() {
        let p = |e: i32| 2f64.powi(e);
        for (x, want) in [
            (1.0 + p(-11), 1.0),                   // a tie: to even
            (1.0 + 3.0 * p(-11), 1.0 + p(-9)),     // a tie: to even (up)
            (1.0 + p(-11) + p(-40), 1.0 + p(-10)), // just above a tie (through float32: 1.0)
            (1.0 + p(-11) - p(-40), 1.0),          // just below
            (p(-25), 0.0),                         // half the smallest subnormal: to even (0)
            (p(-25) + p(-60), p(-24)),             // just above it
            (3.0 * p(-25), 2.0 * p(-24)),          // a subnormal tie: to even
            (65504.0, 65504.0),
            (65519.99, 65504.0),
            (65520.0, f64::INFINITY), // the overflow threshold rounds up
            (1e300, f64::INFINITY),
            (1e-300, 0.0),
            (f64::INFINITY, f64::INFINITY),
        ] {
            assert_eq!(to_f16(x).to_f64(), want, "{x:e}");
            assert_eq!(to_f16(-x).to_f64(), -want, "{:e}", -x);
        }
        assert!(to_f16(f64::NAN).is_nan());
        assert!(to_f16(-1e-300).is_sign_negative());
        assert_eq!(round_float(1.0 + p(-11) + p(-40), F16), 1.0 + p(-10));
        assert_eq!(float_of_int(65519, F16), 65504.0);
        assert_eq!(float_of_uint(u64::MAX, F16), f64::INFINITY);
    }
}
