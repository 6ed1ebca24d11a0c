//! Rows computed on demand (an array expression), read like a file.

use std::path::PathBuf;

use crate::error::Result;
use crate::io::dtype::Dtype;

/// A 2-D array whose rows are computed when read (an array expression):
/// a [`Source`](super::Source) reads it block by block like a file, never whole.
pub trait RowSource: Send + Sync + std::fmt::Debug {
    /// Number of rows.
    fn n_rows(&self) -> usize;
    /// Number of columns.
    fn n_cols(&self) -> usize;
    /// The dtype of the values.
    fn dtype(&self) -> Dtype;
    /// Working bytes per row a read needs (its part of the block buffers).
    fn bytes_per_row(&self) -> usize;
    /// Bytes held while the source lives (intermediate results).
    fn held_bytes(&self) -> u64;
    /// Computes what must exist before rows can be read (an expression's
    /// intermediate results), within [`RowSource::held_bytes`]; stops with
    /// [`crate::Error::Cancelled`] once `cancel` is cancelled. Reads call it
    /// themselves when it has not run; jobs call it first, so that its
    /// errors and cancellation come before any of their work.
    ///
    /// # Errors
    /// The computation's errors (typed); [`crate::Error::Cancelled`].
    fn prepare(&self, _cancel: &crate::exec::Cancel) -> Result<()> {
        Ok(())
    }
    /// The name errors give the rows (`<expression>` unless overridden;
    /// `<memory>` for an array that the front end names itself).
    fn name(&self) -> PathBuf {
        PathBuf::from("<expression>")
    }
    /// Rows `[start, start + rows)` in row-major order as `f64` (exact for
    /// every dtype except 64-bit integers beyond 2^53).
    ///
    /// # Errors
    /// I/O errors of the reads below.
    fn read(&self, start: usize, rows: usize) -> Result<Vec<f64>>;
}

/// Rows `start..start + rows` of a [`CsrRowSource`]: a CSR block whose
/// offsets start at 0, with the stored columns and values (`float32` values
/// widened exactly).
#[derive(Debug, Default)]
pub struct CsrBlock {
    /// `rows + 1` offsets into `indices` and `values`, from 0.
    pub indptr: Vec<i64>,
    /// Each stored value's column.
    pub indices: Vec<i64>,
    /// The stored values.
    pub values: Vec<f64>,
}

/// A sparse matrix whose rows are read on demand as CSR blocks (a Dask
/// array of `scipy.sparse` chunks, computed one at a time): a
/// [`Source`](super::Source) checks each block as it does an in-memory CSR
/// matrix ([`super::CsrRef::new`]) and reads it like one, never the whole
/// matrix.
pub trait CsrRowSource: Send + Sync + std::fmt::Debug {
    /// Number of rows.
    fn n_rows(&self) -> usize;
    /// Number of columns.
    fn n_cols(&self) -> usize;
    /// The dtype of the stored values (`float32` or `float64`).
    fn dtype(&self) -> Dtype;
    /// The most values one row stores (what a read block holds per row).
    fn max_row_nnz(&self) -> usize;
    /// Bytes held while the source lives and between reads (one computed
    /// chunk).
    fn held_bytes(&self) -> u64;
    /// Rows `[start, start + rows)` as a CSR block.
    ///
    /// # Errors
    /// The reader's errors (typed).
    fn read(&self, start: usize, rows: usize) -> Result<CsrBlock>;
}
