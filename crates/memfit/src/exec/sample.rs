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
use std::sync::Arc;

use crate::error::Result;
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
/// in `f64` and their weights), kept by smallest [`row_key`]. The values are
/// held in memory, or in an unnamed scratch file when the sample is
/// [`KeyedSample::spilled`] (its keys and weights stay in memory).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct KeyedSample {
    m: usize,
    seed: u64,
    d: usize,
    /// `(key, row, slot)`: the largest kept key on top.
    heap: BinaryHeap<(u64, usize, usize)>,
    values: Vec<f64>,
    weights: Vec<f64>,
    /// The values by slot, when they are on disk (never sent to a task:
    /// a task's sample is [`KeyedSample::emptied`], in memory).
    #[serde(skip)]
    disk: Option<Arc<ScratchFile>>,
    /// One row's values on their way to the scratch file.
    #[serde(skip)]
    row: Vec<f64>,
    /// The largest `(key, row)` kept, when settled in advance
    /// ([`KeyedSample::settle`]).
    last: Option<(u64, usize)>,
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
            row: Vec::new(),
            last: None,
        }
    }

    /// An empty sample like [`Self::new`] whose values go to an unnamed
    /// scratch file in `dir` (`m × d × 8` bytes on disk); in memory it holds
    /// [`SampleLayout::BYTES_PER_ROW_SPILLED`] bytes per row.
    ///
    /// # Errors
    /// As [`ScratchFile::create`].
    pub fn spilled(m: usize, d: usize, seed: u64, dir: &Path) -> Result<Self> {
        let file = ScratchFile::create(dir, (m * d) as u64)?;
        Ok(KeyedSample { disk: Some(Arc::new(file)), row: vec![0.0; d], ..KeyedSample::new(m, d, seed) })
    }

    /// An empty sample of `layout` under `seed`, spilled into `dir` when the
    /// layout says so.
    ///
    /// # Errors
    /// As [`KeyedSample::spilled`].
    pub fn for_layout(layout: &SampleLayout, d: usize, seed: u64, dir: &Path) -> Result<Self> {
        match layout.piece_rows {
            None => Ok(KeyedSample::new(layout.rows, d, seed)),
            Some(_) => KeyedSample::spilled(layout.rows, d, seed, dir),
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

    /// Whether row `row` would enter the sample now (call before
    /// converting its values).
    #[inline]
    pub fn wants(&self, row: usize) -> bool {
        if let Some(last) = self.last {
            return (row_key(self.seed, row), row) <= last;
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
    /// Scratch write errors (a spilled sample only).
    pub fn offer(&mut self, row: usize, values: impl Iterator<Item = f64>, weight: f64) -> Result<()> {
        if !self.wants(row) {
            return Ok(());
        }
        let key = row_key(self.seed, row);
        let slot = if self.heap.len() < self.m {
            if self.disk.is_none() {
                self.values.resize(self.values.len() + self.d, 0.0);
            }
            self.weights.push(0.0);
            self.weights.len() - 1
        } else {
            self.heap.pop().expect("full").2
        };
        let d = self.d;
        let dst = match &self.disk {
            Some(_) => &mut self.row[..],
            None => &mut self.values[slot * d..(slot + 1) * d],
        };
        for (dst, v) in dst.iter_mut().zip(values) {
            *dst = v;
        }
        if let Some(file) = &self.disk {
            file.write((slot * d) as u64, &self.row)?;
        }
        self.weights[slot] = weight;
        self.heap.push((key, row, slot));
        Ok(())
    }

    /// Folds in `next` (an in-memory sample of other rows, same seed).
    ///
    /// # Errors
    /// Scratch write errors (a spilled sample only).
    pub fn merge_from(&mut self, next: &Self) -> Result<()> {
        let d = self.d;
        for &(_, row, slot) in &next.heap {
            self.offer(row, next.values[slot * d..(slot + 1) * d].iter().copied(), next.weights[slot])?;
        }
        Ok(())
    }

    /// The sample in row order as an [`InitSample`], its values rearranged
    /// in place in memory, or copied into a second scratch file in row order
    /// through a buffer of `piece_rows` rows when spilled.
    ///
    /// # Errors
    /// Scratch read and write errors.
    pub fn into_sample(self, piece_rows: usize) -> Result<InitSample> {
        let d = self.d;
        let mut order = self.heap.into_vec();
        order.sort_unstable_by_key(|&(_, row, _)| row);
        let rows: Vec<usize> = order.iter().map(|&(_, row, _)| row).collect();
        let weights: Vec<f64> = order.iter().map(|&(_, _, slot)| self.weights[slot]).collect();
        let mut slots: Vec<usize> = order.into_iter().map(|(_, _, slot)| slot).collect();
        let values = match self.disk {
            None => {
                let mut values = self.values;
                permute_rows(&mut values, d, &mut slots);
                SampleValues::Memory(values)
            }
            Some(from) => {
                let file = ScratchFile::create(from.dir(), (rows.len() * d) as u64)?;
                let piece_rows = piece_rows.max(1);
                let mut buf = vec![0.0; piece_rows * d];
                for (p, piece) in slots.chunks(piece_rows).enumerate() {
                    for (dst, &slot) in buf.chunks_exact_mut(d.max(1)).zip(piece) {
                        from.read((slot * d) as u64, dst)?;
                    }
                    file.write((p * piece_rows * d) as u64, &buf[..piece.len() * d])?;
                }
                SampleValues::Disk { file, piece_rows }
            }
        };
        Ok(InitSample { d, rows, weights, values })
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

/// An initialisation sample in row order: its rows' indices, weights and
/// values (`f64`), the values in memory or in a scratch file. Its rows are
/// the same whichever way it is held, so an initialisation drawn from it does
/// not depend on the memory limit.
#[derive(Debug)]
pub struct InitSample {
    d: usize,
    /// Row indices of the sampled rows, increasing.
    pub rows: Vec<usize>,
    /// Weights of the sampled rows (1 without weights).
    pub weights: Vec<f64>,
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
        InitSample { d, rows: (0..weights.len()).collect(), weights, values: SampleValues::Memory(values) }
    }

    /// Sampled rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether no row was sampled.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Features per row.
    pub fn n_features(&self) -> usize {
        self.d
    }

    /// Whether the values are in a scratch file.
    pub fn is_on_disk(&self) -> bool {
        matches!(self.values, SampleValues::Disk { .. })
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
        let (n, d, m) = (5_000, 3, 700);
        let dir = tempfile::tempdir().unwrap();
        let row = |r: usize| (0..d).map(move |j| (r * d + j) as f64 * 0.37 - 11.0);
        let mut mem = KeyedSample::new(m, d, 9);
        let mut disk = KeyedSample::spilled(m, d, 9, dir.path()).unwrap();
        for r in (0..n).rev() {
            mem.offer(r, row(r), r as f64 * 0.5).unwrap();
        }
        let mut part = KeyedSample::new(m, d, 9);
        for r in 0..2_000 {
            disk.offer(r, row(r), r as f64 * 0.5).unwrap();
        }
        for r in 2_000..n {
            part.offer(r, row(r), r as f64 * 0.5).unwrap();
        }
        disk.merge_from(&part).unwrap();
        let (a, b) = (mem.into_sample(64).unwrap(), disk.into_sample(64).unwrap());
        assert!(!a.is_on_disk() && b.is_on_disk());
        assert_eq!((&a.rows, &a.weights), (&b.rows, &b.weights));
        let all: Vec<usize> = (0..a.len()).collect();
        assert_eq!(a.gather(&all).unwrap(), b.gather(&all).unwrap());
        let mut seen = Vec::new();
        b.for_each_row(10..300, &mut Vec::new(), |i, v| seen.push((i, v.to_vec()))).unwrap();
        assert_eq!(seen.len(), 290);
        for (i, v) in seen {
            assert_eq!(v, row(a.rows[i]).collect::<Vec<_>>());
        }
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
