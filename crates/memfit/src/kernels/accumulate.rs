//! Per-cluster weighted sums for the centre update, in a fixed order.
//!
//! Sums are accumulated in `f64` in an order fixed by the data alone, so the
//! result does not depend on the thread count or on the block size:
//! - when the per-cluster sums are small ([`Accumulator::uses_row_chunks`]),
//!   rows are cut into chunks of [`CHUNK_ROWS`] at fixed global offsets; each
//!   chunk's partial sums are accumulated row by row (chunks in parallel) and
//!   added to the totals in chunk order, a chunk that straddles two blocks
//!   being carried over;
//! - otherwise each cluster's sum is accumulated row by row in file order,
//!   threads splitting the clusters between them.

use multiversion::multiversion;
use rayon::prelude::*;

use crate::real::Real;

/// Rows per chunk of partial sums: fixed, so chunk boundaries depend on the
/// row index only.
pub const CHUNK_ROWS: usize = 1 << 16;

/// Largest set of per-cluster sums (`n_clusters × (n_features + 1)` values,
/// in bytes) for which per-chunk partial sums are used.
pub const MAX_PARTIAL_BYTES: usize = 256 << 10;

/// Accumulates per-cluster weighted sums over the blocks of one pass.
#[derive(Debug)]
pub struct Accumulator {
    k: usize,
    d: usize,
    /// Partial sums (`k × d` sums then `k` weights) per chunk of the current
    /// block; slot 0 may hold a chunk carried over from the previous block.
    pool: Vec<Vec<f64>>,
    /// The chunk held in slot 0, carried from the previous block.
    open: Option<usize>,
}

impl Accumulator {
    /// Whether sums of `k` clusters of `d` features use row chunks.
    pub fn uses_row_chunks(k: usize, d: usize) -> bool {
        k * (d + 1) * 8 <= MAX_PARTIAL_BYTES
    }

    /// Bytes of partial sums held for blocks of `block_rows` rows.
    pub fn bytes_for(k: usize, d: usize, block_rows: usize) -> u64 {
        if Self::uses_row_chunks(k, d) {
            ((block_rows.div_ceil(CHUNK_ROWS) + 1) * k * (d + 1) * 8) as u64
        } else {
            0
        }
    }

    /// An accumulator for `k` clusters of `d` features and blocks of at most
    /// `block_rows` rows.
    pub fn new(k: usize, d: usize, block_rows: usize) -> Self {
        let slots = if Self::uses_row_chunks(k, d) { block_rows.div_ceil(CHUNK_ROWS) + 1 } else { 0 };
        Accumulator { k, d, pool: (0..slots).map(|_| vec![0.0; k * (d + 1)]).collect(), open: None }
    }

    /// Adds the block `x` (row-major `(rows, d)`, first row `start` of the
    /// data) with its labels and weights to `sums` (`(k, d)`) and `weights`
    /// (`k`). Blocks must come in row order; call [`Accumulator::finish`]
    /// after the last one.
    ///
    /// # Panics
    /// If a label is `>= k` or buffers are smaller than stated.
    pub fn add_block<T: Real>(
        &mut self,
        x: &[T],
        start: usize,
        labels: &[u32],
        sample_weight: Option<&[f64]>,
        sums: &mut [f64],
        weights: &mut [f64],
    ) {
        let (k, d) = (self.k, self.d);
        if self.pool.is_empty() {
            accumulate_block(x, d, labels, sample_weight, sums, weights);
            return;
        }
        let end = start + labels.len();
        let first = start / CHUNK_ROWS;
        let n_chunks = (end - 1) / CHUNK_ROWS - first + 1;
        let carried = self.open == Some(first);
        self.pool[..n_chunks].par_iter_mut().enumerate().for_each(|(ci, buf)| {
            if ci > 0 || !carried {
                buf.fill(0.0);
            }
            let c = first + ci;
            let r0 = (c * CHUNK_ROWS).max(start) - start;
            let r1 = ((c + 1) * CHUNK_ROWS).min(end) - start;
            let (s, w) = buf.split_at_mut(k * d);
            accumulate_range(&x[r0 * d..r1 * d], d, &labels[r0..r1], sample_weight.map(|sw| &sw[r0..r1]), 0, s, w);
        });
        self.open = None;
        for ci in 0..n_chunks {
            if (first + ci + 1) * CHUNK_ROWS <= end {
                add_partial(&self.pool[ci], sums, weights);
            } else {
                self.pool.swap(0, ci);
                self.open = Some(first + ci);
            }
        }
    }

    /// Adds a chunk carried over from the last block.
    pub fn finish(&mut self, sums: &mut [f64], weights: &mut [f64]) {
        if self.open.take().is_some() {
            add_partial(&self.pool[0], sums, weights);
        }
    }
}

fn add_partial(buf: &[f64], sums: &mut [f64], weights: &mut [f64]) {
    let (s, w) = buf.split_at(sums.len());
    for (a, b) in sums.iter_mut().zip(s) {
        *a += b;
    }
    for (a, b) in weights.iter_mut().zip(w) {
        *a += b;
    }
}

/// Adds `w_i · x_i` to `sums[labels[i]]` (row-major `(n_clusters, d)`, `f64`)
/// and `w_i` to `weights[labels[i]]` for every row of the block `x`
/// (row-major `(rows, d)`); `w_i = 1` when `sample_weight` is `None`.
///
/// # Panics
/// If a label is `>= n_clusters` or buffers are smaller than stated.
pub fn accumulate_block<T: Real>(
    x: &[T],
    d: usize,
    labels: &[u32],
    sample_weight: Option<&[f64]>,
    sums: &mut [f64],
    weights: &mut [f64],
) {
    let k = weights.len();
    let parts = rayon::current_num_threads().clamp(1, k);
    let per = k.div_ceil(parts);
    sums.par_chunks_mut(per * d).zip(weights.par_chunks_mut(per)).enumerate().for_each(|(p, (s, w))| {
        accumulate_range(x, d, labels, sample_weight, (p * per) as u32, s, w);
    });
}

/// Adds the rows of `x` whose label lies in `[lo, lo + weights.len())`, in
/// row order, to `sums` and `weights` (indexed from `lo`).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
fn accumulate_range<T: Real>(
    x: &[T],
    d: usize,
    labels: &[u32],
    sample_weight: Option<&[f64]>,
    lo: u32,
    sums: &mut [f64],
    weights: &mut [f64],
) {
    let hi = lo + weights.len() as u32;
    for (i, &l) in labels.iter().enumerate() {
        if l < lo || l >= hi {
            continue;
        }
        let wi = sample_weight.map_or(1.0, |sw| sw[i]);
        let j = (l - lo) as usize;
        weights[j] += wi;
        let row = &x[i * d..(i + 1) * d];
        for (a, v) in sums[j * d..(j + 1) * d].iter_mut().zip(row) {
            *a += wi * v.to_f64();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_sums_do_not_depend_on_block_size() {
        let (n, d, k) = (3 * CHUNK_ROWS + 1234, 3, 5);
        let x: Vec<f64> = (0..n * d).map(|i| (i as f64 * 0.37).sin() * 1e3).collect();
        let labels: Vec<u32> = (0..n).map(|i| ((i * 31) % k) as u32).collect();
        let mut results = Vec::new();
        for block in [256, 1000 * 256, n] {
            let mut acc = Accumulator::new(k, d, block);
            let (mut s, mut w) = (vec![0.0; k * d], vec![0.0; k]);
            for start in (0..n).step_by(block) {
                let end = (start + block).min(n);
                acc.add_block(&x[start * d..end * d], start, &labels[start..end], None, &mut s, &mut w);
            }
            acc.finish(&mut s, &mut w);
            results.push((s.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), w));
        }
        assert!(results.windows(2).all(|r| r[0] == r[1]));
        assert_eq!(results[0].1.iter().sum::<f64>(), n as f64);
    }

    #[test]
    fn matches_naive_sums() {
        let (n, d, k) = (500, 3, 7);
        let x: Vec<f32> = (0..n * d).map(|i| (i as f32 * 0.37).sin()).collect();
        let labels: Vec<u32> = (0..n).map(|i| ((i * 31) % k) as u32).collect();
        let w: Vec<f64> = (0..n).map(|i| (i % 5) as f64).collect();
        let (mut s, mut c) = (vec![0.0; k * d], vec![0.0; k]);
        accumulate_block(&x, d, &labels, Some(&w), &mut s, &mut c);
        let (mut s2, mut c2) = (vec![0.0; k * d], vec![0.0; k]);
        for i in 0..n {
            let l = labels[i] as usize;
            c2[l] += w[i];
            for f in 0..d {
                s2[l * d + f] += w[i] * f64::from(x[i * d + f]);
            }
        }
        assert_eq!(s, s2);
        assert_eq!(c, c2);
    }
}
