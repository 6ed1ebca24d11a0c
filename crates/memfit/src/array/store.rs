//! Stored arrays under an expression: memory (borrowed or owned) and `.npy`
//! files, read element by element at the offsets a [`ViewMap`](super::view::ViewMap)
//! gives, with positioned reads into planned buffers (never `mmap`, whose
//! pages would count as resident memory).

use std::any::Any;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::values::Col;
use crate::dtype::{Dtype, Endian};
use crate::error::{Error, Result};
use crate::io::{ChunkCache, NpyFile};

/// Extra elements a file read may span beyond the elements it needs (so a
/// strided tile is read in one request rather than element by element).
pub const READ_SLACK_ELEMENTS: usize = 4096;

/// Most bytes between two elements a scattered file read still reads in
/// one request: copying them costs less than another system call.
const GAP_BYTES: usize = 16 << 10;

/// Where a stored array's elements are.
pub enum Storage {
    /// Borrowed memory: `len` bytes at `ptr`, kept alive by `owner`.
    Borrowed {
        /// First byte of the memory span holding every element.
        ptr: *const u8,
        /// Bytes in the span.
        len: usize,
        /// Whatever keeps the memory alive (a NumPy array, a `Vec`).
        owner: Arc<dyn Any + Send + Sync>,
    },
    /// Memory owned by the expression (an intermediate result).
    Owned(Vec<u8>),
    /// A `.npy` file.
    Npy(NpyFile),
    /// A Zarr array.
    Zarr(Box<crate::io::ZarrInput>),
}

// SAFETY: the borrowed span is only read, and its owner keeps it alive and
// unchanged for as long as the expression exists (the contract of
// `Stored::borrowed`).
unsafe impl Send for Storage {}
// SAFETY: as for `Send`: shared reads only.
unsafe impl Sync for Storage {}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Storage::Borrowed { len, .. } => write!(f, "Borrowed({len} bytes)"),
            Storage::Owned(v) => write!(f, "Owned({} bytes)", v.len()),
            Storage::Npy(n) => write!(f, "Npy({})", n.path().display()),
            Storage::Zarr(z) => write!(f, "Zarr({})", z.path().display()),
        }
    }
}

/// Where a stored array's elements are read from, for a caller that must
/// know whether writing somewhere could change what an expression reads
/// ([`crate::array::Array::places`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// `len` bytes of borrowed memory from address `start`.
    Memory {
        /// Address of the span's first byte.
        start: usize,
        /// Bytes in the span.
        len: usize,
    },
    /// A `.npy` file or a Zarr array directory.
    File(PathBuf),
}

/// A stored array: its storage, dtype, byte order, shape and element
/// strides (offsets in elements from `base`).
#[derive(Debug)]
pub struct Stored {
    /// Where the elements are.
    pub storage: Storage,
    /// Element type.
    pub dtype: Dtype,
    /// Byte order of the elements.
    pub endian: Endian,
    /// Shape.
    pub shape: Vec<usize>,
    /// Strides in elements (negative for reversed axes).
    pub strides: Vec<i64>,
    /// Offset in elements of element `(0, …, 0)`.
    pub base: i64,
}

fn c_strides(shape: &[usize]) -> Vec<i64> {
    let mut strides = vec![0i64; shape.len()];
    let mut s = 1i64;
    for k in (0..shape.len()).rev() {
        strides[k] = s;
        s *= shape[k] as i64;
    }
    strides
}

impl Stored {
    /// An array in memory the caller keeps alive: `len` bytes at `ptr` hold
    /// every element, element `(i_k)` at byte `(base + Σ i_k · strides[k]) ·
    /// itemsize`, native (little-endian) byte order.
    ///
    /// # Safety
    /// The span must stay valid and unchanged while `owner` lives, and every
    /// element offset must lie within it.
    pub unsafe fn borrowed(
        ptr: *const u8,
        len: usize,
        owner: Arc<dyn Any + Send + Sync>,
        dtype: Dtype,
        shape: Vec<usize>,
        strides: Vec<i64>,
        base: i64,
    ) -> Self {
        Stored { storage: Storage::Borrowed { ptr, len, owner }, dtype, endian: Endian::Little, shape, strides, base }
    }

    /// An owned C-order array of little-endian elements.
    ///
    /// # Panics
    /// If `bytes` does not hold exactly the shape's elements.
    pub fn owned(bytes: Vec<u8>, dtype: Dtype, shape: Vec<usize>) -> Self {
        assert_eq!(bytes.len(), shape.iter().product::<usize>() * dtype.itemsize(), "bytes for the shape");
        let strides = c_strides(&shape);
        Stored { storage: Storage::Owned(bytes), dtype, endian: Endian::Little, shape, strides, base: 0 }
    }

    /// A `.npy` file, read lazily.
    ///
    /// # Errors
    /// As [`NpyFile::open`].
    pub fn npy(path: &Path) -> Result<Self> {
        let file = NpyFile::open(path)?;
        let h = file.header();
        let (dtype, endian, shape) = (h.dtype, h.endian, h.shape.clone());
        let strides = if h.fortran_order {
            let mut rev: Vec<usize> = shape.clone();
            rev.reverse();
            let mut s = c_strides(&rev);
            s.reverse();
            s
        } else {
            c_strides(&shape)
        };
        Ok(Stored { storage: Storage::Npy(file), dtype, endian, shape, strides, base: 0 })
    }

    /// A Zarr array (v2 or v3), read lazily by regions.
    ///
    /// # Errors
    /// As [`crate::io::ZarrInput::open`].
    pub fn zarr(path: &Path) -> Result<Self> {
        let z = crate::io::ZarrInput::open(path)?;
        let (dtype, shape) = (z.dtype(), z.shape().to_vec());
        let strides = c_strides(&shape);
        Ok(Stored { storage: Storage::Zarr(Box::new(z)), dtype, endian: Endian::Little, shape, strides, base: 0 })
    }

    /// Where the elements are read from: borrowed memory or a file; `None`
    /// for memory the expression owns (no caller can write to it).
    pub fn place(&self) -> Option<Place> {
        match &self.storage {
            Storage::Borrowed { ptr, len, .. } => Some(Place::Memory { start: *ptr as usize, len: *len }),
            Storage::Owned(_) => None,
            Storage::Npy(_) | Storage::Zarr(_) => self.path().map(Place::File),
        }
    }

    /// The file behind the array, if any.
    pub fn path(&self) -> Option<PathBuf> {
        match &self.storage {
            Storage::Npy(f) => Some(f.path().to_path_buf()),
            Storage::Zarr(z) => Some(z.path().to_path_buf()),
            _ => None,
        }
    }

    /// The elements of an owned array (an intermediate result in memory):
    /// C order, little-endian; `None` for other storage.
    pub(crate) fn owned_bytes(&self) -> Option<&[u8]> {
        match &self.storage {
            Storage::Owned(bytes) => Some(bytes),
            _ => None,
        }
    }

    /// Whether reads go to a file (and need read buffers).
    pub fn on_disk(&self) -> bool {
        matches!(self.storage, Storage::Npy(_) | Storage::Zarr(_))
    }

    /// The chunk shape of a Zarr array (each chunk is decoded whole by a
    /// read of any part of it); `None` for other storage.
    pub fn zarr_chunks(&self) -> Option<Vec<usize>> {
        match &self.storage {
            Storage::Zarr(z) => Some(z.chunk_shape()),
            _ => None,
        }
    }

    /// The chunk shape of a Zarr array whose decoded chunks a stage keeps
    /// in its cache (not a sharded one's: see
    /// [`crate::io::ZarrInput::cached`]); `None` for other storage.
    pub fn cached_zarr_chunks(&self) -> Option<Vec<usize>> {
        match &self.storage {
            Storage::Zarr(z) if z.cached() => Some(z.chunk_shape()),
            _ => None,
        }
    }

    /// Whether a box is best read as runs ([`Stored::read_runs`]): in a
    /// `.npy` file, a run is one positioned read. A Zarr array is read by
    /// [`Stored::gather`] instead, which decodes each chunk once for the
    /// whole box, where a run would decode a chunk for a few elements (a
    /// transpose's runs are a tile's width).
    pub fn reads_runs(&self) -> bool {
        matches!(self.storage, Storage::Npy(_))
    }

    /// Appends the elements at `offsets` (in elements) to `out`, of this
    /// array's dtype's kind. File reads go through `buf`, which grows to at
    /// most `(2 · offsets.len() + READ_SLACK_ELEMENTS) · itemsize` bytes (one
    /// request for a dense span; for scattered offsets, the gathered elements
    /// and a window that nearby ones are read through together).
    ///
    /// # Errors
    /// [`Error::Io`] when a file read fails.
    pub fn gather(&self, offsets: &[i64], out: &mut Col, buf: &mut Vec<u8>, zarr: &ChunkCache) -> Result<()> {
        let size = self.dtype.itemsize();
        let run = offsets.windows(2).all(|w| w[1] == w[0] + 1);
        let memory = |raw: &[u8], out: &mut Col| {
            if run && self.endian == Endian::Little && !offsets.is_empty() {
                let first = offsets[0] as usize * size;
                out.decode_all(&raw[first..first + offsets.len() * size], self.dtype);
            } else {
                out.decode_from(raw, self.dtype, offsets.iter().map(|&o| o as usize));
            }
        };
        match &self.storage {
            Storage::Borrowed { ptr, len, .. } => {
                // SAFETY: the span is valid for `len` bytes (contract of `borrowed`).
                let raw = unsafe { std::slice::from_raw_parts(*ptr, *len) };
                memory(raw, out);
            }
            Storage::Owned(raw) => memory(raw, out),
            Storage::Npy(file) => {
                let Some((&lo, &hi)) = offsets.iter().min().zip(offsets.iter().max()) else { return Ok(()) };
                let span = (hi - lo) as usize + 1;
                let at = |o: i64| file.header().data_offset + (o as u64) * size as u64;
                let read = |buf: &mut [u8], o: i64| {
                    file.file().read_exact_at(buf, at(o)).map_err(|e| Error::io(file.path(), "read", e))
                };
                if span <= 2 * offsets.len() + READ_SLACK_ELEMENTS {
                    buf.resize(span * size, 0);
                    read(buf, lo)?;
                    self.swap(buf);
                    if run {
                        out.decode_all(buf, self.dtype);
                    } else {
                        out.decode_from(buf, self.dtype, offsets.iter().map(|&o| (o - lo) as usize));
                    }
                } else {
                    self.read_runs(offsets, 1, buf)?;
                    out.decode_all(buf, self.dtype);
                }
            }
            Storage::Zarr(z) => {
                // Read the bounding box of the offsets' coordinates
                // (coordinate k of offset o: (o / strides[k]) % shape[k]).
                let nd = self.shape.len();
                let strides = c_strides(&self.shape);
                let coord = |o: i64, k: usize| (o / strides[k].max(1)) as usize % self.shape[k].max(1);
                let (mut lo, mut hi) = (self.shape.clone(), vec![0usize; nd]);
                match (run, offsets.first(), offsets.last()) {
                    (true, Some(&first), Some(&last)) => {
                        // A run in C order: the box of its ends along the
                        // first axis where they differ, whole along the
                        // axes inside it (the run crosses their ends).
                        let mut crossed = false;
                        for k in 0..nd {
                            let (a, b) = (coord(first, k), coord(last, k));
                            (lo[k], hi[k]) = if crossed { (0, self.shape[k]) } else { (a, b + 1) };
                            crossed |= a != b;
                        }
                    }
                    _ => {
                        for &o in offsets {
                            for k in 0..nd {
                                let c = coord(o, k);
                                lo[k] = lo[k].min(c);
                                hi[k] = hi[k].max(c + 1);
                            }
                        }
                    }
                }
                let ext: Vec<usize> = (0..nd).map(|k| hi[k].saturating_sub(lo[k])).collect();
                if ext.iter().product::<usize>() <= 2 * offsets.len() + READ_SLACK_ELEMENTS {
                    buf.resize(ext.iter().product::<usize>() * size, 0);
                    z.read_region(&lo, &ext, buf, zarr)?;
                    let box_strides = c_strides(&ext);
                    let at =
                        |o: i64| (0..nd).map(|k| (coord(o, k) - lo[k]) as i64 * box_strides[k]).sum::<i64>() as usize;
                    // A run as long as its box is the box in C order.
                    let whole = offsets.len() == buf.len() / size;
                    if whole && (run || offsets.iter().enumerate().all(|(i, &o)| at(o) == i)) {
                        // The whole box in its C order (a tile of whole chunks).
                        out.decode_all(buf, self.dtype);
                    } else {
                        out.decode_from(buf, self.dtype, offsets.iter().map(|&o| at(o)));
                    }
                } else {
                    // Scattered: each chunk decoded once for the elements in it.
                    buf.resize(offsets.len() * size, 0);
                    z.read_points(offsets, buf, zarr)?;
                    out.decode_all(buf, self.dtype);
                }
            }
        }
        Ok(())
    }

    /// Appends the `n` elements at offsets `start..start + n` to `out`.
    ///
    /// # Errors
    /// [`Error::Io`] when a file read fails.
    pub fn read_range(&self, start: i64, n: usize, out: &mut Col, buf: &mut Vec<u8>, zarr: &ChunkCache) -> Result<()> {
        let size = self.dtype.itemsize();
        let from = start as usize * size;
        match &self.storage {
            Storage::Borrowed { ptr, len, .. } if self.endian == Endian::Little => {
                // SAFETY: the span is valid for `len` bytes (contract of `borrowed`).
                let raw = unsafe { std::slice::from_raw_parts(*ptr, *len) };
                out.decode_all(&raw[from..from + n * size], self.dtype);
            }
            Storage::Owned(raw) => out.decode_all(&raw[from..from + n * size], self.dtype),
            Storage::Npy(file) => {
                buf.resize(n * size, 0);
                let at = file.header().data_offset + from as u64;
                file.file().read_exact_at(buf, at).map_err(|e| Error::io(file.path(), "read", e))?;
                self.swap(buf);
                out.decode_all(buf, self.dtype);
            }
            _ => {
                let offsets: Vec<i64> = (start..start + n as i64).collect();
                self.gather(&offsets, out, buf, zarr)?;
            }
        }
        Ok(())
    }

    /// Reads runs of `run` elements starting at element offsets `starts` (in
    /// any order) from a file into `buf`, run `r` at bytes `r · run ·
    /// itemsize` (native byte order). Runs at most `GAP_BYTES` apart in the
    /// file are read in one request through a window (a system call costs
    /// more than copying that many bytes), so `buf` grows to at most
    /// `(2 · starts.len() · run + READ_SLACK_ELEMENTS) · itemsize` bytes.
    ///
    /// # Errors
    /// [`Error::Io`] when a read fails.
    ///
    /// # Panics
    /// For arrays not in a `.npy` file (a caller bug: see
    /// [`Stored::reads_runs`]).
    pub fn read_runs(&self, starts: &[i64], run: usize, buf: &mut Vec<u8>) -> Result<()> {
        let size = self.dtype.itemsize();
        let n = starts.len() * run;
        let Storage::Npy(file) = &self.storage else { panic!("runs are read from .npy files") };
        let sorted = starts.windows(2).all(|w| w[1] > w[0]);
        let mut order: Vec<u32> = Vec::new();
        if !sorted {
            order = (0..starts.len() as u32).collect();
            order.sort_unstable_by_key(|&i| starts[i as usize]);
        }
        let at_rank = |k: usize| if sorted { k } else { order[k] as usize };
        let span = match (starts.iter().min(), starts.iter().max()) {
            (Some(lo), Some(hi)) => (hi - lo) as usize + run,
            _ => 0,
        };
        let window = (n + READ_SLACK_ELEMENTS).min(span).max(run);
        let gap = (GAP_BYTES / size).max(1) as i64;
        buf.resize((n + window) * size, 0);
        let (packed, win) = buf.split_at_mut(n * size);
        let mut k = 0;
        while k < starts.len() {
            let first = starts[at_rank(k)];
            let (mut end, mut j) = (first + run as i64, k + 1);
            while j < starts.len() {
                let o = starts[at_rank(j)];
                if o - end > gap || (o - first) as usize + run > window {
                    break;
                }
                end = end.max(o + run as i64);
                j += 1;
            }
            let bytes = (end - first) as usize * size;
            let at = file.header().data_offset + first as u64 * size as u64;
            file.file().read_exact_at(&mut win[..bytes], at).map_err(|e| Error::io(file.path(), "read", e))?;
            for q in k..j {
                let (r, o) = (at_rank(q), (starts[at_rank(q)] - first) as usize * size);
                packed[r * run * size..(r + 1) * run * size].copy_from_slice(&win[o..o + run * size]);
            }
            k = j;
        }
        buf.truncate(n * size);
        self.swap(buf);
        Ok(())
    }

    fn swap(&self, buf: &mut [u8]) {
        let size = self.dtype.itemsize();
        if self.endian == Endian::Big && size > 1 {
            for e in buf.chunks_exact_mut(size) {
                e.reverse();
            }
        }
    }

    /// Bytes of read buffer a gather of `n` offsets may use.
    pub fn read_buffer_bytes(&self, n: usize) -> u64 {
        if self.on_disk() {
            ((2 * n + READ_SLACK_ELEMENTS) * self.dtype.itemsize()) as u64
                + match self.storage {
                    Storage::Npy(_) => 12 * n as u64,
                    // The sort keys of scattered reads.
                    _ => (crate::io::ZarrInput::POINT_BYTES * n) as u64,
                }
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::write_npy;

    /// An int64 `.npy` of `0..n` (element `i` holds `i`).
    fn counting(n: usize) -> (tempfile::TempDir, Stored) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.npy");
        let values: Vec<i64> = (0..n as i64).collect();
        write_npy(&path, Dtype::I64, &[n], &values, |v, b| b.extend_from_slice(&v.to_le_bytes())).unwrap();
        let s = Stored::npy(&path).unwrap();
        (dir, s)
    }

    fn decoded(buf: &[u8]) -> Vec<i64> {
        buf.chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap())).collect()
    }

    #[test]
    fn runs_come_back_in_the_order_asked_whatever_their_spacing() {
        let (_dir, s) = counting(200_000);
        let gap = (GAP_BYTES / 8) as i64;
        let cases: Vec<(Vec<i64>, usize)> = vec![
            ((0..64).map(|r| r * 64).collect(), 29), // a column block of a (_, 64) matrix
            ((0..64).rev().map(|r| r * 64 + 3).collect(), 32), // runs in reverse file order
            (vec![5, 5, 100, 7], 4),                 // repeated and overlapping runs
            (vec![0, gap + 1, 3 * gap, 150_000, 199_990], 10), // beyond the gap: separate reads
            ((0..50).map(|r| r * 3000).collect(), 1), // scattered elements, windows full
            (Vec::new(), 7),
        ];
        for (starts, run) in cases {
            let mut buf = Vec::new();
            s.read_runs(&starts, run, &mut buf).unwrap();
            let want: Vec<i64> = starts.iter().flat_map(|&a| a..a + run as i64).collect();
            assert_eq!(decoded(&buf), want, "runs of {run} at {starts:?}");
            let bound = (2 * starts.len() * run + READ_SLACK_ELEMENTS) * 8;
            assert!(buf.capacity() <= bound.max(8 * run), "buffer {} over {bound}", buf.capacity());
        }
    }

    #[test]
    fn scattered_gathers_match_the_offsets() {
        let (_dir, s) = counting(100_000);
        let offsets: Vec<i64> = (0..2000).map(|i| (i * 7919) % 100_000).collect();
        let mut out = Col::with_capacity(Dtype::I64, offsets.len());
        s.gather(&offsets, &mut out, &mut Vec::new(), &ChunkCache::default()).unwrap();
        let Col::I(v) = out else { panic!("int64 column") };
        assert_eq!(v, offsets);
    }
}
