//! Row blocks read into buffers that are allocated once and reused.

use super::source::Source;
use crate::dtype::Real;
use crate::error::{Error, Result};
use crate::exec::Cancel;

/// Reads the rows of a [`Source`] (and optionally per-row weights) block by
/// block, converted to `T` and shifted, into buffers of `block_rows` rows
/// allocated once: `block_rows × (n_features × size_of::<T>() + raw bytes
/// per row)` for the data, `block_rows × (8 + raw bytes)` for weights.
#[derive(Debug)]
pub struct BlockReader<'s, 'a, T> {
    x: &'s Source<'a>,
    w: Option<&'s Source<'a>>,
    block_rows: usize,
    x_scratch: Vec<u8>,
    w_scratch: Vec<u8>,
    values: Vec<T>,
    weights: Vec<f64>,
}

impl<'s, 'a, T: Real> BlockReader<'s, 'a, T> {
    /// Buffers for blocks of `block_rows` rows of `x` and of weights `w`
    /// (shape `(n_samples, 1)`).
    pub fn new(x: &'s Source<'a>, w: Option<&'s Source<'a>>, block_rows: usize) -> Self {
        let d = x.n_features();
        BlockReader {
            x,
            w,
            block_rows,
            x_scratch: vec![0; block_rows * x.scratch_bytes_per_row()],
            w_scratch: vec![0; w.map_or(0, |w| block_rows * w.scratch_bytes_per_row())],
            values: vec![T::default(); block_rows * d],
            weights: vec![0.0; if w.is_some() { block_rows } else { 0 }],
        }
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

    /// Calls `f(start, values, weights)` for each block in row order:
    /// `values` is row-major `(rows, n_features)` with column `j` shifted by
    /// `shift[j]`. `cancel` is checked before each block.
    ///
    /// # Errors
    /// Read errors, [`Error::Cancelled`], and whatever `f` returns.
    pub fn for_each(
        &mut self,
        shift: &[f64],
        cancel: &Cancel,
        f: impl FnMut(usize, &[T], Option<&[f64]>) -> Result<()>,
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
        mut f: impl FnMut(usize, &[T], Option<&[f64]>) -> Result<()>,
    ) -> Result<()> {
        let d = self.x.n_features();
        let mut start = rows.start;
        while start < rows.end {
            if cancel.is_cancelled() {
                return Err(Error::Cancelled);
            }
            let n = self.block_rows.min(rows.end - start);
            self.x.read_rows(start, n, shift, &mut self.x_scratch, &mut self.values)?;
            let w = match self.w {
                Some(ws) => {
                    ws.read_rows::<f64>(start, n, &[0.0], &mut self.w_scratch, &mut self.weights)?;
                    Some(&self.weights[..n])
                }
                None => None,
            };
            f(start, &self.values[..n * d], w)?;
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
        self.x.read_rows(i, 1, shift, &mut self.x_scratch, &mut self.values[..d])?;
        for (o, v) in out.iter_mut().zip(&self.values[..d]) {
            *o = v.to_f64();
        }
        Ok(())
    }
}
