//! Columns of values and the elementwise kernels over them.
//!
//! A [`Col`] holds one tile's values of one expression node in C order:
//! booleans, signed integers widened to `i64`, unsigned integers widened to
//! `u64`, or floats widened to `f64`. After every operation the values are
//! brought back to the node's dtype (integers wrap to its width, float16 and
//! float32 results are rounded to it), so the results equal NumPy's: for
//! `+ - * /`, `sqrt`, comparisons and casts bit for bit (double rounding from
//! `f64` is exact for these), for the transcendental functions within an
//! ulp of NumPy's own float32/float16 loops.

use std::sync::atomic::{AtomicU64, Ordering};

use super::types::{float_of_int, float_of_uint, kind, round_float, to_f16, wrap_signed, wrap_unsigned, Kind, Scalar};

use crate::dtype::Dtype;
use crate::error::{Error, ExpressionFault, Result};
use crate::warning::{FpException, Warning};

/// One tile's values of one node.
#[derive(Debug, Clone, PartialEq)]
pub enum Col {
    /// `bool`
    B(Vec<bool>),
    /// Signed integers of any width.
    I(Vec<i64>),
    /// Unsigned integers of any width.
    U(Vec<u64>),
    /// Floats of any width.
    F(Vec<f64>),
}

/// Bytes one element of a [`Col`] takes (the planner's unit).
pub const COL_BYTES: u64 = 8;

impl Col {
    /// `n` copies of `value` as `dtype`.
    pub fn splat(value: Scalar, dtype: Dtype, n: usize) -> Col {
        match kind(dtype) {
            Kind::Bool => Col::B(vec![value.to_f64() != 0.0; n]),
            Kind::Float => Col::F(vec![super::types::cast_scalar(value, dtype).to_f64(); n]),
            Kind::Int => match super::types::cast_scalar(value, dtype) {
                Scalar::Int(i) if dtype.is_signed_int() => Col::I(vec![i; n]),
                Scalar::Int(i) => Col::U(vec![i as u64; n]),
                Scalar::UInt(u) => Col::U(vec![u; n]),
                _ => unreachable!("cast_scalar gives integers for integer dtypes"),
            },
        }
    }

    /// An empty column of `dtype`'s kind with room for `n` values.
    pub fn with_capacity(dtype: Dtype, n: usize) -> Col {
        match kind(dtype) {
            Kind::Bool => Col::B(Vec::with_capacity(n)),
            Kind::Float => Col::F(Vec::with_capacity(n)),
            Kind::Int if dtype.is_signed_int() => Col::I(Vec::with_capacity(n)),
            Kind::Int => Col::U(Vec::with_capacity(n)),
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            Col::B(v) => v.len(),
            Col::I(v) => v.len(),
            Col::U(v) => v.len(),
            Col::F(v) => v.len(),
        }
    }

    /// `true` when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Value `i` as `f64`.
    pub fn get_f64(&self, i: usize) -> f64 {
        match self {
            Col::B(v) => f64::from(u8::from(v[i])),
            Col::I(v) => v[i] as f64,
            Col::U(v) => v[i] as f64,
            Col::F(v) => v[i],
        }
    }

    /// Appends the values `src[i]` for `i` in `idx` (same kind).
    ///
    /// # Panics
    /// If the kinds differ or an index is out of range.
    pub fn extend_from(&mut self, src: &Col, idx: impl Iterator<Item = usize>) {
        match (self, src) {
            (Col::B(d), Col::B(s)) => d.extend(idx.map(|i| s[i])),
            (Col::I(d), Col::I(s)) => d.extend(idx.map(|i| s[i])),
            (Col::U(d), Col::U(s)) => d.extend(idx.map(|i| s[i])),
            (Col::F(d), Col::F(s)) => d.extend(idx.map(|i| s[i])),
            _ => panic!("columns of different kinds"),
        }
    }

    /// Encodes the values as little-endian `dtype` elements onto `out`.
    pub fn encode(&self, dtype: Dtype, out: &mut Vec<u8>) {
        macro_rules! put {
            ($v:expr, $t:ty) => {
                for &x in $v {
                    out.extend_from_slice(&(x as $t).to_le_bytes());
                }
            };
        }
        match (self, dtype) {
            (Col::B(v), _) => out.extend(v.iter().map(|&b| u8::from(b))),
            (Col::I(v), Dtype::I8) => put!(v, i8),
            (Col::I(v), Dtype::I16) => put!(v, i16),
            (Col::I(v), Dtype::I32) => put!(v, i32),
            (Col::I(v), _) => put!(v, i64),
            (Col::U(v), Dtype::U8) => put!(v, u8),
            (Col::U(v), Dtype::U16) => put!(v, u16),
            (Col::U(v), Dtype::U32) => put!(v, u32),
            (Col::U(v), _) => put!(v, u64),
            (Col::F(v), Dtype::F16) => {
                for &x in v {
                    out.extend_from_slice(&to_f16(x).to_le_bytes());
                }
            }
            (Col::F(v), Dtype::F32) => put!(v, f32),
            (Col::F(v), _) => put!(v, f64),
        }
    }

    /// Decodes little-endian `dtype` elements `raw[i]` for `i` in `idx`
    /// onto `self` (of `dtype`'s kind).
    pub fn decode_from(&mut self, raw: &[u8], dtype: Dtype, idx: impl Iterator<Item = usize>) {
        macro_rules! get {
            ($v:expr, $t:ty, $n:literal, $conv:expr) => {
                $v.extend(idx.map(|i| {
                    let b: [u8; $n] = raw[i * $n..i * $n + $n].try_into().expect("n bytes");
                    $conv(<$t>::from_le_bytes(b))
                }))
            };
        }
        match (self, dtype) {
            (Col::B(v), _) => v.extend(idx.map(|i| raw[i] != 0)),
            (Col::I(v), Dtype::I8) => v.extend(idx.map(|i| i64::from(raw[i] as i8))),
            (Col::I(v), Dtype::I16) => get!(v, i16, 2, i64::from),
            (Col::I(v), Dtype::I32) => get!(v, i32, 4, i64::from),
            (Col::I(v), _) => get!(v, i64, 8, |x| x),
            (Col::U(v), Dtype::U8) => v.extend(idx.map(|i| u64::from(raw[i]))),
            (Col::U(v), Dtype::U16) => get!(v, u16, 2, u64::from),
            (Col::U(v), Dtype::U32) => get!(v, u32, 4, u64::from),
            (Col::U(v), _) => get!(v, u64, 8, |x| x),
            (Col::F(v), Dtype::F16) => get!(v, u16, 2, |b| half::f16::from_bits(b).to_f64()),
            (Col::F(v), Dtype::F32) => get!(v, f32, 4, f64::from),
            (Col::F(v), _) => get!(v, f64, 8, |x| x),
        }
    }

    /// Decodes every little-endian `dtype` element of `raw` onto `self`.
    pub fn decode_all(&mut self, raw: &[u8], dtype: Dtype) {
        macro_rules! all {
            ($v:expr, $t:ty, $n:literal, $conv:expr) => {
                $v.extend(raw.chunks_exact($n).map(|b| $conv(<$t>::from_le_bytes(b.try_into().expect("n bytes")))))
            };
        }
        match (self, dtype) {
            (Col::F(v), Dtype::F64) => all!(v, f64, 8, |x| x),
            (Col::F(v), Dtype::F32) => all!(v, f32, 4, f64::from),
            (Col::I(v), Dtype::I64) => all!(v, i64, 8, |x| x),
            (Col::I(v), Dtype::I32) => all!(v, i32, 4, i64::from),
            (this, _) => this.decode_from(raw, dtype, 0..raw.len() / dtype.itemsize()),
        }
    }

    /// Values that are NaN or infinite (0 for non-float columns).
    pub fn count_non_finite(&self) -> u64 {
        match self {
            Col::F(v) => v.iter().filter(|x| !x.is_finite()).count() as u64,
            _ => 0,
        }
    }

    /// Whether value `i` is NaN or infinite (never for non-float columns).
    fn non_finite_at(&self, i: usize) -> bool {
        matches!(self, Col::F(v) if !v[i].is_finite())
    }

    /// Whether value `i` is NaN (never for non-float columns).
    fn nan_at(&self, i: usize) -> bool {
        matches!(self, Col::F(v) if v[i].is_nan())
    }
}

/// Values that became NaN or infinite from finite operands during an
/// evaluation, by exception ([`FpException::index`]); shared by threads.
#[derive(Debug, Default)]
pub struct FpCounts([AtomicU64; 3]);

impl FpCounts {
    /// Counts `n` more values that raised `e`.
    pub fn add(&self, e: FpException, n: u64) {
        if n > 0 {
            self.0[e.index()].fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Counts `c[k]` more values for each exception `k`.
    pub fn add_all(&self, c: [u64; 3]) {
        for e in FpException::ALL {
            self.add(e, c[e.index()]);
        }
    }

    /// The counts so far.
    pub fn get(&self) -> [u64; 3] {
        FpException::ALL.map(|e| self.0[e.index()].load(Ordering::Relaxed))
    }

    /// One warning per exception raised so far.
    pub fn warnings(&self) -> Vec<Warning> {
        let c = self.get();
        FpException::ALL
            .into_iter()
            .filter(|e| c[e.index()] > 0)
            .map(|exception| Warning::FloatingPoint { exception, count: c[exception.index()] })
            .collect()
    }
}

/// The floating-point exceptions one elementwise step `op` raised, by
/// [`FpException::index`], as IEEE 754 (and NumPy: "overflow encountered
/// in multiply", "invalid value encountered in subtract") raises them:
/// values of `out` (operands `args`, columns of `out`'s length) that are
/// NaN although no operand is NaN there (invalid: `0 / 0`, `inf - inf`,
/// `0 * inf`, `sin(inf)`), or infinite although every operand is finite (a
/// division by zero when the divisor — or a logarithm's, a reciprocal's, a
/// negative power's operand — is zero; else an overflow). NaN or infinite
/// operands that merely propagate are not counted. For integer results
/// (computed in `loop_dtype`), as NumPy's integer loops report them:
/// divisions and remainders by zero (NumPy gives 0) are divisions by zero,
/// the reciprocal of 0 both a division by zero and an invalid value, and the
/// signed minimum floor-divided by -1 an overflow; a float cast to an
/// integer `out_dtype` is invalid where the conversion is (NaN, infinities,
/// values out of its range).
pub fn fresh_exceptions(op: Op, loop_dtype: Dtype, out_dtype: Dtype, args: &[Col], out: &Col) -> [u64; 3] {
    let mut c = [0u64; 3];
    let zero = |k: usize, i: usize| args.get(k).is_some_and(|a| a.get_f64(i) == 0.0);
    match out {
        Col::F(v) => {
            for i in (0..v.len()).filter(|&i| !v[i].is_finite()) {
                let e = if v[i].is_nan() {
                    if args.iter().any(|c| c.nan_at(i)) {
                        continue;
                    }
                    FpException::Invalid
                } else {
                    if args.iter().any(|c| c.non_finite_at(i)) {
                        continue;
                    }
                    let by_zero = match op {
                        Op::TrueDivide | Op::FloorDivide | Op::Remainder => zero(1, i),
                        Op::Log | Op::Log2 | Op::Log10 | Op::Reciprocal => zero(0, i),
                        Op::Power => zero(0, i) && args.get(1).is_some_and(|a| a.get_f64(i) < 0.0),
                        _ => false,
                    };
                    if by_zero {
                        FpException::DivideByZero
                    } else {
                        FpException::Overflow
                    }
                };
                c[e.index()] += 1;
            }
        }
        Col::I(_) | Col::U(_) if matches!(op, Op::FloorDivide | Op::Remainder) => {
            c[FpException::DivideByZero.index()] = (0..out.len()).filter(|&i| zero(1, i)).count() as u64;
            if let (Op::FloorDivide, [Col::I(a), Col::I(b)]) = (op, args) {
                let min = signed_min(loop_dtype);
                c[FpException::Overflow.index()] =
                    a.iter().zip(b).filter(|&(&x, &y)| x == min && y == -1).count() as u64;
            }
        }
        Col::I(_) | Col::U(_) if op == Op::Cast => {
            if let [Col::F(v)] = args {
                c[FpException::Invalid.index()] = v.iter().filter(|&&x| float_to_int(x, out_dtype).1).count() as u64;
            }
        }
        Col::I(_) | Col::U(_) if op == Op::Reciprocal => {
            let zeros = (0..out.len()).filter(|&i| zero(0, i)).count() as u64;
            c[FpException::DivideByZero.index()] = zeros;
            c[FpException::Invalid.index()] = zeros;
        }
        _ => {}
    }
    c
}

/// A float converted to the integer dtype `dtype` as NumPy's loops do on
/// x86-64 (C's conversions, compiled to `cvttsd2si`): truncated towards
/// zero into an int32 (int8, int16, int32, uint8, uint16) or an int64
/// (int64), whose minimum stands for NaN, infinities and values beyond it;
/// unsigned 32- and 64-bit values from `[2^(b-1), 2^b)` through the signed
/// conversion of `x − 2^(b-1)`; narrower dtypes then keep the low bits (see
/// [`settle`]). Returns the bits (two's complement for negative values) and
/// whether the conversion was invalid (NumPy: "invalid value encountered in
/// cast").
fn float_to_int(x: f64, dtype: Dtype) -> (u64, bool) {
    const P31: f64 = 2_147_483_648.0;
    const P63: f64 = 9_223_372_036_854_775_808.0;
    let cvt32 = |x: f64| if x > -P31 - 1.0 && x < P31 { (x as i32, false) } else { (i32::MIN, true) };
    let cvt64 = |x: f64| if (-P63..P63).contains(&x) { (x as i64, false) } else { (i64::MIN, true) };
    match dtype {
        Dtype::I64 => {
            let (v, bad) = cvt64(x);
            (v as u64, bad)
        }
        Dtype::U64 if x >= P63 => {
            let (v, bad) = cvt64(x - P63);
            (v as u64 ^ (1 << 63), bad)
        }
        Dtype::U64 => {
            let (v, bad) = cvt64(x);
            (v as u64, bad)
        }
        Dtype::U32 if x >= P31 => {
            let (v, bad) = cvt32(x - P31);
            (u64::from(v as u32 ^ (1 << 31)), bad)
        }
        Dtype::U32 => {
            let (v, bad) = cvt32(x);
            (u64::from(v as u32), bad)
        }
        _ => {
            let (v, bad) = cvt32(x);
            (i64::from(v) as u64, bad)
        }
    }
}

/// The smallest value of the signed integer dtype `dtype`, as i64.
fn signed_min(dtype: Dtype) -> i64 {
    i64::MIN >> (64 - 8 * dtype.itemsize())
}

/// An elementwise operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Op {
    Add,
    Subtract,
    Multiply,
    TrueDivide,
    FloorDivide,
    Remainder,
    Power,
    Minimum,
    Maximum,
    Equal,
    NotEqual,
    Less,
    LessEqual,
    Greater,
    GreaterEqual,
    LogicalAnd,
    LogicalOr,
    LogicalXor,
    BitwiseAnd,
    BitwiseOr,
    BitwiseXor,
    LeftShift,
    RightShift,
    Negative,
    Positive,
    Absolute,
    Sqrt,
    Exp,
    Log,
    Log2,
    Log10,
    Sin,
    Cos,
    Tan,
    Square,
    Reciprocal,
    LogicalNot,
    IsNan,
    IsFinite,
    IsInf,
    Sign,
    Floor,
    Ceil,
    Trunc,
    Rint,
    Invert,
    /// Conversion to the node's dtype (`astype`).
    Cast,
    /// `where(cond, x, y)`.
    Where,
}

impl Op {
    /// NumPy's name (`"add"`, `"sqrt"`, ...).
    pub fn name(self) -> &'static str {
        use Op::*;
        match self {
            Add => "add",
            Subtract => "subtract",
            Multiply => "multiply",
            TrueDivide => "true_divide",
            FloorDivide => "floor_divide",
            Remainder => "remainder",
            Power => "power",
            Minimum => "minimum",
            Maximum => "maximum",
            Equal => "equal",
            NotEqual => "not_equal",
            Less => "less",
            LessEqual => "less_equal",
            Greater => "greater",
            GreaterEqual => "greater_equal",
            LogicalAnd => "logical_and",
            LogicalOr => "logical_or",
            LogicalXor => "logical_xor",
            BitwiseAnd => "bitwise_and",
            BitwiseOr => "bitwise_or",
            BitwiseXor => "bitwise_xor",
            LeftShift => "left_shift",
            RightShift => "right_shift",
            Negative => "negative",
            Positive => "positive",
            Absolute => "absolute",
            Sqrt => "sqrt",
            Exp => "exp",
            Log => "log",
            Log2 => "log2",
            Log10 => "log10",
            Sin => "sin",
            Cos => "cos",
            Tan => "tan",
            Square => "square",
            Reciprocal => "reciprocal",
            LogicalNot => "logical_not",
            IsNan => "isnan",
            IsFinite => "isfinite",
            IsInf => "isinf",
            Sign => "sign",
            Floor => "floor",
            Ceil => "ceil",
            Trunc => "trunc",
            Rint => "rint",
            Invert => "invert",
            Cast => "astype",
            Where => "where",
        }
    }

    /// The operation NumPy calls `name`.
    pub fn from_name(name: &str) -> Option<Op> {
        use Op::*;
        const ALL: [Op; 48] = [
            Add,
            Subtract,
            Multiply,
            TrueDivide,
            FloorDivide,
            Remainder,
            Power,
            Minimum,
            Maximum,
            Equal,
            NotEqual,
            Less,
            LessEqual,
            Greater,
            GreaterEqual,
            LogicalAnd,
            LogicalOr,
            LogicalXor,
            BitwiseAnd,
            BitwiseOr,
            BitwiseXor,
            LeftShift,
            RightShift,
            Negative,
            Positive,
            Absolute,
            Sqrt,
            Exp,
            Log,
            Log2,
            Log10,
            Sin,
            Cos,
            Tan,
            Square,
            Reciprocal,
            LogicalNot,
            IsNan,
            IsFinite,
            IsInf,
            Sign,
            Floor,
            Ceil,
            Trunc,
            Rint,
            Invert,
            Cast,
            Where,
        ];
        ALL.into_iter().find(|o| o.name() == name)
    }

    /// Number of operands.
    pub fn arity(self) -> usize {
        use Op::*;
        match self {
            Where => 3,
            Add | Subtract | Multiply | TrueDivide | FloorDivide | Remainder | Power | Minimum | Maximum | Equal
            | NotEqual | Less | LessEqual | Greater | GreaterEqual | LogicalAnd | LogicalOr | LogicalXor
            | BitwiseAnd | BitwiseOr | BitwiseXor | LeftShift | RightShift => 2,
            _ => 1,
        }
    }

    /// For a ufunc whose operands promote to `common`: the dtype it computes
    /// in (its operands are cast to it) and the dtype of its result, as
    /// NumPy's loops resolve them.
    ///
    /// # Errors
    /// [`Error::Expression`] (a type fault) when NumPy has no loop.
    pub fn resolve(self, common: Dtype) -> Result<(Dtype, Dtype)> {
        use Op::*;
        let k = kind(common);
        let float = super::types::float_for(common);
        let small_int = if k == Kind::Bool { Dtype::I8 } else { common };
        let fail = || Err(super::types::no_loop(self.name(), &[common]));
        Ok(match self {
            Add | Multiply | Minimum | Maximum | Positive | Absolute | Floor | Ceil | Trunc => (common, common),
            Subtract | Negative if k == Kind::Bool => {
                return Err(Error::Expression {
                    kind: ExpressionFault::Type,
                    message: if self == Negative {
                        "The numpy boolean negative, the `-` operator, is not supported, use the `~` operator or the logical_not function instead.".into()
                    } else {
                        "numpy boolean subtract, the `-` operator, is not supported, use the bitwise_xor, the `^` operator, or the logical_xor function instead.".into()
                    },
                })
            }
            Subtract | Negative => (common, common),
            TrueDivide => {
                (if k == Kind::Float { common } else { Dtype::F64 }, if k == Kind::Float { common } else { Dtype::F64 })
            }
            FloorDivide | Remainder | Power | Square => (small_int, small_int),
            Reciprocal | Sign if k == Kind::Bool => return fail(),
            Reciprocal | Sign => (common, common),
            Equal | NotEqual | Less | LessEqual | Greater | GreaterEqual => (common, Dtype::Bool),
            LogicalAnd | LogicalOr | LogicalXor | LogicalNot => (Dtype::Bool, Dtype::Bool),
            BitwiseAnd | BitwiseOr | BitwiseXor | Invert | LeftShift | RightShift if k == Kind::Float => return fail(),
            LeftShift | RightShift => (small_int, small_int),
            BitwiseAnd | BitwiseOr | BitwiseXor | Invert => (common, common),
            Sqrt | Exp | Log | Log2 | Log10 | Sin | Cos | Tan | Rint => (float, float),
            IsNan | IsFinite | IsInf => (common, Dtype::Bool),
            Cast | Where => (common, common),
        })
    }
}

/// NumPy's float `divmod` (`npy_divmod`): floor quotient and remainder
/// with the divisor's sign.
macro_rules! divmod {
    ($name:ident, $t:ty) => {
        fn $name(a: $t, b: $t) -> ($t, $t) {
            if b == 0.0 {
                // fmod's NaN (NumPy's, with its sign bit), not a made one.
                return (a / b, a % b);
            }
            let mut m = a % b;
            let mut div = (a - m) / b;
            if m != 0.0 {
                if (b < 0.0) != (m < 0.0) {
                    m += b;
                    div -= 1.0;
                }
            } else {
                m = (0.0 as $t).copysign(b);
            }
            let q = if div != 0.0 {
                let f = div.floor();
                if div - f > 0.5 {
                    f + 1.0
                } else {
                    f
                }
            } else {
                (0.0 as $t).copysign(a / b)
            };
            (q, m)
        }
    };
}

divmod!(divmod_f, f64);
// NumPy's float32 and float16 loops divide in float32.
divmod!(divmod_f32, f32);

fn floor_div_i(a: i64, b: i64) -> i64 {
    if b == 0 {
        return 0;
    }
    let q = a.wrapping_div(b);
    if (a.wrapping_rem(b) != 0) && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

fn rem_i(a: i64, b: i64) -> i64 {
    if b == 0 {
        return 0;
    }
    let r = a.wrapping_rem(b);
    if r != 0 && ((r < 0) != (b < 0)) {
        r + b
    } else {
        r
    }
}

/// `x^e` modulo 2^64 for any exponent (square and multiply): integer
/// powers, and the product of a value repeated `e` times.
pub(super) fn pow_wrapping(mut x: u64, mut e: u128) -> u64 {
    let mut acc = 1u64;
    while e > 0 {
        if e & 1 == 1 {
            acc = acc.wrapping_mul(x);
        }
        x = x.wrapping_mul(x);
        e >>= 1;
    }
    acc
}

fn bin<T: Copy, U>(a: &[T], b: &[T], f: impl Fn(T, T) -> U) -> Vec<U> {
    a.iter().zip(b).map(|(&x, &y)| f(x, y)).collect()
}

fn un<T: Copy, U>(a: &[T], f: impl Fn(T) -> U) -> Vec<U> {
    a.iter().map(|&x| f(x)).collect()
}

/// Brings values back to `dtype` (rounding floats, wrapping integers).
pub fn settle(col: Col, dtype: Dtype) -> Col {
    match col {
        Col::F(mut v) if matches!(dtype, Dtype::F32 | Dtype::F16) => {
            for x in &mut v {
                *x = round_float(*x, dtype);
            }
            Col::F(v)
        }
        Col::I(mut v) if dtype != Dtype::I64 => {
            for x in &mut v {
                *x = wrap_signed(*x, dtype);
            }
            Col::I(v)
        }
        Col::U(mut v) if dtype != Dtype::U64 => {
            for x in &mut v {
                *x = wrap_unsigned(*x, dtype);
            }
            Col::U(v)
        }
        other => other,
    }
}

/// Converts `col` to `dtype` (NumPy's unsafe cast: integers wrap into a
/// narrower integer dtype; floats truncate towards zero into integers as
/// NumPy's x86-64 loops convert them, NaN, infinities and values out of
/// range included: see `float_to_int`).
pub fn cast(col: Col, dtype: Dtype) -> Col {
    let out = match (col, kind(dtype)) {
        (c @ Col::B(_), Kind::Bool) => c,
        (Col::I(v), Kind::Bool) => Col::B(un(&v, |x| x != 0)),
        (Col::U(v), Kind::Bool) => Col::B(un(&v, |x| x != 0)),
        (Col::F(v), Kind::Bool) => Col::B(un(&v, |x| x != 0.0)),
        (Col::B(v), Kind::Float) => Col::F(un(&v, |x| f64::from(u8::from(x)))),
        (Col::I(v), Kind::Float) => Col::F(un(&v, |x| float_of_int(x, dtype))),
        (Col::U(v), Kind::Float) => Col::F(un(&v, |x| float_of_uint(x, dtype))),
        (c @ Col::F(_), Kind::Float) => c,
        (c, Kind::Int) if dtype.is_signed_int() => match c {
            Col::B(v) => Col::I(un(&v, i64::from)),
            c @ Col::I(_) => c,
            Col::U(v) => Col::I(un(&v, |x| x as i64)),
            Col::F(v) => Col::I(un(&v, |x| float_to_int(x, dtype).0 as i64)),
        },
        (c, _) => match c {
            Col::B(v) => Col::U(un(&v, u64::from)),
            Col::I(v) => Col::U(un(&v, |x| x as u64)),
            c @ Col::U(_) => c,
            Col::F(v) => Col::U(un(&v, |x| float_to_int(x, dtype).0)),
        },
    };
    settle(out, dtype)
}

/// Applies `op` (computing in `loop_dtype`, every operand already of that
/// dtype, except `where`'s boolean condition) and settles the result to
/// `out_dtype`.
///
/// # Errors
/// [`Error::Expression`] for an integer raised to a negative power.
///
/// # Panics
/// If the operands' kinds do not match `loop_dtype` (a bug in the caller).
pub fn apply(op: Op, loop_dtype: Dtype, out_dtype: Dtype, args: &[Col]) -> Result<Col> {
    use Op::*;
    if op == Cast {
        // NumPy's float16 loops convert through C's `(npy_uint)` of a float,
        // which x86-64 compiles to a 64-bit conversion: NaN and infinities
        // (the int64 minimum) keep its low 32 bits, 0.
        if let (Dtype::F16, Dtype::U32, Col::F(v)) = (loop_dtype, out_dtype, &args[0]) {
            return Ok(Col::U(un(v, |x| u64::from(float_to_int(x, Dtype::I64).0 as u32))));
        }
        return Ok(cast(args[0].clone(), out_dtype));
    }
    if op == Where {
        let Col::B(c) = &args[0] else { panic!("where's condition is boolean") };
        let pick = |i: usize| if c[i] { 1 } else { 2 };
        let mut out = Col::with_capacity(out_dtype, c.len());
        for i in 0..c.len() {
            out.extend_from(&args[pick(i)], std::iter::once(i));
        }
        return Ok(out);
    }
    let bits = 8 * loop_dtype.itemsize() as u64;
    let col = match args {
        [Col::F(a), Col::F(b)] => match op {
            Add => Col::F(bin(a, b, |x, y| x + y)),
            Subtract => Col::F(bin(a, b, |x, y| x - y)),
            Multiply => Col::F(bin(a, b, |x, y| x * y)),
            TrueDivide => Col::F(bin(a, b, |x, y| x / y)),
            FloorDivide | Remainder => {
                let (floor, single) = (op == FloorDivide, matches!(loop_dtype, Dtype::F32 | Dtype::F16));
                Col::F(bin(a, b, |x, y| {
                    let (q, m) = if single {
                        let (q, m) = divmod_f32(x as f32, y as f32);
                        (f64::from(q), f64::from(m))
                    } else {
                        divmod_f(x, y)
                    };
                    // The remainder by 0 is NaN (`divmod`'s).
                    if floor {
                        q
                    } else {
                        m
                    }
                }))
            }
            Power => Col::F(bin(a, b, f64::powf)),
            // NumPy's loops: NaN wins (the first operand's when both are,
            // its sign and payload kept); of equal values (0.0 and -0.0)
            // the float32 and float64 loops give the second operand, the
            // float16 loops the first.
            Minimum | Maximum => {
                let first_on_ties = loop_dtype == Dtype::F16;
                let min = op == Minimum;
                Col::F(bin(a, b, |x, y| {
                    if x.is_nan() {
                        x
                    } else if y.is_nan() {
                        y
                    } else if x == y {
                        if first_on_ties {
                            x
                        } else {
                            y
                        }
                    } else if (x < y) == min {
                        x
                    } else {
                        y
                    }
                }))
            }
            _ => compare(op, a, b),
        },
        [Col::I(a), Col::I(b)] => match op {
            Add => Col::I(bin(a, b, i64::wrapping_add)),
            Subtract => Col::I(bin(a, b, i64::wrapping_sub)),
            Multiply => Col::I(bin(a, b, i64::wrapping_mul)),
            FloorDivide => Col::I(bin(a, b, floor_div_i)),
            Remainder => Col::I(bin(a, b, rem_i)),
            Power => {
                if b.iter().any(|&e| e < 0) {
                    return Err(Error::Expression {
                        kind: ExpressionFault::Value,
                        message: "Integers to negative integer powers are not allowed.".into(),
                    });
                }
                Col::I(bin(a, b, |x, e| pow_wrapping(x as u64, u128::from(e as u64)) as i64))
            }
            Minimum => Col::I(bin(a, b, i64::min)),
            Maximum => Col::I(bin(a, b, i64::max)),
            BitwiseAnd => Col::I(bin(a, b, |x, y| x & y)),
            BitwiseOr => Col::I(bin(a, b, |x, y| x | y)),
            BitwiseXor => Col::I(bin(a, b, |x, y| x ^ y)),
            // NumPy's `npy_lshift`/`npy_rshift`: a shift by the width or
            // more (a negative one too, as `size_t`) gives 0, or -1 for a
            // negative value shifted right.
            LeftShift => Col::I(bin(a, b, |x, y| if (y as u64) < bits { x.wrapping_shl(y as u32) } else { 0 })),
            RightShift => Col::I(bin(a, b, |x, y| if (y as u64) < bits { x >> y } else { x >> 63 })),
            _ => compare(op, a, b),
        },
        [Col::U(a), Col::U(b)] => match op {
            Add => Col::U(bin(a, b, u64::wrapping_add)),
            Subtract => Col::U(bin(a, b, u64::wrapping_sub)),
            Multiply => Col::U(bin(a, b, u64::wrapping_mul)),
            FloorDivide => Col::U(bin(a, b, |x, y| x.checked_div(y).unwrap_or(0))),
            Remainder => Col::U(bin(a, b, |x, y| x.checked_rem(y).unwrap_or(0))),
            Power => Col::U(bin(a, b, |x, e| pow_wrapping(x, u128::from(e)))),
            Minimum => Col::U(bin(a, b, u64::min)),
            Maximum => Col::U(bin(a, b, u64::max)),
            BitwiseAnd => Col::U(bin(a, b, |x, y| x & y)),
            BitwiseOr => Col::U(bin(a, b, |x, y| x | y)),
            BitwiseXor => Col::U(bin(a, b, |x, y| x ^ y)),
            LeftShift => Col::U(bin(a, b, |x, y| if y < bits { x.wrapping_shl(y as u32) } else { 0 })),
            RightShift => Col::U(bin(a, b, |x, y| if y < bits { x >> y } else { 0 })),
            _ => compare(op, a, b),
        },
        [Col::B(a), Col::B(b)] => match op {
            Add | LogicalOr | BitwiseOr | Maximum => Col::B(bin(a, b, |x, y| x | y)),
            Multiply | LogicalAnd | BitwiseAnd | Minimum => Col::B(bin(a, b, |x, y| x & y)),
            LogicalXor | BitwiseXor => Col::B(bin(a, b, |x, y| x ^ y)),
            _ => compare(op, a, b),
        },
        [Col::F(a)] => Col::F(match op {
            Negative => un(a, |x| -x),
            Positive => a.clone(),
            Absolute => un(a, f64::abs),
            Sqrt => un(a, f64::sqrt),
            Exp => un(a, f64::exp),
            Log => un(a, f64::ln),
            Log2 => un(a, f64::log2),
            Log10 => un(a, f64::log10),
            Sin => un(a, f64::sin),
            Cos => un(a, f64::cos),
            Tan => un(a, f64::tan),
            Square => un(a, |x| x * x),
            Reciprocal => un(a, |x| 1.0 / x),
            Sign => un(a, |x| {
                if x.is_nan() {
                    x
                } else if x > 0.0 {
                    1.0
                } else if x < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            }),
            Floor => un(a, f64::floor),
            Ceil => un(a, f64::ceil),
            Trunc => un(a, f64::trunc),
            Rint => un(a, f64::round_ties_even),
            IsNan => return Ok(Col::B(un(a, f64::is_nan))),
            IsFinite => return Ok(Col::B(un(a, f64::is_finite))),
            IsInf => return Ok(Col::B(un(a, f64::is_infinite))),
            _ => panic!("{op:?} on floats"),
        }),
        [Col::I(a)] => match op {
            Negative => Col::I(un(a, i64::wrapping_neg)),
            Absolute => Col::I(un(a, i64::wrapping_abs)),
            Square => Col::I(un(a, |x| x.wrapping_mul(x))),
            // NumPy's loop computes 1.0 / x and converts: 1 / 0 gives the
            // int32 or int64 minimum (x86's conversion of inf), 0 in the
            // narrower dtypes (that minimum's low bits).
            Reciprocal => {
                let of_zero = if matches!(loop_dtype, Dtype::I32 | Dtype::I64) { signed_min(loop_dtype) } else { 0 };
                Col::I(un(a, |x| match x {
                    1 | -1 => x,
                    0 => of_zero,
                    _ => 0,
                }))
            }
            Sign => Col::I(un(a, i64::signum)),
            Invert => Col::I(un(a, |x| !x)),
            Positive | Floor | Ceil | Trunc => Col::I(a.clone()),
            IsNan | IsInf => Col::B(vec![false; a.len()]),
            IsFinite => Col::B(vec![true; a.len()]),
            _ => panic!("{op:?} on signed integers"),
        },
        [Col::U(a)] => match op {
            Negative => Col::U(un(a, u64::wrapping_neg)),
            Square => Col::U(un(a, |x| x.wrapping_mul(x))),
            Reciprocal => Col::U(un(a, |x| u64::from(x == 1))),
            Sign => Col::U(un(a, |x| u64::from(x > 0))),
            Invert => Col::U(un(a, |x| !x)),
            Positive | Absolute | Floor | Ceil | Trunc => Col::U(a.clone()),
            IsNan | IsInf => Col::B(vec![false; a.len()]),
            IsFinite => Col::B(vec![true; a.len()]),
            _ => panic!("{op:?} on unsigned integers"),
        },
        [Col::B(a)] => Col::B(match op {
            LogicalNot | Invert => un(a, |x| !x),
            Positive | Absolute | Floor | Ceil | Trunc => a.clone(),
            IsNan | IsInf => vec![false; a.len()],
            IsFinite => vec![true; a.len()],
            _ => panic!("{op:?} on booleans"),
        }),
        _ => panic!("{op:?} on operands of mixed kinds (loop dtype {loop_dtype:?})"),
    };
    Ok(settle(col, out_dtype))
}

fn compare<T: PartialOrd + Copy>(op: Op, a: &[T], b: &[T]) -> Col {
    Col::B(match op {
        Op::Equal => bin(a, b, |x, y| x == y),
        Op::NotEqual => bin(a, b, |x, y| x != y),
        Op::Less => bin(a, b, |x, y| x < y),
        Op::LessEqual => bin(a, b, |x, y| x <= y),
        Op::Greater => bin(a, b, |x, y| x > y),
        Op::GreaterEqual => bin(a, b, |x, y| x >= y),
        _ => panic!("{op:?} is not a comparison"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float32_floor_division_divides_in_float32() {
        // NumPy's float32 loop: fmodf, then (a − mod) / b in float32.
        let (a, b) = (f64::from(133.91493f32), f64::from(1e-5f32));
        let got = apply(Op::FloorDivide, Dtype::F32, Dtype::F32, &[Col::F(vec![a]), Col::F(vec![b])]).unwrap();
        assert_eq!(got, Col::F(vec![13391494.0]));
        let got = apply(Op::FloorDivide, Dtype::F64, Dtype::F64, &[Col::F(vec![a]), Col::F(vec![b])]).unwrap();
        assert_eq!(got, Col::F(vec![(a / b).floor()]));
    }

    #[test]
    fn float_divmod_follows_numpy() {
        // numpy: np.floor_divide(-7.0, 2.0) == -4.0, np.remainder(-7.0, 2.0) == 1.0
        assert_eq!(divmod_f(-7.0, 2.0), (-4.0, 1.0));
        assert_eq!(divmod_f(7.0, -2.0), (-4.0, -1.0));
        assert_eq!(divmod_f(0.0, -2.0).1.to_bits(), (-0.0f64).to_bits());
        assert!(divmod_f(1.0, 0.0).0.is_infinite());
        assert_eq!((floor_div_i(-7, 2), rem_i(-7, 2)), (-4, 1));
        assert_eq!((floor_div_i(7, 0), rem_i(7, 0)), (0, 0));
    }

    #[test]
    fn results_settle_to_the_dtype() {
        let a = Col::I(vec![100, -100]);
        let got = apply(Op::Add, Dtype::I8, Dtype::I8, &[a.clone(), a]).unwrap();
        assert_eq!(got, Col::I(vec![-56, 56]));
        let x = Col::F(vec![0.1f32 as f64]);
        let got = apply(Op::Multiply, Dtype::F32, Dtype::F32, &[x.clone(), x]).unwrap();
        assert_eq!(got, Col::F(vec![f64::from(0.1f32 * 0.1f32)]));
        let got = cast(Col::F(vec![-1.5, 300.7]), Dtype::U8);
        assert_eq!(got, Col::U(vec![255, 44]));
        let x = (1i64 << 60) + (1 << 36) + 1;
        assert_eq!(cast(Col::I(vec![x]), Dtype::F32), Col::F(vec![((1u64 << 60) + (1 << 37)) as f64]));
        assert_eq!(Col::splat(Scalar::Int(x), Dtype::F32, 1), Col::F(vec![((1u64 << 60) + (1 << 37)) as f64]));
    }

    #[test]
    fn only_values_that_turn_non_finite_from_finite_operands_are_fresh() {
        let over = |n| [n, 0, 0];
        // numpy: float32([1e300, inf, nan, 1]) cast: only the first is an overflow
        let a = Col::F(vec![1e300, f64::INFINITY, f64::NAN, 1.0]);
        let out = cast(a.clone(), Dtype::F32);
        assert_eq!(fresh_exceptions(Op::Cast, Dtype::F64, Dtype::F32, std::slice::from_ref(&a), &out), over(1));
        // 1e5 (a Python float) cast to float16: inf from a finite value
        let c = Col::splat(Scalar::Float(1e5), Dtype::F64, 3);
        assert_eq!(
            fresh_exceptions(Op::Cast, Dtype::F64, Dtype::F16, std::slice::from_ref(&c), &cast(c.clone(), Dtype::F16)),
            over(3)
        );
        // integers to float16 overflow too: numpy array([100000]).astype(float16) -> inf
        let i = Col::I(vec![100_000, 7]);
        assert_eq!(
            fresh_exceptions(Op::Cast, Dtype::F64, Dtype::F16, std::slice::from_ref(&i), &cast(i.clone(), Dtype::F16)),
            over(1)
        );
        // 0 / 0 and inf / inf (invalid: NaN from operands that are not),
        // 1 / 0 (divide by zero), 1e300 / 1e-300 (overflow); inf / 1 and
        // NaN / 1 propagate an operand.
        let inf = f64::INFINITY;
        let (x, y) = (Col::F(vec![0.0, 1.0, inf, 1e300, inf, f64::NAN]), Col::F(vec![0.0, 0.0, inf, 1e-300, 1.0, 1.0]));
        let q = apply(Op::TrueDivide, Dtype::F64, Dtype::F64, &[x.clone(), y.clone()]).unwrap();
        assert_eq!(fresh_exceptions(Op::TrueDivide, Dtype::F64, Dtype::F64, &[x, y], &q), [1, 1, 2]);
        assert_eq!(fresh_exceptions(Op::Add, Dtype::I64, Dtype::I64, &[Col::I(vec![1])], &Col::I(vec![1])), [0; 3]);
        // integer division and remainder by zero (NumPy gives 0)
        let (n, d) = (Col::I(vec![7, 8, 9]), Col::I(vec![0, 3, 0]));
        for op in [Op::FloorDivide, Op::Remainder] {
            let r = apply(op, Dtype::I64, Dtype::I64, &[n.clone(), d.clone()]).unwrap();
            assert_eq!(fresh_exceptions(op, Dtype::I64, Dtype::I64, &[n.clone(), d.clone()], &r), [0, 2, 0], "{op:?}");
        }
        // numpy: int8 -128 // -1 overflows (to -128), -128 % -1 does not;
        // reciprocal(0) divides by zero and is invalid.
        let (n, d) = (Col::I(vec![-128, -128, 5]), Col::I(vec![-1, 1, -1]));
        let q = apply(Op::FloorDivide, Dtype::I8, Dtype::I8, &[n.clone(), d.clone()]).unwrap();
        assert_eq!(fresh_exceptions(Op::FloorDivide, Dtype::I8, Dtype::I8, &[n.clone(), d.clone()], &q), [1, 0, 0]);
        let r = apply(Op::Remainder, Dtype::I8, Dtype::I8, &[n.clone(), d.clone()]).unwrap();
        assert_eq!(fresh_exceptions(Op::Remainder, Dtype::I8, Dtype::I8, &[n, d], &r), [0; 3]);
        let z = Col::I(vec![0, 1, 2]);
        let r = apply(Op::Reciprocal, Dtype::I32, Dtype::I32, std::slice::from_ref(&z)).unwrap();
        assert_eq!(r, Col::I(vec![i64::from(i32::MIN), 1, 0]));
        assert_eq!(fresh_exceptions(Op::Reciprocal, Dtype::I32, Dtype::I32, &[z], &r), [0, 1, 1]);
    }
}
