//! [`ZarrOutput`]: a Zarr v3 array written under a temporary directory and
//! renamed into place.

use std::borrow::Cow;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;
use zarrs::array::codec::{BytesCodec, ZstdCodec};
use zarrs::array::{Array, ArrayBuilder, ArrayBytes, CodecOptions, FillValue};
use zarrs::filesystem::FilesystemStore;

use super::{array_error, copy_box, storage_error, swap_le, to_u64};
use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::io::writer::{check_free_space, resolve_output, Unfinished};

/// The zstd level of written chunks (fast; zarr-python's default is 3).
const ZSTD_LEVEL: i32 = 1;

/// A Zarr v3 array being written under a temporary directory beside `path`,
/// renamed into place by [`ZarrOutput::commit`].
///
/// Dropping it without `commit` removes the temporary directory; until then
/// the directory is listed for
/// [`remove_unfinished_outputs`](crate::io::remove_unfinished_outputs).
pub struct ZarrOutput {
    // Fields drop in order: the array (and its store) before its directory.
    array: Array<FilesystemStore>,
    tmp: tempfile::TempDir,
    _unfinished: Unfinished,
    dest: PathBuf,
    overwrite: bool,
    shape: Vec<usize>,
    /// The unit of a write: the shard when sharded, else the chunk.
    unit: Vec<usize>,
    dtype: Dtype,
}

impl std::fmt::Debug for ZarrOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZarrOutput")
            .field("path", &self.dest)
            .field("shape", &self.shape)
            .field("unit", &self.unit)
            .field("dtype", &self.dtype)
            .finish_non_exhaustive()
    }
}

impl ZarrOutput {
    /// Starts a Zarr v3 array of `shape` (elements per dimension) and `dtype`
    /// at `path`, cut into chunks of `chunks` elements per dimension (edge
    /// chunks hold what is left), in a temporary directory beside `path`.
    /// Chunks are encoded with the `bytes` codec (little endian) and zstd
    /// (level 1); the fill value is 0 (`false`); there are no dimension
    /// names. A symlink at `path` is followed: its target is replaced.
    ///
    /// # Errors
    /// All before anything is created:
    /// [`Error::InvalidParameter`] when `chunks` holds a 0 or has another
    /// length than `shape` (a 0-d array has one chunk, `chunks` empty);
    /// [`Error::OutputExists`] when `path` exists and `!overwrite`;
    /// [`Error::Io`] of kind `NotFound` when `path`'s folder is missing, of kind
    /// `IsADirectory` when `path` is a non-empty folder that holds no Zarr
    /// array (such a folder is never replaced), of kind `PermissionDenied`
    /// when an array to be replaced could not be removed (a folder of it
    /// not writable); [`Error::NoDiskSpace`] when
    /// the filesystem has less free space than the uncompressed array
    /// (see [`check_free_space`]); other [`Error::Io`] when the temporary
    /// directory or the array's metadata cannot be written.
    pub fn create(path: &Path, shape: &[usize], dtype: Dtype, chunks: &[usize], overwrite: bool) -> Result<Self> {
        Self::create_sharded(path, shape, dtype, chunks, None, overwrite)
    }

    /// Starts a Zarr v3 array as [`ZarrOutput::create`] does; with `shards`,
    /// chunks are grouped into shards of `shards` elements per dimension
    /// (the `sharding_indexed` codec: one file per shard, its chunks
    /// encoded with `bytes` and zstd, the index at the end without a
    /// checksum), and every write is one whole shard
    /// ([`ZarrOutput::write_chunk`] then takes shard indices). Chunks of a
    /// shard are compressed one after the other and lie in the file in
    /// chunk order: the same bytes whatever the threads.
    ///
    /// # Errors
    /// As [`ZarrOutput::create`]; [`Error::InvalidParameter`] (`shards`)
    /// when `shards` has another length than `shape`, holds a 0, or a
    /// length that is not a multiple of the chunk's.
    pub fn create_sharded(
        path: &Path,
        shape: &[usize],
        dtype: Dtype,
        chunks: &[usize],
        shards: Option<&[usize]>,
        overwrite: bool,
    ) -> Result<Self> {
        if chunks.len() != shape.len() || chunks.contains(&0) {
            return Err(Error::param(
                "chunks",
                format!("needs one positive length per dimension of the shape {shape:?}, got {chunks:?}"),
            ));
        }
        if let Some(s) = shards {
            check_shards(chunks, s)?;
        }
        crate::io::writer::check_name_length(path)?;
        let dest = resolve_output(path);
        let dir = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if !dir.is_dir() {
            return Err(Error::io(path, "create", crate::io::writer::missing_folder(&dir)));
        }
        replace_checked(&dest, overwrite)?;
        let bytes = shape.iter().try_fold(dtype.itemsize() as u64, |acc, &n| acc.checked_mul(n as u64));
        check_free_space(&[(&dest, bytes.unwrap_or(u64::MAX))])?;

        let tmp = tempfile::Builder::new()
            .prefix(&crate::io::writer::hidden_prefix(dest.file_name().unwrap_or_default()))
            .suffix(".tmp")
            .tempdir_in(&dir)
            .map_err(|e| Error::io(path, "create", e))?;
        let unfinished = Unfinished::new_dir(tmp.path());
        let store = FilesystemStore::new(tmp.path()).map_err(|e| Error::io(path, "create", io::Error::other(e)))?;
        let unit = shards.unwrap_or(chunks);
        let array =
            ArrayBuilder::new(to_u64(shape), to_u64(unit), dtype.name(), FillValue::from(vec![0u8; dtype.itemsize()]))
                .array_to_bytes_codec(Arc::new(BytesCodec::little()))
                .bytes_to_bytes_codecs(vec![Arc::new(ZstdCodec::new(ZSTD_LEVEL, false))])
                .subchunk_shape(shards.map(|_| to_u64(chunks)))
                .build(Arc::new(store), "/")
                .map_err(|e| Error::io(path, "create", io::Error::other(e.to_string())))?;
        array.store_metadata().map_err(|e| storage_error(path, "write", e))?;
        Ok(ZarrOutput {
            array,
            tmp,
            _unfinished: unfinished,
            dest,
            overwrite,
            shape: shape.to_vec(),
            unit: unit.to_vec(),
            dtype,
        })
    }

    /// The shape (elements per dimension) of one write: the shard shape
    /// when sharded, else the chunk shape.
    pub fn chunk_shape(&self) -> &[usize] {
        &self.unit
    }

    /// Encodes and writes the chunk (the shard, when sharded) at
    /// `chunk_index` (its position in the grid of
    /// [`ZarrOutput::chunk_shape`], per dimension). `bytes` holds the chunk's values in C
    /// order as little-endian raw bytes of the dtype, covering only the part
    /// of the chunk inside the array (edge chunks are smaller); edge chunks
    /// are padded with the fill value here. Different chunks may be written
    /// concurrently from several threads; writing a chunk again replaces it.
    /// A chunk of fill values only is not stored (readers see the fill value).
    ///
    /// # Errors
    /// [`Error::Io`] when encoding or writing fails (e.g. a full disk).
    ///
    /// # Panics
    /// If `chunk_index` has another length than the shape or lies outside
    /// the chunk grid, or `bytes` does not hold exactly the chunk's part
    /// inside the array.
    pub fn write_chunk(&self, chunk_index: &[u64], bytes: &[u8]) -> Result<()> {
        let itemsize = self.dtype.itemsize();
        assert_eq!(
            chunk_index.len(),
            self.shape.len(),
            "chunk index {chunk_index:?} for a {}-D array",
            self.shape.len()
        );
        let extent: Vec<usize> = (0..self.shape.len())
            .map(|d| {
                let start = chunk_index[d] as usize * self.unit[d];
                assert!(start < self.shape[d], "chunk index {chunk_index:?} outside the chunk grid");
                self.unit[d].min(self.shape[d] - start)
            })
            .collect();
        let expected = extent.iter().product::<usize>() * itemsize;
        assert_eq!(bytes.len(), expected, "chunk {chunk_index:?} of shape {extent:?} needs {expected} bytes");
        let mut data = if extent == self.unit {
            Cow::Borrowed(bytes)
        } else {
            let mut full = vec![0u8; self.unit.iter().product::<usize>() * itemsize];
            let zeros = vec![0; extent.len()];
            copy_box((bytes, &extent, &zeros), (&mut full, &self.unit, &zeros), &extent, itemsize);
            Cow::Owned(full)
        };
        if cfg!(target_endian = "big") {
            swap_le(data.to_mut(), itemsize);
        }
        // A shard's chunks are compressed one after the other, so that they
        // lie in the file in chunk order: compressed in parallel, each would
        // take the next free offset as it finished, and the file's bytes
        // would change from run to run and with the threads (shards are
        // written by the threads in parallel).
        let options = CodecOptions::default().with_concurrent_target(1);
        self.array
            .store_chunk_opt(chunk_index, ArrayBytes::new_flen(data), &options)
            .map_err(|e| array_error(&self.dest, "write", e))
    }

    /// Syncs the array's files and renames the temporary directory to the
    /// destination, replacing an existing array there (when `overwrite` was
    /// set) with an atomic exchange where the filesystem supports one.
    /// Chunks never written read as the fill value.
    ///
    /// # Errors
    /// [`Error::Io`] when syncing or renaming fails, or
    /// [`Error::OutputExists`] when the destination appeared meanwhile and
    /// `overwrite` was not set; the temporary directory is then removed.
    pub fn commit(self) -> Result<()> {
        let ZarrOutput { array, tmp, _unfinished, dest, overwrite, .. } = self;
        drop(array);
        sync_tree(tmp.path()).map_err(|e| Error::io(&dest, "sync", e))?;
        // Checked again: the tree may have changed while the array was written.
        let replacing = replace_checked(&dest, overwrite)?;
        if !replacing {
            std::fs::rename(tmp.path(), &dest).map_err(|e| Error::io(&dest, "rename", e))?;
            let _ = tmp.keep();
            return Ok(());
        }
        // Swap the new array with the old one, which the temporary directory
        // then holds and drops; else move the old one aside first.
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            use rustix::fs::{renameat_with, RenameFlags, CWD};
            if renameat_with(CWD, tmp.path(), CWD, &dest, RenameFlags::EXCHANGE).is_ok() {
                return remove_any(tmp.path()).map_err(|e| Error::io(&dest, "remove the replaced array", e));
            }
        }
        let aside = tmp.path().with_extension("old");
        std::fs::rename(&dest, &aside).map_err(|e| Error::io(&dest, "rename", e))?;
        if let Err(e) = std::fs::rename(tmp.path(), &dest) {
            let _ = std::fs::rename(&aside, &dest);
            return Err(Error::io(&dest, "rename", e));
        }
        let _ = tmp.keep();
        remove_any(&aside).map_err(|e| Error::io(&dest, "remove the replaced array", e))
    }
}

/// Checks that `shards` has one positive multiple of each chunk length.
fn check_shards(chunks: &[usize], shards: &[usize]) -> Result<()> {
    if shards.len() != chunks.len() || shards.iter().zip(chunks).any(|(&s, &c)| s == 0 || !s.is_multiple_of(c)) {
        return Err(Error::param(
            "shards",
            format!("needs one positive multiple of each chunk length {chunks:?}, got {shards:?}"),
        ));
    }
    Ok(())
}

/// Whether `dest` exists (and may be replaced), or an error: it exists and
/// `!overwrite`, or it is a non-empty folder without Zarr array metadata.
fn check_replaceable(dest: &Path, overwrite: bool) -> Result<bool> {
    let Ok(meta) = std::fs::metadata(dest) else { return Ok(false) };
    if !overwrite {
        return Err(Error::OutputExists { path: dest.to_path_buf() });
    }
    let empty = || std::fs::read_dir(dest).is_ok_and(|mut d| d.next().is_none());
    let is_array = dest.join("zarr.json").is_file() || dest.join(".zarray").is_file();
    if meta.is_dir() && !is_array && !empty() {
        let e = io::Error::new(
            io::ErrorKind::IsADirectory,
            "it is a folder that holds no Zarr array, which is never replaced; hint: name a new path",
        );
        return Err(Error::io(dest, "create", e));
    }
    Ok(true)
}

/// [`check_replaceable`], and for an array to be replaced,
/// [`check_removable`]: its removal must not fail once the new array is in
/// its place.
fn replace_checked(dest: &Path, overwrite: bool) -> Result<bool> {
    let replacing = check_replaceable(dest, overwrite)?;
    if replacing {
        check_removable(dest).map_err(|(dir, e)| Error::io(&dir, "remove the replaced array", e))?;
    }
    Ok(replacing)
}

/// Whether `path` (a file, or a folder and everything under it) can be
/// removed by this process: every folder of the tree writable and
/// searchable (`access(2)`). Else the folder that is not, with why.
fn check_removable(path: &Path) -> std::result::Result<(), (PathBuf, io::Error)> {
    use rustix::fs::{access, Access};
    let mut dirs = vec![path.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        if !std::fs::symlink_metadata(&dir).map_err(|e| (dir.clone(), e))?.is_dir() {
            continue;
        }
        access(&dir, Access::WRITE_OK | Access::EXEC_OK).map_err(|e| (dir.clone(), io::Error::from(e)))?;
        for entry in std::fs::read_dir(&dir).map_err(|e| (dir.clone(), e))? {
            let entry = entry.map_err(|e| (dir.clone(), e))?;
            if entry.file_type().map_err(|e| (entry.path(), e))?.is_dir() {
                dirs.push(entry.path());
            }
        }
    }
    Ok(())
}

/// Removes a file or a directory tree.
fn remove_any(path: &Path) -> io::Result<()> {
    if std::fs::symlink_metadata(path)?.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    }
}

/// `fsync`s every file and directory under `root` (files in parallel), so
/// the renamed array is complete on disk.
fn sync_tree(root: &Path) -> io::Result<()> {
    let (mut dirs, mut files) = (vec![root.to_path_buf()], Vec::new());
    let mut i = 0;
    while i < dirs.len() {
        for entry in std::fs::read_dir(&dirs[i])? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                dirs.push(entry.path());
            } else {
                files.push(entry.path());
            }
        }
        i += 1;
    }
    files.par_iter().chain(dirs.par_iter()).try_for_each(|p| std::fs::File::open(p)?.sync_all())
}
