//! [`ZarrInput`]: a Zarr v2 or v3 array read by regions.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use zarrs::array::{Array, ArrayBytes, ArrayCreateError, ArrayShardedExt, ArraySubset};
use zarrs::filesystem::FilesystemStore;
use zarrs::storage::StorageError;

use super::{array_error, copy_box, storage_error, swap_le, to_u64, ChunkCache};
use crate::dtype::Dtype;
use crate::error::{Error, Result};

/// A Zarr array (v2 or v3) on the local filesystem, read by regions.
///
/// Readable codecs are those of this zarrs build: `bytes` (either byte
/// order) and `zstd` (zarr-python's defaults for v3 and v2), `crc32c`,
/// `sharding_indexed`, and v2's `shuffle` filter; an array compressed
/// with blosc, gzip, zlib, lz4, bz2 or lzma, with a delta filter, the
/// `transpose` codec or v2's Fortran order fails to open with an error
/// naming the codec.
pub struct ZarrInput {
    array: Array<FilesystemStore>,
    path: PathBuf,
    shape: Vec<usize>,
    dtype: Dtype,
    chunks: Vec<usize>,
    /// Whether its chunks are shards (read by their inner chunks, never
    /// decoded whole into a [`ChunkCache`]).
    sharded: bool,
}

impl std::fmt::Debug for ZarrInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZarrInput")
            .field("path", &self.path)
            .field("shape", &self.shape)
            .field("dtype", &self.dtype)
            .field("chunks", &self.chunks)
            .finish_non_exhaustive()
    }
}

impl ZarrInput {
    /// Opens the Zarr array whose folder (holding `zarr.json` for v3,
    /// `.zarray` for v2) is `path`.
    ///
    /// # Errors
    /// [`Error::Io`] when `path` does not exist (kind `NotFound`) or cannot
    /// be read; [`Error::NotZarr`] when it is not a folder holding a Zarr
    /// array (a file, a group, an unsupported codec or chunk grid);
    /// [`Error::UnsupportedDtype`] naming the Zarr data type when it is none
    /// of the 12 [`Dtype`]s.
    pub fn open(path: &Path) -> Result<Self> {
        let not_zarr = |reason: String| Error::NotZarr { path: path.to_path_buf(), reason };
        let meta = std::fs::metadata(path).map_err(|e| Error::io(path, "open", e))?;
        if !meta.is_dir() {
            return Err(not_zarr("it is a file, not a folder".into()));
        }
        if !path.join("zarr.json").is_file() && !path.join(".zarray").is_file() {
            return Err(not_zarr("it holds no zarr.json or .zarray".into()));
        }
        let store = FilesystemStore::new(path).map_err(|e| not_zarr(e.to_string()))?;
        let array = Array::open(Arc::new(store), "/").map_err(|e| match e {
            ArrayCreateError::StorageError(s @ StorageError::IOError(_)) => storage_error(path, "open", s),
            ArrayCreateError::DataTypeCreateError(d) => {
                Error::UnsupportedDtype { path: path.to_path_buf(), descr: d.to_string() }
            }
            other => not_zarr(other.to_string()),
        })?;
        let name = array.data_type().name_v3().map(|n| n.into_owned()).unwrap_or_default();
        let dtype = Dtype::from_name(&name)
            .ok_or_else(|| Error::UnsupportedDtype { path: path.to_path_buf(), descr: name.clone() })?;
        let too_big = |_| not_zarr("its shape does not fit this machine's addresses".into());
        let shape: Vec<usize> =
            array.shape().iter().map(|&n| usize::try_from(n)).collect::<Result<_, _>>().map_err(too_big)?;
        let chunks = array
            .chunk_shape(&vec![0; shape.len()])
            .map_err(|e| not_zarr(format!("its chunk grid is not regular: {e}")))?
            .iter()
            .map(|n| usize::try_from(n.get()))
            .collect::<Result<_, _>>()
            .map_err(too_big)?;
        let sharded = array.is_sharded();
        Ok(ZarrInput { array, path: path.to_path_buf(), shape, dtype, chunks, sharded })
    }

    /// The array's shape (elements per dimension).
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The element type.
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }

    /// The shape of the chunk grid's first chunk (elements per dimension):
    /// the chunk shape of the regular grid.
    pub fn chunk_shape(&self) -> Vec<usize> {
        self.chunks.clone()
    }

    /// Whether reads keep its decoded chunks in a [`ChunkCache`]: all but a
    /// sharded array's, whose shards are read by the inner chunks a region
    /// needs (a shard can be far larger than what a unit reads).
    pub fn cached(&self) -> bool {
        !self.sharded
    }

    /// Reads the box `[start, start + shape)` into `out`: its values in C
    /// order as little-endian raw bytes of [`ZarrInput::dtype`]. Chunks are
    /// decoded one at a time (memory: one decoded chunk and its part of the
    /// box, besides `out`), or found in `cache` and kept there (see
    /// [`ChunkCache`]); chunks never written read as the fill value.
    ///
    /// # Errors
    /// [`Error::Io`] when a chunk cannot be read (kind of the operating
    /// system's error) or decoded (kind `InvalidData`: corrupt data, an
    /// unsupported codec).
    ///
    /// # Panics
    /// If `start` or `shape` has another length than the array's shape, the
    /// box reaches outside the array, or `out` does not hold exactly
    /// `prod(shape) * itemsize` bytes.
    pub fn read_region(&self, start: &[usize], shape: &[usize], out: &mut [u8], cache: &ChunkCache) -> Result<()> {
        let (nd, itemsize) = (self.shape.len(), self.dtype.itemsize());
        assert!(start.len() == nd && shape.len() == nd, "a {nd}-D region is needed, got {start:?} + {shape:?}");
        assert!(
            (0..nd).all(|d| start[d].checked_add(shape[d]).is_some_and(|end| end <= self.shape[d])),
            "region {start:?} + {shape:?} reaches outside the array's shape {:?}",
            self.shape
        );
        let n: usize = shape.iter().product();
        assert_eq!(out.len(), n * itemsize, "a region of shape {shape:?} needs {} bytes", n * itemsize);
        if n == 0 {
            return Ok(());
        }
        let region = ArraySubset::new_with_start_shape(to_u64(start), to_u64(shape)).expect("same dimensionality");
        let err = |e| array_error(&self.path, "read", e);
        let Some(chunks) = self.array.chunks_in_array_subset(&region).map_err(|e| err(e.into()))? else {
            return Ok(());
        };
        for index in &chunks.indices() {
            let chunk = self.array.chunk_subset_bounded(&index).map_err(err)?;
            let part = region.overlap(&chunk).map_err(|e| err(e.into()))?;
            let within = part.relative_to(chunk.start()).map_err(|e| err(e.into()))?;
            let part_shape = part.shape_usize();
            let dst_start: Vec<usize> = (0..nd).map(|d| part.start()[d] as usize - start[d]).collect();
            if cache.capacity() == 0 || !self.cached() {
                let err = |e| self.chunk_error(&index, e);
                let bytes: ArrayBytes<'static> = self.array.retrieve_chunk_subset(&index, &within).map_err(err)?;
                let bytes = bytes.into_fixed().map_err(|e| err(zarrs::array::ArrayError::CodecError(e.into())))?;
                copy_box((&bytes, &part_shape, &vec![0; nd]), (out, shape, &dst_start), &part_shape, itemsize);
                continue;
            }
            let (decoded, full) = self.decoded(&index, cache)?;
            let src_start: Vec<usize> = within.start().iter().map(|&s| s as usize).collect();
            copy_box((&decoded, &full, &src_start), (out, shape, &dst_start), &part_shape, itemsize);
        }
        swap_le(out, itemsize);
        Ok(())
    }

    /// A failed read of chunk `index`, naming its file (or shard's).
    fn chunk_error(&self, index: &[u64], e: zarrs::array::ArrayError) -> Error {
        array_error(&self.path.join(self.array.chunk_key(index).as_str()), "read", e)
    }

    /// The whole chunk `index` (of the grid's chunk shape, past the array's
    /// end too) and that shape: from `cache`, or decoded (and kept there
    /// while it holds it, unless the array is sharded), so units reading
    /// parts of it decode it once.
    fn decoded(&self, index: &[u64], cache: &ChunkCache) -> Result<(Arc<Vec<u8>>, Vec<usize>)> {
        let err = |e| array_error(&self.path, "read", e);
        let full: Vec<usize> = self.array.chunk_shape(index).map_err(err)?.iter().map(|n| n.get() as usize).collect();
        let bytes = (full.iter().product::<usize>() * self.dtype.itemsize()) as u64;
        let decode = || {
            let err = |e| self.chunk_error(index, e);
            let whole: ArrayBytes<'static> = self.array.retrieve_chunk(index).map_err(err)?;
            let whole = whole.into_fixed().map_err(|e| err(zarrs::array::ArrayError::CodecError(e.into())))?;
            Ok(whole.into_owned())
        };
        let decoded = if self.cached() {
            cache.get((self as *const Self as usize, index.to_vec()), bytes, decode)?
        } else {
            Arc::new(decode()?)
        };
        Ok((decoded, full))
    }

    /// Reads scattered elements: the element at C-order offset
    /// `offsets[i]` (in elements) goes to bytes `i·itemsize..` of `out`
    /// (little-endian raw bytes of [`ZarrInput::dtype`]). Each chunk holding
    /// some of them is decoded once, or found in `cache` (memory: one
    /// decoded chunk, and [`ZarrInput::POINT_BYTES`] per element, besides
    /// `out`), where reading them one by one decodes a chunk per element.
    ///
    /// # Errors
    /// As [`ZarrInput::read_region`].
    ///
    /// # Panics
    /// If an offset lies outside the array or `out` holds another number of
    /// elements than `offsets`.
    pub fn read_points(&self, offsets: &[i64], out: &mut [u8], cache: &ChunkCache) -> Result<()> {
        let (nd, itemsize) = (self.shape.len(), self.dtype.itemsize());
        assert_eq!(out.len(), offsets.len() * itemsize, "one element per offset");
        let coords = |o: i64, c: &mut [usize]| {
            let mut rem = usize::try_from(o).expect("an offset within the array");
            for k in (0..nd).rev() {
                c[k] = rem % self.shape[k].max(1);
                rem /= self.shape[k].max(1);
            }
        };
        // Chunks numbered in C order over the chunk grid.
        let grid: Vec<usize> = self.shape.iter().zip(&self.chunks).map(|(&n, &s)| n.div_ceil(s.max(1))).collect();
        let mut c = vec![0usize; nd];
        let mut order: Vec<(u64, u64)> = offsets
            .iter()
            .enumerate()
            .map(|(i, &o)| {
                coords(o, &mut c);
                let chunk = (0..nd).fold(0usize, |acc, k| acc * grid[k] + c[k] / self.chunks[k].max(1));
                (chunk as u64, i as u64)
            })
            .collect();
        order.sort_unstable();
        for group in order.chunk_by(|a, b| a.0 == b.0) {
            coords(offsets[group[0].1 as usize], &mut c);
            let index: Vec<u64> = (0..nd).map(|k| (c[k] / self.chunks[k].max(1)) as u64).collect();
            let (bytes, shape) = self.decoded(&index, cache)?;
            let start: Vec<usize> = (0..nd).map(|k| index[k] as usize * self.chunks[k]).collect();
            for &(_, i) in group {
                let i = i as usize;
                coords(offsets[i], &mut c);
                let at = (0..nd).fold(0usize, |acc, k| acc * shape[k] + (c[k] - start[k]));
                out[i * itemsize..(i + 1) * itemsize].copy_from_slice(&bytes[at * itemsize..(at + 1) * itemsize]);
            }
        }
        swap_le(out, itemsize);
        Ok(())
    }

    /// Working bytes per element of [`ZarrInput::read_points`] (its sort
    /// keys).
    pub const POINT_BYTES: usize = 16;

    /// The array's folder, as given to [`ZarrInput::open`].
    pub fn path(&self) -> &Path {
        &self.path
    }
}
