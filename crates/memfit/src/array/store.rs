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
use crate::io::NpyFile;

/// Extra elements a file read may span beyond the elements it needs (so a
/// strided tile is read in one request rather than element by element).
pub const READ_SLACK_ELEMENTS: usize = 4096;

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

    /// Appends the elements at `offsets` (in elements) to `out`, of this
    /// array's dtype's kind. File reads go through `buf`, which grows to at
    /// most `(offsets.len() + READ_SLACK_ELEMENTS) · itemsize` bytes or two
    /// such spans for scattered offsets.
    ///
    /// # Errors
    /// [`Error::Io`] when a file read fails.
    pub fn gather(&self, offsets: &[i64], out: &mut Col, buf: &mut Vec<u8>) -> Result<()> {
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
                    // Scattered: read sorted runs of nearby elements.
                    let mut order: Vec<u32> = (0..offsets.len() as u32).collect();
                    order.sort_unstable_by_key(|&i| offsets[i as usize]);
                    let mut pos = vec![0usize; offsets.len()];
                    buf.clear();
                    let mut k = 0;
                    while k < order.len() {
                        let start = offsets[order[k] as usize];
                        let mut end = start;
                        let mut j = k;
                        while j < order.len() && offsets[order[j] as usize] - end <= 1 {
                            end = offsets[order[j] as usize];
                            j += 1;
                        }
                        let from = buf.len();
                        buf.resize(from + ((end - start) as usize + 1) * size, 0);
                        read(&mut buf[from..], start)?;
                        for &i in &order[k..j] {
                            pos[i as usize] = from / size + (offsets[i as usize] - start) as usize;
                        }
                        k = j;
                    }
                    self.swap(buf);
                    out.decode_from(buf, self.dtype, pos.into_iter());
                }
            }
            Storage::Zarr(z) => {
                // Read the bounding box of the offsets' coordinates.
                let nd = self.shape.len();
                let coords = |o: i64| {
                    let mut rem = o as usize;
                    let mut c = vec![0usize; nd];
                    for k in (0..nd).rev() {
                        c[k] = rem % self.shape[k].max(1);
                        rem /= self.shape[k].max(1);
                    }
                    c
                };
                let (mut lo, mut hi) = (self.shape.clone(), vec![0usize; nd]);
                for &o in offsets {
                    for (k, c) in coords(o).into_iter().enumerate() {
                        lo[k] = lo[k].min(c);
                        hi[k] = hi[k].max(c + 1);
                    }
                }
                let ext: Vec<usize> = (0..nd).map(|k| hi[k].saturating_sub(lo[k])).collect();
                if ext.iter().product::<usize>() <= 2 * offsets.len() + READ_SLACK_ELEMENTS {
                    buf.resize(ext.iter().product::<usize>() * size, 0);
                    z.read_region(&lo, &ext, buf)?;
                    let box_strides = c_strides(&ext);
                    let at = |o: i64| {
                        coords(o).iter().zip(&lo).zip(&box_strides).map(|((c, l), s)| (c - l) as i64 * s).sum::<i64>()
                            as usize
                    };
                    out.decode_from(buf, self.dtype, offsets.iter().map(|&o| at(o)));
                } else {
                    buf.resize(size, 0);
                    let one = vec![1usize; nd];
                    for &o in offsets {
                        z.read_region(&coords(o), &one, buf)?;
                        out.decode_from(buf, self.dtype, std::iter::once(0));
                    }
                }
            }
        }
        Ok(())
    }

    /// Appends the `n` elements at offsets `start..start + n` to `out`.
    ///
    /// # Errors
    /// [`Error::Io`] when a file read fails.
    pub fn read_range(&self, start: i64, n: usize, out: &mut Col, buf: &mut Vec<u8>) -> Result<()> {
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
                self.gather(&offsets, out, buf)?;
            }
        }
        Ok(())
    }

    /// Reads the elements at offsets `start..` into `out` (raw little-endian
    /// bytes, `out.len()` a multiple of the item size), from a file.
    ///
    /// # Errors
    /// [`Error::Io`] when the read fails.
    ///
    /// # Panics
    /// For arrays in memory (a caller bug).
    pub fn read_into(&self, start: i64, out: &mut [u8]) -> Result<()> {
        let size = self.dtype.itemsize();
        match &self.storage {
            Storage::Npy(file) => {
                let at = file.header().data_offset + start as u64 * size as u64;
                file.file().read_exact_at(out, at).map_err(|e| Error::io(file.path(), "read", e))?;
                self.swap(out);
                Ok(())
            }
            Storage::Zarr(z) => {
                let nd = self.shape.len();
                let mut c = vec![0usize; nd];
                let mut rem = start as usize;
                for k in (0..nd).rev() {
                    c[k] = rem % self.shape[k].max(1);
                    rem /= self.shape[k].max(1);
                }
                let mut ext = vec![1usize; nd];
                ext[nd - 1] = out.len() / size;
                z.read_region(&c, &ext, out)
            }
            _ => panic!("read_into is for files"),
        }
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
                + if matches!(self.storage, Storage::Npy(_)) { 12 * n as u64 } else { 0 }
        } else {
            0
        }
    }
}
