//! Conversion of raw rows (file bytes or in-memory elements) to the compute
//! type, shifted by a per-column origin, in parallel over fixed chunks of
//! rows, noting the first integer the compute type cannot hold exactly.

use half::f16;
use multiversion::multiversion;
use rayon::prelude::*;

use crate::dtype::Real;
use crate::io::dtype::{decode, Dtype, Endian};

/// What a conversion checks for inexact integers: values whose magnitude
/// exceeds `bound` (2^24 for `float32`, 2^53 for `float64`) and that the
/// compute type does not hold exactly; `exact(k)` is raw element `k` as
/// stored.
#[derive(Clone, Copy)]
pub(super) struct Check<'f> {
    pub(super) bound: u64,
    pub(super) exact: &'f (dyn Fn(usize) -> i128 + Sync),
}

impl Check<'_> {
    /// The value of raw element `k`, when the compute type rounds it.
    fn beyond(&self, k: usize) -> Option<i128> {
        let v = (self.exact)(k);
        let held = if self.bound == 1 << 24 { (v as f32) as i128 == v } else { (v as f64) as i128 == v };
        (v.unsigned_abs() > u128::from(self.bound) && !held).then_some(v)
    }
}

/// Rows per parallel conversion chunk.
pub(super) const CONVERT_CHUNK_ROWS: usize = 4096;

/// The first element of a chunk beyond `check`'s bound, as `(index in the
/// block's row-major output, value)`: elements `index(i, j)` of the raw data,
/// for the chunk's rows `first_row..first_row + rows` in row-major order.
fn first_beyond(
    check: &Check<'_>,
    first_row: usize,
    rows: usize,
    d: usize,
    index: impl Fn(usize, usize) -> usize,
) -> Option<(usize, i128)> {
    (first_row..first_row + rows)
        .flat_map(|i| (0..d).map(move |j| (i, j)))
        .find_map(|(i, j)| check.beyond(index(i, j)).map(|v| (i * d + j, v)))
}

/// Writes `out[i * d + j] = T::from_f64(get(i * row_step + j * col_step) - shift[j])`
/// for `rows` rows, in parallel over fixed chunks of rows; with `check`,
/// returns the first element beyond its bound (see [`first_beyond`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn convert_rows<T: Real>(
    rows: usize,
    d: usize,
    row_step: usize,
    col_step: usize,
    shift: &[f64],
    out: &mut [T],
    get: impl Fn(usize) -> f64 + Sync,
    check: Option<Check<'_>>,
) -> Option<(usize, i128)> {
    let one = |(c, o): (usize, &mut [T])| {
        let first_row = c * CONVERT_CHUNK_ROWS;
        let Some(check) = check else {
            convert_chunk::<T, false>(first_row, d, row_step, col_step, shift, o, &get, 0.0);
            return None;
        };
        let limit = check.bound as f64;
        if !convert_chunk::<T, true>(first_row, d, row_step, col_step, shift, o, &get, limit) {
            return None;
        }
        first_beyond(&check, first_row, o.len() / d, d, |i, j| i * row_step + j * col_step)
    };
    // One chunk (a row gathered alone, say): no threads to hand it to.
    if rows <= CONVERT_CHUNK_ROWS {
        return one((0, &mut out[..rows * d]));
    }
    out[..rows * d].par_chunks_mut(CONVERT_CHUNK_ROWS * d).enumerate().filter_map(one).min_by_key(|&(k, _)| k)
}

/// Converts one chunk; with `CHECK`, returns whether any `|x|` reaches `limit`.
#[allow(clippy::too_many_arguments)]
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
fn convert_chunk<T: Real, const CHECK: bool>(
    first_row: usize,
    d: usize,
    row_step: usize,
    col_step: usize,
    shift: &[f64],
    out: &mut [T],
    get: &(impl Fn(usize) -> f64 + Sync),
    limit: f64,
) -> bool {
    let mut reached = false;
    for (r, row) in out.chunks_exact_mut(d).enumerate() {
        let base = (first_row + r) * row_step;
        if col_step == 1 {
            for (j, (v, s)) in row.iter_mut().zip(shift).enumerate() {
                let x = get(base + j);
                if CHECK {
                    reached |= x.abs() >= limit;
                }
                *v = T::from_f64(x - s);
            }
        } else {
            for (j, (v, s)) in row.iter_mut().zip(shift).enumerate() {
                let x = get(base + j * col_step);
                if CHECK {
                    reached |= x.abs() >= limit;
                }
                *v = T::from_f64(x - s);
            }
        }
    }
    reached
}

/// Converts C-order raw rows (`N` bytes per element, decoded by `dec`) into
/// `out`, in parallel over fixed chunks of rows; with `check`, returns the
/// first element beyond its bound (see [`first_beyond`]).
fn convert_c<T: Real, const N: usize>(
    raw: &[u8],
    d: usize,
    shift: &[f64],
    out: &mut [T],
    dec: impl Fn([u8; N]) -> f64 + Sync,
    check: Option<Check<'_>>,
) -> Option<(usize, i128)> {
    let rows = out.len() / d;
    let one = |(c, (o, r)): (usize, (&mut [T], &[u8]))| {
        let Some(check) = check else {
            convert_c_chunk::<T, N, false>(r, d, shift, o, &dec, 0.0);
            return None;
        };
        if !convert_c_chunk::<T, N, true>(r, d, shift, o, &dec, check.bound as f64) {
            return None;
        }
        first_beyond(&check, c * CONVERT_CHUNK_ROWS, o.len() / d, d, |i, j| i * d + j)
    };
    // One chunk (a row gathered alone, say): no threads to hand it to.
    if rows <= CONVERT_CHUNK_ROWS {
        return one((0, (out, &raw[..rows * d * N])));
    }
    out.par_chunks_mut(CONVERT_CHUNK_ROWS * d)
        .zip(raw[..rows * d * N].par_chunks(CONVERT_CHUNK_ROWS * d * N))
        .enumerate()
        .filter_map(one)
        .min_by_key(|&(k, _)| k)
}

/// Converts one chunk; with `CHECK`, returns whether any `|x|` reaches `limit`.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
fn convert_c_chunk<T: Real, const N: usize, const CHECK: bool>(
    raw: &[u8],
    d: usize,
    shift: &[f64],
    out: &mut [T],
    dec: &(impl Fn([u8; N]) -> f64 + Sync),
    limit: f64,
) -> bool {
    let mut reached = false;
    for (orow, rrow) in out.chunks_exact_mut(d).zip(raw.chunks_exact(d * N)) {
        for ((o, b), s) in orow.iter_mut().zip(rrow.chunks_exact(N)).zip(shift) {
            let x = dec(b.try_into().expect("N bytes"));
            if CHECK {
                reached |= x.abs() >= limit;
            }
            *o = T::from_f64(x - s);
        }
    }
    reached
}

/// Converts `rows * d` raw elements, where element `(i, j)` sits at index
/// `i * row_step + j * col_step` of `raw`, into row-major `out`; with
/// `check`, returns the first element beyond its bound.
#[allow(clippy::too_many_arguments)]
pub(super) fn convert<T: Real>(
    dtype: Dtype,
    endian: Endian,
    raw: &[u8],
    rows: usize,
    d: usize,
    row_step: usize,
    col_step: usize,
    shift: &[f64],
    out: &mut [T],
    check: Option<Check<'_>>,
) -> Option<(usize, i128)> {
    if col_step == 1 {
        // C order: rows are contiguous runs of elements.
        macro_rules! c_order {
            ($t:ty, $n:literal) => {
                match endian {
                    Endian::Little => convert_c::<T, $n>(raw, d, shift, out, |b| <$t>::from_le_bytes(b) as f64, check),
                    Endian::Big => convert_c::<T, $n>(raw, d, shift, out, |b| <$t>::from_be_bytes(b) as f64, check),
                }
            };
        }
        return match dtype {
            Dtype::Bool => convert_c::<T, 1>(raw, d, shift, out, |b| f64::from(u8::from(b[0] != 0)), check),
            Dtype::U8 => convert_c::<T, 1>(raw, d, shift, out, |b| f64::from(b[0]), check),
            Dtype::I8 => convert_c::<T, 1>(raw, d, shift, out, |b| f64::from(b[0] as i8), check),
            Dtype::U16 => c_order!(u16, 2),
            Dtype::I16 => c_order!(i16, 2),
            Dtype::I32 => c_order!(i32, 4),
            Dtype::U32 => c_order!(u32, 4),
            Dtype::I64 => c_order!(i64, 8),
            Dtype::U64 => c_order!(u64, 8),
            Dtype::F32 => c_order!(f32, 4),
            Dtype::F64 => c_order!(f64, 8),
            Dtype::F16 => match endian {
                Endian::Little => convert_c::<T, 2>(raw, d, shift, out, |b| f16::from_le_bytes(b).to_f64(), check),
                Endian::Big => convert_c::<T, 2>(raw, d, shift, out, |b| f16::from_be_bytes(b).to_f64(), check),
            },
        };
    }
    macro_rules! typed {
        ($t:ty, $n:literal) => {
            match endian {
                Endian::Little => convert_rows(
                    rows,
                    d,
                    row_step,
                    col_step,
                    shift,
                    out,
                    |k| <$t>::from_le_bytes(raw[k * $n..k * $n + $n].try_into().unwrap()) as f64,
                    check,
                ),
                Endian::Big => convert_rows(
                    rows,
                    d,
                    row_step,
                    col_step,
                    shift,
                    out,
                    |k| <$t>::from_be_bytes(raw[k * $n..k * $n + $n].try_into().unwrap()) as f64,
                    check,
                ),
            }
        };
    }
    match dtype {
        Dtype::Bool => {
            convert_rows(rows, d, row_step, col_step, shift, out, |k| f64::from(u8::from(raw[k] != 0)), check)
        }
        Dtype::U8 => convert_rows(rows, d, row_step, col_step, shift, out, |k| f64::from(raw[k]), check),
        Dtype::I8 => convert_rows(rows, d, row_step, col_step, shift, out, |k| f64::from(raw[k] as i8), check),
        Dtype::U16 => typed!(u16, 2),
        Dtype::I16 => typed!(i16, 2),
        Dtype::I32 => typed!(i32, 4),
        Dtype::U32 => typed!(u32, 4),
        Dtype::I64 => typed!(i64, 8),
        Dtype::U64 => typed!(u64, 8),
        Dtype::F32 => typed!(f32, 4),
        Dtype::F64 => typed!(f64, 8),
        Dtype::F16 => {
            convert_rows(rows, d, row_step, col_step, shift, out, |k| decode(raw, k, Dtype::F16, endian), check)
        }
    }
}
