//! Row-block readers over `.npy` files and in-memory arrays.
//!
//! A [`Source`] hands out rows `[start, start + rows)` converted to the
//! compute type and shifted by a per-column origin, into a buffer the caller
//! owns and reuses. Files are read with positioned reads (`pread`) into a
//! reused byte buffer, so their pages never count toward resident memory
//! (unlike an mmap), and the file never has to fit in RAM.

mod convert;
mod csr;
mod csr_files;
mod memory;
mod npy;
mod rows;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use half::f16;
use rayon::prelude::*;

use super::dtype::{decode, decode_integer, Dtype, Endian, InexactInteger};
use crate::dtype::Real;
use crate::error::{Error, Result};
use convert::{convert, convert_rows, Check};
pub use csr::{CsrRef, Index, SparseValues};
pub use csr_files::CsrFiles;
pub use memory::{ArrayRef, Values};
use npy::read_exact;
pub use npy::NpyFile;
pub use rows::{CsrBlock, CsrRowSource, RowSource};

/// Rows per piece of work of [`Source::gather_rows`]: 64 rows of 784
/// features (MNIST) are 200 KB of float32.
const GATHER_ROWS: usize = 64;

/// Where rows come from: a `.npy` file read in blocks, or an in-memory array.
///
/// While rows are converted, a source of integers notes the first value that
/// the compute type cannot represent exactly (see
/// [`Source::inexact_integer`]); it is found in the conversion itself, never
/// by an extra pass.
#[derive(Debug)]
pub struct Source<'a> {
    data: Data<'a>,
    /// The number of the first row: a piece of a larger array (a task's
    /// rows) keeps its rows' numbers in the whole, for errors and keyed
    /// draws; rows before it are not here.
    first_row: usize,
    /// The first inexact integer seen per compute type: float32, float64.
    inexact: [Mutex<Option<InexactInteger>>; 2],
    /// Whether rows are read scaled to unit norm (see [`Source::unit_rows`]).
    unit_rows: bool,
}

#[derive(Debug)]
enum Data<'a> {
    /// A `.npy` file, read with positioned reads.
    Npy(NpyFile),
    /// A borrowed in-memory array.
    Memory(ArrayRef<'a>),
    /// Rows computed on demand.
    Rows(Box<dyn RowSource + 'a>),
    /// A borrowed sparse matrix in CSR form.
    Csr(CsrRef<'a>),
    /// A CSR matrix in a folder of `.npy` files, read with positioned reads.
    CsrFiles(CsrFiles),
    /// A CSR matrix whose row blocks are read on demand.
    CsrRows(Box<dyn CsrRowSource + 'a>),
}

impl<'a> Source<'a> {
    fn new(data: Data<'a>) -> Self {
        Source { data, first_row: 0, inexact: Default::default(), unit_rows: false }
    }

    /// The same rows, each read scaled to unit Euclidean norm when `on`
    /// ([`crate::kernels::unit_row`], after the conversion to the compute
    /// type): cosine (spherical) k-means reads its data so, never holding a
    /// normalised copy. Rows of zeros stay zero.
    pub fn unit_rows(mut self, on: bool) -> Self {
        self.unit_rows = on;
        self
    }

    /// Whether rows are read scaled to unit norm (see [`Source::unit_rows`]).
    pub fn has_unit_rows(&self) -> bool {
        self.unit_rows
    }

    /// The same rows, numbered from `first_row`: a piece of a larger array
    /// whose rows before `first_row` are elsewhere (the rows a task was
    /// given). [`Source::n_samples`] then counts to the piece's last row,
    /// and only rows from `first_row` on can be read.
    pub fn starting_at(mut self, first_row: usize) -> Self {
        self.first_row = first_row;
        self
    }

    /// The number of the first row that is here (see [`Source::starting_at`]).
    pub fn first_row(&self) -> usize {
        self.first_row
    }

    /// Opens a `.npy` file holding a 2-D array of shape `(n_samples, n_features)`.
    ///
    /// # Errors
    /// Those of [`NpyFile::open`], and [`Error::WrongDimensions`] when the
    /// array is not 2-D.
    pub fn open_matrix(path: impl AsRef<Path>) -> Result<Source<'static>> {
        let f = NpyFile::open(path)?;
        if f.header.shape.len() != 2 {
            return Err(Error::WrongDimensions {
                path: f.path.clone(),
                expected: 2,
                shape: f.header.shape.clone(),
                hint: "save a 2-D array of shape (n_samples, n_features); for one feature use X.reshape(-1, 1)",
            });
        }
        Ok(Source::new(Data::Npy(f)))
    }

    /// Opens a `.npy` file holding a vector of shape `(n,)` (per-row weights,
    /// as scikit-learn's `sample_weight`), seen as an `(n, 1)` matrix.
    ///
    /// # Errors
    /// Those of [`NpyFile::open`], and [`Error::WrongDimensions`] for any
    /// other shape, `(n, 1)` included (as scikit-learn refuses it).
    pub fn open_vector(path: impl AsRef<Path>) -> Result<Source<'static>> {
        let mut f = NpyFile::open(path)?;
        match f.header.shape.as_slice() {
            [n] => f.header.shape = vec![*n, 1],
            _ => {
                return Err(Error::WrongDimensions {
                    path: f.path.clone(),
                    expected: 1,
                    shape: f.header.shape.clone(),
                    hint: "save a 1-D array of shape (n_samples,), one weight per row; for a column w of shape (n, 1) save w.ravel()",
                })
            }
        }
        Ok(Source::new(Data::Npy(f)))
    }

    /// Opens a `.npy` file holding an array of `ndim` dimensions (1 to 3),
    /// such as a stack of `(n_components, n_features, n_features)` matrices,
    /// seen as a matrix: all dimensions but the last are rows (a 1-D array of
    /// length `n` is `(n, 1)`). Returns the source and the file's shape.
    ///
    /// # Errors
    /// Those of [`NpyFile::open`]; [`Error::WrongDimensions`] for another
    /// number of dimensions, or for a Fortran-order array of 3 dimensions.
    pub fn open_stacked(path: impl AsRef<Path>, ndim: usize) -> Result<(Source<'static>, Vec<usize>)> {
        let mut f = NpyFile::open(path)?;
        let shape = f.header.shape.clone();
        if shape.len() != ndim {
            return Err(Error::WrongDimensions {
                path: f.path.clone(),
                expected: ndim,
                shape,
                hint: "save the array with the shape scikit-learn uses for this attribute",
            });
        }
        if ndim > 2 && f.header.fortran_order {
            return Err(Error::NotNpy {
                path: f.path.clone(),
                reason: format!("the {ndim}-D array of shape {shape:?} is stored in Fortran order, which memfit reads only for 1-D and 2-D arrays (save numpy.ascontiguousarray(array))"),
            });
        }
        f.header.shape = match shape.as_slice() {
            [n] => vec![*n, 1],
            [.., last] => vec![shape[..shape.len() - 1].iter().product(), *last],
            [] => vec![1, 1],
        };
        Ok((Source::new(Data::Npy(f)), shape))
    }

    /// Checks that per-row `weights` (if any) have one value per row of `self`.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] naming `sample_weight`.
    pub fn check_weights(&self, weights: Option<&Source<'_>>) -> Result<()> {
        match weights {
            Some(w) if w.n_samples() != self.n_samples() => Err(Error::ShapeMismatch {
                what: "sample_weight".into(),
                expected: vec![self.n_samples()],
                found: vec![w.n_samples()],
                hint: "give one weight per row of the data",
            }),
            _ => Ok(()),
        }
    }

    /// Wraps an in-memory array.
    pub fn memory(array: ArrayRef<'a>) -> Self {
        Source::new(Data::Memory(array))
    }

    /// Wraps a borrowed sparse matrix: passes read its rows as CSR blocks
    /// ([`Source::read_csr`]); [`Source::read_rows`] densifies them (for
    /// the few rows a sample or a refill takes).
    pub fn csr(matrix: CsrRef<'a>) -> Self {
        Source::new(Data::Csr(matrix))
    }

    /// Opens a CSR folder (see [`CsrFiles::open`]): rows read in CSR
    /// blocks, out of core.
    ///
    /// # Errors
    /// As [`CsrFiles::open`].
    pub fn open_csr_dir(dir: impl AsRef<Path>) -> Result<Source<'static>> {
        Ok(Source::new(Data::CsrFiles(CsrFiles::open(dir)?)))
    }

    /// Opens a `.npz` of a CSR matrix (see [`CsrFiles::open_npz`]), its
    /// arrays unpacked into unnamed files in `scratch_dir`: rows read in
    /// CSR blocks, out of core.
    ///
    /// # Errors
    /// As [`CsrFiles::open_npz`].
    pub fn open_npz(path: impl AsRef<Path>, scratch_dir: &Path) -> Result<Source<'static>> {
        Ok(Source::new(Data::CsrFiles(CsrFiles::open_npz(path, scratch_dir)?)))
    }

    /// The scratch files reading this source writes (a `.npz`'s deflated
    /// arrays, unpacked at the first read; see [`CsrFiles::scratch_disk`]),
    /// for the plan of a job that reads it.
    pub fn scratch_disk(&self) -> Vec<crate::io::PlannedWrite> {
        match &self.data {
            Data::CsrFiles(f) => f.scratch_disk(),
            _ => Vec::new(),
        }
    }

    /// For sparse rows, the most values one row stores (what a read block
    /// holds per row); `None` for dense rows.
    pub fn sparse_row_nnz(&self) -> Option<usize> {
        match &self.data {
            Data::Csr(c) => Some(c.max_row_nnz()),
            Data::CsrFiles(f) => Some(f.max_row_nnz()),
            Data::CsrRows(r) => Some(r.max_row_nnz()),
            _ => None,
        }
    }

    /// Reads rows `[start, start + rows)` of a sparse source as a CSR block:
    /// `indptr` (`rows + 1` offsets from 0) and each stored value's column
    /// and value converted to `T` (scaled to unit row norm with
    /// [`Source::unit_rows`]). The buffers are cleared and refilled (their
    /// capacity is the reader's planned block); `raw` holds a file's bytes
    /// (`rows × scratch_bytes_per_row()`).
    ///
    /// # Errors
    /// For a folder: read errors, and [`Error::InvalidParameter`] for a row
    /// whose columns are not strictly increasing within the matrix.
    ///
    /// # Panics
    /// If the source is not sparse or the rows lie outside it (programming
    /// errors, never user input).
    pub fn read_csr<T: Real>(
        &self,
        start: usize,
        rows: usize,
        indptr: &mut Vec<usize>,
        indices: &mut Vec<u32>,
        values: &mut Vec<T>,
        raw: &mut Vec<u8>,
    ) -> Result<()> {
        assert!(start >= self.first_row && start + rows <= self.n_samples());
        match &self.data {
            Data::Csr(c) => c.read(start - self.first_row, rows, indptr, indices, values),
            Data::CsrFiles(f) => {
                // Integers the compute type rounds, noted as dense reads note them.
                let bound = self.check_bound(T::DTYPE, start);
                let found = f.read(start - self.first_row, rows, indptr, indices, values, raw, bound)?;
                if let (Some(found), Some(exact_up_to)) = (found, bound) {
                    self.note_inexact(InexactInteger {
                        row: start + found.row,
                        column: found.column,
                        value: found.value,
                        dtype: self.dtype(),
                        compute: T::DTYPE,
                        exact_up_to,
                    });
                }
            }
            Data::CsrRows(r) => {
                self.read_csr_block(r.as_ref(), start - self.first_row, rows, indptr, indices, values)?
            }
            _ => panic!("read_csr on a dense source"),
        }
        if self.unit_rows {
            for r in 0..rows {
                let p = indptr[r]..indptr[r + 1];
                crate::kernels::unit_sparse_row(&mut values[p.clone()], &indices[p]);
            }
        }
        Ok(())
    }

    /// Rows `at..at + rows` (counted from the first row here) of a sparse
    /// source as a CSR block of `f64` values, as stored (not unit rows), in
    /// buffers of their own: for the few rows that are read densified (a
    /// sample, a refill) or one value.
    fn sparse_rows(&self, at: usize, rows: usize) -> Result<(Vec<usize>, Vec<u32>, Vec<f64>)> {
        let (mut p, mut j, mut v, mut raw) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        match &self.data {
            Data::Csr(c) => c.read(at, rows, &mut p, &mut j, &mut v),
            Data::CsrFiles(f) => {
                f.read(at, rows, &mut p, &mut j, &mut v, &mut raw, None)?;
            }
            Data::CsrRows(r) => self.read_csr_block(r.as_ref(), at, rows, &mut p, &mut j, &mut v)?,
            _ => unreachable!("sparse_rows on a dense source"),
        }
        Ok((p, j, v))
    }

    /// Reads rows `at..at + rows` (counted from the first row here) of
    /// `source` as [`Source::read_csr`] does, each block checked as an
    /// in-memory CSR matrix is ([`CsrRef::new`]: offsets, columns within the
    /// matrix and strictly increasing) and against the densest row the
    /// source declared (what its reads were planned for).
    fn read_csr_block<T: Real>(
        &self,
        source: &dyn CsrRowSource,
        at: usize,
        rows: usize,
        indptr: &mut Vec<usize>,
        indices: &mut Vec<u32>,
        values: &mut Vec<T>,
    ) -> Result<()> {
        let block = source.read(at, rows)?;
        let (a, b) = (self.first_row + at, self.first_row + at + rows);
        let c = CsrRef::new(
            Index::I64(&block.indptr),
            Index::I64(&block.indices),
            SparseValues::F64(&block.values),
            rows,
            source.n_cols(),
        )
        .map_err(|e| match e {
            Error::InvalidParameter { name, rule, remedies } => {
                Error::param_with(name, format!("in rows {a}..{b} (counted from {a}): {rule}"), remedies)
            }
            e => e,
        })?;
        if c.max_row_nnz() > source.max_row_nnz() {
            return Err(Error::param(
                "X",
                format!(
                    "rows {a}..{b} hold a row of {} stored values, more than the {} their reader declared",
                    c.max_row_nnz(),
                    source.max_row_nnz()
                ),
            ));
        }
        c.read(0, rows, indptr, indices, values);
        Ok(())
    }

    /// Wraps a sparse matrix whose row blocks are read on demand.
    pub fn csr_rows(rows: Box<dyn CsrRowSource + 'a>) -> Self {
        Source::new(Data::CsrRows(rows))
    }

    /// Wraps rows computed on demand.
    pub fn rows(rows: Box<dyn RowSource + 'a>) -> Self {
        Source::new(Data::Rows(rows))
    }

    /// Bytes the source holds while it lives (0 except for computed rows).
    pub fn held_bytes(&self) -> u64 {
        match &self.data {
            Data::Rows(r) => r.held_bytes(),
            Data::CsrRows(r) => r.held_bytes(),
            _ => 0,
        }
    }

    /// Computes what computed rows need before they can be read (see
    /// [`RowSource::prepare`]); nothing for files and in-memory arrays.
    ///
    /// # Errors
    /// As [`RowSource::prepare`].
    pub fn prepare(&self, cancel: &crate::exec::Cancel) -> Result<()> {
        match &self.data {
            Data::Rows(r) => r.prepare(cancel),
            _ => Ok(()),
        }
    }

    /// Number of rows (up to the last row of a piece, see
    /// [`Source::starting_at`]).
    pub fn n_samples(&self) -> usize {
        self.first_row
            + match &self.data {
                Data::Npy(f) => f.header.shape[0],
                Data::Memory(a) => a.n_rows,
                Data::Rows(r) => r.n_rows(),
                Data::Csr(c) => c.n_rows(),
                Data::CsrFiles(f) => f.n_rows(),
                Data::CsrRows(r) => r.n_rows(),
            }
    }

    /// Number of columns.
    pub fn n_features(&self) -> usize {
        match &self.data {
            Data::Npy(f) => f.header.shape[1],
            Data::Memory(a) => a.n_cols,
            Data::Rows(r) => r.n_cols(),
            Data::Csr(c) => c.n_cols(),
            Data::CsrFiles(f) => f.n_cols(),
            Data::CsrRows(r) => r.n_cols(),
        }
    }

    /// The stored element type.
    pub fn dtype(&self) -> Dtype {
        match &self.data {
            Data::Npy(f) => f.header.dtype,
            Data::Memory(a) => a.values.dtype(),
            Data::Rows(r) => r.dtype(),
            Data::Csr(c) => c.dtype(),
            Data::CsrFiles(f) => f.dtype(),
            Data::CsrRows(r) => r.dtype(),
        }
    }

    /// Whether the values are stored in this machine's byte order (or in
    /// one byte): false only for a `.npy` file of the other order, which
    /// scikit-learn's rule computes in float64 even when it holds float32.
    pub fn native_order(&self) -> bool {
        match &self.data {
            Data::Npy(f) => f.header.endian == Endian::NATIVE || f.header.dtype.itemsize() == 1,
            _ => true,
        }
    }

    /// The file path, or `<memory>` for an in-memory array.
    pub fn name(&self) -> PathBuf {
        match &self.data {
            Data::Npy(f) => f.path.clone(),
            Data::Memory(_) | Data::Csr(_) | Data::CsrRows(_) => PathBuf::from("<memory>"),
            Data::CsrFiles(f) => f.path().to_path_buf(),
            Data::Rows(r) => r.name(),
        }
    }

    /// Bytes of scratch [`Source::read_rows`] needs per row (0 for in-memory
    /// arrays, which are converted in place).
    pub fn scratch_bytes_per_row(&self) -> usize {
        match &self.data {
            Data::Npy(f) => f.header.shape[1] * f.header.dtype.itemsize(),
            Data::Memory(_) | Data::Csr(_) => 0,
            Data::CsrFiles(f) => f.scratch_bytes_per_row(),
            // A block as the reader hands it and its copy: an offset, and
            // each stored value's column and value, twice.
            Data::CsrRows(r) => 2 * (8 + r.max_row_nnz() * 16),
            Data::Rows(r) => r.bytes_per_row(),
        }
    }

    /// Reads rows `[start, start + rows)` into `out` (row-major, `rows *
    /// n_features` values), converting each element `x` of column `j` to
    /// `T::from_f64(x - shift[j])`. `scratch` must hold at least
    /// `rows * scratch_bytes_per_row()` bytes; it is not resized.
    ///
    /// Integers that `T` cannot hold exactly (see [`Dtype::inexact_beyond`])
    /// are noted as they are converted, for [`Source::inexact_integer`].
    ///
    /// # Errors
    /// [`Error::Io`] on a read failure and [`Error::Truncated`] if the file
    /// shrank since it was opened.
    ///
    /// # Panics
    /// If the rows lie outside the array or the buffers are too small
    /// (programming errors, never user input).
    pub fn read_rows<T: Real>(
        &self,
        start: usize,
        rows: usize,
        shift: &[f64],
        scratch: &mut [u8],
        out: &mut [T],
    ) -> Result<()> {
        let d = self.n_features();
        assert!(
            start >= self.first_row && start + rows <= self.n_samples() && out.len() >= rows * d && shift.len() == d
        );
        let out = &mut out[..rows * d];
        // The row's place in what is here.
        let at = start - self.first_row;
        let bound = self.check_bound(T::DTYPE, start);
        let found = match &self.data {
            Data::Npy(f) => {
                let h = &f.header;
                let item = h.dtype.itemsize();
                if !h.fortran_order
                    && h.dtype == T::DTYPE
                    && h.endian == Endian::NATIVE
                    && bound.is_none()
                    && shift.iter().all(|&s| s == 0.0)
                {
                    // Rows already as the compute type holds them: read in
                    // place, the same bits as converting them (x − 0 = x).
                    read_exact(f, T::bytes_mut(out), h.data_offset + (at * d * item) as u64)?;
                    None
                } else {
                    let raw = &mut scratch[..rows * d * item];
                    let (row_step, col_step) = if h.fortran_order {
                        // Column j of the block is contiguous in the file: read
                        // each column segment, then convert while transposing.
                        let n = h.shape[0] as u64;
                        for j in 0..d {
                            let off = h.data_offset + (j as u64 * n + at as u64) * item as u64;
                            read_exact(f, &mut raw[j * rows * item..(j + 1) * rows * item], off)?;
                        }
                        (1, rows)
                    } else {
                        let off = h.data_offset + (at * d * item) as u64;
                        read_exact(f, raw, off)?;
                        (d, 1)
                    };
                    let raw = &*raw;
                    let exact = |k: usize| decode_integer(raw, k, h.dtype, h.endian).unwrap_or_default();
                    let check = bound.map(|bound| Check { bound, exact: &exact });
                    convert(h.dtype, h.endian, raw, rows, d, row_step, col_step, shift, out, check)
                }
            }
            Data::Csr(_) | Data::CsrFiles(_) | Data::CsrRows(_) => {
                let (p, j, v) = self.sparse_rows(at, rows)?;
                for (r, o) in out.chunks_exact_mut(d.max(1)).enumerate() {
                    // An unstored value is 0.0 − s, as a stored zero's (+0.0
                    // where s is 0, as the dense rows').
                    for (x, s) in o.iter_mut().zip(shift) {
                        *x = T::from_f64(0.0 - s);
                    }
                    for q in p[r]..p[r + 1] {
                        let c = j[q] as usize;
                        // A stored −0.0 as scipy's `toarray` reads it: +0.0.
                        o[c] = T::from_f64((0.0 + v[q]) - shift[c]);
                    }
                }
                None
            }
            Data::Rows(r) => {
                let values = r.read(at, rows)?;
                for (k, (o, v)) in out.iter_mut().zip(&values).enumerate() {
                    *o = T::from_f64(v - shift[k % d]);
                }
                None
            }
            Data::Memory(a) => {
                let base = at * a.row_stride;
                let (rs, cs) = (a.row_stride, a.col_stride);
                macro_rules! typed {
                    ($v:expr, $to_f64:expr, $to_int:expr) => {{
                        let v = $v;
                        let exact = |k: usize| $to_int(v[base + k]);
                        let check = bound.map(|bound| Check { bound, exact: &exact });
                        convert_rows(rows, d, rs, cs, shift, out, |k| $to_f64(v[base + k]), check)
                    }};
                }
                match a.values {
                    Values::U8(v) => typed!(v, f64::from, i128::from),
                    Values::I16(v) => typed!(v, f64::from, i128::from),
                    Values::I32(v) => typed!(v, f64::from, i128::from),
                    Values::U32(v) => typed!(v, f64::from, i128::from),
                    Values::I64(v) => typed!(v, |x| x as f64, i128::from),
                    Values::U64(v) => typed!(v, |x| x as f64, i128::from),
                    Values::F16(v) => typed!(v, f16::to_f64, |_| 0),
                    Values::F32(v) => typed!(v, f64::from, |_| 0),
                    Values::F64(v) => typed!(v, |x| x, |_| 0),
                }
            }
        };
        if self.unit_rows {
            debug_assert!(shift.iter().all(|&s| s == 0.0), "unit rows are read unshifted");
            out.chunks_exact_mut(d.max(1)).for_each(crate::kernels::unit_row);
        }
        if let Some((k, value)) = found {
            let dtype = self.dtype();
            self.note_inexact(InexactInteger {
                row: start + k / d,
                column: k % d,
                value,
                dtype,
                compute: T::DTYPE,
                exact_up_to: bound.expect("found only when checked"),
            });
        }
        Ok(())
    }

    /// Rows `start..start + rows` as they are held, when that is what
    /// [`Source::read_rows`] would write unshifted into `T`: a borrowed
    /// C-order array of `T`'s dtype whose rows are not scaled. `None`
    /// otherwise.
    ///
    /// # Panics
    /// If the rows lie outside the array (a programming error).
    pub fn rows_in_place<T: Real>(&self, start: usize, rows: usize) -> Option<&'a [T]> {
        let d = self.n_features();
        assert!(start >= self.first_row && start + rows <= self.n_samples());
        match &self.data {
            Data::Memory(a) if !self.unit_rows && a.col_stride == 1 && a.row_stride == d => {
                let at = (start - self.first_row) * d..(start - self.first_row + rows) * d;
                match a.values {
                    Values::F64(v) => T::of_f64(&v[at]),
                    Values::F32(v) => T::of_f32(&v[at]),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// Reads the rows `rows` (any order, repeats allowed) into `out`
    /// (row-major, `rows.len() × n_features` values of `T`), each run of
    /// consecutive rows with one positioned read. Rows in memory or in a
    /// `.npy` file are read by the calling rayon pool's threads,
    /// `GATHER_ROWS` (64) rows each (so a run may be read in pieces), with
    /// the same values; each thread holds one row's raw bytes per row of the
    /// longest run in its piece (other sources: in all `rows`).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for a row outside the array;
    /// [`Error::NonFinite`] for a row with a value that is not finite in
    /// `T`, naming its row in the array; as [`Source::read_rows`].
    ///
    /// # Panics
    /// If `out` is smaller than stated.
    pub fn gather_rows<T: Real>(&self, rows: &[usize], out: &mut [T]) -> Result<()> {
        let (n, d) = (self.n_samples(), self.n_features());
        if let Some(&r) = rows.iter().find(|&&r| r < self.first_row || r >= n) {
            return Err(Error::param("rows", format!("row {r} is outside the array's {n} rows")));
        }
        let per = match self.data {
            Data::Memory(_) | Data::Npy(_) => GATHER_ROWS,
            _ => rows.len().max(1),
        };
        let shift = vec![0.0; d];
        let read: Vec<Result<()>> = rows
            .par_chunks(per)
            .zip(out[..rows.len() * d].par_chunks_mut(per * d))
            .map(|(rows, out)| {
                let mut scratch = Vec::new();
                let mut i = 0;
                while i < rows.len() {
                    let mut len = 1;
                    while i + len < rows.len() && rows[i + len] == rows[i] + len {
                        len += 1;
                    }
                    let out = &mut out[i * d..(i + len) * d];
                    // Rows held as they would be read are copied (x − 0 = x).
                    match self.rows_in_place::<T>(rows[i], len) {
                        Some(held) => out.copy_from_slice(held),
                        None => {
                            scratch.resize(len * self.scratch_bytes_per_row(), 0);
                            self.read_rows(rows[i], len, &shift, &mut scratch, out)?;
                        }
                    }
                    i += len;
                }
                Ok(())
            })
            .collect();
        read.into_iter().collect::<Result<()>>()?;
        // Integers that the source holds itself convert to finite values of
        // either compute type (a reader's chunks are checked: they may not
        // be what it declares).
        let integers = !self.dtype().is_float() && !matches!(self.data, Data::Rows(_));
        let checked = (!integers).then(|| crate::kernels::first_non_finite(&out[..rows.len() * d]));
        if let Some(k) = checked.flatten() {
            let (row, column) = (rows[k / d], k % d);
            let value = self.value(row, column)?;
            return Err(Error::bad_value(self.name(), row, column, value, 1, T::DTYPE));
        }
        Ok(())
    }

    /// The rows `rows` (any order, repeats allowed) of a sparse source as one
    /// CSR block, as [`Source::read_csr`] reads them (unit rows with
    /// [`Source::unit_rows`]): `indptr` (`rows.len() + 1` offsets from 0),
    /// each stored value's column and value. The buffers are cleared and
    /// refilled; each run of consecutive rows is one read, through buffers
    /// of the longest run's size.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for a row outside the matrix;
    /// [`Error::NonFinite`] for a stored value that is not finite in `T`,
    /// naming its row in the matrix and its column; as [`Source::read_csr`].
    ///
    /// # Panics
    /// If the source is not sparse (a programming error).
    pub fn gather_csr<T: Real>(
        &self,
        rows: &[usize],
        indptr: &mut Vec<usize>,
        indices: &mut Vec<u32>,
        values: &mut Vec<T>,
    ) -> Result<()> {
        assert!(self.sparse_row_nnz().is_some(), "gather_csr on a dense source");
        let n = self.n_samples();
        if let Some(&r) = rows.iter().find(|&&r| r < self.first_row || r >= n) {
            return Err(Error::param("rows", format!("row {r} is outside the array's {n} rows")));
        }
        indptr.clear();
        indices.clear();
        values.clear();
        indptr.push(0);
        let (mut p, mut j, mut v, mut raw) = (Vec::new(), Vec::new(), Vec::<T>::new(), Vec::new());
        let mut i = 0;
        while i < rows.len() {
            let mut len = 1;
            while i + len < rows.len() && rows[i + len] == rows[i] + len {
                len += 1;
            }
            self.read_csr(rows[i], len, &mut p, &mut j, &mut v, &mut raw)?;
            let base = values.len();
            indptr.extend(p[1..].iter().map(|o| base + o));
            indices.extend_from_slice(&j);
            values.extend_from_slice(&v);
            i += len;
        }
        if let Some(k) = crate::kernels::first_non_finite(values) {
            let (row, column) = (rows[indptr.partition_point(|&o| o <= k) - 1], indices[k] as usize);
            let value = self.value(row, column)?;
            return Err(Error::bad_value(self.name(), row, column, value, 1, T::DTYPE));
        }
        Ok(())
    }

    /// The first integer of this source, in row-major order over the rows
    /// read so far as `compute` (`float32` or `float64`), whose magnitude
    /// exceeds what `compute` holds exactly (2^24 or 2^53): `None` when there
    /// was none, or the dtype cannot have one (see [`Dtype::inexact_beyond`]).
    /// Front ends report it once the job is done.
    pub fn inexact_integer(&self, compute: Dtype) -> Option<InexactInteger> {
        *self.inexact_slot(compute)?.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn inexact_slot(&self, compute: Dtype) -> Option<&Mutex<Option<InexactInteger>>> {
        match compute {
            Dtype::F32 => Some(&self.inexact[0]),
            Dtype::F64 => Some(&self.inexact[1]),
            _ => None,
        }
    }

    /// The magnitude to check values against when rows from `start` on are
    /// read as `compute`: `None` when the dtype converts exactly, or when a
    /// value before row `start` was already noted (nothing later can be first).
    fn check_bound(&self, compute: Dtype, start: usize) -> Option<u64> {
        let bound = self.dtype().inexact_beyond(compute)?;
        let seen = *self.inexact_slot(compute)?.lock().unwrap_or_else(PoisonError::into_inner);
        match seen {
            Some(s) if s.row < start => None,
            _ => Some(bound),
        }
    }

    /// Keeps `found` if it comes before the value noted so far.
    fn note_inexact(&self, found: InexactInteger) {
        if let Some(slot) = self.inexact_slot(found.compute) {
            let mut seen = slot.lock().unwrap_or_else(PoisonError::into_inner);
            if seen.is_none_or(|s| (found.row, found.column) < (s.row, s.column)) {
                *seen = Some(found);
            }
        }
    }

    /// Reads the single value at `(row, column)` as `f64`, exactly as stored
    /// (integers beyond 2^53 round to the nearest `f64`).
    ///
    /// # Errors
    /// As [`Source::read_rows`].
    pub fn value(&self, row: usize, column: usize) -> Result<f64> {
        let row = row - self.first_row;
        match &self.data {
            Data::Npy(f) => {
                let h = &f.header;
                let item = h.dtype.itemsize();
                let idx = if h.fortran_order { column * h.shape[0] + row } else { row * h.shape[1] + column };
                let mut b = [0u8; 8];
                read_exact(f, &mut b[..item], h.data_offset + (idx * item) as u64)?;
                Ok(decode(&b, 0, h.dtype, h.endian))
            }
            Data::Rows(r) => Ok(r.read(row, 1)?[column]),
            Data::Csr(_) | Data::CsrFiles(_) | Data::CsrRows(_) => {
                let (_, j, v) = self.sparse_rows(row, 1)?;
                Ok(j.iter().position(|&c| c as usize == column).map_or(0.0, |q| v[q]))
            }
            Data::Memory(a) => {
                let i = row * a.row_stride + column * a.col_stride;
                Ok(match a.values {
                    Values::U8(v) => f64::from(v[i]),
                    Values::I16(v) => f64::from(v[i]),
                    Values::I32(v) => f64::from(v[i]),
                    Values::U32(v) => f64::from(v[i]),
                    Values::I64(v) => v[i] as f64,
                    Values::U64(v) => v[i] as f64,
                    Values::F16(v) => v[i].to_f64(),
                    Values::F32(v) => f64::from(v[i]),
                    Values::F64(v) => v[i],
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::convert::CONVERT_CHUNK_ROWS;
    use super::*;
    use crate::io::write_npy;

    /// Reads all rows as `T` in blocks of `block` rows, as the engine does.
    fn read_all<T: Real>(src: &Source<'_>, block: usize) -> Vec<T> {
        let (n, d) = (src.n_samples(), src.n_features());
        let mut scratch = vec![0u8; block * src.scratch_bytes_per_row()];
        let mut out = vec![T::default(); n * d];
        for start in (0..n).step_by(block) {
            let rows = block.min(n - start);
            src.read_rows(start, rows, &vec![0.0; d], &mut scratch, &mut out[start * d..(start + rows) * d]).unwrap();
        }
        out
    }

    /// Only rows held exactly as a block holds them (C order, the compute
    /// type, not scaled) are read in place, and those give the copied bits.
    #[test]
    fn rows_are_read_in_place_only_as_the_block_would_hold_them() {
        let v: Vec<f64> = (0..24).map(|i| f64::from(i) * 0.5 - 3.0).collect();
        let c = Source::memory(ArrayRef::c_order(Values::F64(&v), 8, 3).unwrap());
        let held = c.rows_in_place::<f64>(3, 4).unwrap();
        assert!(std::ptr::eq(held.as_ptr(), &v[9]));
        assert_eq!(held, &read_all::<f64>(&c, 8)[9..21]);
        // Rows held from a first row on: row 3 is the second held.
        let later = Source::memory(ArrayRef::c_order(Values::F64(&v[6..]), 6, 3).unwrap()).starting_at(2);
        assert!(std::ptr::eq(later.rows_in_place::<f64>(3, 4).unwrap().as_ptr(), &v[9]));
        assert!(c.rows_in_place::<f32>(3, 4).is_none(), "another compute type is converted");
        let f = Source::memory(ArrayRef::strided(Values::F64(&v), 8, 3, 1, 8).unwrap());
        assert!(f.rows_in_place::<f64>(0, 8).is_none(), "Fortran order is gathered");
        let unit = Source::memory(ArrayRef::c_order(Values::F64(&v), 8, 3).unwrap()).unit_rows(true);
        assert!(unit.rows_in_place::<f64>(0, 8).is_none(), "unit rows are scaled");
        let w: Vec<f32> = v.iter().map(|&x| x as f32).collect();
        let s = Source::memory(ArrayRef::c_order(Values::F32(&w), 8, 3).unwrap());
        assert_eq!(s.rows_in_place::<f32>(0, 8), Some(&w[..]));
        assert!(s.rows_in_place::<f64>(0, 8).is_none());
    }

    #[test]
    fn notes_the_first_inexact_integer_per_compute_type() {
        // 3 columns over several conversion chunks; offenders in later chunks
        // come first in the second block, so order across chunks matters.
        let (n, d) = (3 * CONVERT_CHUNK_ROWS + 17, 3);
        let mut v: Vec<i64> = (0..n * d).map(|k| k as i64 % 1000).collect();
        v[(2 * CONVERT_CHUNK_ROWS + 5) * d + 2] = (1 << 53) + 1; // beyond both bounds, later
        v[(CONVERT_CHUNK_ROWS + 3) * d + 1] = -(1 << 24) - 1; // beyond 2^24 only, earlier
        v[(CONVERT_CHUNK_ROWS + 3) * d + 2] = 1 << 24; // exact in float32: never noted
        v[(CONVERT_CHUNK_ROWS + 2) * d] = 1_000_000_000; // beyond 2^24 but exact in float32: never noted
        for block in [n, 1000, 1] {
            let src = Source::memory(ArrayRef::c_order(Values::I64(&v), n, d).unwrap());
            assert_eq!(src.inexact_integer(Dtype::F32), None);
            read_all::<f32>(&src, block);
            let f32_first = src.inexact_integer(Dtype::F32).unwrap();
            assert_eq!(
                (f32_first.row, f32_first.column, f32_first.value, f32_first.exact_up_to),
                (CONVERT_CHUNK_ROWS + 3, 1, -(1 << 24) - 1, 1 << 24),
                "block {block}"
            );
            assert_eq!(src.inexact_integer(Dtype::F64), None);
            let got = read_all::<f64>(&src, block);
            let f64_first = src.inexact_integer(Dtype::F64).unwrap();
            assert_eq!(
                (f64_first.row, f64_first.column, f64_first.value),
                (2 * CONVERT_CHUNK_ROWS + 5, 2, (1 << 53) + 1)
            );
            assert_eq!(f64_first.to_string(), format!("column 2 holds int64 values beyond 2^53 in magnitude (first: 9007199254740993 at row {}), which float64 cannot represent exactly: results computed from them may be rounded", 2 * CONVERT_CHUNK_ROWS + 5));
            // A second pass keeps the first value noted.
            assert_eq!(read_all::<f64>(&src, block), got);
            assert_eq!(src.inexact_integer(Dtype::F64), Some(f64_first));
        }
        // int32 is exact in float64; uint64 is checked like int64.
        let small: Vec<i32> = vec![i32::MAX; 6];
        let src = Source::memory(ArrayRef::c_order(Values::I32(&small), 3, 2).unwrap());
        read_all::<f64>(&src, 3);
        assert_eq!(src.inexact_integer(Dtype::F64), None);
        read_all::<f32>(&src, 3);
        assert_eq!(src.inexact_integer(Dtype::F32).map(|f| (f.row, f.column)), Some((0, 0)));
        let big = [u64::MAX, 1];
        let src = Source::memory(ArrayRef::strided(Values::U64(&big), 2, 1, 1, 1).unwrap());
        assert_eq!(read_all::<f64>(&src, 2), [u64::MAX as f64, 1.0]);
        assert_eq!(src.inexact_integer(Dtype::F64).map(|f| f.value), Some(i128::from(u64::MAX)));
    }

    #[test]
    fn notes_inexact_integers_in_files_of_either_order() {
        let dir = tempfile::tempdir().unwrap();
        let (n, d) = (CONVERT_CHUNK_ROWS + 10, 2);
        let mut v: Vec<u32> = (0..(n * d) as u32).collect();
        v[(CONVERT_CHUNK_ROWS + 2) * d + 1] = (1 << 24) + 1;
        v[(CONVERT_CHUNK_ROWS + 4) * d] = u32::MAX;
        let c = dir.path().join("c.npy");
        write_npy(&c, Dtype::U32, &[n, d], &v, |x: u32, o: &mut Vec<u8>| o.extend_from_slice(&x.to_le_bytes()))
            .unwrap();
        // The same values in Fortran order, big-endian.
        let mut bytes = crate::io::write_header(Dtype::U32, &[n, d]);
        let at = bytes.windows(5).position(|w| w == b"False").unwrap();
        bytes.splice(at..at + 5, *b"True ");
        let at = bytes.windows(3).position(|w| w == b"<u4").unwrap();
        bytes[at] = b'>';
        for j in 0..d {
            for i in 0..n {
                bytes.extend_from_slice(&v[i * d + j].to_be_bytes());
            }
        }
        let f = dir.path().join("f.npy");
        std::fs::write(&f, bytes).unwrap();
        for path in [c, f] {
            let src = Source::open_matrix(&path).unwrap();
            let got = read_all::<f64>(&src, 1000);
            assert_eq!(got, v.iter().map(|&x| f64::from(x)).collect::<Vec<_>>(), "{path:?}");
            assert_eq!(src.inexact_integer(Dtype::F64), None);
            read_all::<f32>(&src, 1000);
            let first = src.inexact_integer(Dtype::F32).unwrap();
            assert_eq!(
                (first.row, first.column, first.value, first.dtype),
                (CONVERT_CHUNK_ROWS + 2, 1, (1 << 24) + 1, Dtype::U32)
            );
        }
    }

    /// Drawn rows (repeats, runs, any order) read by the pool's threads are
    /// the rows read one at a time, from memory and from a file; a value
    /// that is not finite is named at its first place in the draw.
    #[test]
    fn gathered_rows_are_the_rows_read_one_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let (n, d) = (700, 5);
        let mut v: Vec<f64> = (0..n * d).map(|i| (i as f64 * 0.37).sin() * 100.0).collect();
        let path = dir.path().join("x.npy");
        let put = |x: f64, o: &mut Vec<u8>| o.extend_from_slice(&x.to_le_bytes());
        write_npy(&path, Dtype::F64, &[n, d], &v, put).unwrap();
        // Runs that cross pieces, repeats, and single rows, out of order.
        let mut rows: Vec<usize> = (100..300).collect();
        rows.extend((0..400).map(|i| (i * 389) % n));
        rows.extend([5, 5, 5, 699, 0]);
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        let file = Source::open_matrix(&path).unwrap();
        fn check<T: Real>(src: &Source<'_>, rows: &[usize], pool: &rayon::ThreadPool) {
            let d = src.n_features();
            let one = read_all::<T>(src, 1);
            let mut out = vec![T::default(); rows.len() * d];
            pool.install(|| src.gather_rows(rows, &mut out)).unwrap();
            for (r, o) in rows.iter().zip(out.chunks_exact(d)) {
                assert_eq!(o, &one[r * d..(r + 1) * d]);
            }
        }
        // float64 rows in memory are copied as held, the others converted.
        for src in [Source::memory(ArrayRef::c_order(Values::F64(&v), n, d).unwrap()), file] {
            check::<f32>(&src, &rows, &pool);
            check::<f64>(&src, &rows, &pool);
        }
        v[650 * d + 3] = f64::NAN;
        v[150 * d + 1] = f64::INFINITY;
        let src = Source::memory(ArrayRef::c_order(Values::F64(&v), n, d).unwrap());
        let mut out = vec![0.0f64; rows.len() * d];
        let e = pool.install(|| src.gather_rows(&[650, 3, 150, 650], &mut out)).unwrap_err().to_string();
        assert!(e.contains("row 650, column 3"), "{e}");
    }

    #[test]
    fn open_vector_takes_one_dimension_only() {
        let dir = tempfile::tempdir().unwrap();
        let put = |x: f64, o: &mut Vec<u8>| o.extend_from_slice(&x.to_le_bytes());
        let one = dir.path().join("w.npy");
        write_npy(&one, Dtype::F64, &[3], &[1.0, 2.0, 3.0], put).unwrap();
        assert_eq!(Source::open_vector(&one).unwrap().n_samples(), 3);
        let column = dir.path().join("w1.npy");
        write_npy(&column, Dtype::F64, &[3, 1], &[1.0, 2.0, 3.0], put).unwrap();
        let e = Source::open_vector(&column).unwrap_err().to_string();
        assert!(e.contains("expected a 1-D array, found shape [3, 1]") && e.contains("ravel()"), "{e}");
    }
}
