//! Per-row state a pass reads and updates ([`RowStates`]): `width` `f64`
//! values per row, kept in memory or in an unnamed scratch file (which
//! leaves nothing behind however the run ends), read and written a block
//! at a time. Bounds carried across k-means iterations and the grouped
//! mixture's running log-sum-exp per row are such states.

use std::path::Path;

use crate::error::Result;
use crate::io::ScratchFile;

/// `width` values for each of the rows `first_row..first_row + n_rows`.
#[derive(Debug)]
pub struct RowStates {
    width: usize,
    first_row: usize,
    n_rows: usize,
    memory: Vec<f64>,
    file: Option<ScratchFile>,
    /// One block's states when they live on disk.
    block: Vec<f64>,
}

impl RowStates {
    /// Bytes of state per row (in memory, or on disk).
    pub fn bytes_per_row(width: usize) -> u64 {
        (width * 8) as u64
    }

    /// States in memory (`n_rows × width × 8` bytes, plan them), zero at first.
    pub fn in_memory(first_row: usize, n_rows: usize, width: usize) -> Self {
        RowStates { width, first_row, n_rows, memory: vec![0.0; n_rows * width], file: None, block: Vec::new() }
    }

    /// States in an unnamed scratch file in `dir` (`n_rows × width × 8`
    /// bytes on disk), read through a buffer of `block_rows` rows held in
    /// memory (`block_rows × width × 8` bytes); zero at first.
    ///
    /// # Errors
    /// As [`ScratchFile::create`]: [`crate::Error::NoDiskSpace`],
    /// [`crate::Error::Io`] for a folder that cannot hold the file.
    pub fn on_disk(first_row: usize, n_rows: usize, width: usize, dir: &Path, block_rows: usize) -> Result<Self> {
        Ok(RowStates {
            width,
            first_row,
            n_rows,
            memory: Vec::new(),
            file: Some(ScratchFile::create(dir, (n_rows * width) as u64)?),
            block: vec![0.0; block_rows * width],
        })
    }

    /// States in memory holding `values` (row-major `(n_rows, width)`), as
    /// [`Self::into_values`] gave them: a range's states kept by another
    /// process between passes (see [`crate::exec::RowStateUse`]).
    ///
    /// # Panics
    /// When `values` does not hold `n_rows × width` values (a caller bug).
    pub fn from_values(first_row: usize, n_rows: usize, width: usize, values: Vec<f64>) -> Self {
        assert_eq!(values.len(), n_rows * width, "a state per row");
        RowStates { width, first_row, n_rows, memory: values, file: None, block: Vec::new() }
    }

    /// The states in memory, row-major `(n_rows, width)`; `None` for states
    /// on disk.
    pub fn into_values(self) -> Option<Vec<f64>> {
        self.file.is_none().then_some(self.memory)
    }

    /// Values per row.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Whether the states are in a scratch file.
    pub fn is_on_disk(&self) -> bool {
        self.file.is_some()
    }

    /// The states of rows `start..start + rows` (within the rows given at
    /// creation; at most `block_rows` at a time on disk), row-major
    /// `(rows, width)`, to read and change, then [`Self::store`]. With
    /// `fresh`, every row's state is first set to `fresh` (`width` values).
    ///
    /// # Errors
    /// Scratch read errors.
    ///
    /// # Panics
    /// For rows outside the states or more rows than the block buffer holds
    /// (a caller bug).
    pub fn rows(&mut self, start: usize, rows: usize, fresh: Option<&[f64]>) -> Result<&mut [f64]> {
        assert!(start >= self.first_row && start + rows <= self.first_row + self.n_rows, "rows within the states");
        let w = self.width;
        let at = (start - self.first_row) * w;
        let s = match &self.file {
            Some(f) => {
                let s = &mut self.block[..rows * w];
                if fresh.is_none() {
                    f.read(at as u64, s)?;
                }
                s
            }
            None => &mut self.memory[at..at + rows * w],
        };
        if let Some(v) = fresh {
            s.chunks_exact_mut(w).for_each(|r| r.copy_from_slice(v));
        }
        Ok(s)
    }

    /// Writes back the states [`Self::rows`] returned for rows
    /// `start..start + rows` (a no-op in memory).
    ///
    /// # Errors
    /// Scratch write errors ([`crate::Error::Io`], a full disk among them).
    pub fn store(&mut self, start: usize, rows: usize) -> Result<()> {
        match &self.file {
            Some(f) => f.write(((start - self.first_row) * self.width) as u64, &self.block[..rows * self.width]),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::{run_pass, Block, Cancel, Leaf, Pass};
    use crate::io::{ArrayRef, BlockReader, Source, Values};

    /// Keeps each row's running sum and visit count; its statistic is the
    /// sum of the states it leaves.
    struct Carry<'s>(&'s mut RowStates, bool);
    impl Pass<f64> for Carry<'_> {
        type Stats = f64;
        fn new_stats(&self) -> f64 {
            0.0
        }
        fn block(&mut self, b: Block<'_, f64>, leaves: &mut [Leaf<'_, f64>]) -> Result<()> {
            let s = self.0.rows(b.start, b.rows(), self.1.then_some(&[0.0, 0.0][..]))?;
            for (i, st) in s.chunks_exact_mut(2).enumerate() {
                st[0] += b.x[i];
                st[1] += 1.0;
                *leaves[0].stats += st[0];
            }
            self.0.store(b.start, b.rows())
        }
    }

    #[test]
    fn a_pass_reads_and_updates_states_in_memory_or_on_disk() {
        let n = 10_000;
        let x: Vec<f64> = (0..n).map(|i| (i as f64 * 0.61).cos()).collect();
        let src = Source::memory(ArrayRef::c_order(Values::F64(&x), n, 1).unwrap());
        let dir = tempfile::tempdir().unwrap();
        let run = |states: &mut RowStates| {
            let mut blocks = BlockReader::<f64>::new(&src, None, 700);
            let mut sums = Vec::new();
            for pass in 0..3 {
                let mut p = Carry(states, pass == 0);
                sums.push(run_pass(&mut p, &mut blocks, None, &[0.0], &Cancel::new()).unwrap().finish().unwrap());
            }
            let mut last = vec![0.0; 2 * n];
            for start in (0..n).step_by(700) {
                let rows = 700.min(n - start);
                last[2 * start..2 * (start + rows)].copy_from_slice(states.rows(start, rows, None).unwrap());
            }
            (sums, last)
        };
        let mut mem = RowStates::in_memory(0, n, 2);
        let mut disk = RowStates::on_disk(0, n, 2, dir.path(), 700).unwrap();
        assert!(disk.is_on_disk() && !mem.is_on_disk());
        let (a, b) = (run(&mut mem), run(&mut disk));
        assert_eq!(a, b);
        assert_eq!(a.1[2 * 5..2 * 6], [3.0 * x[5], 3.0]);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the scratch file has no name");
    }
}
