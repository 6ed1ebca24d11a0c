//! Per-cluster weighted sums for the centre update. Each cluster's sum is
//! accumulated in `f64` in row order, so the result does not depend on how
//! the work is split between threads (the pass folds these per-chunk sums
//! in order, see [`crate::exec`]).

use multiversion::multiversion;
use rayon::prelude::*;

use crate::dtype::Real;

/// Largest set of per-cluster sums (`n_clusters × (n_features + 1)` values,
/// in bytes) for which accumulation chunks are summed in parallel, each row
/// by row; larger sets split the clusters between threads instead.
pub const MAX_PARTIAL_BYTES: usize = 256 << 10;

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

/// Adds `w_i · x_i` to `sums[labels[i]]` and `w_i` to `weights[labels[i]]`
/// for every row, one thread, in row order (the same bits as
/// [`accumulate_block`]).
///
/// # Panics
/// If a label is `>= n_clusters` or buffers are smaller than stated.
pub fn accumulate_rows<T: Real>(
    x: &[T],
    d: usize,
    labels: &[u32],
    sample_weight: Option<&[f64]>,
    sums: &mut [f64],
    weights: &mut [f64],
) {
    accumulate_range(x, d, labels, sample_weight, 0, sums, weights);
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
        let (mut s3, mut c3) = (vec![0.0; k * d], vec![0.0; k]);
        accumulate_rows(&x, d, &labels, Some(&w), &mut s3, &mut c3);
        assert_eq!((s3, c3), (s2, c2));
    }
}
