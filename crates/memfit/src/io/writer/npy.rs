//! `.npy` outputs: streamed in order ([`NpyWriter`]) or by positioned
//! writes from many threads ([`PositionedNpy`]), atomically.

use std::path::{Path, PathBuf};

use super::atomic::{temp_beside, AtomicFile, WRITE_BUFFER_BYTES};
use super::disk_space::check_free_space;
use super::paths::check_output_path;
use super::unfinished::Unfinished;
use crate::error::{Error, Result};
use crate::io::dtype::Dtype;
use crate::io::npy_header::write_header;

/// Bytes of a whole `.npy` file holding an array of `dtype` and `shape`
/// (header and data; `u64::MAX` if that overflows).
pub fn npy_file_bytes(dtype: Dtype, shape: &[usize]) -> u64 {
    (write_header(dtype, shape).len() as u64).saturating_add(npy_data_bytes(dtype, shape))
}

fn npy_data_bytes(dtype: Dtype, shape: &[usize]) -> u64 {
    shape.iter().try_fold(dtype.itemsize() as u64, |acc, &s| acc.checked_mul(s as u64)).unwrap_or(u64::MAX)
}

/// Streams a C-order little-endian `.npy` array of a known shape to disk in
/// pieces, atomically.
#[derive(Debug)]
pub struct NpyWriter {
    file: AtomicFile,
    remaining_bytes: u64,
    encode: Vec<u8>,
}

impl NpyWriter {
    /// Starts an array of `dtype` and `shape` at `path`.
    ///
    /// # Errors
    /// As [`AtomicFile::create`].
    /// Refuses, before creating anything, when the destination's filesystem
    /// has less free space than the whole array needs.
    ///
    /// # Errors
    /// As [`AtomicFile::create`] and [`check_free_space`].
    pub fn create(path: impl AsRef<Path>, dtype: Dtype, shape: &[usize]) -> Result<Self> {
        let header = write_header(dtype, shape);
        let data_bytes = npy_data_bytes(dtype, shape);
        check_free_space(&[(path.as_ref(), (header.len() as u64).saturating_add(data_bytes))])?;
        let mut file = AtomicFile::create(path)?;
        file.write_all(&header)?;
        Ok(NpyWriter { file, remaining_bytes: data_bytes, encode: Vec::new() })
    }

    /// Appends elements already encoded as little-endian bytes.
    ///
    /// # Errors
    /// [`Error::Io`] on a write failure.
    ///
    /// # Panics
    /// If more bytes are written than the shape holds.
    pub fn write_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        assert!(bytes.len() as u64 <= self.remaining_bytes, "more data than the declared shape");
        self.remaining_bytes -= bytes.len() as u64;
        self.file.write_all(bytes)
    }

    /// Appends elements, encoding each with `put` into a reused buffer of at
    /// most [`WRITE_BUFFER_BYTES`] bytes.
    ///
    /// # Errors
    /// [`Error::Io`] on a write failure.
    pub fn write_with<E: Copy>(&mut self, values: &[E], put: impl Fn(E, &mut Vec<u8>)) -> Result<()> {
        let mut enc = std::mem::take(&mut self.encode);
        for chunk in values.chunks(WRITE_BUFFER_BYTES / 8) {
            enc.clear();
            for &v in chunk {
                put(v, &mut enc);
            }
            self.write_bytes(&enc)?;
        }
        self.encode = enc;
        Ok(())
    }

    /// Finishes the array and renames it into place.
    ///
    /// # Errors
    /// [`Error::Io`] on failure.
    ///
    /// # Panics
    /// If fewer elements were written than the shape holds.
    pub fn commit(self) -> Result<()> {
        assert_eq!(self.remaining_bytes, 0, "fewer elements written than the declared shape");
        self.file.commit()
    }
}

/// Writes a whole small array (`values` in C order) to `path` atomically.
///
/// # Errors
/// As [`NpyWriter`].
pub fn write_npy<E: Copy>(
    path: impl AsRef<Path>,
    dtype: Dtype,
    shape: &[usize],
    values: &[E],
    put: impl Fn(E, &mut Vec<u8>),
) -> Result<()> {
    let mut w = NpyWriter::create(path, dtype, shape)?;
    w.write_with(values, put)?;
    w.commit()
}

/// A C-order little-endian `.npy` array written by positioned writes from
/// any number of threads (each writing its own elements), under a temporary
/// name beside the destination, renamed into place by
/// [`PositionedNpy::commit`]. Dropping it uncommitted deletes the temporary
/// file; so does [`remove_unfinished_outputs`](super::remove_unfinished_outputs).
#[derive(Debug)]
pub struct PositionedNpy {
    path: PathBuf,
    tmp: tempfile::NamedTempFile,
    data_offset: u64,
    itemsize: u64,
    _unfinished: Unfinished,
}

impl PositionedNpy {
    /// Creates the temporary file with the header and room for every
    /// element. `overwrite = false` refuses an existing destination.
    ///
    /// # Errors
    /// [`Error::OutputExists`]; as [`check_output_path`] and
    /// [`check_free_space`]; [`Error::Io`] when the file cannot be created.
    pub fn create(path: impl AsRef<Path>, dtype: Dtype, shape: &[usize], overwrite: bool) -> Result<Self> {
        let path = path.as_ref();
        if !overwrite && std::fs::symlink_metadata(path).is_ok() {
            return Err(Error::OutputExists { path: path.to_path_buf() });
        }
        check_output_path(path)?;
        let header = write_header(dtype, shape);
        let total = (header.len() as u64).saturating_add(npy_data_bytes(dtype, shape));
        check_free_space(&[(path, total)])?;
        let (path, tmp) = temp_beside(path)?;
        let unfinished = Unfinished::new(tmp.path());
        let file = tmp.as_file();
        file.set_len(total).map_err(|e| Error::io(&path, "write", e))?;
        std::os::unix::fs::FileExt::write_all_at(file, &header, 0).map_err(|e| Error::io(&path, "write", e))?;
        Ok(PositionedNpy {
            path,
            tmp,
            data_offset: header.len() as u64,
            itemsize: dtype.itemsize() as u64,
            _unfinished: unfinished,
        })
    }

    /// Writes encoded elements starting at element `first` (C order).
    ///
    /// # Errors
    /// [`Error::Io`] on a write failure (a full disk).
    pub fn write_at(&self, first: u64, bytes: &[u8]) -> Result<()> {
        std::os::unix::fs::FileExt::write_all_at(self.tmp.as_file(), bytes, self.data_offset + first * self.itemsize)
            .map_err(|e| Error::io(&self.path, "write", e))
    }

    /// Syncs and renames the file into place.
    ///
    /// # Errors
    /// [`Error::Io`] when syncing or renaming fails.
    pub fn commit(self) -> Result<()> {
        let path = self.path;
        self.tmp.as_file().sync_all().map_err(|e| Error::io(&path, "sync", e))?;
        self.tmp.persist(&path).map_err(|e| Error::io(&path, "rename", e.error))?;
        Ok(())
    }
}
