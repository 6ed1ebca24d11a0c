//! Zarr arrays on the local filesystem: [`ZarrOutput`] writes a Zarr v3
//! array chunk by chunk (atomically, like the `.npy` writers), [`ZarrInput`]
//! reads a v2 or v3 array by regions. Both exchange elements as C-order
//! little-endian raw bytes of a [`Dtype`](crate::dtype::Dtype), through the
//! [`zarrs`] crate (codecs `bytes`, `zstd` and `sharding_indexed`; no blosc
//! or gzip).

mod cache;
mod read;
mod write;

#[cfg(test)]
mod tests;

pub use cache::ChunkCache;
pub use read::ZarrInput;
pub use write::ZarrOutput;

use std::io;
use std::path::Path;

use zarrs::array::ArrayError;
use zarrs::storage::StorageError;

use crate::error::Error;

/// An [`Error::Io`] for a zarrs storage error at `path`, keeping the
/// operating system's error kind where there is one.
fn storage_error(path: &Path, action: &'static str, e: StorageError) -> Error {
    let cause = match e {
        StorageError::IOError(os) => io::Error::new(os.kind(), os.to_string()),
        other => io::Error::other(other.to_string()),
    };
    Error::io(path, action, cause)
}

/// An [`Error::Io`] for a zarrs array error at `path`: storage errors keep
/// their kind, the rest (a corrupt chunk, ...) are `InvalidData`.
fn array_error(path: &Path, action: &'static str, e: ArrayError) -> Error {
    match e {
        ArrayError::StorageError(s) => storage_error(path, action, s),
        other => Error::io(path, action, io::Error::new(io::ErrorKind::InvalidData, other.to_string())),
    }
}

/// Copies the box of `shape` from a C-order array to another, elements of
/// `itemsize` bytes: `src` and `dst` are each (bytes, the array's shape,
/// where the box starts in it). The box must lie inside both.
fn copy_box(src: (&[u8], &[usize], &[usize]), dst: (&mut [u8], &[usize], &[usize]), shape: &[usize], itemsize: usize) {
    let ((src, src_shape, src_start), (dst, dst_shape, dst_start)) = (src, dst);
    if shape.contains(&0) {
        return;
    }
    let row = shape.last().copied().unwrap_or(1) * itemsize;
    let offset = |array: &[usize], start: &[usize], idx: &[usize]| {
        array.iter().zip(start).zip(idx).fold(0, |acc, ((&n, &s), &i)| acc * n + s + i) * itemsize
    };
    // `idx` runs over the box's rows; its last entry stays 0.
    let mut idx = vec![0usize; shape.len()];
    loop {
        let (s, d) = (offset(src_shape, src_start, &idx), offset(dst_shape, dst_start, &idx));
        dst[d..d + row].copy_from_slice(&src[s..s + row]);
        let mut k = shape.len().saturating_sub(1);
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            idx[k] += 1;
            if idx[k] < shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
}

/// Swaps native-endian elements to little endian, or back (a no-op on
/// little-endian machines).
fn swap_le(bytes: &mut [u8], itemsize: usize) {
    if cfg!(target_endian = "big") && itemsize > 1 {
        bytes.chunks_exact_mut(itemsize).for_each(<[u8]>::reverse);
    }
}

/// `xs` as `u64`s, for zarrs.
fn to_u64(xs: &[usize]) -> Vec<u64> {
    xs.iter().map(|&x| x as u64).collect()
}
