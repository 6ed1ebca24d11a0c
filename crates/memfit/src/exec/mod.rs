//! The blocked pass: per-block work over a range of rows, with statistics
//! that merge in row order.
//!
//! Every pass over the data (validation, initialisation, Lloyd and EM
//! iterations, final assignments, predictions, the linear-algebra kernels)
//! is a [`Pass`] run by [`run_pass`], which owns the block iteration over
//! planned read buffers, cancellation, the finite check and the reduction.
//!
//! **Reduction.** Rows are cut into accumulation chunks of
//! [`CHUNK_ROWS`] at fixed offsets (multiples of [`CHUNK_ROWS`] from row 0).
//! A pass adds each chunk's rows, in row order, into that chunk's own
//! statistics (a *leaf*, started from zero); leaves are then folded left to
//! right with [`Merge::merge`]. Results therefore depend on the data and the
//! chunk size only, never on the block size, the memory limit or the thread
//! count; and a pass over consecutive row ranges that start on chunk
//! boundaries gives [`Partial`]s whose [`Partial::merge`] has the same bits
//! as one pass over all the rows: the basis for running a pass in pieces
//! (tasks on a cluster, [`Remote`]) without changing its answer.

mod cancel;
mod context;
mod grid;
mod options;
mod progress;
mod remote;
mod sample;
mod scan;
mod select;
mod sink;
mod state;

pub use cancel::{install, thread_pool, Cancel};
pub use context::{Backend, Context};
pub use grid::{run_grid, run_tiles};
pub use options::RunOptions;
pub use progress::{Observer, Progress};
pub use remote::{decode, encode, task_result, Remote, RowStateUse, Task, TaskRunner};
pub use sample::{nth_smallest_key, row_key, row_unit, Column, InitSample, KeyedSample, SAMPLE_CHUNK};
pub(crate) use scan::exact_shift;
pub(crate) use scan::{plan_scan_task, run_scan_task, ScanTask, SCAN};
pub use scan::{scan, Scan, ScanStats};
pub use select::{run_selected, Selection};
pub use sink::{box_runs, range_boxes, MemorySink, NpySink, RowWriter, Sink, ZarrSink};
pub use state::RowStates;

use std::ops::Range;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::dtype::Real;
use crate::error::{Error, Result};
use crate::io::{BlockReader, Source};
pub use crate::plan::CHUNK_ROWS;

/// Statistics of consecutive rows that fold in row order (and travel
/// between processes, see [`Remote`]).
pub trait Merge: Send + Serialize + DeserializeOwned {
    /// Folds in `next`, the statistics of the rows right after those of
    /// `self`.
    fn merge(&mut self, next: &Self);
    /// Resets to the statistics of no rows.
    fn clear(&mut self);
}

impl Merge for f64 {
    fn merge(&mut self, next: &Self) {
        *self += next;
    }
    fn clear(&mut self) {
        *self = 0.0;
    }
}

impl Merge for () {
    fn merge(&mut self, _: &Self) {}
    fn clear(&mut self) {}
}

/// Several statistics of one pass (several reductions over one read of the
/// data), each folded as it would be alone: the same bits as one pass per
/// statistic.
impl<A: Merge, B: Merge> Merge for (A, B) {
    fn merge(&mut self, next: &Self) {
        self.0.merge(&next.0);
        self.1.merge(&next.1);
    }
    fn clear(&mut self) {
        self.0.clear();
        self.1.clear();
    }
}

/// Any number of statistics of one kind in one pass (one per output, per
/// cluster, per reduction), each folded as it would be alone.
impl<S: Merge> Merge for Vec<S> {
    fn merge(&mut self, next: &Self) {
        self.iter_mut().zip(next).for_each(|(a, b)| a.merge(b));
    }
    fn clear(&mut self) {
        self.iter_mut().for_each(Merge::clear);
    }
}

/// How a block's values are laid out in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Layout {
    /// Row-major `(rows, n_features)` values, every value stored.
    #[default]
    Dense,
    /// Compressed sparse rows: row `i`'s stored values are
    /// `x[indptr[i]..indptr[i + 1]]`, in the strictly increasing columns
    /// `indices[indptr[i]..indptr[i + 1]]` ([`Block::csr`]); the others
    /// are zero.
    Csr,
}

/// The structure of a [`Layout::Csr`] block: `rows + 1` offsets into the
/// block's values and one column per stored value.
#[derive(Debug, Clone, Copy)]
pub struct CsrIndex<'b> {
    /// Offsets of each row's first value (and one past the last row's).
    pub indptr: &'b [usize],
    /// The column of each stored value.
    pub indices: &'b [u32],
}

/// One read block handed to a pass: rows `start..start + rows()` of the
/// source (or the selected rows [`Block::index`] names), converted to `T`
/// (and shifted by the pass's origin).
#[derive(Debug, Clone, Copy)]
pub struct Block<'b, T> {
    /// Index of the block's first row in the source.
    pub start: usize,
    /// Values of the block's rows, laid out as [`Block::layout`] says.
    pub x: &'b [T],
    /// Per-row sample weights, when the pass has any.
    pub w: Option<&'b [f64]>,
    /// Columns of `x`.
    pub n_features: usize,
    /// The layout of `x` ([`Layout::Dense`]: row-major `(rows, n_features)`).
    pub layout: Layout,
    /// For a pass over a [`Selection`]: the source index of each row of the
    /// block (increasing, the first is `start`); `None` when the rows are
    /// consecutive.
    pub index: Option<&'b [usize]>,
    /// For a [`Layout::Csr`] block, where each row's values lie.
    pub csr: Option<CsrIndex<'b>>,
}

impl<'b, T> Block<'b, T> {
    /// A dense block of consecutive rows from row `start`.
    pub fn dense(start: usize, x: &'b [T], w: Option<&'b [f64]>, n_features: usize) -> Self {
        Block { start, x, w, n_features, layout: Layout::Dense, index: None, csr: None }
    }

    /// A sparse block of consecutive rows from row `start`: the stored
    /// values `x` of rows laid out as `csr` says.
    pub fn sparse(start: usize, x: &'b [T], csr: CsrIndex<'b>, w: Option<&'b [f64]>, n_features: usize) -> Self {
        Block { start, x, w, n_features, layout: Layout::Csr, index: None, csr: Some(csr) }
    }

    /// Rows in the block.
    pub fn rows(&self) -> usize {
        match self.csr {
            Some(c) => c.indptr.len() - 1,
            None => self.x.len() / self.n_features.max(1),
        }
    }

    /// Row `i`'s stored values and their columns: every value of a dense
    /// block (columns `None`), the nonzeros of a sparse one.
    #[inline]
    pub fn row_values(&self, i: usize) -> (&'b [T], Option<&'b [u32]>) {
        match self.csr {
            Some(c) => {
                let r = c.indptr[i]..c.indptr[i + 1];
                (&self.x[r.clone()], Some(&c.indices[r]))
            }
            None => (&self.x[i * self.n_features..(i + 1) * self.n_features], None),
        }
    }

    /// The source index of the block's row `i`.
    pub fn row(&self, i: usize) -> usize {
        self.index.map_or(self.start + i, |ix| ix[i])
    }

    /// The rows `r` (relative to the block) as a block of their own.
    pub fn sub(&self, r: Range<usize>) -> Block<'b, T> {
        let d = self.n_features;
        let index = self.index.map(|ix| &ix[r.clone()]);
        // A sparse block keeps its values; its offsets are cut.
        let (x, csr) = match self.csr {
            Some(c) => (self.x, Some(CsrIndex { indptr: &c.indptr[r.start..=r.end], indices: c.indices })),
            None => (&self.x[r.start * d..r.end * d], None),
        };
        Block {
            start: index.map_or(self.start + r.start, |ix| ix.first().copied().unwrap_or(self.start)),
            x,
            w: self.w.map(|w| &w[r]),
            n_features: d,
            layout: self.layout,
            index,
            csr,
        }
    }
}

impl<T: Real> Block<'_, T> {
    /// Row `i`'s `n_features` values as `f64` (zeros filled in for a
    /// sparse block, and a stored −0.0 read as +0.0, as scipy's `toarray`
    /// adds the stored values to zeros).
    pub fn dense_row(&self, i: usize) -> Vec<f64> {
        let mut out = Vec::new();
        self.dense_row_into(i, &mut out);
        out
    }

    /// [`Block::dense_row`] appended to `out` (cleared by the caller).
    pub fn dense_row_into(&self, i: usize, out: &mut Vec<f64>) {
        match self.row_values(i) {
            (v, None) => out.extend(v.iter().map(|v| v.to_f64())),
            (v, Some(cols)) => {
                let at = out.len();
                out.resize(at + self.n_features, 0.0);
                cols.iter().zip(v).for_each(|(&j, v)| out[at + j as usize] = 0.0 + v.to_f64());
            }
        }
    }
}

/// The statistics one accumulation chunk's rows of a block go into.
#[derive(Debug)]
pub struct Leaf<'l, S> {
    /// The rows of the block (relative to its first row) in this chunk.
    pub rows: Range<usize>,
    /// The chunk's statistics so far (its earlier rows came in earlier blocks).
    pub stats: &'l mut S,
}

/// Per-block work of a pass.
pub trait Pass<T: Real> {
    /// What the pass accumulates (see [`Merge`]).
    type Stats: Merge;

    /// The statistics of no rows.
    fn new_stats(&self) -> Self::Stats;

    /// Whether [`Pass::block`] takes all the chunks of a block at once (and
    /// works on them in parallel); otherwise it is called once per chunk of
    /// a block, and at most two statistics (the folded prefix and the open
    /// chunk) are held at a time.
    fn chunks_at_once(&self) -> bool {
        false
    }

    /// Whether [`run_pass`] checks every value for finiteness before the
    /// pass sees it (passes over data no validation pass has read).
    fn checks_finite(&self) -> bool {
        false
    }

    /// Processes `block`: per-row work and outputs, and the rows of each
    /// leaf added, in row order, to its statistics.
    ///
    /// # Errors
    /// Whatever the pass finds wrong in the data or its outputs return.
    fn block(&mut self, block: Block<'_, T>, leaves: &mut [Leaf<'_, Self::Stats>]) -> Result<()>;

    /// The pass described for another process (its kind and encoded
    /// parameters, see [`Task`]), when it can run there: it has no per-row
    /// outputs and its statistics are all it computes. `None` (the default)
    /// runs it here even when its split is [`RowSplit::remote`].
    fn task(&self) -> Option<(&'static str, Vec<u8>)> {
        None
    }

    /// The per-row state [`Pass::task`]'s runs keep where they run, if any
    /// (see [`RowStateUse`]).
    fn row_state(&self) -> Option<RowStateUse> {
        None
    }

    /// Takes back cleared statistics the runner no longer needs (the spare
    /// ones of a pass), for [`Pass::new_stats`] to hand out again instead
    /// of allocating; dropped by default.
    fn recycle(&mut self, _stats: Self::Stats) {}

    /// What the pass keeps apart from its statistics, encoded: results that
    /// merge in any order (the validation pass's keyed sample). A task
    /// returns them with its statistics ([`task_result`]); empty by default.
    fn side(&self) -> Vec<u8> {
        Vec::new()
    }

    /// Merges a task's [`Pass::side`] results into this pass.
    ///
    /// # Errors
    /// [`Error::Remote`] for bytes this pass cannot decode.
    fn merge_side(&mut self, _side: &[u8]) -> Result<()> {
        Ok(())
    }
}

/// The statistics of a range of rows.
#[derive(Debug, Serialize, Deserialize)]
#[serde(bound = "S: Merge")]
pub struct Partial<S> {
    rows: Range<usize>,
    /// From row 0: one value, the fold of every chunk so far. Otherwise one
    /// leaf per chunk, in order.
    parts: Vec<S>,
}

impl<S: Merge> Partial<S> {
    /// The rows covered.
    pub fn rows(&self) -> Range<usize> {
        self.rows.clone()
    }

    /// Appends `next`, the statistics of the rows right after these.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`rows`) unless `next` starts where
    /// `self` ends, on a chunk boundary.
    pub fn merge(mut self, next: Partial<S>) -> Result<Partial<S>> {
        if next.rows.start != self.rows.end || !next.rows.start.is_multiple_of(CHUNK_ROWS) {
            return Err(Error::param(
                "rows",
                format!(
                    "rows {:?} cannot follow rows {:?}: ranges must be consecutive and start on a multiple of {CHUNK_ROWS}",
                    next.rows, self.rows
                ),
            ));
        }
        self.rows.end = next.rows.end;
        if self.rows.start == 0 {
            for p in &next.parts {
                self.parts[0].merge(p);
            }
        } else {
            self.parts.extend(next.parts);
        }
        Ok(self)
    }

    /// The statistics of these rows alone: their chunks folded left to right
    /// (from row 0, the same as [`Partial::finish`]).
    pub fn fold(mut self) -> S {
        let mut parts = self.parts.drain(..);
        let mut first = parts.next().expect("at least one part");
        for p in parts {
            first.merge(&p);
        }
        first
    }

    /// The statistics of rows `0..end`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`rows`) when the rows do not start at 0.
    pub fn finish(mut self) -> Result<S> {
        if self.rows.start != 0 || self.parts.len() != 1 {
            return Err(Error::param(
                "rows",
                format!("statistics of rows {:?} are not a whole pass (rows must start at 0)", self.rows),
            ));
        }
        Ok(self.parts.pop().expect("one part"))
    }
}

/// Runs `pass` over rows `rows` of `blocks`' source (all rows when `None`),
/// read block by block into `blocks`' buffers, converted to `T` and shifted
/// by `shift` (`n_features` values). `cancel` is checked before each block.
///
/// # Errors
/// [`Error::InvalidParameter`] (`rows`) for a range beyond the data or not
/// starting on a chunk boundary; [`Error::NonFinite`] for a non-finite value
/// when the pass [checks](Pass::checks_finite); read errors;
/// [`Error::Cancelled`]; whatever the pass returns.
pub fn run_pass<T: Real, P: Pass<T>>(
    pass: &mut P,
    blocks: &mut BlockReader<'_, '_, T>,
    rows: Option<Range<usize>>,
    shift: &[f64],
    cancel: &Cancel,
) -> Result<Partial<P::Stats>> {
    let x = blocks.x();
    let n = x.n_samples();
    let rows = rows.unwrap_or(0..n);
    if rows.start > rows.end || rows.end > n || !rows.start.is_multiple_of(CHUNK_ROWS) {
        return Err(Error::param(
            "rows",
            format!("rows {rows:?} of {n}: a range must lie within the data and start on a multiple of {CHUNK_ROWS}"),
        ));
    }
    let from_zero = rows.start == 0;
    let mut parts: Vec<P::Stats> = Vec::new();
    // The chunk whose leaf is open (its last rows are still to come), and
    // cleared statistics to reuse.
    let mut open: Option<(usize, P::Stats)> = None;
    let mut spare: Vec<P::Stats> = Vec::new();
    let end = rows.end;
    let at_once = pass.chunks_at_once();
    let check = pass.checks_finite();
    blocks.for_each_in(rows.clone(), shift, cancel, |block| {
        let start = block.start;
        if check {
            check_finite(x, block)?;
        }
        let stop = start + block.rows();
        let first = start / CHUNK_ROWS;
        let chunks = first..(stop - 1) / CHUNK_ROWS + 1;
        let mut leaves: Vec<(usize, Range<usize>, P::Stats)> = chunks
            .map(|c| {
                let r = (c * CHUNK_ROWS).max(start) - start..((c + 1) * CHUNK_ROWS).min(stop) - start;
                let stats = match open.take() {
                    Some((oc, s)) if oc == c => s,
                    Some(_) => unreachable!("an open chunk is continued by the next block"),
                    None => spare.pop().unwrap_or_else(|| pass.new_stats()),
                };
                (c, r, stats)
            })
            .take(if at_once { usize::MAX } else { 1 })
            .collect();
        if at_once {
            let mut view: Vec<Leaf<'_, P::Stats>> =
                leaves.iter_mut().map(|(_, r, s)| Leaf { rows: r.clone(), stats: s }).collect();
            pass.block(block, &mut view)?;
            for (c, _, s) in leaves {
                close(c, s, stop, end, from_zero, &mut parts, &mut open, &mut spare);
            }
        } else {
            // One chunk at a time: the next leaf is taken after the last is
            // folded, so at most the prefix and one leaf exist.
            let mut c = first;
            let mut leaf = leaves.pop();
            while let Some((_, r, mut s)) = leaf.take() {
                let piece_end = r.end;
                pass.block(block.sub(r.clone()), &mut [Leaf { rows: 0..r.len(), stats: &mut s }])?;
                close(c, s, stop, end, from_zero, &mut parts, &mut open, &mut spare);
                if piece_end < block.rows() {
                    c += 1;
                    let r = piece_end..((c + 1) * CHUNK_ROWS).min(stop) - start;
                    leaf = Some((c, r, spare.pop().unwrap_or_else(|| pass.new_stats())));
                }
            }
        }
        Ok(())
    })?;
    if parts.is_empty() {
        parts.push(open.map_or_else(|| pass.new_stats(), |(_, s)| s));
    }
    for s in spare {
        pass.recycle(s);
    }
    Ok(Partial { rows, parts })
}

/// Folds chunk `c`'s leaf if the chunk is complete (it ends within the
/// block, or the range ends there), else keeps it open.
#[allow(clippy::too_many_arguments)]
fn close<S: Merge>(
    c: usize,
    mut s: S,
    stop: usize,
    end: usize,
    from_zero: bool,
    parts: &mut Vec<S>,
    open: &mut Option<(usize, S)>,
    spare: &mut Vec<S>,
) {
    if (c + 1) * CHUNK_ROWS > stop && stop < end {
        *open = Some((c, s));
    } else if from_zero && !parts.is_empty() {
        parts[0].merge(&s);
        s.clear();
        spare.push(s);
    } else {
        parts.push(s);
    }
}

/// Row boundaries at which a job cuts every pass into ranges that run
/// separately and merge their statistics ([`Partial::merge`]); the default
/// runs each pass whole, here. Results are the same bits for any split: it
/// exists to run passes in pieces, elsewhere ([`RowSplit::remote`]), and to
/// test that they agree.
#[derive(Debug, Clone, Default)]
pub struct RowSplit {
    bounds: Vec<usize>,
    remote: Option<Arc<dyn Remote>>,
}

impl PartialEq for RowSplit {
    fn eq(&self, o: &Self) -> bool {
        self.bounds == o.bounds
            && match (&self.remote, &o.remote) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                _ => false,
            }
    }
}

impl RowSplit {
    /// Cuts at `boundaries` (non-decreasing multiples of [`CHUNK_ROWS`];
    /// boundaries at 0, at or beyond the data's end, or repeated (the end of
    /// an empty piece, such as a Dask chunk of zero rows) are ignored: no
    /// range is empty).
    pub fn at(boundaries: Vec<usize>) -> Self {
        RowSplit { bounds: boundaries, remote: None }
    }

    /// Cuts at `boundaries` (as [`RowSplit::at`]) and runs the ranges of
    /// every pass that [describes itself](Pass::task) on `remote`; other
    /// passes run here, reading the rows through the job's source.
    pub fn remote(boundaries: Vec<usize>, remote: Arc<dyn Remote>) -> Self {
        RowSplit { bounds: boundaries, remote: Some(remote) }
    }

    /// Whether passes that describe themselves run on a cluster.
    pub fn is_remote(&self) -> bool {
        self.remote.is_some()
    }

    /// The ranges of a pass over rows `first..n`.
    fn ranges(&self, first: usize, n: usize) -> Vec<Range<usize>> {
        let mut bounds = vec![first];
        for &b in &self.bounds {
            if b > bounds[bounds.len() - 1] && b < n {
                bounds.push(b);
            }
        }
        bounds.push(n);
        bounds.windows(2).map(|w| w[0]..w[1]).collect()
    }
}

/// Runs `pass` over all rows as the ranges of `split` and merges their
/// statistics (see [`run_pass`]): one after another here, or all at once on
/// the split's [`Remote`] when the pass has a [`Task`].
///
/// # Errors
/// As [`run_pass`]; [`Error::InvalidParameter`] (`rows`) for boundaries
/// that are not increasing multiples of [`CHUNK_ROWS`]; the remote's errors.
pub fn run_split<T: Real, P: Pass<T>>(
    pass: &mut P,
    blocks: &mut BlockReader<'_, '_, T>,
    split: &RowSplit,
    shift: &[f64],
    cancel: &Cancel,
) -> Result<P::Stats> {
    // A piece of larger data (see `Source::starting_at`) is passed from its
    // first row on.
    let ranges = split.ranges(blocks.x().first_row(), blocks.x().n_samples());
    if let Some(b) = split.bounds.iter().find(|&&b| !b.is_multiple_of(CHUNK_ROWS)) {
        return Err(Error::param("rows", format!("row boundary {b} is not a multiple of {CHUNK_ROWS}")));
    }
    // Only a remote split asks the pass for its task (encoding it costs the
    // parameters' bytes again).
    if let Some(remote) = &split.remote {
        if let Some((kind, payload)) = pass.task() {
            if cancel.is_cancelled() {
                return Err(Error::Cancelled);
            }
            let unit_rows = blocks.x().has_unit_rows();
            let task = Task {
                kind: kind.to_string(),
                compute: T::DTYPE,
                shift: shift.to_vec(),
                payload,
                unit_rows,
                row_state: pass.row_state(),
            };
            return remote::merge_encoded(pass, remote.as_ref(), &task, &ranges);
        }
    }
    let mut total: Option<Partial<P::Stats>> = None;
    for r in ranges {
        let p = run_pass(pass, blocks, Some(r), shift, cancel)?;
        total = Some(match total {
            None => p,
            Some(t) => t.merge(p)?,
        });
    }
    let total = total.expect("at least one range");
    // A piece of larger data: the statistics of its rows alone.
    if total.rows.start == blocks.x().first_row() && total.rows.start > 0 {
        return Ok(total.fold());
    }
    total.finish()
}

/// Fails with [`Error::NonFinite`] at the first non-finite value of `block`.
///
/// # Errors
/// As described; read errors while fetching the value as stored.
pub fn check_finite<T: Real>(x: &Source<'_>, block: Block<'_, T>) -> Result<()> {
    let d = block.n_features.max(1);
    let at = |p: usize| match block.csr {
        // The stored value's row: the last whose first value is at or before it.
        Some(c) => (block.start + c.indptr.partition_point(|&a| a <= p) - 1, c.indices[p] as usize),
        None => (block.start + p / d, p % d),
    };
    let values = block.csr.map_or(block.x, |c| &block.x[c.indptr[0]..c.indptr[c.indptr.len() - 1]]);
    let first = block.csr.map_or(0, |c| c.indptr[0]);
    match crate::kernels::first_non_finite(values) {
        None => Ok(()),
        Some(p) => {
            let (row, column) = at(first + p);
            Err(Error::bad_value(x.name(), row, column, x.value(row, column)?, 1, T::DTYPE))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{ArrayRef, Values};

    /// Sums of each column, row by row within a chunk.
    struct ColumnSums;

    #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Sums(Vec<f64>);

    impl Merge for Sums {
        fn merge(&mut self, next: &Self) {
            self.0.iter_mut().zip(&next.0).for_each(|(a, b)| *a += b);
        }
        fn clear(&mut self) {
            self.0.fill(0.0);
        }
    }

    impl Pass<f64> for ColumnSums {
        type Stats = Sums;
        fn new_stats(&self) -> Sums {
            Sums(vec![0.0; 2])
        }
        fn block(&mut self, block: Block<'_, f64>, leaves: &mut [Leaf<'_, Sums>]) -> Result<()> {
            for leaf in leaves.iter_mut() {
                for row in block.sub(leaf.rows.clone()).x.chunks(2) {
                    leaf.stats.0[0] += row[0];
                    leaf.stats.0[1] += row[1];
                }
            }
            Ok(())
        }
    }

    struct AtOnce;
    impl Pass<f64> for AtOnce {
        type Stats = Sums;
        fn new_stats(&self) -> Sums {
            Sums(vec![0.0; 2])
        }
        fn chunks_at_once(&self) -> bool {
            true
        }
        fn block(&mut self, block: Block<'_, f64>, leaves: &mut [Leaf<'_, Sums>]) -> Result<()> {
            ColumnSums.block(block, leaves)
        }
    }

    #[test]
    fn blocks_and_ranges_do_not_change_the_bits() {
        let n = 3 * CHUNK_ROWS + 1000;
        let x: Vec<f64> = (0..2 * n).map(|i| ((i as f64) * 0.731).sin() * 1e6 + 0.1).collect();
        let src = Source::memory(ArrayRef::c_order(Values::F64(&x), n, 2).unwrap());
        let run = |block: usize, ranges: &[usize], at_once: bool| {
            let mut blocks = BlockReader::<f64>::new(&src, None, block);
            let mut total: Option<Partial<Sums>> = None;
            for w in ranges.windows(2) {
                let p = if at_once {
                    run_pass(&mut AtOnce, &mut blocks, Some(w[0]..w[1]), &[0.0; 2], &Cancel::new()).unwrap()
                } else {
                    run_pass(&mut ColumnSums, &mut blocks, Some(w[0]..w[1]), &[0.0; 2], &Cancel::new()).unwrap()
                };
                total = Some(match total {
                    None => p,
                    Some(t) => t.merge(p).unwrap(),
                });
            }
            total.unwrap().finish().unwrap()
        };
        let want = run(n, &[0, n], false);
        let c = CHUNK_ROWS;
        for at_once in [false, true] {
            for block in [256, 1000 * 256, n] {
                for ranges in [vec![0, n], vec![0, c, n], vec![0, c, 2 * c, 3 * c, n], vec![0, 2 * c, 3 * c, n]] {
                    assert_eq!(run(block, &ranges, at_once), want, "block {block}, ranges {ranges:?}");
                }
            }
        }
        // The fold is left to right over chunk leaves.
        let leaf = |c: usize| -> Vec<f64> {
            let rows = c * CHUNK_ROWS..((c + 1) * CHUNK_ROWS).min(n);
            let mut s = vec![0.0; 2];
            for i in rows {
                s[0] += x[2 * i];
                s[1] += x[2 * i + 1];
            }
            s
        };
        let mut fold = leaf(0);
        for c in 1..4 {
            let l = leaf(c);
            fold[0] += l[0];
            fold[1] += l[1];
        }
        assert_eq!(want.0, fold);
    }

    #[test]
    fn a_piece_keeps_its_rows_numbers() {
        let n = 3 * CHUNK_ROWS + 10;
        let mut x: Vec<f64> = (0..2 * n).map(|i| (i % 7) as f64).collect();
        let c = CHUNK_ROWS;
        let want = {
            let all = Source::memory(ArrayRef::c_order(Values::F64(&x), n, 2).unwrap());
            let mut blocks = BlockReader::<f64>::new(&all, None, 1000);
            run_pass(&mut ColumnSums, &mut blocks, Some(c..n), &[0.0; 2], &Cancel::new()).unwrap().fold()
        };
        {
            let piece = Source::memory(ArrayRef::c_order(Values::F64(&x[2 * c..]), n - c, 2).unwrap()).starting_at(c);
            assert_eq!(piece.n_samples(), n);
            let mut blocks = BlockReader::<f64>::new(&piece, None, 1000);
            let got = run_split(&mut ColumnSums, &mut blocks, &RowSplit::default(), &[0.0; 2], &Cancel::new()).unwrap();
            assert_eq!(got, want);
        }
        // Errors name rows as in the whole array.
        x[2 * (2 * c + 5) + 1] = f64::NAN;
        let piece = Source::memory(ArrayRef::c_order(Values::F64(&x[2 * c..]), n - c, 2).unwrap()).starting_at(c);
        let mut blocks = BlockReader::<f64>::new(&piece, None, 1000);
        let mut failed = None;
        blocks
            .for_each_in(c..n, &[0.0; 2], &Cancel::new(), |b| {
                let (start, xb) = (b.start, b.x);
                let b = Block::dense(start, xb, None, 2);
                if let Err(e) = check_finite(&piece, b) {
                    failed.get_or_insert(e.to_string());
                }
                Ok(())
            })
            .unwrap();
        assert!(failed.unwrap().contains(&format!("row {}", 2 * c + 5)));
    }

    /// Sum (`squares = false`) or sum of squares of the first column; with
    /// `both`, the two at once as a pair of statistics.
    struct Moments(bool);
    impl Pass<f64> for Moments {
        type Stats = (f64, f64);
        fn new_stats(&self) -> (f64, f64) {
            (0.0, 0.0)
        }
        fn block(&mut self, block: Block<'_, f64>, leaves: &mut [Leaf<'_, (f64, f64)>]) -> Result<()> {
            assert_eq!(block.layout, Layout::Dense);
            assert!(block.index.is_none());
            for leaf in leaves.iter_mut() {
                for row in block.sub(leaf.rows.clone()).x.chunks(2) {
                    leaf.stats.0 += row[0];
                    if self.0 {
                        leaf.stats.1 += row[0] * row[0];
                    }
                }
            }
            Ok(())
        }
    }

    #[test]
    fn several_statistics_in_one_pass_equal_one_pass_each() {
        let n = 2 * CHUNK_ROWS + 311;
        let x: Vec<f64> = (0..2 * n).map(|i| ((i as f64) * 0.173).sin() * 1e3).collect();
        let src = Source::memory(ArrayRef::c_order(Values::F64(&x), n, 2).unwrap());
        let mut blocks = BlockReader::<f64>::new(&src, None, 1000);
        let run = |p: &mut Moments, blocks: &mut BlockReader<'_, '_, f64>| {
            run_split(p, blocks, &RowSplit::default(), &[0.0; 2], &Cancel::new()).unwrap()
        };
        let both = run(&mut Moments(true), &mut blocks);
        let sum = run(&mut Moments(false), &mut blocks).0;
        // The sum of squares alone: the squares as a one-column source.
        let sq: Vec<f64> = x.chunks(2).flat_map(|r| [r[0] * r[0], 0.0]).collect();
        let sq_src = Source::memory(ArrayRef::c_order(Values::F64(&sq), n, 2).unwrap());
        let mut sq_blocks = BlockReader::<f64>::new(&sq_src, None, 777);
        let squares = run(&mut Moments(false), &mut sq_blocks).0;
        assert_eq!(both.0.to_bits(), sum.to_bits());
        assert_eq!(both.1.to_bits(), squares.to_bits());
        // Vec statistics fold element by element, as each alone.
        let mut v = vec![1.0, 2.0];
        v.merge(&vec![0.5, 0.25]);
        assert_eq!(v, vec![1.5, 2.25]);
    }

    #[test]
    fn refuses_unaligned_or_gapped_ranges() {
        let x = vec![1.0; 2 * 10];
        let src = Source::memory(ArrayRef::c_order(Values::F64(&x), 10, 2).unwrap());
        let mut blocks = BlockReader::<f64>::new(&src, None, 10);
        assert!(run_pass(&mut ColumnSums, &mut blocks, Some(3..10), &[0.0; 2], &Cancel::new()).is_err());
        assert!(run_pass(&mut ColumnSums, &mut blocks, Some(0..11), &[0.0; 2], &Cancel::new()).is_err());
        let a = run_pass(&mut ColumnSums, &mut blocks, Some(0..5), &[0.0; 2], &Cancel::new()).unwrap();
        let b = run_pass(&mut ColumnSums, &mut blocks, Some(5..10), &[0.0; 2], &Cancel::new());
        assert!(b.is_err());
        assert_eq!(a.finish().unwrap().0, vec![5.0, 5.0]);
    }
}
