//! Row-block readers over `.npy` files and in-memory arrays.
//!
//! A [`Source`] hands out rows `[start, start + rows)` converted to the
//! compute type and shifted by a per-column origin, into a buffer the caller
//! owns and reuses. Files are read with positioned reads (`pread`) into a
//! reused byte buffer, so their pages never count toward resident memory
//! (unlike an mmap), and the file never has to fit in RAM.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use half::f16;
use multiversion::multiversion;
use rayon::prelude::*;

use super::dtype::{decode, decode_integer, Dtype, Endian, InexactInteger};
use super::npy_header::{header_len, parse_header, HeaderError, NpyHeader, PREAMBLE_BYTES};
use crate::dtype::Real;
use crate::error::{Error, Result};

/// An opened `.npy` file: its header, validated against the file's length.
#[derive(Debug)]
pub struct NpyFile {
    path: PathBuf,
    file: File,
    header: NpyHeader,
}

impl NpyFile {
    /// Opens `path` and parses its header.
    ///
    /// # Errors
    /// [`Error::Io`] if the file cannot be opened or read, [`Error::NotNpy`]
    /// for a directory, a pipe, socket or device, a bad magic or header, [`Error::UnsupportedDtype`], and
    /// [`Error::Truncated`] when the data is shorter than the shape says.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        // Before opening: opening a named pipe blocks until a writer comes.
        if let Ok(kind) = std::fs::metadata(&path).map(|m| m.file_type()) {
            if !kind.is_file() && !kind.is_dir() {
                let reason = "it is not a regular file (a pipe, socket or device); positioned reads need a file";
                return Err(Error::NotNpy { path, reason: reason.into() });
            }
        }
        let file = File::open(&path).map_err(|e| Error::io(&path, "open", e))?;
        let meta = file.metadata().map_err(|e| Error::io(&path, "stat", e))?;
        if meta.is_dir() {
            return Err(Error::NotNpy { path, reason: "it is a directory".into() });
        }
        let len = meta.len();
        let not_npy = |reason: String| Error::NotNpy { path: path.clone(), reason };
        let mut pre = [0u8; PREAMBLE_BYTES];
        let got = read_up_to(&file, &mut pre, 0).map_err(|e| Error::io(&path, "read", e))?;
        let hlen = match header_len(&pre[..got]) {
            Ok(n) => n,
            Err(HeaderError::Short) => return Err(not_npy(format!("only {got} bytes, too short for a header"))),
            Err(HeaderError::Malformed(m) | HeaderError::Unsupported(m)) => return Err(not_npy(m)),
        };
        if hlen as u64 > len || hlen > (1 << 24) {
            return Err(not_npy(format!("the header claims {hlen} bytes but the file has {len}")));
        }
        let mut hbuf = vec![0u8; hlen];
        file.read_exact_at(&mut hbuf, 0).map_err(|e| Error::io(&path, "read", e))?;
        let header = match parse_header(&hbuf) {
            Ok(h) => h,
            Err(HeaderError::Unsupported(descr)) => return Err(Error::UnsupportedDtype { path, descr }),
            Err(HeaderError::Malformed(m)) => return Err(not_npy(m)),
            Err(HeaderError::Short) => return Err(not_npy("truncated header".into())),
        };
        let expected = header.data_bytes().ok_or_else(|| not_npy(format!("shape {:?} overflows", header.shape)))?;
        let found = len - header.data_offset;
        if found < expected {
            return Err(Error::Truncated { path, expected_bytes: expected, found_bytes: found });
        }
        Ok(NpyFile { path, file, header })
    }

    /// The parsed header.
    pub fn header(&self) -> &NpyHeader {
        &self.header
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open file, for positioned reads.
    pub fn file(&self) -> &File {
        &self.file
    }
}

fn read_up_to(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

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
    fn len(&self) -> usize {
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
    fn dtype(&self) -> Dtype {
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
    values: Values<'a>,
    n_rows: usize,
    n_cols: usize,
    row_stride: usize,
    col_stride: usize,
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
}

#[derive(Debug)]
enum Data<'a> {
    /// A `.npy` file, read with positioned reads.
    Npy(NpyFile),
    /// A borrowed in-memory array.
    Memory(ArrayRef<'a>),
    /// Rows computed on demand.
    Rows(Box<dyn RowSource + 'a>),
}

/// A 2-D array whose rows are computed when read (an array expression):
/// a [`Source`] reads it block by block like a file, never whole.
pub trait RowSource: Send + Sync + std::fmt::Debug {
    /// Number of rows.
    fn n_rows(&self) -> usize;
    /// Number of columns.
    fn n_cols(&self) -> usize;
    /// The dtype of the values.
    fn dtype(&self) -> Dtype;
    /// Working bytes per row a read needs (its part of the block buffers).
    fn bytes_per_row(&self) -> usize;
    /// Bytes held while the source lives (intermediate results).
    fn held_bytes(&self) -> u64;
    /// Computes what must exist before rows can be read (an expression's
    /// intermediate results), within [`RowSource::held_bytes`]; stops with
    /// [`crate::Error::Cancelled`] once `cancelled` is set. Reads call it
    /// themselves when it has not run; jobs call it first, so that its
    /// errors and cancellation come before any of their work.
    ///
    /// # Errors
    /// The computation's errors (typed); [`crate::Error::Cancelled`].
    fn prepare(&self, _cancelled: &std::sync::atomic::AtomicBool) -> Result<()> {
        Ok(())
    }
    /// The name errors give the rows (`<expression>` unless overridden;
    /// `<memory>` for an array that the front end names itself).
    fn name(&self) -> PathBuf {
        PathBuf::from("<expression>")
    }
    /// Rows `[start, start + rows)` in row-major order as `f64` (exact for
    /// every dtype except 64-bit integers beyond 2^53).
    ///
    /// # Errors
    /// I/O errors of the reads below.
    fn read(&self, start: usize, rows: usize) -> Result<Vec<f64>>;
}

/// What a conversion checks for inexact integers: values whose magnitude
/// exceeds `bound` (2^24 for `float32`, 2^53 for `float64`) and that the
/// compute type does not hold exactly; `exact(k)` is raw element `k` as
/// stored.
#[derive(Clone, Copy)]
struct Check<'f> {
    bound: u64,
    exact: &'f (dyn Fn(usize) -> i128 + Sync),
}

impl Check<'_> {
    /// The value of raw element `k`, when the compute type rounds it.
    fn beyond(&self, k: usize) -> Option<i128> {
        let v = (self.exact)(k);
        let held = if self.bound == 1 << 24 { (v as f32) as i128 == v } else { (v as f64) as i128 == v };
        (v.unsigned_abs() > u128::from(self.bound) && !held).then_some(v)
    }
}

impl<'a> Source<'a> {
    fn new(data: Data<'a>) -> Self {
        Source { data, first_row: 0, inexact: Default::default() }
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

    /// Wraps rows computed on demand.
    pub fn rows(rows: Box<dyn RowSource + 'a>) -> Self {
        Source::new(Data::Rows(rows))
    }

    /// Bytes the source holds while it lives (0 except for computed rows).
    pub fn held_bytes(&self) -> u64 {
        match &self.data {
            Data::Rows(r) => r.held_bytes(),
            _ => 0,
        }
    }

    /// Computes what computed rows need before they can be read (see
    /// [`RowSource::prepare`]); nothing for files and in-memory arrays.
    ///
    /// # Errors
    /// As [`RowSource::prepare`].
    pub fn prepare(&self, cancelled: &std::sync::atomic::AtomicBool) -> Result<()> {
        match &self.data {
            Data::Rows(r) => r.prepare(cancelled),
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
            }
    }

    /// Number of columns.
    pub fn n_features(&self) -> usize {
        match &self.data {
            Data::Npy(f) => f.header.shape[1],
            Data::Memory(a) => a.n_cols,
            Data::Rows(r) => r.n_cols(),
        }
    }

    /// The stored element type.
    pub fn dtype(&self) -> Dtype {
        match &self.data {
            Data::Npy(f) => f.header.dtype,
            Data::Memory(a) => a.values.dtype(),
            Data::Rows(r) => r.dtype(),
        }
    }

    /// The file path, or `<memory>` for an in-memory array.
    pub fn name(&self) -> PathBuf {
        match &self.data {
            Data::Npy(f) => f.path.clone(),
            Data::Memory(_) => PathBuf::from("<memory>"),
            Data::Rows(r) => r.name(),
        }
    }

    /// Bytes of scratch [`Source::read_rows`] needs per row (0 for in-memory
    /// arrays, which are converted in place).
    pub fn scratch_bytes_per_row(&self) -> usize {
        match &self.data {
            Data::Npy(f) => f.header.shape[1] * f.header.dtype.itemsize(),
            Data::Memory(_) => 0,
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

fn read_exact(f: &NpyFile, buf: &mut [u8], offset: u64) -> Result<()> {
    f.file.read_exact_at(buf, offset).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            let len = f.file.metadata().map(|m| m.len()).unwrap_or(0);
            Error::Truncated {
                path: f.path.clone(),
                expected_bytes: f.header.data_bytes().unwrap_or(0),
                found_bytes: len.saturating_sub(f.header.data_offset),
            }
        } else {
            Error::io(&f.path, "read", e)
        }
    })
}

/// Rows per parallel conversion chunk.
const CHUNK_ROWS: usize = 4096;

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
fn convert_rows<T: Real>(
    rows: usize,
    d: usize,
    row_step: usize,
    col_step: usize,
    shift: &[f64],
    out: &mut [T],
    get: impl Fn(usize) -> f64 + Sync,
    check: Option<Check<'_>>,
) -> Option<(usize, i128)> {
    out[..rows * d]
        .par_chunks_mut(CHUNK_ROWS * d)
        .enumerate()
        .filter_map(|(c, o)| {
            let first_row = c * CHUNK_ROWS;
            let Some(check) = check else {
                convert_chunk::<T, false>(first_row, d, row_step, col_step, shift, o, &get, 0.0);
                return None;
            };
            let limit = check.bound as f64;
            if !convert_chunk::<T, true>(first_row, d, row_step, col_step, shift, o, &get, limit) {
                return None;
            }
            first_beyond(&check, first_row, o.len() / d, d, |i, j| i * row_step + j * col_step)
        })
        .min_by_key(|&(k, _)| k)
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
    out.par_chunks_mut(CHUNK_ROWS * d)
        .zip(raw[..rows * d * N].par_chunks(CHUNK_ROWS * d * N))
        .enumerate()
        .filter_map(|(c, (o, r))| {
            let Some(check) = check else {
                convert_c_chunk::<T, N, false>(r, d, shift, o, &dec, 0.0);
                return None;
            };
            if !convert_c_chunk::<T, N, true>(r, d, shift, o, &dec, check.bound as f64) {
                return None;
            }
            first_beyond(&check, c * CHUNK_ROWS, o.len() / d, d, |i, j| i * d + j)
        })
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
fn convert<T: Real>(
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
            Dtype::Bool | Dtype::U8 => convert_c::<T, 1>(raw, d, shift, out, |b| f64::from(b[0]), check),
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
        Dtype::Bool | Dtype::U8 => convert_rows(rows, d, row_step, col_step, shift, out, |k| f64::from(raw[k]), check),
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

#[cfg(test)]
mod tests {
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

    #[test]
    fn notes_the_first_inexact_integer_per_compute_type() {
        // 3 columns over several conversion chunks; offenders in later chunks
        // come first in the second block, so order across chunks matters.
        let (n, d) = (3 * CHUNK_ROWS + 17, 3);
        let mut v: Vec<i64> = (0..n * d).map(|k| k as i64 % 1000).collect();
        v[(2 * CHUNK_ROWS + 5) * d + 2] = (1 << 53) + 1; // beyond both bounds, later
        v[(CHUNK_ROWS + 3) * d + 1] = -(1 << 24) - 1; // beyond 2^24 only, earlier
        v[(CHUNK_ROWS + 3) * d + 2] = 1 << 24; // exact in float32: never noted
        v[(CHUNK_ROWS + 2) * d] = 1_000_000_000; // beyond 2^24 but exact in float32: never noted
        for block in [n, 1000, 1] {
            let src = Source::memory(ArrayRef::c_order(Values::I64(&v), n, d).unwrap());
            assert_eq!(src.inexact_integer(Dtype::F32), None);
            read_all::<f32>(&src, block);
            let f32_first = src.inexact_integer(Dtype::F32).unwrap();
            assert_eq!(
                (f32_first.row, f32_first.column, f32_first.value, f32_first.exact_up_to),
                (CHUNK_ROWS + 3, 1, -(1 << 24) - 1, 1 << 24),
                "block {block}"
            );
            assert_eq!(src.inexact_integer(Dtype::F64), None);
            let got = read_all::<f64>(&src, block);
            let f64_first = src.inexact_integer(Dtype::F64).unwrap();
            assert_eq!((f64_first.row, f64_first.column, f64_first.value), (2 * CHUNK_ROWS + 5, 2, (1 << 53) + 1));
            assert_eq!(f64_first.to_string(), format!("column 2 holds int64 values beyond 2^53 in magnitude (first: 9007199254740993 at row {}), which float64 cannot represent exactly: results computed from them may be rounded", 2 * CHUNK_ROWS + 5));
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
        let (n, d) = (CHUNK_ROWS + 10, 2);
        let mut v: Vec<u32> = (0..(n * d) as u32).collect();
        v[(CHUNK_ROWS + 2) * d + 1] = (1 << 24) + 1;
        v[(CHUNK_ROWS + 4) * d] = u32::MAX;
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
                (CHUNK_ROWS + 2, 1, (1 << 24) + 1, Dtype::U32)
            );
        }
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
