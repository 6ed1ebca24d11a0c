//! Input and output: `.npy` headers, block readers, atomic writers, Zarr
//! arrays.

mod blocks;
mod dtype;
mod npy_header;
mod scratch;
mod source;
mod writer;
pub mod zarr;

pub use blocks::BlockReader;
pub use dtype::{decode, decode_integer, Dtype, Endian, InexactInteger};
pub use npy_header::{header_len, parse_header, write_header, HeaderError, NpyHeader, MAGIC, PREAMBLE_BYTES};
pub use scratch::{temp_dir, ScratchFile};
pub use source::{
    ArrayRef, CsrBlock, CsrFiles, CsrRef, CsrRowSource, Index, NpyFile, RowSource, Source, SparseValues, Values,
};
pub use writer::{
    check_disk_space, check_free_space, check_output_path, check_outputs_distinct, is_model_folder, npy_file_bytes,
    npy_writer_bytes, remove_unfinished_outputs, write_bytes_atomic, write_npy, AtomicFile, AtomicFolder, NpyWriter,
    PlannedWrite, PositionedNpy, MODEL_JSON, WRITE_BUFFER_BYTES,
};
pub(crate) use writer::{probe_dir, resolved_path};
pub use zarr::{ChunkCache, ZarrInput, ZarrOutput};

use crate::dtype::Real;
use crate::error::Result;
use std::path::Path;

/// Reads a whole (small) 2-D `.npy` file, such as saved centres, as `f64`
/// in C order; returns `(values, n_rows, n_cols)`.
///
/// # Errors
/// As [`Source::open_matrix`] and [`Source::read_rows`].
pub fn read_matrix_f64(path: impl AsRef<Path>) -> Result<(Vec<f64>, usize, usize)> {
    let src = Source::open_matrix(path)?;
    let (n, d) = (src.n_samples(), src.n_features());
    Ok((read_all(&src)?, n, d))
}

/// Reads a whole (small) `.npy` file of `ndim` dimensions as `f64` in C
/// order; returns the values and the shape.
///
/// # Errors
/// As [`Source::open_stacked`] and [`Source::read_rows`].
pub fn read_array_f64(path: impl AsRef<Path>, ndim: usize) -> Result<(Vec<f64>, Vec<usize>)> {
    let (src, shape) = Source::open_stacked(path, ndim)?;
    Ok((read_all(&src)?, shape))
}

fn read_all(src: &Source<'_>) -> Result<Vec<f64>> {
    let (n, d) = (src.n_samples(), src.n_features());
    let mut out = vec![0f64; n * d];
    // Read in blocks of rows, so that the raw bytes held beside the values
    // stay small (about 1 MiB, at least one row), not a second copy.
    let per_row = src.scratch_bytes_per_row().max(1);
    let rows = ((1 << 20) / per_row).clamp(1, n.max(1));
    let mut scratch = vec![0u8; rows * per_row];
    let zero = vec![0.0; d];
    let mut at = 0;
    while at < n {
        let take = rows.min(n - at);
        src.read_rows::<f64>(at, take, &zero, &mut scratch[..take * per_row], &mut out[at * d..(at + take) * d])?;
        at += take;
    }
    Ok(out)
}

/// Writes a matrix of the compute type to `path` atomically.
///
/// # Errors
/// As [`write_npy`].
pub fn write_matrix<T: Real>(path: impl AsRef<Path>, values: &[T], n_rows: usize, n_cols: usize) -> Result<()> {
    write_npy(path, T::DTYPE, &[n_rows, n_cols], values, T::write_le)
}
