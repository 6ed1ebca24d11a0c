//! Keyed sampling: each row's key is a hash of the seed and the row index,
//! and a sample of `m` rows keeps the `m` smallest keys. The sample depends on
//! the seed and the data alone, not on the order or the pieces in which rows
//! are seen, so samples of row ranges merge exactly.
//!
//! Reference: the random keys of Efraimidis & Spirakis, "Weighted random
//! sampling with a reservoir" (2006), with uniform weights; the hash is
//! SplitMix64 (Steele, Lea & Flood, "Fast splittable pseudorandom number
//! generators", 2014).

use std::collections::BinaryHeap;
use std::ops::Range;
use std::path::Path;

use crate::error::{Error, Result};
use rayon::prelude::*;

use crate::io::ScratchFile;
use crate::plan::SampleLayout;

/// The 64-bit key of row `row` under `seed`: SplitMix64's finaliser applied
/// to the seed and then to the row index.
pub fn row_key(seed: u64, row: usize) -> u64 {
    mix(mix(seed) ^ (row as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// A uniform number in the open interval (0, 1) from [`row_key`].
pub fn row_unit(seed: u64, row: usize) -> f64 {
    ((row_key(seed, row) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
}

fn mix(z: u64) -> u64 {
    let z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A uniform sample without replacement of at most `m` rows (their values
/// in `f64` and their weights), kept by smallest [`row_key`]. The sample is
/// held in memory, or [`KeyedSample::spilled`] into unnamed scratch files
/// with nothing per row in memory.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct KeyedSample {
    m: usize,
    seed: u64,
    d: usize,
    /// `(key, row, slot)`: the largest kept key on top (in memory).
    heap: BinaryHeap<(u64, usize, usize)>,
    values: Vec<f64>,
    weights: Vec<f64>,
    /// The rows on disk (never sent to a task: a task's sample is
    /// [`KeyedSample::emptied`], in memory).
    #[serde(skip)]
    disk: Option<Box<Spill>>,
    /// The largest `(key, row)` kept, when settled in advance
    /// ([`KeyedSample::settle`]).
    last: Option<(u64, usize)>,
}

/// A spilled sample's rows, appended in increasing row order: the sample is
/// settled (or keeps every row), so each row offered is kept for good and
/// its place is the count of rows before it.
#[derive(Debug)]
struct Spill {
    /// Values, row-major `(m, d)`.
    values: ScratchFile,
    /// Weights, one per row.
    weights: ScratchFile,
    /// Row indices (as `f64`, exact below 2^53), one per row.
    rows: ScratchFile,
    /// Rows written.
    len: usize,
    /// The last row appended.
    last_row: Option<usize>,
    /// Rows waiting to be written (at most `piece_rows`).
    pending_values: Vec<f64>,
    pending_weights: Vec<f64>,
    pending_rows: Vec<f64>,
    piece_rows: usize,
    /// The rows read at a time once the sample is used.
    read_rows: usize,
}

impl Spill {
    fn flush(&mut self, d: usize) -> Result<()> {
        let start = self.len - self.pending_weights.len();
        self.values.write((start * d) as u64, &self.pending_values)?;
        self.weights.write(start as u64, &self.pending_weights)?;
        self.rows.write(start as u64, &self.pending_rows)?;
        self.pending_values.clear();
        self.pending_weights.clear();
        self.pending_rows.clear();
        Ok(())
    }
}

/// Bits of the key histogrammed per pass of [`nth_smallest_key`].
const RADIX_BITS: u32 = 8;

/// The `m`-th smallest `(row_key(seed, r), r)` over the rows `rows`
/// (`1 ≤ m ≤ rows.len()`), by a most-significant-digit radix selection on
/// the keys, recomputed each pass: 8 bits per pass (one
/// histogram per thread, summed), until at most 2^8 rows share
/// the digits found so far; those are collected and ordered. About
/// `log₂₅₆(n)` hashes per row in all, no data read; memory as planned by
/// [`SampleLayout::select_bytes`].
pub fn nth_smallest_key(seed: u64, rows: Range<usize>, m: usize) -> (u64, usize) {
    assert!(m >= 1 && m <= rows.len(), "1 <= m <= rows");
    let threads = rayon::current_num_threads().max(1);
    let (mut prefix, mut bits, mut rank, mut count) = (0u64, 0u32, m, rows.len());
    let piece = rows.len().div_ceil(threads).max(1);
    let pieces = || rows.clone().step_by(piece).map(move |s| s..(s + piece).min(rows.end));
    let matches = move |key: u64, bits: u32, prefix: u64| bits == 0 || key >> (64 - bits) == prefix;
    while count > 1 << RADIX_BITS && bits + RADIX_BITS <= 64 {
        let shift = 64 - bits - RADIX_BITS;
        let hist = pieces()
            .collect::<Vec<_>>()
            .into_par_iter()
            .map(|r| {
                let mut h = vec![0usize; 1 << RADIX_BITS];
                for row in r {
                    let key = row_key(seed, row);
                    if matches(key, bits, prefix) {
                        h[((key >> shift) & ((1 << RADIX_BITS) - 1)) as usize] += 1;
                    }
                }
                h
            })
            .reduce(
                || vec![0; 1 << RADIX_BITS],
                |mut a, b| {
                    a.iter_mut().zip(&b).for_each(|(x, y)| *x += y);
                    a
                },
            );
        let mut digit = 0;
        while rank > hist[digit] {
            rank -= hist[digit];
            digit += 1;
        }
        count = hist[digit];
        prefix = (prefix << RADIX_BITS) | digit as u64;
        bits += RADIX_BITS;
    }
    let mut left: Vec<(u64, usize)> = pieces()
        .collect::<Vec<_>>()
        .into_par_iter()
        .flat_map_iter(|r| r.map(|row| (row_key(seed, row), row)).filter(|&(key, _)| matches(key, bits, prefix)))
        .collect();
    left.sort_unstable();
    left[rank - 1]
}

impl KeyedSample {
    /// Bytes held per sampled row of `d` features: values, weight, and the
    /// heap entry (key, row, slot).
    pub const fn bytes_per_row(d: usize) -> u64 {
        (d * 8 + 8 + 24) as u64
    }

    /// An empty sample of at most `m` rows of `d` features under `seed`.
    pub fn new(m: usize, d: usize, seed: u64) -> Self {
        KeyedSample {
            m,
            seed,
            d,
            heap: BinaryHeap::with_capacity(m.min(1 << 20)),
            values: Vec::new(),
            weights: Vec::new(),
            disk: None,
            last: None,
        }
    }

    /// An empty sample like [`Self::new`] whose rows go to unnamed scratch
    /// files in `dir` (`m × (d + 2) × 8` bytes on disk), written
    /// `piece_rows` rows at a time. It must be [`Self::settle`]d over the
    /// rows offered unless it keeps them all, and rows are offered in
    /// increasing order; in memory it holds one piece of rows.
    ///
    /// # Errors
    /// As [`ScratchFile::create`].
    pub fn spilled(m: usize, d: usize, seed: u64, dir: &Path, piece_rows: usize) -> Result<Self> {
        let piece_rows = piece_rows.max(1);
        let spill = Spill {
            values: ScratchFile::create(dir, (m * d) as u64)?,
            weights: ScratchFile::create(dir, m as u64)?,
            rows: ScratchFile::create(dir, m as u64)?,
            len: 0,
            last_row: None,
            pending_values: Vec::with_capacity(piece_rows * d),
            pending_weights: Vec::with_capacity(piece_rows),
            pending_rows: Vec::with_capacity(piece_rows),
            piece_rows,
            read_rows: piece_rows,
        };
        Ok(KeyedSample { disk: Some(Box::new(spill)), ..KeyedSample::new(m, d, seed) })
    }

    /// An empty sample of `layout` under `seed`, spilled into `dir` when the
    /// layout says so.
    ///
    /// # Errors
    /// As [`KeyedSample::spilled`].
    pub fn for_layout(layout: &SampleLayout, d: usize, seed: u64, dir: &Path) -> Result<Self> {
        match layout.piece_rows {
            None => Ok(KeyedSample::new(layout.rows, d, seed)),
            Some(p) => KeyedSample::spilled(layout.rows, d, seed, dir, p),
        }
    }

    /// An empty sample with the same capacity, width, seed and settled
    /// rows, in memory.
    pub fn emptied(&self) -> KeyedSample {
        KeyedSample { last: self.last, ..KeyedSample::new(self.m, self.d, self.seed) }
    }

    /// The most rows the sample keeps.
    pub fn capacity(&self) -> usize {
        self.m
    }

    /// How many of the rows `rows` the sample keeps when it is settled (an
    /// upper bound, `min(capacity, rows)`, when it is not), from the keys
    /// alone.
    pub fn kept_in(&self, rows: Range<usize>) -> usize {
        match self.last {
            None => self.m.min(rows.len()),
            Some(last) => rows.into_par_iter().filter(|&r| (row_key(self.seed, r), r) <= last).count(),
        }
    }

    /// Whether row `row` would enter the sample now (call before
    /// converting its values).
    #[inline]
    pub fn wants(&self, row: usize) -> bool {
        if let Some(last) = self.last {
            return (row_key(self.seed, row), row) <= last;
        }
        if let Some(spill) = &self.disk {
            return spill.len < self.m;
        }
        self.m > 0
            && (self.heap.len() < self.m
                || self.heap.peek().is_some_and(|&(k, r, _)| (row_key(self.seed, row), row) < (k, r)))
    }

    /// Settles in advance which of the rows `rows` (all the rows that will
    /// be offered) the sample keeps: keys depend on the seed and the row
    /// only, so the largest kept key can be found from the keys alone (see
    /// [`nth_smallest_key`]). Then [`Self::wants`] is a comparison, exactly
    /// the kept rows are offered and none is evicted: a pass offers each
    /// row at most once instead of about `m · ln(n / m)` heap updates.
    pub fn settle(&mut self, rows: Range<usize>) {
        let m = self.m.min(rows.len());
        // A sample of every row needs no selection.
        if m > 0 && m < rows.len() {
            self.last = Some(nth_smallest_key(self.seed, rows, m));
        }
    }

    /// Offers row `row` with `values` and `weight`.
    ///
    /// # Errors
    /// Scratch write errors (a spilled sample); [`Error::Remote`] when a
    /// spilled sample is offered a row at or before the last one it kept
    /// (rows merged from tasks out of order).
    pub fn offer(&mut self, row: usize, values: impl Iterator<Item = f64>, weight: f64) -> Result<()> {
        if !self.wants(row) {
            return Ok(());
        }
        let d = self.d;
        if let Some(spill) = &mut self.disk {
            if let Some(last) = spill.last_row.filter(|&last| row <= last) {
                return Err(Error::Remote { reason: format!("sampled row {row} came after row {last}") });
            }
            let at = spill.pending_values.len();
            spill.pending_values.extend(values.take(d));
            spill.pending_values.resize(at + d, 0.0);
            spill.pending_weights.push(weight);
            spill.pending_rows.push(row as f64);
            spill.len += 1;
            spill.last_row = Some(row);
            if spill.pending_weights.len() == spill.piece_rows {
                spill.flush(d)?;
            }
            return Ok(());
        }
        let key = row_key(self.seed, row);
        let slot = if self.heap.len() < self.m {
            self.values.resize(self.values.len() + d, 0.0);
            self.weights.push(0.0);
            self.weights.len() - 1
        } else {
            self.heap.pop().expect("full").2
        };
        for (dst, v) in self.values[slot * d..(slot + 1) * d].iter_mut().zip(values) {
            *dst = v;
        }
        self.weights[slot] = weight;
        self.heap.push((key, row, slot));
        Ok(())
    }

    /// Folds in `next` (an in-memory sample of other rows, same seed), its
    /// rows in increasing order.
    ///
    /// # Errors
    /// As [`Self::offer`].
    pub fn merge_from(&mut self, next: &Self) -> Result<()> {
        let d = self.d;
        let mut order: Vec<(usize, usize)> = next.heap.iter().map(|&(_, row, slot)| (row, slot)).collect();
        order.sort_unstable();
        for (row, slot) in order {
            let values = next
                .values
                .get(slot * d..(slot + 1) * d)
                .ok_or_else(|| Error::Remote { reason: format!("a sampled row's values are missing (slot {slot})") })?;
            self.offer(row, values.iter().copied(), next.weights.get(slot).copied().unwrap_or(0.0))?;
        }
        Ok(())
    }

    /// The sample in row order as an [`InitSample`]: in memory, its values
    /// rearranged in place; spilled, its files as written, read
    /// `piece_rows` rows at a time.
    ///
    /// # Errors
    /// Scratch write errors.
    pub fn into_sample(self) -> Result<InitSample> {
        let d = self.d;
        if let Some(mut spill) = self.disk {
            spill.flush(d)?;
            let n = spill.len;
            return Ok(InitSample {
                d,
                n,
                weights: Column::Disk(spill.weights),
                rows: Column::Disk(spill.rows),
                values: SampleValues::Disk { file: spill.values, piece_rows: spill.read_rows },
            });
        }
        let mut order = self.heap.into_vec();
        order.sort_unstable_by_key(|&(_, row, _)| row);
        let weights: Vec<f64> = order.iter().map(|&(_, _, slot)| self.weights[slot]).collect();
        let rows: Vec<f64> = order.iter().map(|&(_, row, _)| row as f64).collect();
        let mut slots: Vec<usize> = order.into_iter().map(|(_, _, slot)| slot).collect();
        let mut values = self.values;
        permute_rows(&mut values, d, &mut slots);
        Ok(InitSample {
            d,
            n: weights.len(),
            weights: Column::Memory(weights),
            rows: Column::Memory(rows),
            values: SampleValues::Memory(values),
        })
    }

    /// The sample in row order: row-major values `(rows, d)`, weights and
    /// row indices (an in-memory sample).
    pub fn into_rows(self) -> (Vec<f64>, Vec<f64>, Vec<usize>) {
        let d = self.d;
        let mut order: Vec<(usize, usize)> = self.heap.into_iter().map(|(_, r, s)| (r, s)).collect();
        order.sort_unstable();
        let values = order.iter().flat_map(|&(_, s)| self.values[s * d..(s + 1) * d].iter().copied()).collect();
        let weights = order.iter().map(|&(_, s)| self.weights[s]).collect();
        (values, weights, order.into_iter().map(|(r, _)| r).collect())
    }
}

/// Rearranges the rows of `values` (row-major, `d` per row) so that row `i`
/// holds what row `from[i]` held, following the permutation's cycles with one
/// row of extra memory; `from` is consumed (left marked).
fn permute_rows(values: &mut [f64], d: usize, from: &mut [usize]) {
    const DONE: usize = usize::MAX;
    let mut held = vec![0.0; d];
    for start in 0..from.len() {
        if from[start] == DONE || from[start] == start {
            continue;
        }
        held.copy_from_slice(&values[start * d..(start + 1) * d]);
        let mut i = start;
        loop {
            let j = std::mem::replace(&mut from[i], DONE);
            if j == start {
                values[i * d..(i + 1) * d].copy_from_slice(&held);
                break;
            }
            values.copy_within(j * d..(j + 1) * d, i * d);
            i = j;
        }
    }
}

/// Where an [`InitSample`]'s values live.
#[derive(Debug)]
enum SampleValues {
    /// Row-major `(rows, d)`.
    Memory(Vec<f64>),
    /// Row-major in an unnamed scratch file, read `piece_rows` rows at a time.
    Disk { file: ScratchFile, piece_rows: usize },
}

/// One `f64` per row of an [`InitSample`] (a weight, a running distance), in
/// memory or in an unnamed scratch file, used [`SAMPLE_CHUNK`] rows at a
/// time.
#[derive(Debug)]
pub enum Column {
    /// All values.
    Memory(Vec<f64>),
    /// All values in a scratch file.
    Disk(ScratchFile),
}

/// Rows per chunk of an [`InitSample`]'s columns: the unit in which they
/// are read, updated and summed, fixed so that sums reduced chunk by chunk
/// do not depend on the thread count or on where the column is held.
pub const SAMPLE_CHUNK: usize = 4096;

impl Column {
    /// `n` zeros, in a scratch file in `dir` when `on_disk`.
    ///
    /// # Errors
    /// As [`ScratchFile::create`].
    pub fn zeros(n: usize, on_disk: Option<&Path>) -> Result<Self> {
        Ok(match on_disk {
            None => Column::Memory(vec![0.0; n]),
            Some(dir) => Column::Disk(ScratchFile::create(dir, n as u64)?),
        })
    }

    /// Values of chunk `c` (rows `c · SAMPLE_CHUNK ..`, at most `n`):
    /// borrowed in memory, read into `buf` from disk.
    ///
    /// # Errors
    /// Scratch read errors.
    pub fn chunk<'a>(&'a self, c: usize, n: usize, buf: &'a mut Vec<f64>) -> Result<&'a [f64]> {
        let rows = c * SAMPLE_CHUNK..((c + 1) * SAMPLE_CHUNK).min(n);
        match self {
            Column::Memory(v) => Ok(&v[rows]),
            Column::Disk(file) => {
                buf.resize(rows.len(), 0.0);
                file.read(rows.start as u64, buf)?;
                Ok(buf)
            }
        }
    }

    /// Calls `f(scratch, c, values)` on every chunk of `n` rows in parallel,
    /// `values` mutable (read from and written back to disk), `scratch` a
    /// buffer of the thread's own.
    ///
    /// # Errors
    /// The first error of `f`; scratch read and write errors.
    pub fn update_chunks(
        &mut self,
        n: usize,
        f: impl Fn(&mut Vec<f64>, usize, &mut [f64]) -> Result<()> + Sync + Send,
    ) -> Result<()> {
        match self {
            Column::Memory(v) => v[..n]
                .par_chunks_mut(SAMPLE_CHUNK)
                .enumerate()
                .try_for_each_init(Vec::new, |buf, (c, out)| f(buf, c, out)),
            Column::Disk(file) => {
                let file = &*file;
                (0..n.div_ceil(SAMPLE_CHUNK)).into_par_iter().try_for_each_init(
                    || (Vec::new(), Vec::new()),
                    |(buf, out), c| {
                        let rows = c * SAMPLE_CHUNK..((c + 1) * SAMPLE_CHUNK).min(n);
                        out.resize(rows.len(), 0.0);
                        file.read(rows.start as u64, out)?;
                        f(buf, c, out)?;
                        file.write(rows.start as u64, out)
                    },
                )
            }
        }
    }
}

/// An initialisation sample in row order: its rows' weights and values
/// (`f64`), in memory or in scratch files. Its rows are the same whichever
/// way it is held, so an initialisation drawn from it does not depend on
/// the memory limit.
#[derive(Debug)]
pub struct InitSample {
    d: usize,
    n: usize,
    /// Weights of the sampled rows (1 without weights).
    weights: Column,
    /// Row indices of the sampled rows, increasing (as `f64`).
    rows: Column,
    values: SampleValues,
}

impl InitSample {
    /// All rows of `values` (row-major, `d` features; rows `0..n`) with
    /// `weights`, in memory.
    ///
    /// # Panics
    /// If the lengths disagree.
    pub fn from_rows(values: Vec<f64>, d: usize, weights: Vec<f64>) -> Self {
        assert_eq!(values.len(), weights.len() * d, "one weight per row");
        let n = weights.len();
        let rows = Column::Memory((0..n).map(|r| r as f64).collect());
        InitSample { d, n, weights: Column::Memory(weights), rows, values: SampleValues::Memory(values) }
    }

    /// Sampled rows.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether no row was sampled.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Features per row.
    pub fn n_features(&self) -> usize {
        self.d
    }

    /// The scratch folder of a sample held on disk (`None`: in memory).
    pub fn scratch_dir(&self) -> Option<&Path> {
        match &self.values {
            SampleValues::Memory(_) => None,
            SampleValues::Disk { file, .. } => Some(file.dir()),
        }
    }

    /// The weights of chunk `c` (see [`Column::chunk`]).
    ///
    /// # Errors
    /// Scratch read errors.
    pub fn weights<'a>(&'a self, c: usize, buf: &'a mut Vec<f64>) -> Result<&'a [f64]> {
        self.weights.chunk(c, self.n, buf)
    }

    /// The row indices (in the data) of the sample's rows `idx` (positions
    /// in the sample).
    ///
    /// # Errors
    /// Scratch read errors.
    pub fn rows_of(&self, idx: &[usize]) -> Result<Vec<usize>> {
        let mut buf = Vec::new();
        idx.iter()
            .map(|&i| Ok(self.rows.chunk(i / SAMPLE_CHUNK, self.n, &mut buf)?[i % SAMPLE_CHUNK] as usize))
            .collect()
    }

    /// The values of the sample's rows `idx` (positions in the sample),
    /// concatenated.
    ///
    /// # Errors
    /// Scratch read errors.
    pub fn gather(&self, idx: &[usize]) -> Result<Vec<f64>> {
        let d = self.d;
        let mut out = vec![0.0; idx.len() * d];
        for (dst, &i) in out.chunks_exact_mut(d.max(1)).zip(idx) {
            match &self.values {
                SampleValues::Memory(v) => dst.copy_from_slice(&v[i * d..(i + 1) * d]),
                SampleValues::Disk { file, .. } => file.read((i * d) as u64, dst)?,
            }
        }
        Ok(out)
    }

    /// Calls `f(i, values)` for the sample's rows `range` in order; a
    /// spilled sample reads them into `buf` a piece at a time.
    ///
    /// # Errors
    /// Scratch read errors.
    pub fn for_each_row(
        &self,
        range: Range<usize>,
        buf: &mut Vec<f64>,
        mut f: impl FnMut(usize, &[f64]),
    ) -> Result<()> {
        let d = self.d;
        match &self.values {
            SampleValues::Memory(v) => {
                for i in range {
                    f(i, &v[i * d..(i + 1) * d]);
                }
            }
            SampleValues::Disk { file, piece_rows } => {
                buf.resize(piece_rows * d, 0.0);
                let mut start = range.start;
                while start < range.end {
                    let rows = (*piece_rows).min(range.end - start);
                    file.read((start * d) as u64, &mut buf[..rows * d])?;
                    for j in 0..rows {
                        f(start + j, &buf[j * d..(j + 1) * d]);
                    }
                    start += rows;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_does_not_depend_on_order_or_pieces() {
        let n = 10_000;
        let all = |order: &mut dyn Iterator<Item = usize>| {
            let mut s = KeyedSample::new(100, 1, 7);
            for r in order {
                s.offer(r, std::iter::once(r as f64), 1.0).unwrap();
            }
            s
        };
        let a = all(&mut (0..n)).into_rows();
        let b = all(&mut (0..n).rev()).into_rows();
        assert_eq!(a, b);
        let mut first = all(&mut (0..3000));
        first.merge_from(&all(&mut (3000..n))).unwrap();
        assert_eq!(first.into_rows(), a);
        assert_eq!(a.2.len(), 100);
        assert!(a.2.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(a.0, a.2.iter().map(|&r| r as f64).collect::<Vec<_>>());
        // Roughly uniform: the sample's mean row is near the middle.
        let mean = a.2.iter().sum::<usize>() as f64 / 100.0;
        assert!((mean - n as f64 / 2.0).abs() < 0.15 * n as f64, "{mean}");
        assert!((0..1000).all(|r| (0.0..1.0).contains(&row_unit(3, r))));
    }

    #[test]
    fn a_spilled_sample_holds_the_same_rows_in_the_same_order() {
        // Settled (most rows offered are refused) and keeping every row;
        // rows offered one by one and merged from a task's in-memory sample.
        for (n, m) in [(5_000, 700), (9_000, 9_000)] {
            let d = 3;
            let dir = tempfile::tempdir().unwrap();
            let row = |r: usize| (0..d).map(move |j| (r * d + j) as f64 * 0.37 - 11.0);
            let mut mem = KeyedSample::new(m, d, 9);
            let mut disk = KeyedSample::spilled(m, d, 9, dir.path(), 64).unwrap();
            disk.settle(0..n);
            for r in (0..n).rev() {
                mem.offer(r, row(r), r as f64 * 0.5).unwrap();
            }
            let mut part = disk.emptied();
            assert_eq!(part.kept_in(0..2_000) + part.kept_in(2_000..n), m);
            for r in 0..2_000 {
                disk.offer(r, row(r), r as f64 * 0.5).unwrap();
            }
            for r in (2_000..n).rev() {
                part.offer(r, row(r), r as f64 * 0.5).unwrap();
            }
            disk.merge_from(&part).unwrap();
            let (a, b) = (mem.into_sample().unwrap(), disk.into_sample().unwrap());
            assert!(a.scratch_dir().is_none() && b.scratch_dir().is_some());
            assert_eq!(a.len(), m);
            assert_eq!(b.len(), m);
            let all: Vec<usize> = (0..a.len()).collect();
            let rows = a.rows_of(&all).unwrap();
            assert!(rows.windows(2).all(|w| w[0] < w[1]));
            assert_eq!(b.rows_of(&all).unwrap(), rows);
            let weights = |s: &InitSample| {
                (0..m.div_ceil(SAMPLE_CHUNK))
                    .flat_map(|c| s.weights(c, &mut Vec::new()).unwrap().to_vec())
                    .collect::<Vec<_>>()
            };
            assert_eq!(weights(&a), weights(&b));
            assert_eq!(weights(&a), rows.iter().map(|&r| r as f64 * 0.5).collect::<Vec<_>>());
            assert_eq!(a.gather(&all).unwrap(), b.gather(&all).unwrap());
            let mut seen = Vec::new();
            b.for_each_row(10..300, &mut Vec::new(), |i, v| seen.push((i, v.to_vec()))).unwrap();
            assert_eq!(seen.len(), 290);
            for (i, v) in seen {
                assert_eq!(v, row(rows[i]).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn a_spilled_sample_refuses_rows_out_of_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut disk = KeyedSample::spilled(10, 1, 9, dir.path(), 4).unwrap();
        disk.offer(5, std::iter::once(1.0), 1.0).unwrap();
        let err = disk.offer(3, std::iter::once(1.0), 1.0).unwrap_err();
        assert!(err.to_string().contains("sampled row 3 came after row 5"), "{err}");
    }

    #[test]
    fn a_column_on_disk_updates_as_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let n = 2 * SAMPLE_CHUNK + 17;
        let (mut mem, mut disk) = (Column::zeros(n, None).unwrap(), Column::zeros(n, Some(dir.path())).unwrap());
        for col in [&mut mem, &mut disk] {
            col.update_chunks(n, |_, c, out| {
                out.iter_mut().enumerate().for_each(|(j, v)| *v = (c * SAMPLE_CHUNK + j) as f64);
                Ok(())
            })
            .unwrap();
        }
        for c in 0..3 {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            assert_eq!(mem.chunk(c, n, &mut a).unwrap(), disk.chunk(c, n, &mut b).unwrap());
        }
        assert_eq!(
            disk.chunk(2, n, &mut Vec::new()).unwrap(),
            (2 * SAMPLE_CHUNK..n).map(|r| r as f64).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_settled_sample_keeps_the_same_rows() {
        for (n, m, first) in [(10_000, 100, 0), (50_000, 4_999, 7), (200_000, 30, 0), (5_000, 5_000, 0)] {
            let mut keys: Vec<(u64, usize)> = (first..first + n).map(|r| (row_key(3, r), r)).collect();
            keys.sort_unstable();
            assert_eq!(nth_smallest_key(3, first..first + n, m), keys[m - 1]);
            let (mut plain, mut settled) = (KeyedSample::new(m, 1, 3), KeyedSample::new(m, 1, 3));
            settled.settle(first..first + n);
            let mut offered = 0;
            for r in first..first + n {
                plain.offer(r, std::iter::once(r as f64), 1.0).unwrap();
                if settled.wants(r) {
                    offered += 1;
                    settled.offer(r, std::iter::once(r as f64), 1.0).unwrap();
                }
            }
            assert_eq!(offered, m);
            assert_eq!(plain.into_rows(), settled.into_rows());
        }
    }
}
