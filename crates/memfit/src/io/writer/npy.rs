//! `.npy` outputs: streamed in order ([`NpyWriter`]) or by positioned
//! writes from many threads ([`PositionedNpy`]), put in place only when
//! complete.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::atomic::{stage_beside, AtomicFile, WRITE_BUFFER_BYTES};
use super::disk_space::check_free_space;
use super::paths::check_output_path;
use super::staged::Staged;
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

/// Bytes an [`NpyWriter`] of an array of `dtype` and `shape` holds: its
/// file buffer and its encode buffer, each [`WRITE_BUFFER_BYTES`] or the
/// whole file when that is smaller.
pub fn npy_writer_bytes(dtype: Dtype, shape: &[usize]) -> u64 {
    2 * npy_file_bytes(dtype, shape).min(WRITE_BUFFER_BYTES as u64)
}

/// Streams a C-order little-endian `.npy` array of a known shape to disk in
/// pieces, atomically.
#[derive(Debug)]
pub struct NpyWriter {
    file: AtomicFile,
    remaining_bytes: u64,
    itemsize: usize,
    encode: Vec<u8>,
}

impl NpyWriter {
    /// Starts an array of `dtype` and `shape` at `path`, holding at most
    /// [`npy_writer_bytes`] bytes. Refuses, before creating anything, when
    /// the destination's filesystem has less free space than the whole
    /// array needs.
    ///
    /// # Errors
    /// As [`AtomicFile::create`] and [`check_free_space`].
    pub fn create(path: impl AsRef<Path>, dtype: Dtype, shape: &[usize]) -> Result<Self> {
        let total = npy_file_bytes(dtype, shape);
        check_free_space(&[(path.as_ref(), total)])?;
        let buffer = total.min(WRITE_BUFFER_BYTES as u64) as usize;
        Self::start(AtomicFile::create_buffered(path, buffer)?, dtype, shape)
    }

    /// Starts an array of `dtype` and `shape` in `file`, writing its header.
    pub(super) fn start(mut file: AtomicFile, dtype: Dtype, shape: &[usize]) -> Result<Self> {
        file.write_all(&write_header(dtype, shape))?;
        let itemsize = dtype.itemsize();
        Ok(NpyWriter { file, remaining_bytes: npy_data_bytes(dtype, shape), itemsize, encode: Vec::new() })
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

    /// Appends elements, encoding each (in the array's item size) with
    /// `put` into a reused buffer of at most [`WRITE_BUFFER_BYTES`] bytes
    /// and never more than the array's data.
    ///
    /// # Errors
    /// [`Error::Io`] on a write failure.
    pub fn write_with<E: Copy>(&mut self, values: &[E], put: impl Fn(E, &mut Vec<u8>)) -> Result<()> {
        let mut enc = std::mem::take(&mut self.encode);
        let per_chunk = WRITE_BUFFER_BYTES / self.itemsize.max(1);
        enc.reserve_exact(values.len().min(per_chunk) * self.itemsize);
        for chunk in values.chunks(per_chunk) {
            enc.clear();
            for &v in chunk {
                put(v, &mut enc);
            }
            self.write_bytes(&enc)?;
        }
        self.encode = enc;
        Ok(())
    }

    /// Finishes the array and puts it in place.
    ///
    /// # Errors
    /// [`Error::Io`] on failure.
    ///
    /// # Panics
    /// If fewer elements were written than the shape holds.
    pub fn commit(self) -> Result<()> {
        self.complete().commit()
    }

    /// The finished array's file, for its owner to put in place.
    ///
    /// # Panics
    /// As [`NpyWriter::commit`].
    pub(super) fn complete(self) -> AtomicFile {
        assert_eq!(self.remaining_bytes, 0, "fewer elements written than the declared shape");
        self.file
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
/// any number of threads (each writing its own elements), staged beside
/// the destination (unnamed where the system allows, see `Staged`) and put
/// in place by [`PositionedNpy::commit`]. Dropping it uncommitted leaves
/// nothing; so does a kill, where the file is unnamed.
#[derive(Debug)]
pub struct PositionedNpy {
    path: PathBuf,
    staged: Staged,
    data_offset: u64,
    itemsize: u64,
}

impl PositionedNpy {
    /// Creates the staged file with the header and room for every element.
    /// `overwrite = false` refuses an existing destination.
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
        let total = npy_file_bytes(dtype, shape);
        check_free_space(&[(path, total)])?;
        let (path, staged) = stage_beside(path)?;
        let file = staged.file();
        file.set_len(total).map_err(|e| Error::io(&path, "write", e))?;
        file.write_all_at(&header, 0).map_err(|e| Error::io(&path, "write", e))?;
        Ok(PositionedNpy { path, staged, data_offset: header.len() as u64, itemsize: dtype.itemsize() as u64 })
    }

    /// Where element 0 lies in the file, in bytes (the header's length).
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// Writes encoded elements starting at element `first` (C order).
    ///
    /// # Errors
    /// [`Error::Io`] on a write failure (a full disk).
    pub fn write_at(&self, first: u64, bytes: &[u8]) -> Result<()> {
        self.staged
            .file()
            .write_all_at(bytes, self.data_offset + first * self.itemsize)
            .map_err(|e| Error::io(&self.path, "write", e))
    }

    /// Writes float64 elements starting at element `first` (C order) of a
    /// float64 array, from `values` themselves on a little-endian machine
    /// (no encoded copy), in pieces of 4 KiB otherwise.
    ///
    /// # Errors
    /// As [`PositionedNpy::write_at`].
    pub fn write_f64_at(&self, first: u64, values: &[f64]) -> Result<()> {
        if cfg!(target_endian = "little") {
            return self.write_at(first, bytemuck::cast_slice(values));
        }
        let mut piece = [0u8; 4096];
        for (i, chunk) in values.chunks(512).enumerate() {
            for (b, v) in piece.chunks_exact_mut(8).zip(chunk) {
                b.copy_from_slice(&v.to_le_bytes());
            }
            self.write_at(first + 512 * i as u64, &piece[..8 * chunk.len()])?;
        }
        Ok(())
    }

    /// Starts writing elements `first..first + n` (written with
    /// [`PositionedNpy::write_at`]) to disk now rather than when the page
    /// cache fills, and drops those already on disk from the cache (advice:
    /// errors are ignored), so a long sequence of writes keeps the disk busy
    /// while the next elements are computed and `commit`'s sync has little
    /// left to wait for.
    pub fn write_back(&self, first: u64, n: u64) {
        let start = self.data_offset + first * self.itemsize;
        if let Some(len) = std::num::NonZeroU64::new(n * self.itemsize) {
            let _ = rustix::fs::fadvise(self.staged.file(), start, Some(len), rustix::fs::Advice::DontNeed);
        }
    }

    /// Syncs the file and puts it in place.
    ///
    /// # Errors
    /// [`Error::Io`] when syncing or linking fails; nothing is left.
    pub fn commit(self) -> Result<()> {
        let path = self.path;
        self.staged.file().sync_all().map_err(|e| Error::io(&path, "sync", e))?;
        self.staged.persist(&path).map_err(|e| Error::io(&path, "rename", e))
    }
}
