//! A CSR matrix stored as a folder of `.npy` files, read in row blocks
//! with positioned reads (out of core): the arrays scipy's
//! `scipy.sparse.save_npz` writes (`indptr.npy`, `indices.npy`,
//! `data.npy`, `shape.npy`, and `format.npy`, which must say `csr`), so an
//! unzipped `.npz` is such a folder. A `.npz` itself is unpacked member by
//! member into unnamed scratch files and read the same way
//! ([`CsrFiles::open_npz`]).

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::npy::read_exact;
use super::NpyFile;
use crate::dtype::Real;
use crate::error::{Error, Result};
use crate::io::dtype::{decode, Dtype};
use crate::io::{check_disk_space, header_len, PlannedWrite};

/// Checks the bytes of a `format.npy` (at `path`), when there is one
/// (scipy writes the format's name, a 0-d unicode or bytes array): only
/// `csr` is read; a `csc` matrix read as CSR would be its transpose.
///
/// # Errors
/// [`Error::InvalidParameter`] (`X`) for another format.
fn check_format(path: &Path, bytes: Option<Vec<u8>>) -> Result<()> {
    let Some(bytes) = bytes else { return Ok(()) };
    let start = header_len(&bytes).unwrap_or(bytes.len()).min(bytes.len());
    // UTF-32 or bytes: the characters without their zero bytes.
    let name: String = bytes[start..].iter().filter(|&&b| b != 0).map(|&b| char::from(b)).collect();
    if name.trim() == "csr" {
        return Ok(());
    }
    let hint = if name.trim() == "csc" { "; hint: save X.tocsr() instead" } else { "; hint: save X.tocsr()" };
    Err(Error::param(
        "X",
        format!("{}: the matrix is stored as {:?}; only CSR is read{hint}", path.display(), name.trim()),
    ))
}

/// Offsets read at a time while the folder is opened (8 bytes each).
const OFFSET_PIECE: usize = 1 << 16;

/// The arrays of a CSR folder or `.npz`, besides `format.npy`.
const MEMBERS: [&str; 4] = ["shape.npy", "indptr.npy", "indices.npy", "data.npy"];

/// The most bytes of a `format.npy` read (scipy's is about 130).
const FORMAT_BYTES: u64 = 4096;

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
        let format_path = dir.join("format.npy");
        let format = if format_path.exists() {
            Some(std::fs::read(&format_path).map_err(|e| Error::io(&format_path, "read", e))?)
        } else {
            None
        };
        check_format(&format_path, format)?;
        let holds = "a sparse (CSR) folder holds indptr.npy, indices.npy, data.npy and shape.npy, as scipy.sparse.save_npz writes them";
        Self::from_members(dir.clone(), holds, |file| {
            let path = dir.join(file);
            if path.exists() {
                NpyFile::open(path).map(Some)
            } else {
                Ok(None)
            }
        })
    }

    /// Opens the `.npz` file `path` that `scipy.sparse.save_npz` writes (a
    /// zip archive of the folder's arrays), then as [`Self::open`]: an
    /// array stored uncompressed (`save_npz(..., compressed=False)`) is
    /// read where it lies in the archive; a deflated one (scipy's default)
    /// is unpacked with a fixed-size buffer into an unnamed file in
    /// `scratch_dir` (removed when the matrix is dropped, however the
    /// process ends), taking its uncompressed size on disk. Memory holds
    /// none of them.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`X`) for a file that is not a zip
    /// archive, or one whose members are missing, corrupt or not a CSR
    /// matrix's; [`Error::NoDiskSpace`] when `scratch_dir` cannot hold the
    /// unpacked arrays (checked before any is written); [`Error::Io`];
    /// those of [`NpyFile::open`], naming the member (`X.npz/indices.npy`).
    pub fn open_npz(path: impl AsRef<Path>, scratch_dir: &Path) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let file = File::open(&path).map_err(|e| Error::io(&path, "open", e))?;
        let not_npz = |why: String| Error::param("X", format!("{}: {why}", path.display()));
        let mut zip = zip::ZipArchive::new(file).map_err(|e| {
            not_npz(format!("not a .npz (zip) archive ({e}); hint: save it with scipy.sparse.save_npz"))
        })?;
        let size = |zip: &mut zip::ZipArchive<File>, name: &str| zip.by_name(name).map(|m| m.size()).ok();
        let deflated = |zip: &mut zip::ZipArchive<File>, name: &str| {
            zip.by_name(name).ok().filter(|m| m.compression() != zip::CompressionMethod::Stored).map(|m| m.size())
        };
        let total: u64 = MEMBERS.iter().filter_map(|m| deflated(&mut zip, m)).fold(0, u64::saturating_add);
        check_disk_space(&[PlannedWrite::inside("the .npz's arrays, unpacked", scratch_dir, total)])?;
        let format = match size(&mut zip, "format.npy") {
            None => None,
            Some(n) if n > FORMAT_BYTES => Some(Vec::new()),
            Some(_) => {
                let mut bytes = Vec::new();
                let mut m = zip.by_name("format.npy").map_err(|e| not_npz(format!("format.npy: {e}")))?;
                m.read_to_end(&mut bytes).map_err(|e| not_npz(format!("format.npy: {e}")))?;
                Some(bytes)
            }
        };
        check_format(&path.join("format.npy"), format)?;
        let holds = "a sparse (CSR) .npz holds indptr.npy, indices.npy, data.npy and shape.npy, as scipy.sparse.save_npz writes them";
        Self::from_members(path.clone(), holds, |name| {
            let mut m = match zip.by_name(name) {
                Ok(m) => m,
                Err(zip::result::ZipError::FileNotFound) => return Ok(None),
                Err(e) => return Err(not_npz(format!("{name}: {e}"))),
            };
            let expected = m.size();
            if let (zip::CompressionMethod::Stored, Some(start)) = (m.compression(), m.data_start()) {
                let file = File::open(&path).map_err(|e| Error::io(&path, "open", e))?;
                return NpyFile::from_part(path.join(name), file, start, expected).map(Some);
            }
            let mut out = tempfile::tempfile_in(scratch_dir)
                .map_err(|e| Error::io(scratch_dir, "use as the scratch folder", e))?;
            // At most the size the archive declares (the disk check's).
            let written = std::io::copy(&mut (&mut m).take(expected), &mut out)
                .map_err(|e| not_npz(format!("{name}: cannot be unpacked ({e})")))?;
            if written != expected {
                return Err(not_npz(format!("{name}: holds {written} bytes but the archive says {expected}")));
            }
            NpyFile::from_file(path.join(name), out).map(Some)
        })
    }

    /// Opens the matrix whose arrays `member` opens by name (`None` for a
    /// missing one, reported with what `holds` says), named `dir` in
    /// messages.
    fn from_members(
        dir: PathBuf,
        holds: &str,
        mut member: impl FnMut(&str) -> Result<Option<NpyFile>>,
    ) -> Result<Self> {
        let bad = |file: &str, reason: String| Error::param("X", format!("{}: {reason}", dir.join(file).display()));
        let mut open = |file: &str| -> Result<NpyFile> {
            member(file)?.ok_or_else(|| bad(file, format!("{holds}; {file} is missing")))
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
        let shape_file = open(MEMBERS[0])?;
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
        let (indptr, indices, data) = (open(MEMBERS[1])?, open(MEMBERS[2])?, open(MEMBERS[3])?);
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

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::io::write_header;

    /// The arrays of a 4 × 6 CSR matrix with an empty row, as `.npy`
    /// bytes: int64 offsets, int32 columns, float64 values, the shape.
    fn members() -> Vec<(&'static str, Vec<u8>)> {
        let npy = |dtype: Dtype, n: usize, bytes: Vec<u8>| [write_header(dtype, &[n]), bytes].concat();
        let indptr: Vec<u8> = [0i64, 2, 3, 3, 5].iter().flat_map(|v| v.to_le_bytes()).collect();
        let indices: Vec<u8> = [1i32, 4, 0, 2, 5].iter().flat_map(|v| v.to_le_bytes()).collect();
        let data: Vec<u8> = [1.5f64, -2.0, 3.25, 0.5, 7.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        let shape: Vec<u8> = [4i64, 6].iter().flat_map(|v| v.to_le_bytes()).collect();
        vec![
            ("indptr.npy", npy(Dtype::I64, 5, indptr)),
            ("indices.npy", npy(Dtype::I32, 5, indices)),
            ("data.npy", npy(Dtype::F64, 5, data)),
            ("shape.npy", npy(Dtype::I64, 2, shape)),
        ]
    }

    fn write_npz(path: &Path, method: zip::CompressionMethod, members: &[(&str, Vec<u8>)]) {
        let mut z = zip::ZipWriter::new(File::create(path).unwrap());
        let options = zip::write::SimpleFileOptions::default().compression_method(method);
        for (name, bytes) in members {
            z.start_file(*name, options).unwrap();
            z.write_all(bytes).unwrap();
        }
        z.finish().unwrap();
    }

    fn rows(m: &CsrFiles) -> (Vec<usize>, Vec<u32>, Vec<f64>) {
        let (mut indptr, mut indices, mut values, mut raw) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        m.read::<f64>(0, m.n_rows(), &mut indptr, &mut indices, &mut values, &mut raw).unwrap();
        (indptr, indices, values)
    }

    #[test]
    fn a_npz_deflated_or_stored_reads_as_its_folder() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("X");
        std::fs::create_dir(&dir).unwrap();
        for (name, bytes) in members() {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
        let folder = CsrFiles::open(&dir).unwrap();
        assert_eq!((folder.n_rows(), folder.n_cols(), folder.max_row_nnz()), (4, 6, 2));
        let want = rows(&folder);
        assert_eq!(want, (vec![0, 2, 3, 3, 5], vec![1, 4, 0, 2, 5], vec![1.5, -2.0, 3.25, 0.5, 7.0]));
        let scratch = t.path().join("scratch");
        std::fs::create_dir(&scratch).unwrap();
        for method in [zip::CompressionMethod::Stored, zip::CompressionMethod::Deflated] {
            let path = t.path().join("X.npz");
            write_npz(&path, method, &members());
            let npz = CsrFiles::open_npz(&path, &scratch).unwrap();
            assert_eq!((npz.n_rows(), npz.n_cols(), npz.max_row_nnz(), npz.dtype()), (4, 6, 2, Dtype::F64));
            assert_eq!(rows(&npz), want, "{method:?}");
            // Unpacked arrays are unnamed: nothing in the scratch folder.
            assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0);
        }
    }

    #[test]
    fn a_bad_npz_names_what_is_wrong() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("X.npz");
        let err = |path: &Path| CsrFiles::open_npz(path, t.path()).unwrap_err().to_string();
        std::fs::write(&path, b"not a zip archive").unwrap();
        assert!(err(&path).contains("X.npz: not a .npz (zip) archive"), "{}", err(&path));
        // A dense np.savez archive: no CSR arrays.
        write_npz(&path, zip::CompressionMethod::Deflated, &[("arr_0.npy", members()[2].1.clone())]);
        assert!(err(&path).contains("X.npz/shape.npy: a sparse (CSR) .npz holds indptr.npy"), "{}", err(&path));
        // A member whose data are cut short.
        let mut cut = members();
        let len = cut[2].1.len();
        cut[2].1.truncate(len - 8);
        write_npz(&path, zip::CompressionMethod::Stored, &cut);
        assert!(matches!(CsrFiles::open_npz(&path, t.path()), Err(Error::Truncated { .. })), "{}", err(&path));
        // A CSC matrix is refused, not read as its transpose.
        let mut csc = members();
        let mut format = write_header(Dtype::U8, &[]);
        let at = format.windows(3).position(|w| w == b"|u1").unwrap();
        format.splice(at..at + 3, *b"<U3");
        format.extend(b"c\0\0\0s\0\0\0c\0\0\0");
        csc.push(("format.npy", format));
        write_npz(&path, zip::CompressionMethod::Deflated, &csc);
        assert!(err(&path).contains("X.npz/format.npy: the matrix is stored as \"csc\""), "{}", err(&path));
    }
}
