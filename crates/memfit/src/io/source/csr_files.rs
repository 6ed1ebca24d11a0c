//! A CSR matrix stored as a folder of `.npy` files, read in row blocks
//! with positioned reads (out of core): the arrays scipy's
//! `scipy.sparse.save_npz` writes (`indptr.npy`, `indices.npy`,
//! `data.npy`, `shape.npy`, and `format.npy`, which must say `csr`), so an
//! unzipped `.npz` is such a folder. A `.npz` itself is read the same way,
//! its arrays read in place (stored) or unpacked into unnamed scratch files
//! (deflated), each at its first use ([`CsrFiles::open_npz`]).

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use std::sync::{Mutex, OnceLock};

use super::npy::{parse_npy, read_exact};
use super::NpyFile;
use crate::dtype::Real;
use crate::error::{Error, Result};
use crate::io::dtype::{decode, decode_integer, Dtype};
use crate::io::{check_disk_space, header_len, NpyHeader, PlannedWrite};

/// Checks the bytes of a `format.npy` (at `path`; scipy writes the
/// format's name, a 0-d unicode or bytes array): only `csr` is read; a
/// `csc` matrix read as CSR would be its transpose.
///
/// # Errors
/// [`Error::InvalidParameter`] (`X`) for another format.
fn check_format(path: &Path, bytes: &[u8]) -> Result<()> {
    let start = header_len(bytes).unwrap_or(bytes.len()).min(bytes.len());
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

/// The error for a folder or `.npz` without the `format.npy` at `path`
/// (whose arrays would read the same as a CSC matrix's transpose).
fn no_format(path: &Path) -> Error {
    Error::param(
        "X",
        format!(
            "{}: missing; a sparse (CSR) matrix's arrays come with format.npy saying \"csr\", as \
             scipy.sparse.save_npz writes it (a CSC matrix's arrays read as CSR would be its transpose); \
             hint: save the matrix with scipy.sparse.save_npz, or add the file: np.save(\"format.npy\", \"csr\")",
            path.display()
        ),
    )
}

/// An integer value that the compute type cannot hold exactly, found by a
/// read: its row (counted from the block's first), column and value.
pub(super) struct Inexact {
    pub(super) row: usize,
    pub(super) column: usize,
    pub(super) value: i128,
}

/// Offsets read at a time while the folder is opened (8 bytes each).
const OFFSET_PIECE: usize = 1 << 16;

/// The arrays of a CSR folder or `.npz`, besides `format.npy`.
const MEMBERS: [&str; 4] = ["shape.npy", "indptr.npy", "indices.npy", "data.npy"];

/// The most bytes of a `format.npy` read (scipy's is about 130).
const FORMAT_BYTES: u64 = 4096;

/// Opens `path` as a zip archive.
///
/// # Errors
/// [`Error::Io`] when it cannot be opened; [`Error::InvalidParameter`]
/// (`X`) when it is not a zip archive.
fn open_zip(path: &Path) -> Result<zip::ZipArchive<File>> {
    let file = File::open(path).map_err(|e| Error::io(path, "open", e))?;
    zip::ZipArchive::new(file).map_err(|e| {
        let why = match e {
            zip::result::ZipError::Io(e) => format!("cannot be read ({e})"),
            _ => "not a .npz (zip) archive, or one cut short".into(),
        };
        Error::param("X", format!("{}: {why}; hint: save it with scipy.sparse.save_npz", path.display()))
    })
}

/// A member of the `.npz` at `path` that cannot be read: corrupt (its
/// checksum), cut short, or compressed in a way not read here.
fn corrupt(path: &Path, name: &str, e: &dyn std::fmt::Display) -> Error {
    Error::param(
        "X",
        format!(
            "{}: cannot be read from the archive ({e}); hint: save it again with scipy.sparse.save_npz (deflated or stored)",
            path.join(name).display()
        ),
    )
}

/// An array of the matrix: a `.npy` file open for positioned reads, or a
/// `.npz` member opened at its first use.
#[derive(Debug)]
enum Member {
    Open(NpyFile),
    Packed(Box<Packed>),
}

/// A `.npz` member not yet opened: its header (read through the archive)
/// and what opening it needs.
#[derive(Debug)]
struct Packed {
    npz: PathBuf,
    name: &'static str,
    scratch: PathBuf,
    /// Bytes it takes unpacked in `scratch`: its size when deflated, 0
    /// when stored (read where it lies).
    unpacked_bytes: u64,
    header: NpyHeader,
    opened: OnceLock<NpyFile>,
    /// Held while the member is opened (by one thread; the others wait).
    opening: Mutex<()>,
}

impl Member {
    fn header(&self) -> &NpyHeader {
        match self {
            Member::Open(f) => &f.header,
            Member::Packed(p) => &p.header,
        }
    }

    /// The file, opening a packed member on first use.
    fn file(&self) -> Result<&NpyFile> {
        match self {
            Member::Open(f) => Ok(f),
            Member::Packed(p) => {
                if let Some(f) = p.opened.get() {
                    return Ok(f);
                }
                let _one = p.opening.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if let Some(f) = p.opened.get() {
                    return Ok(f);
                }
                let f = p.open()?;
                Ok(p.opened.get_or_init(|| f))
            }
        }
    }

    /// The file, opened now.
    fn opened(self) -> Result<NpyFile> {
        match self {
            Member::Open(f) => Ok(f),
            Member::Packed(p) => p.open(),
        }
    }
}

impl Packed {
    /// Opens the member: stored, where it lies (after a read that checks
    /// its checksum); deflated, unpacked into an unnamed scratch file
    /// (after a disk-space check), its checksum checked at its end.
    fn open(&self) -> Result<NpyFile> {
        let (path, name) = (&self.npz, self.name);
        let mut zip = open_zip(path)?;
        let mut m = zip.by_name(name).map_err(|e| corrupt(path, name, &e))?;
        let len = m.size();
        if let (zip::CompressionMethod::Stored, Some(start)) = (m.compression(), m.data_start()) {
            std::io::copy(&mut m, &mut std::io::sink()).map_err(|e| corrupt(path, name, &e))?;
            let file = File::open(path).map_err(|e| Error::io(path, "open", e))?;
            return NpyFile::from_part(path.join(name), file, start, len);
        }
        check_disk_space(&[PlannedWrite::inside(
            format!("{name} of {}, unpacked", path.display()),
            &self.scratch,
            len,
        )])?;
        let mut out = tempfile::tempfile_in(&self.scratch)
            .map_err(|e| Error::io(&self.scratch, "use as the scratch folder", e))?;
        // At most the size the archive declares (the disk check's); then
        // the end, where the reader checks the checksum.
        let written = std::io::copy(&mut (&mut m).take(len), &mut out).map_err(|e| corrupt(path, name, &e))?;
        let mut past = [0u8; 1];
        if written != len || m.read(&mut past).map_err(|e| corrupt(path, name, &e))? != 0 {
            return Err(corrupt(path, name, &format!("it holds other than the {len} bytes the archive declares")));
        }
        NpyFile::from_file(path.join(name), out)
    }
}

/// An opened CSR folder (see the module docs).
#[derive(Debug)]
pub struct CsrFiles {
    dir: PathBuf,
    indptr: NpyFile,
    indices: Member,
    data: Member,
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
    /// wrong, or a `format.npy` missing or other than `csr`; those of
    /// [`NpyFile::open`].
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        let format_path = dir.join("format.npy");
        let format = if format_path.exists() {
            Some(std::fs::read(&format_path).map_err(|e| Error::io(&format_path, "read", e))?)
        } else {
            None
        };
        let holds = "a sparse (CSR) folder holds indptr.npy, indices.npy, data.npy and shape.npy, as scipy.sparse.save_npz writes them";
        Self::from_members(dir.clone(), format, holds, |file| {
            let path = dir.join(file);
            if path.exists() {
                NpyFile::open(path).map(|f| Some(Member::Open(f)))
            } else {
                Ok(None)
            }
        })
    }

    /// Opens the `.npz` file `path` that `scipy.sparse.save_npz` writes (a
    /// zip archive of the folder's arrays), then as [`Self::open`]. Each
    /// array's header is read through the archive; its data are opened on
    /// first use: `shape.npy` and `indptr.npy` here,
    /// `indices.npy` and `data.npy` at the first block read, so planning,
    /// a dry run and a refusal read neither. An array stored uncompressed
    /// (`save_npz(..., compressed=False)`) is read where it lies in the
    /// archive, after one read that checks its checksum; a deflated one
    /// (scipy's default) is unpacked with a fixed-size buffer into an
    /// unnamed file in `scratch_dir` (removed when the matrix is dropped,
    /// however the process ends), taking its uncompressed size on disk,
    /// and its checksum checked. Memory holds none of them.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`X`) for a file that is not a zip
    /// archive, or one whose members are missing, corrupt or not a CSR
    /// matrix's; [`Error::NoDiskSpace`] when `scratch_dir` cannot hold an
    /// unpacked array (checked before it is written); [`Error::Io`]; those
    /// of [`NpyFile::open`], naming the member (`X.npz/indices.npy`). The
    /// same errors for `indices.npy` and `data.npy` come from the first
    /// block read.
    pub fn open_npz(path: impl AsRef<Path>, scratch_dir: &Path) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let mut zip = open_zip(&path)?;
        let format = match zip.by_name("format.npy") {
            Err(_) => None,
            Ok(m) if m.size() > FORMAT_BYTES => Some(Vec::new()),
            Ok(mut m) => {
                let mut bytes = Vec::new();
                m.read_to_end(&mut bytes).map_err(|e| corrupt(&path, "format.npy", &e))?;
                Some(bytes)
            }
        };
        let holds = "a sparse (CSR) .npz holds indptr.npy, indices.npy, data.npy and shape.npy, as scipy.sparse.save_npz writes them (an np.savez of dense arrays is not one: save a dense 2-D .npy)";
        Self::from_members(path.clone(), format, holds, |name| {
            let mut m = match zip.by_name(name) {
                Ok(m) => m,
                Err(zip::result::ZipError::FileNotFound) => return Ok(None),
                Err(e) => return Err(corrupt(&path, name, &e)),
            };
            let len = m.size();
            let unpacked_bytes = if m.compression() == zip::CompressionMethod::Stored { 0 } else { len };
            // The header, through the archive: the data stay packed.
            let mut seen = Vec::new();
            let header = parse_npy(&path.join(name), len, |buf, at| {
                let end = at as usize + buf.len();
                if seen.len() < end {
                    (&mut m).take((end - seen.len()) as u64).read_to_end(&mut seen)?;
                }
                let got = seen.len().saturating_sub(at as usize).min(buf.len());
                buf[..got].copy_from_slice(&seen[at as usize..at as usize + got]);
                Ok(got)
            })
            .map_err(|e| match e {
                Error::Io { cause, .. } => corrupt(&path, name, &cause),
                e => e,
            })?;
            Ok(Some(Member::Packed(Box::new(Packed {
                npz: path.clone(),
                name,
                scratch: scratch_dir.to_path_buf(),
                unpacked_bytes,
                header,
                opened: OnceLock::new(),
                opening: Mutex::new(()),
            }))))
        })
    }

    /// The scratch files that reading the matrix writes: a `.npz`'s
    /// deflated `indices.npy` and `data.npy`, unpacked at the first block
    /// read (for a job's plan, whose disk check runs before any work).
    /// Empty for a folder and for arrays stored uncompressed.
    pub fn scratch_disk(&self) -> Vec<PlannedWrite> {
        [&self.indices, &self.data]
            .into_iter()
            .filter_map(|m| match m {
                Member::Packed(p) if p.unpacked_bytes > 0 => Some(PlannedWrite::inside(
                    format!("{} of {}, unpacked", p.name, p.npz.display()),
                    &p.scratch,
                    p.unpacked_bytes,
                )),
                _ => None,
            })
            .collect()
    }

    /// Opens the matrix whose arrays `member` opens by name (`None` for a
    /// missing one, reported with what `holds` says), named `dir` in
    /// messages; `format` holds the bytes of its `format.npy` (`None`: there
    /// is none), which must say `csr` ([`check_format`], checked first; a
    /// missing one is refused once the arrays are found good).
    fn from_members(
        dir: PathBuf,
        format: Option<Vec<u8>>,
        holds: &str,
        mut member: impl FnMut(&'static str) -> Result<Option<Member>>,
    ) -> Result<Self> {
        if let Some(bytes) = &format {
            check_format(&dir.join("format.npy"), bytes)?;
        }
        let bad = |file: &str, reason: String| Error::param("X", format!("{}: {reason}", dir.join(file).display()));
        let mut open = |file: &'static str| -> Result<Member> {
            member(file)?.ok_or_else(|| bad(file, format!("{holds}; {file} is missing")))
        };
        let vector = |file: &str, f: &Member, integer: bool| -> Result<usize> {
            let h = f.header();
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
            return Err(bad("shape.npy", format!("expected 2 values, found shape {:?}", shape_file.header().shape)));
        }
        let shape_file = shape_file.opened()?;
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
                format!("expected n_samples + 1 = {} offsets, found {}", n_rows + 1, indptr.header().shape[0]),
            ));
        }
        let nnz = vector("indices.npy", &indices, true)?;
        if vector("data.npy", &data, false)? != nnz {
            return Err(bad(
                "data.npy",
                format!("indices.npy holds {nnz} values but data.npy {}", data.header().shape[0]),
            ));
        }
        let indptr = indptr.opened()?;
        let mut files = CsrFiles { dir, indptr, indices, data, n_rows, n_cols, max_row_nnz: 0 };
        // The offsets, piece by piece: from 0 to nnz, never decreasing.
        let (mut offsets, mut raw, mut last) = (Vec::new(), Vec::new(), 0usize);
        for at in (0..=n_rows).step_by(OFFSET_PIECE) {
            let count = OFFSET_PIECE.min(n_rows + 1 - at);
            files.offsets(at, count, &mut offsets, &mut raw)?;
            for (i, &o) in offsets.iter().enumerate() {
                let row = at + i;
                if (row == 0 && o != 0) || o < last || (row == n_rows && o != nnz) {
                    return Err(files.bad_offsets(row, Some(last), o as f64, nnz));
                }
                files.max_row_nnz = files.max_row_nnz.max(o - last);
                last = o;
            }
        }
        if format.is_none() {
            return Err(no_format(&files.dir.join("format.npy")));
        }
        Ok(files)
    }

    /// Offset `row` is `at` (as read: negative ones included), after
    /// `before` where that is known.
    fn bad_offsets(&self, row: usize, before: Option<usize>, at: f64, nnz: usize) -> Error {
        let after = before.map(|b| format!(" after {b}")).unwrap_or_default();
        // The rule that fails first: offsets start at 0, never decrease and
        // end at the number of values.
        let rule = if row == 0 && at != 0.0 {
            "the first offset must be 0".to_string()
        } else if before.is_some_and(|b| at < b as f64) || at < 0.0 {
            "offsets must not decrease".to_string()
        } else if row == self.n_rows {
            format!("the last offset must be len(data) = {nnz}")
        } else {
            format!("offsets must run from 0 to len(data) = {nnz} without decreasing")
        };
        Error::param(
            "X",
            format!(
                "{}: offset {row} is {at}{after}: {rule}; hint: save the matrix again with scipy.sparse.save_npz",
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
        self.data.header().dtype
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Bytes of raw scratch per block row: an offset, and the densest row's
    /// columns and values as stored.
    pub fn scratch_bytes_per_row(&self) -> usize {
        8 + self.max_row_nnz * (self.indices.header().dtype.itemsize() + self.data.header().dtype.itemsize())
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
                let before = i.checked_sub(1).map(|p| out[p]);
                return Err(self.bad_offsets(at + i, before, v, self.data.header().shape[0]));
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
    #[allow(clippy::too_many_arguments)]
    pub(super) fn read<T: Real>(
        &self,
        at: usize,
        rows: usize,
        indptr: &mut Vec<usize>,
        indices: &mut Vec<u32>,
        values: &mut Vec<T>,
        raw: &mut Vec<u8>,
        bound: Option<u64>,
    ) -> Result<Option<Inexact>> {
        self.offsets(at, rows + 1, indptr, raw)?;
        let (a, b) = (indptr[0], indptr[rows]);
        indptr.iter_mut().for_each(|o| *o -= a);
        let (indices_file, data_file) = (self.indices.file()?, self.data.file()?);
        let (hi, hd) = (&indices_file.header, &data_file.header);
        raw.resize((b - a) * hi.dtype.itemsize().max(hd.dtype.itemsize()), 0);
        let bytes = &mut raw[..(b - a) * hi.dtype.itemsize()];
        read_exact(indices_file, bytes, hi.data_offset + (a * hi.dtype.itemsize()) as u64)?;
        indices.clear();
        for r in 0..rows {
            let mut last = -1.0;
            for p in indptr[r]..indptr[r + 1] {
                let j = decode(bytes, p, hi.dtype, hi.endian);
                let row = at + r;
                let why = if !(0.0..self.n_cols as f64).contains(&j) {
                    Some(format!(
                        "row {row} has column index {j}, outside 0..{} (the columns shape.npy gives); hint: save the matrix again with scipy.sparse.save_npz",
                        self.n_cols
                    ))
                } else if j <= last {
                    Some(format!(
                        "row {row}'s column indices are not strictly increasing ({last} then {j}); hint: save the matrix in canonical form (each row's columns sorted, duplicates summed)"
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
        read_exact(data_file, bytes, hd.data_offset + (a * hd.dtype.itemsize()) as u64)?;
        values.clear();
        values.extend((0..b - a).map(|p| T::from_f64(decode(bytes, p, hd.dtype, hd.endian))));
        // The first value beyond `bound` (rows in order, columns increasing
        // within a row: the first stored is the first in row-major order).
        let Some(bound) = bound else { return Ok(None) };
        let beyond = (0..b - a).find_map(|p| {
            decode_integer(bytes, p, hd.dtype, hd.endian)
                .filter(|v| v.unsigned_abs() > u128::from(bound))
                .map(|v| (p, v))
        });
        Ok(beyond.map(|(p, value)| Inexact {
            row: indptr.partition_point(|&o| o <= p) - 1,
            column: indices[p] as usize,
            value,
        }))
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
            ("format.npy", [write_header(Dtype::U8, &[]), b"csr".to_vec()].concat()),
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

    fn rows(m: &CsrFiles) -> Result<(Vec<usize>, Vec<u32>, Vec<f64>)> {
        let (mut indptr, mut indices, mut values, mut raw) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        m.read::<f64>(0, m.n_rows(), &mut indptr, &mut indices, &mut values, &mut raw, None)?;
        Ok((indptr, indices, values))
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
        let want = rows(&folder).unwrap();
        assert_eq!(want, (vec![0, 2, 3, 3, 5], vec![1, 4, 0, 2, 5], vec![1.5, -2.0, 3.25, 0.5, 7.0]));
        let scratch = t.path().join("scratch");
        std::fs::create_dir(&scratch).unwrap();
        for method in [zip::CompressionMethod::Stored, zip::CompressionMethod::Deflated] {
            let path = t.path().join("X.npz");
            write_npz(&path, method, &members());
            let npz = CsrFiles::open_npz(&path, &scratch).unwrap();
            assert_eq!((npz.n_rows(), npz.n_cols(), npz.max_row_nnz(), npz.dtype()), (4, 6, 2, Dtype::F64));
            assert_eq!(rows(&npz).unwrap(), want, "{method:?}");
            // Unpacked arrays are unnamed: nothing in the scratch folder.
            assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0);
        }
    }

    #[test]
    fn bad_offsets_are_named_with_their_values() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("X");
        std::fs::create_dir(&dir).unwrap();
        for (offsets, want) in [
            ([0i64, 2, -5, 3, 5], "offset 2 is -5 after 2: offsets must not decrease"),
            ([-1i64, 2, 3, 3, 5], "offset 0 is -1: the first offset must be 0"),
            ([0i64, 3, 2, 3, 5], "offset 2 is 2 after 3: offsets must not decrease"),
            ([0i64, 2, 3, 3, 4], "offset 4 is 4 after 3: the last offset must be len(data) = 5"),
        ] {
            for (name, bytes) in members() {
                std::fs::write(dir.join(name), bytes).unwrap();
            }
            let bytes: Vec<u8> = offsets.iter().flat_map(|v| v.to_le_bytes()).collect();
            std::fs::write(dir.join("indptr.npy"), [write_header(Dtype::I64, &[5]), bytes].concat()).unwrap();
            let e = CsrFiles::open(&dir).unwrap_err().to_string();
            assert!(e.contains(want), "{offsets:?}: {e}");
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
        // A value changed inside a stored archive: opening reads only the
        // headers; the first read checks the checksum and refuses it.
        write_npz(&path, zip::CompressionMethod::Stored, &members());
        let mut bytes = std::fs::read(&path).unwrap();
        let at = bytes.windows(8).position(|w| w == 7.0f64.to_le_bytes()).unwrap();
        bytes[at + 7] ^= 1;
        std::fs::write(&path, bytes).unwrap();
        let npz = CsrFiles::open_npz(&path, t.path()).unwrap();
        let e = rows(&npz).unwrap_err().to_string();
        assert!(e.contains("X.npz/data.npy: cannot be read from the archive") && e.contains("hint: "), "{e}");
        // A CSC matrix is refused, not read as its transpose.
        let mut csc = members();
        let mut format = write_header(Dtype::U8, &[]);
        let at = format.windows(3).position(|w| w == b"|u1").unwrap();
        format.splice(at..at + 3, *b"<U3");
        format.extend(b"c\0\0\0s\0\0\0c\0\0\0");
        csc.pop();
        csc.push(("format.npy", format));
        write_npz(&path, zip::CompressionMethod::Deflated, &csc);
        assert!(err(&path).contains("X.npz/format.npy: the matrix is stored as \"csc\""), "{}", err(&path));
        // Without format.npy the arrays could be a CSC matrix's: refused.
        csc.pop();
        write_npz(&path, zip::CompressionMethod::Deflated, &csc);
        assert!(err(&path).contains("X.npz/format.npy: missing; a sparse (CSR) matrix's arrays"), "{}", err(&path));
    }
}
