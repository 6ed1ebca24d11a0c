//! A CSR matrix stored as a folder of `.npy` files, read in row blocks
//! with positioned reads (out of core): the arrays scipy's
//! `scipy.sparse.save_npz` writes (`indptr.npy`, `indices.npy`,
//! `data.npy`, `shape.npy`; `format.npy` is ignored), so an unzipped
//! `.npz` is such a folder.

use std::path::{Path, PathBuf};

use super::npy::read_exact;
use super::NpyFile;
use crate::dtype::Real;
use crate::error::{Error, Result};
use crate::io::dtype::{decode, Dtype};
use crate::io::header_len;

/// Checks the folder's `format.npy`, when there is one (scipy writes the
/// format's name, a 0-d unicode or bytes array): only `csr` is read; a
/// `csc` matrix read as CSR would be its transpose.
///
/// # Errors
/// [`Error::InvalidParameter`] (`X`) for another format; read errors.
fn check_format(dir: &Path) -> Result<()> {
    let path = dir.join("format.npy");
    if !path.exists() {
        return Ok(());
    }
    let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, "read", e))?;
    let start = header_len(&bytes).unwrap_or(bytes.len()).min(bytes.len());
    // UTF-32 or bytes: the characters without their zero bytes.
    let name: String = bytes[start..].iter().filter(|&&b| b != 0).map(|&b| char::from(b)).collect();
    if name.trim() == "csr" {
        return Ok(());
    }
    let hint = if name.trim() == "csc" { "; save X.tocsr() instead" } else { "; save X.tocsr()" };
    Err(Error::param(
        "X",
        format!("{}: the folder holds a {:?} matrix; only CSR is read{hint}", path.display(), name.trim()),
    ))
}

/// Offsets read at a time while the folder is opened (8 bytes each).
const OFFSET_PIECE: usize = 1 << 16;

/// An opened CSR folder (see the module docs).
#[derive(Debug)]
pub struct CsrFiles {
    dir: PathBuf,
    indptr: NpyFile,
    indices: NpyFile,
    data: NpyFile,
    n_rows: usize,
    n_cols: usize,
    max_row_nnz: usize,
}

impl CsrFiles {
    /// Opens the folder `dir` and checks its arrays: `shape.npy` two
    /// integers, `indptr.npy` `n_rows + 1` integers (int32 or int64)
    /// from 0 to `nnz`, non-decreasing (read once, in pieces), `indices.npy`
    /// (int32 or int64) and `data.npy` (any numeric dtype) `nnz` values.
    /// Columns are checked as blocks are read.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`X`) naming the file that is missing or
    /// wrong, or a `format.npy` other than `csr`; those of
    /// [`NpyFile::open`].
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        let bad = |file: &str, reason: String| Error::param("X", format!("{}: {reason}", dir.join(file).display()));
        let open = |file: &str| -> Result<NpyFile> {
            let path = dir.join(file);
            if !path.exists() {
                return Err(bad(
                    file,
                    format!("a sparse (CSR) folder holds indptr.npy, indices.npy, data.npy and shape.npy, as scipy.sparse.save_npz writes them (unzip the .npz); {file} is missing"),
                ));
            }
            NpyFile::open(path)
        };
        let vector = |file: &str, f: &NpyFile, integer: bool| -> Result<usize> {
            let h = &f.header;
            if h.shape.len() != 1 {
                return Err(bad(file, format!("expected a 1-D array, found shape {:?}", h.shape)));
            }
            if integer && !matches!(h.dtype, Dtype::I32 | Dtype::I64) {
                return Err(bad(file, format!("expected int32 or int64 values, found {}", h.dtype.name())));
            }
            Ok(h.shape[0])
        };
        check_format(&dir)?;
        let shape_file = open("shape.npy")?;
        if vector("shape.npy", &shape_file, true)? != 2 {
            return Err(bad("shape.npy", format!("expected 2 values, found shape {:?}", shape_file.header.shape)));
        }
        let mut raw = [0u8; 16];
        let item = shape_file.header.dtype.itemsize();
        read_exact(&shape_file, &mut raw[..2 * item], shape_file.header.data_offset)?;
        let dim = |i: usize| decode(&raw, i, shape_file.header.dtype, shape_file.header.endian);
        let (n, d) = (dim(0), dim(1));
        if !(n >= 0.0 && d >= 0.0 && d <= f64::from(u32::MAX)) {
            return Err(bad(
                "shape.npy",
                format!("the shape ({n}, {d}) is not that of a matrix of at most 2^32 − 1 columns"),
            ));
        }
        let (n_rows, n_cols) = (n as usize, d as usize);
        let (indptr, indices, data) = (open("indptr.npy")?, open("indices.npy")?, open("data.npy")?);
        if vector("indptr.npy", &indptr, true)? != n_rows + 1 {
            return Err(bad(
                "indptr.npy",
                format!("expected n_samples + 1 = {} offsets, found {}", n_rows + 1, indptr.header.shape[0]),
            ));
        }
        let nnz = vector("indices.npy", &indices, true)?;
        if vector("data.npy", &data, false)? != nnz {
            return Err(bad(
                "data.npy",
                format!("indices.npy holds {nnz} values but data.npy {}", data.header.shape[0]),
            ));
        }
        let mut files = CsrFiles { dir, indptr, indices, data, n_rows, n_cols, max_row_nnz: 0 };
        // The offsets, piece by piece: from 0 to nnz, never decreasing.
        let (mut offsets, mut raw, mut last) = (Vec::new(), Vec::new(), 0usize);
        for at in (0..=n_rows).step_by(OFFSET_PIECE) {
            let count = OFFSET_PIECE.min(n_rows + 1 - at);
            files.offsets(at, count, &mut offsets, &mut raw)?;
            for (i, &o) in offsets.iter().enumerate() {
                let row = at + i;
                if (row == 0 && o != 0) || o < last || (row == n_rows && o != nnz) {
                    return Err(files.bad_offsets(row, last, o, nnz));
                }
                files.max_row_nnz = files.max_row_nnz.max(o - last);
                last = o;
            }
        }
        Ok(files)
    }

    fn bad_offsets(&self, row: usize, before: usize, at: usize, nnz: usize) -> Error {
        Error::param(
            "X",
            format!(
                "{}: offset {row} is {at} after {before}: offsets must run from 0 to len(data) = {nnz} without decreasing",
                self.dir.join("indptr.npy").display()
            ),
        )
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

    /// The stored values' dtype.
    pub fn dtype(&self) -> Dtype {
        self.data.header.dtype
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Bytes of raw scratch per block row: an offset, and the densest row's
    /// columns and values as stored.
    pub fn scratch_bytes_per_row(&self) -> usize {
        8 + self.max_row_nnz * (self.indices.header.dtype.itemsize() + self.data.header.dtype.itemsize())
    }

    /// Offsets `at..at + count` into `out`.
    fn offsets(&self, at: usize, count: usize, out: &mut Vec<usize>, raw: &mut Vec<u8>) -> Result<()> {
        let h = &self.indptr.header;
        let item = h.dtype.itemsize();
        raw.resize(count * item, 0);
        read_exact(&self.indptr, raw, h.data_offset + (at * item) as u64)?;
        out.clear();
        for i in 0..count {
            let v = decode(raw, i, h.dtype, h.endian);
            if v < 0.0 {
                return Err(self.bad_offsets(at + i, 0, 0, self.data.header.shape[0]));
            }
            out.push(v as usize);
        }
        Ok(())
    }

    /// Rows `at..at + rows` as a CSR block (see `Source::read_csr`),
    /// checking each row's columns: within `0..n_cols`, strictly
    /// increasing.
    ///
    /// # Errors
    /// Read errors; [`Error::InvalidParameter`] (`X`) for a bad column.
    pub(super) fn read<T: Real>(
        &self,
        at: usize,
        rows: usize,
        indptr: &mut Vec<usize>,
        indices: &mut Vec<u32>,
        values: &mut Vec<T>,
        raw: &mut Vec<u8>,
    ) -> Result<()> {
        self.offsets(at, rows + 1, indptr, raw)?;
        let (a, b) = (indptr[0], indptr[rows]);
        indptr.iter_mut().for_each(|o| *o -= a);
        let (hi, hd) = (&self.indices.header, &self.data.header);
        raw.resize((b - a) * hi.dtype.itemsize().max(hd.dtype.itemsize()), 0);
        let bytes = &mut raw[..(b - a) * hi.dtype.itemsize()];
        read_exact(&self.indices, bytes, hi.data_offset + (a * hi.dtype.itemsize()) as u64)?;
        indices.clear();
        for r in 0..rows {
            let mut last = -1.0;
            for p in indptr[r]..indptr[r + 1] {
                let j = decode(bytes, p, hi.dtype, hi.endian);
                let row = at + r;
                let why = if !(0.0..self.n_cols as f64).contains(&j) {
                    Some(format!(
                        "row {row} has column index {j}, outside 0..{} (the columns shape.npy gives)",
                        self.n_cols
                    ))
                } else if j <= last {
                    Some(format!(
                        "row {row}'s column indices are not strictly increasing ({last} then {j}); save the matrix after X.sum_duplicates()"
                    ))
                } else {
                    None
                };
                if let Some(why) = why {
                    return Err(Error::param("X", format!("{}: {why}", self.dir.display())));
                }
                last = j;
                indices.push(j as u32);
            }
        }
        let bytes = &mut raw[..(b - a) * hd.dtype.itemsize()];
        read_exact(&self.data, bytes, hd.data_offset + (a * hd.dtype.itemsize()) as u64)?;
        values.clear();
        values.extend((0..b - a).map(|p| T::from_f64(decode(bytes, p, hd.dtype, hd.endian))));
        Ok(())
    }
}
