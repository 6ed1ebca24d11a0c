//! Sparse rows in compressed sparse row (CSR) form, borrowed in place: the
//! `indptr`, `indices` and `data` arrays of a `scipy.sparse` CSR matrix
//! (the layout of Saad's SPARSKIT, "Sparse matrix formats"), read block by
//! block into the reader's planned buffers, never densified whole.

use crate::dtype::Real;
use crate::error::{Error, Result};
use crate::io::dtype::Dtype;

/// Borrowed integer index arrays (`int32` or `int64`, as scipy stores them).
#[derive(Debug, Clone, Copy)]
pub enum Index<'a> {
    /// `int32` indices.
    I32(&'a [i32]),
    /// `int64` indices.
    I64(&'a [i64]),
}

/// Row `i`'s offsets into `indices`, checked: not decreasing, columns
/// strictly increasing within `0..n_cols` (see [`CsrRef::new`]).
fn check_row(indptr: Index<'_>, indices: Index<'_>, n_cols: usize, i: usize) -> Result<std::ops::Range<usize>> {
    let bad = |why: String| Error::param("X", format!("the sparse matrix is not valid CSR: {why}"));
    let (a, b) = (indptr.signed(i), indptr.signed(i + 1));
    if b < a {
        return Err(bad(format!("indptr decreases at row {i} ({a} then {b})")));
    }
    if a < 0 || b as usize > indices.len() {
        return Err(bad(format!("row {i}'s offsets {a}..{b} lie outside 0..len(indices) = {}", indices.len())));
    }
    let (a, b) = (a as usize, b as usize);
    let mut last = -1i64;
    for p in a..b {
        let j = indices.signed(p);
        if j < 0 || j >= n_cols as i64 {
            return Err(bad(format!("row {i} has column index {j}, outside 0..{n_cols}")));
        }
        if j <= last {
            return Err(bad(format!(
                "row {i}'s column indices are not strictly increasing ({last} then {j}): sort each row's columns and sum duplicates first"
            )));
        }
        last = j;
    }
    Ok(a..b)
}

impl Index<'_> {
    fn len(&self) -> usize {
        match self {
            Index::I32(v) => v.len(),
            Index::I64(v) => v.len(),
        }
    }

    /// Element `i` (checked non-negative by [`CsrRef::new`]).
    #[inline]
    fn at(&self, i: usize) -> usize {
        match self {
            Index::I32(v) => v[i] as usize,
            Index::I64(v) => v[i] as usize,
        }
    }

    fn signed(&self, i: usize) -> i64 {
        match self {
            Index::I32(v) => i64::from(v[i]),
            Index::I64(v) => v[i],
        }
    }
}

/// Borrowed stored values of a sparse matrix (`float32` or `float64`, the
/// dtypes scikit-learn's sparse k-means computes in).
#[derive(Debug, Clone, Copy)]
pub enum SparseValues<'a> {
    /// `float32` values.
    F32(&'a [f32]),
    /// `float64` values.
    F64(&'a [f64]),
}

impl SparseValues<'_> {
    fn len(&self) -> usize {
        match self {
            SparseValues::F32(v) => v.len(),
            SparseValues::F64(v) => v.len(),
        }
    }

    #[inline]
    fn at(&self, p: usize) -> f64 {
        match self {
            SparseValues::F32(v) => f64::from(v[p]),
            SparseValues::F64(v) => v[p],
        }
    }
}

/// A borrowed CSR matrix of shape `(n_rows, n_cols)`: row `i`'s stored
/// values are `data[indptr[i]..indptr[i + 1]]` in columns
/// `indices[indptr[i]..indptr[i + 1]]`, strictly increasing (scipy's
/// canonical form: sorted, no duplicates); every other value is zero.
#[derive(Debug, Clone, Copy)]
pub struct CsrRef<'a> {
    indptr: Index<'a>,
    indices: Index<'a>,
    data: SparseValues<'a>,
    n_rows: usize,
    n_cols: usize,
    /// Most values stored in one row.
    max_row_nnz: usize,
}

impl<'a> CsrRef<'a> {
    /// Checks and wraps the three arrays of a CSR matrix of shape
    /// `(n_rows, n_cols)` (one pass over `indptr` and `indices`).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`X`) when `indptr` does not hold
    /// `n_rows + 1` non-decreasing offsets from 0 to `len(data)`, when
    /// `indices` and `data` differ in length, when a row's column indices
    /// are not strictly increasing within `0..n_cols` (sort them and sum
    /// duplicates first, as scipy's `sum_duplicates` does), or when
    /// `n_cols` exceeds 2^32 − 1.
    pub fn new(
        indptr: Index<'a>,
        indices: Index<'a>,
        data: SparseValues<'a>,
        n_rows: usize,
        n_cols: usize,
    ) -> Result<Self> {
        let bad = |why: String| Error::param("X", format!("the sparse matrix is not valid CSR: {why}"));
        if indptr.len() != n_rows + 1 {
            return Err(bad(format!("indptr holds {} offsets, expected n_samples + 1 = {}", indptr.len(), n_rows + 1)));
        }
        if indices.len() != data.len() {
            return Err(bad(format!("indices holds {} entries but data {}", indices.len(), data.len())));
        }
        if n_cols > u32::MAX as usize {
            return Err(bad(format!("{n_cols} columns; at most {} are supported", u32::MAX)));
        }
        if indptr.signed(0) != 0 || indptr.signed(n_rows) != data.len() as i64 {
            return Err(bad(format!(
                "indptr runs from {} to {}, expected 0 to len(data) = {}",
                indptr.signed(0),
                indptr.signed(n_rows),
                data.len()
            )));
        }
        let mut max_row_nnz = 0;
        for i in 0..n_rows {
            max_row_nnz = max_row_nnz.max(check_row(indptr, indices, n_cols, i)?.len());
        }
        Ok(CsrRef { indptr, indices, data, n_rows, n_cols, max_row_nnz })
    }

    /// The rows `rows` (any order, repeats allowed) of the CSR arrays of a
    /// `(n_rows, n_cols)` matrix, as `(indptr, indices, data)` of their own
    /// (int64 offsets from 0 and columns, `f64` values: exact for either
    /// stored dtype), for [`CsrRef::new`] to borrow: the rows a mini-batch
    /// draws, at a cost of their own values, never of the whole matrix's.
    /// Checks what [`CsrRef::new`] checks, of the rows taken only (and that
    /// `indptr` holds `n_rows + 1` offsets, none beyond `data`).
    ///
    /// # Errors
    /// As [`CsrRef::new`]; [`Error::InvalidParameter`] (`rows`) for a row
    /// outside the matrix.
    pub fn take_rows(
        indptr: Index<'_>,
        indices: Index<'_>,
        data: SparseValues<'_>,
        (n_rows, n_cols): (usize, usize),
        rows: &[usize],
    ) -> Result<(Vec<i64>, Vec<i64>, Vec<f64>)> {
        let bad = |why: String| Error::param("X", format!("the sparse matrix is not valid CSR: {why}"));
        if indptr.len() != n_rows + 1 || indices.len() != data.len() {
            return Err(bad(format!(
                "indptr holds {} offsets for {n_rows} rows, indices {} entries and data {}",
                indptr.len(),
                indices.len(),
                data.len()
            )));
        }
        let (mut p, mut j, mut v) = (vec![0i64], Vec::new(), Vec::new());
        for &i in rows {
            if i >= n_rows {
                return Err(Error::param("rows", format!("row {i} is outside the matrix's {n_rows} rows")));
            }
            let r = check_row(indptr, indices, n_cols, i)?;
            j.extend(r.clone().map(|q| indices.signed(q)));
            v.extend(r.map(|q| data.at(q)));
            p.push(j.len() as i64);
        }
        Ok((p, j, v))
    }

    /// Rows.
    pub fn n_rows(&self) -> usize {
        self.n_rows
    }

    /// Columns.
    pub fn n_cols(&self) -> usize {
        self.n_cols
    }

    /// Most values stored in one row.
    pub fn max_row_nnz(&self) -> usize {
        self.max_row_nnz
    }

    /// Values stored in all rows.
    pub fn nnz(&self) -> usize {
        self.data.len()
    }

    pub(super) fn dtype(&self) -> Dtype {
        match self.data {
            SparseValues::F32(_) => Dtype::F32,
            SparseValues::F64(_) => Dtype::F64,
        }
    }

    /// Rows `at..at + rows` as a block: `indptr` (`rows + 1` offsets from
    /// 0), their columns and their values converted to `T`.
    pub(super) fn read<T: Real>(
        &self,
        at: usize,
        rows: usize,
        indptr: &mut Vec<usize>,
        indices: &mut Vec<u32>,
        values: &mut Vec<T>,
    ) {
        let (a, b) = (self.indptr.at(at), self.indptr.at(at + rows));
        indptr.clear();
        indptr.extend((at..=at + rows).map(|i| self.indptr.at(i) - a));
        indices.clear();
        indices.extend((a..b).map(|p| self.indices.at(p) as u32));
        values.clear();
        values.extend((a..b).map(|p| T::from_f64(self.data.at(p))));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_the_arrays_and_reads_blocks() {
        let indptr = [0i32, 2, 2, 3];
        let indices = [0i32, 3, 1];
        let data = [1.0f64, -2.0, 4.0];
        let m = CsrRef::new(Index::I32(&indptr), Index::I32(&indices), SparseValues::F64(&data), 3, 4).unwrap();
        assert_eq!((m.max_row_nnz(), m.nnz()), (2, 3));
        let (mut p, mut j, mut v) = (Vec::new(), Vec::new(), Vec::<f32>::new());
        m.read(1, 2, &mut p, &mut j, &mut v);
        assert_eq!((p, j, v), (vec![0, 0, 1], vec![1], vec![4.0]));
        let src = crate::io::Source::csr(m);
        let mut dense = vec![0.0f64; 8];
        src.read_rows(0, 2, &[0.0, 0.0, 0.0, 1.0], &mut [], &mut dense).unwrap();
        assert_eq!(dense, [1.0, 0.0, 0.0, -3.0, 0.0, 0.0, 0.0, -1.0]);
        assert_eq!((src.value(0, 3).unwrap(), src.value(1, 3).unwrap()), (-2.0, 0.0));
        let err = |indptr: &[i64], indices: &[i64], d: usize| {
            CsrRef::new(
                Index::I64(indptr),
                Index::I64(indices),
                SparseValues::F64(&data[..indices.len()]),
                indptr.len() - 1,
                d,
            )
            .unwrap_err()
            .to_string()
        };
        assert!(err(&[0, 2, 1, 3], &[0, 3, 1], 4).contains("indptr decreases at row 1"));
        assert!(err(&[0, 2, 2, 3], &[3, 0, 1], 4).contains("not strictly increasing (3 then 0)"));
        assert!(err(&[0, 2, 2, 3], &[0, 4, 1], 4).contains("column index 4, outside 0..4"));
        assert!(err(&[0, 2, 2, 2], &[0, 1, 1], 4).contains("indptr runs from 0 to 2"));
    }
}
