//! Row blocks read into buffers that are allocated once and reused.

use super::source::Source;
use crate::dtype::Real;
use crate::error::{Error, Result};
use crate::exec::{Block, Cancel, CsrIndex};

/// Reads the rows of a [`Source`] (and optionally per-row weights) block by
/// block, converted to `T` and shifted, into buffers of `block_rows` rows
/// allocated once: `block_rows × (n_features × size_of::<T>() + raw bytes
/// per row)` for the data, `block_rows × (8 + raw bytes)` for weights. A
/// sparse source's blocks are CSR ([`crate::exec::Layout::Csr`]): for each
/// row an offset and up to its most stored values with their columns
/// ([`BlockReader::sparse_bytes_per_row`]); they are not shifted.
#[derive(Debug)]
pub struct BlockReader<'s, 'a, T> {
    x: &'s Source<'a>,
    w: Option<&'s Source<'a>>,
    block_rows: usize,
    x_scratch: Vec<u8>,
    w_scratch: Vec<u8>,
    values: Vec<T>,
    weights: Vec<f64>,
    indptr: Vec<usize>,
    indices: Vec<u32>,
}

impl<'s, 'a, T: Real> BlockReader<'s, 'a, T> {
    /// Buffers for blocks of `block_rows` rows of `x` and of weights `w`
    /// (shape `(n_samples, 1)`).
    pub fn new(x: &'s Source<'a>, w: Option<&'s Source<'a>>, block_rows: usize) -> Self {
        let d = x.n_features();
        let sparse = x.sparse_row_nnz().map(|nnz| block_rows.min(x.n_samples()) * nnz);
        BlockReader {
            x,
            w,
            block_rows,
            x_scratch: vec![0; block_rows * x.scratch_bytes_per_row()],
            w_scratch: vec![0; w.map_or(0, |w| block_rows * w.scratch_bytes_per_row())],
            values: match sparse {
                Some(nnz) => Vec::with_capacity(nnz),
                None => vec![T::default(); block_rows * d],
            },
            weights: vec![0.0; if w.is_some() { block_rows } else { 0 }],
            indptr: Vec::with_capacity(if sparse.is_some() { block_rows + 1 } else { 0 }),
            indices: Vec::with_capacity(sparse.unwrap_or(0)),
        }
    }

    /// Bytes a reader of a sparse source holds per block row in place of
    /// [`BlockReader::bytes_per_row`]'s values: an offset, and for the most
    /// values a row stores (`max_row_nnz`) each value and its column.
    pub fn sparse_bytes_per_row(max_row_nnz: usize, compute_bytes: usize, w_scratch: Option<usize>) -> u64 {
        (8 + max_row_nnz * (compute_bytes + 4) + w_scratch.map_or(0, |s| s + 8)) as u64
    }

    /// Bytes a reader holds per block row: the raw scratch of `x`
    /// (`x_scratch` bytes per row), `n_features` converted values of
    /// `compute_bytes` each, and for weights their raw scratch (`w_scratch`)
    /// and one `f64`.
    pub fn bytes_per_row(x_scratch: usize, n_features: usize, compute_bytes: usize, w_scratch: Option<usize>) -> u64 {
        (x_scratch + n_features * compute_bytes + w_scratch.map_or(0, |s| s + 8)) as u64
    }

    /// The data source.
    pub fn x(&self) -> &'s Source<'a> {
        self.x
    }

    /// The weights source, if any.
    pub fn weights(&self) -> Option<&'s Source<'a>> {
        self.w
    }

    /// Rows per block.
    pub fn block_rows(&self) -> usize {
        self.block_rows
    }

    /// Calls `f(block)` for each block in row order: a dense block's values
    /// are row-major `(rows, n_features)` with column `j` shifted by
    /// `shift[j]`; a sparse source's blocks are CSR, unshifted (`shift`
    /// must be zero). `cancel` is checked before each block.
    ///
    /// # Errors
    /// Read errors, [`Error::Cancelled`], and whatever `f` returns.
    pub fn for_each(
        &mut self,
        shift: &[f64],
        cancel: &Cancel,
        f: impl FnMut(Block<'_, T>) -> Result<()>,
    ) -> Result<()> {
        self.for_each_in(0..self.x.n_samples(), shift, cancel, f)
    }

    /// [`Self::for_each`] over the rows `rows` only (within the data);
    /// blocks start at `rows.start` and every `block_rows` rows after it.
    ///
    /// # Errors
    /// As [`Self::for_each`].
    pub fn for_each_in(
        &mut self,
        rows: std::ops::Range<usize>,
        shift: &[f64],
        cancel: &Cancel,
        mut f: impl FnMut(Block<'_, T>) -> Result<()>,
    ) -> Result<()> {
        let d = self.x.n_features();
        let sparse = self.x.sparse_row_nnz().is_some();
        let unshifted = shift.iter().all(|&s| s == 0.0);
        let mut start = rows.start;
        while start < rows.end {
            if cancel.is_cancelled() {
                return Err(Error::Cancelled);
            }
            let n = self.block_rows.min(rows.end - start);
            // Rows held as the block would hold them are read in place.
            let held = if unshifted && !sparse { self.x.rows_in_place::<T>(start, n) } else { None };
            if sparse {
                debug_assert!(unshifted, "sparse rows are read unshifted");
                self.x.read_csr(
                    start,
                    n,
                    &mut self.indptr,
                    &mut self.indices,
                    &mut self.values,
                    &mut self.x_scratch,
                )?;
            } else if held.is_none() {
                self.x.read_rows(start, n, shift, &mut self.x_scratch, &mut self.values)?;
            }
            let w = match self.w {
                Some(ws) => {
                    ws.read_rows::<f64>(start, n, &[0.0], &mut self.w_scratch, &mut self.weights)?;
                    Some(&self.weights[..n])
                }
                None => None,
            };
            f(if sparse {
                let csr = CsrIndex { indptr: &self.indptr, indices: &self.indices };
                Block::sparse(start, &self.values, csr, w, d)
            } else {
                Block::dense(start, held.unwrap_or(&self.values[..n * d]), w, d)
            })?;
            start += n;
        }
        Ok(())
    }

    /// Reads row `i` shifted by `shift` into `out` as `f64`, after rounding
    /// to `T` (the values the kernels see).
    ///
    /// # Errors
    /// Read errors.
    pub fn read_row(&mut self, i: usize, shift: &[f64], out: &mut [f64]) -> Result<()> {
        let d = out.len();
        if self.x.sparse_row_nnz().is_some() {
            let mut row = vec![T::default(); d];
            self.x.read_rows(i, 1, shift, &mut [], &mut row)?;
            out.iter_mut().zip(&row).for_each(|(o, v)| *o = v.to_f64());
            return Ok(());
        }
        self.x.read_rows(i, 1, shift, &mut self.x_scratch, &mut self.values[..d])?;
        for (o, v) in out.iter_mut().zip(&self.values[..d]) {
            *o = v.to_f64();
        }
        Ok(())
    }
}
