//! In-memory arrays borrowed without copying: their elements of any
//! supported dtype and their shape and strides.

use half::f16;

use crate::error::{Error, Result};
use crate::io::dtype::Dtype;

/// Borrowed elements of an in-memory array, of any supported dtype.
#[derive(Debug, Clone, Copy)]
pub enum Values<'a> {
    /// `uint8` elements.
    U8(&'a [u8]),
    /// `int16` elements.
    I16(&'a [i16]),
    /// `int32` elements.
    I32(&'a [i32]),
    /// `int64` elements.
    I64(&'a [i64]),
    /// `uint32` elements.
    U32(&'a [u32]),
    /// `uint64` elements.
    U64(&'a [u64]),
    /// `float16` elements.
    F16(&'a [f16]),
    /// `float32` elements.
    F32(&'a [f32]),
    /// `float64` elements.
    F64(&'a [f64]),
}

impl Values<'_> {
    pub(super) fn len(&self) -> usize {
        match self {
            Values::U8(v) => v.len(),
            Values::I16(v) => v.len(),
            Values::I32(v) => v.len(),
            Values::I64(v) => v.len(),
            Values::U32(v) => v.len(),
            Values::U64(v) => v.len(),
            Values::F16(v) => v.len(),
            Values::F32(v) => v.len(),
            Values::F64(v) => v.len(),
        }
    }
    pub(super) fn dtype(&self) -> Dtype {
        match self {
            Values::U8(_) => Dtype::U8,
            Values::I16(_) => Dtype::I16,
            Values::I32(_) => Dtype::I32,
            Values::I64(_) => Dtype::I64,
            Values::U32(_) => Dtype::U32,
            Values::U64(_) => Dtype::U64,
            Values::F16(_) => Dtype::F16,
            Values::F32(_) => Dtype::F32,
            Values::F64(_) => Dtype::F64,
        }
    }
}

/// A borrowed in-memory matrix with arbitrary element strides (C order,
/// Fortran order or a strided view), used without copying it whole.
#[derive(Debug, Clone, Copy)]
pub struct ArrayRef<'a> {
    pub(super) values: Values<'a>,
    pub(super) n_rows: usize,
    pub(super) n_cols: usize,
    pub(super) row_stride: usize,
    pub(super) col_stride: usize,
}

impl<'a> ArrayRef<'a> {
    /// A C-order (row-major) matrix of shape `(n_rows, n_cols)`.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] when `values` does not hold exactly
    /// `n_rows * n_cols` elements.
    pub fn c_order(values: Values<'a>, n_rows: usize, n_cols: usize) -> Result<Self> {
        Self::strided(values, n_rows, n_cols, n_cols, 1)
    }

    /// A matrix whose element `(i, j)` is `values[i * row_stride + j * col_stride]`.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] when the last element lies outside `values`.
    pub fn strided(
        values: Values<'a>,
        n_rows: usize,
        n_cols: usize,
        row_stride: usize,
        col_stride: usize,
    ) -> Result<Self> {
        let needed = if n_rows == 0 || n_cols == 0 {
            0
        } else {
            (n_rows - 1)
                .checked_mul(row_stride)
                .and_then(|a| (n_cols - 1).checked_mul(col_stride).and_then(|b| a.checked_add(b)))
                .and_then(|x| x.checked_add(1))
                .unwrap_or(usize::MAX)
        };
        if needed > values.len() {
            return Err(Error::ShapeMismatch {
                what: "in-memory array".into(),
                expected: vec![n_rows, n_cols],
                found: vec![values.len()],
                hint: "the buffer is smaller than its shape and strides say",
            });
        }
        Ok(ArrayRef { values, n_rows, n_cols, row_stride, col_stride })
    }
}
