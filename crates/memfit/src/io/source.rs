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

use half::f16;
use multiversion::multiversion;
use rayon::prelude::*;

use super::dtype::{decode, Dtype, Endian};
use super::npy_header::{header_len, parse_header, HeaderError, NpyHeader, PREAMBLE_BYTES};
use crate::error::{Error, Result};
use crate::real::Real;

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
    /// for a bad magic or header, [`Error::UnsupportedDtype`], and
    /// [`Error::Truncated`] when the data is shorter than the shape says.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
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
#[derive(Debug)]
pub enum Source<'a> {
    /// A `.npy` file, read with positioned reads.
    Npy(NpyFile),
    /// A borrowed in-memory array.
    Memory(ArrayRef<'a>),
}

impl<'a> Source<'a> {
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
        Ok(Source::Npy(f))
    }

    /// Opens a `.npy` file holding a vector of shape `(n,)` or `(n, 1)`,
    /// seen as an `(n, 1)` matrix.
    ///
    /// # Errors
    /// Those of [`NpyFile::open`], and [`Error::WrongDimensions`] for any
    /// other shape.
    pub fn open_vector(path: impl AsRef<Path>) -> Result<Source<'static>> {
        let mut f = NpyFile::open(path)?;
        match f.header.shape.as_slice() {
            [n] => f.header.shape = vec![*n, 1],
            [_, 1] => {}
            _ => {
                return Err(Error::WrongDimensions {
                    path: f.path.clone(),
                    expected: 1,
                    shape: f.header.shape.clone(),
                    hint: "save a 1-D array of shape (n_samples,)",
                })
            }
        }
        Ok(Source::Npy(f))
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
        Ok((Source::Npy(f), shape))
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
        Source::Memory(array)
    }

    /// Number of rows.
    pub fn n_samples(&self) -> usize {
        match self {
            Source::Npy(f) => f.header.shape[0],
            Source::Memory(a) => a.n_rows,
        }
    }

    /// Number of columns.
    pub fn n_features(&self) -> usize {
        match self {
            Source::Npy(f) => f.header.shape[1],
            Source::Memory(a) => a.n_cols,
        }
    }

    /// The stored element type.
    pub fn dtype(&self) -> Dtype {
        match self {
            Source::Npy(f) => f.header.dtype,
            Source::Memory(a) => a.values.dtype(),
        }
    }

    /// The file path, or `<memory>` for an in-memory array.
    pub fn name(&self) -> PathBuf {
        match self {
            Source::Npy(f) => f.path.clone(),
            Source::Memory(_) => PathBuf::from("<memory>"),
        }
    }

    /// Bytes of scratch [`Source::read_rows`] needs per row (0 for in-memory
    /// arrays, which are converted in place).
    pub fn scratch_bytes_per_row(&self) -> usize {
        match self {
            Source::Npy(f) => f.header.shape[1] * f.header.dtype.itemsize(),
            Source::Memory(_) => 0,
        }
    }

    /// Reads rows `[start, start + rows)` into `out` (row-major, `rows *
    /// n_features` values), converting each element `x` of column `j` to
    /// `T::from_f64(x - shift[j])`. `scratch` must hold at least
    /// `rows * scratch_bytes_per_row()` bytes; it is not resized.
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
        assert!(start + rows <= self.n_samples() && out.len() >= rows * d && shift.len() == d);
        let out = &mut out[..rows * d];
        match self {
            Source::Npy(f) => {
                let h = &f.header;
                let item = h.dtype.itemsize();
                let raw = &mut scratch[..rows * d * item];
                if h.fortran_order {
                    // Column j of the block is contiguous in the file: read
                    // each column segment, then convert while transposing.
                    let n = h.shape[0] as u64;
                    for j in 0..d {
                        let off = h.data_offset + (j as u64 * n + start as u64) * item as u64;
                        read_exact(f, &mut raw[j * rows * item..(j + 1) * rows * item], off)?;
                    }
                    convert(h.dtype, h.endian, raw, rows, d, 1, rows, shift, out);
                } else {
                    let off = h.data_offset + (start * d * item) as u64;
                    read_exact(f, raw, off)?;
                    convert(h.dtype, h.endian, raw, rows, d, d, 1, shift, out);
                }
            }
            Source::Memory(a) => {
                let v = &a.values;
                let base = start * a.row_stride;
                let (rs, cs) = (a.row_stride, a.col_stride);
                match v {
                    Values::U8(v) => convert_rows(rows, d, rs, cs, shift, out, |k| f64::from(v[base + k])),
                    Values::I16(v) => convert_rows(rows, d, rs, cs, shift, out, |k| f64::from(v[base + k])),
                    Values::I32(v) => convert_rows(rows, d, rs, cs, shift, out, |k| f64::from(v[base + k])),
                    Values::I64(v) => convert_rows(rows, d, rs, cs, shift, out, |k| v[base + k] as f64),
                    Values::F16(v) => convert_rows(rows, d, rs, cs, shift, out, |k| v[base + k].to_f64()),
                    Values::F32(v) => convert_rows(rows, d, rs, cs, shift, out, |k| f64::from(v[base + k])),
                    Values::F64(v) => convert_rows(rows, d, rs, cs, shift, out, |k| v[base + k]),
                }
            }
        }
        Ok(())
    }

    /// Reads the single value at `(row, column)` as `f64`, exactly as stored.
    ///
    /// # Errors
    /// As [`Source::read_rows`].
    pub fn value(&self, row: usize, column: usize) -> Result<f64> {
        match self {
            Source::Npy(f) => {
                let h = &f.header;
                let item = h.dtype.itemsize();
                let idx = if h.fortran_order { column * h.shape[0] + row } else { row * h.shape[1] + column };
                let mut b = [0u8; 8];
                read_exact(f, &mut b[..item], h.data_offset + (idx * item) as u64)?;
                Ok(decode(&b, 0, h.dtype, h.endian))
            }
            Source::Memory(a) => {
                let i = row * a.row_stride + column * a.col_stride;
                Ok(match a.values {
                    Values::U8(v) => f64::from(v[i]),
                    Values::I16(v) => f64::from(v[i]),
                    Values::I32(v) => f64::from(v[i]),
                    Values::I64(v) => v[i] as f64,
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

/// Writes `out[i * d + j] = T::from_f64(get(i * row_step + j * col_step) - shift[j])`
/// for `rows` rows, in parallel over fixed chunks of rows.
fn convert_rows<T: Real>(
    rows: usize,
    d: usize,
    row_step: usize,
    col_step: usize,
    shift: &[f64],
    out: &mut [T],
    get: impl Fn(usize) -> f64 + Sync,
) {
    const CHUNK_ROWS: usize = 4096;
    out[..rows * d].par_chunks_mut(CHUNK_ROWS * d).enumerate().for_each(|(c, o)| {
        convert_chunk(c * CHUNK_ROWS, d, row_step, col_step, shift, o, &get);
    });
}

#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
fn convert_chunk<T: Real>(
    first_row: usize,
    d: usize,
    row_step: usize,
    col_step: usize,
    shift: &[f64],
    out: &mut [T],
    get: &(impl Fn(usize) -> f64 + Sync),
) {
    for (r, row) in out.chunks_exact_mut(d).enumerate() {
        let base = (first_row + r) * row_step;
        if col_step == 1 {
            for (j, (v, s)) in row.iter_mut().zip(shift).enumerate() {
                *v = T::from_f64(get(base + j) - s);
            }
        } else {
            for (j, (v, s)) in row.iter_mut().zip(shift).enumerate() {
                *v = T::from_f64(get(base + j * col_step) - s);
            }
        }
    }
}

/// Converts C-order raw rows (`N` bytes per element, decoded by `dec`) into
/// `out`, in parallel over fixed chunks of rows.
fn convert_c<T: Real, const N: usize>(
    raw: &[u8],
    d: usize,
    shift: &[f64],
    out: &mut [T],
    dec: impl Fn([u8; N]) -> f64 + Sync,
) {
    const CHUNK_ROWS: usize = 4096;
    let rows = out.len() / d;
    out.par_chunks_mut(CHUNK_ROWS * d).zip(raw[..rows * d * N].par_chunks(CHUNK_ROWS * d * N)).for_each(|(o, r)| {
        convert_c_chunk::<T, N>(r, d, shift, o, &dec);
    });
}

#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
fn convert_c_chunk<T: Real, const N: usize>(
    raw: &[u8],
    d: usize,
    shift: &[f64],
    out: &mut [T],
    dec: &(impl Fn([u8; N]) -> f64 + Sync),
) {
    for (orow, rrow) in out.chunks_exact_mut(d).zip(raw.chunks_exact(d * N)) {
        for ((o, b), s) in orow.iter_mut().zip(rrow.chunks_exact(N)).zip(shift) {
            *o = T::from_f64(dec(b.try_into().expect("N bytes")) - s);
        }
    }
}

/// Converts `rows * d` raw elements, where element `(i, j)` sits at index
/// `i * row_step + j * col_step` of `raw`, into row-major `out`.
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
) {
    if col_step == 1 {
        // C order: rows are contiguous runs of elements.
        macro_rules! c_order {
            ($t:ty, $n:literal) => {
                match endian {
                    Endian::Little => convert_c::<T, $n>(raw, d, shift, out, |b| <$t>::from_le_bytes(b) as f64),
                    Endian::Big => convert_c::<T, $n>(raw, d, shift, out, |b| <$t>::from_be_bytes(b) as f64),
                }
            };
        }
        return match dtype {
            Dtype::U8 => convert_c::<T, 1>(raw, d, shift, out, |b| f64::from(b[0])),
            Dtype::I16 => c_order!(i16, 2),
            Dtype::I32 => c_order!(i32, 4),
            Dtype::I64 => c_order!(i64, 8),
            Dtype::F32 => c_order!(f32, 4),
            Dtype::F64 => c_order!(f64, 8),
            Dtype::F16 => match endian {
                Endian::Little => convert_c::<T, 2>(raw, d, shift, out, |b| f16::from_le_bytes(b).to_f64()),
                Endian::Big => convert_c::<T, 2>(raw, d, shift, out, |b| f16::from_be_bytes(b).to_f64()),
            },
        };
    }
    macro_rules! typed {
        ($t:ty, $n:literal) => {
            match endian {
                Endian::Little => convert_rows(rows, d, row_step, col_step, shift, out, |k| {
                    <$t>::from_le_bytes(raw[k * $n..k * $n + $n].try_into().unwrap()) as f64
                }),
                Endian::Big => convert_rows(rows, d, row_step, col_step, shift, out, |k| {
                    <$t>::from_be_bytes(raw[k * $n..k * $n + $n].try_into().unwrap()) as f64
                }),
            }
        };
    }
    match dtype {
        Dtype::U8 => convert_rows(rows, d, row_step, col_step, shift, out, |k| f64::from(raw[k])),
        Dtype::I16 => typed!(i16, 2),
        Dtype::I32 => typed!(i32, 4),
        Dtype::I64 => typed!(i64, 8),
        Dtype::F32 => typed!(f32, 4),
        Dtype::F64 => typed!(f64, 8),
        Dtype::F16 => convert_rows(rows, d, row_step, col_step, shift, out, |k| decode(raw, k, Dtype::F16, endian)),
    }
}
