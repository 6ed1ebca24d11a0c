//! Fused nearest-centre assignment: squared distances by the GEMM identity
//! ‖x‖² − 2x·c + ‖c‖² on tiles (faer), an argmin per row, and the exact
//! squared distance to the chosen centre, without ever holding an
//! `n_samples × n_clusters` matrix.
//!
//! The argmin needs only `‖c‖² − 2x·c` (‖x‖² is constant per row). The GEMM
//! identity loses accuracy when data sit far from the origin, so callers
//! shift the data by its mean first, and the distance that is reported (for
//! inertia) is recomputed from exact differences in `f64`.
//! Reference: scikit-learn's `_k_means_lloyd.pyx` (chunked GEMM + argmin).

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use multiversion::multiversion;
use rayon::prelude::*;

use crate::real::Real;

/// Widest data (in features) assigned by the direct register kernel; wider
/// data go through faer's GEMM on tiles. Measured on 1,000,000 × d rows,
/// k = 200, f64, 2 threads (see BENCHMARKS.md): the direct kernel is several
/// times faster than GEMM + argmin for small d, where GEMM's inner dimension
/// is too short to amortise packing.
pub const DIRECT_MAX_FEATURES: usize = 16;

/// Centres handled per step of the direct kernel and of the vectorised
/// argmin (one or two SIMD registers).
pub const LANES: usize = 16;

/// Centres prepared for assignment: row-major `(n_clusters, n_features)`
/// values in the compute type and their squared norms; for narrow data also
/// a transposed copy padded to a multiple of [`LANES`] centres.
#[derive(Debug, Clone)]
pub struct PreparedCenters<T> {
    /// Row-major `(n_clusters, n_features)` centres.
    pub values: Vec<T>,
    /// `‖c_j‖²` per centre, computed in `f64` and rounded.
    pub sq_norms: Vec<T>,
    /// Number of centres.
    pub n_clusters: usize,
    /// Number of features.
    pub n_features: usize,
    /// `(n_features, padded_k)` row-major transposed centres when
    /// `n_features <= DIRECT_MAX_FEATURES`, else empty.
    transposed: Vec<T>,
    /// Norms padded with `+inf` to `padded_k` (never chosen), or empty.
    padded_norms: Vec<T>,
}

impl<T: Real> PreparedCenters<T> {
    /// Rounds `f64` centres (row-major `(k, d)`) to the compute type.
    ///
    /// # Panics
    /// If `centers.len() != k * d`.
    pub fn new(centers: &[f64], k: usize, d: usize) -> Self {
        assert_eq!(centers.len(), k * d);
        let values: Vec<T> = centers.iter().map(|&c| T::from_f64(c)).collect();
        let sq_norms: Vec<T> =
            values.chunks(d.max(1)).map(|c| T::from_f64(c.iter().map(|v| v.to_f64() * v.to_f64()).sum())).collect();
        let (mut transposed, mut padded_norms) = (Vec::new(), Vec::new());
        if d <= DIRECT_MAX_FEATURES {
            let kp = Self::padded_k(k);
            transposed = vec![T::default(); d * kp];
            for j in 0..k {
                for f in 0..d {
                    transposed[f * kp + j] = values[j * d + f];
                }
            }
            padded_norms = sq_norms.clone();
            padded_norms.resize(kp, T::from_f64(f64::INFINITY));
        }
        PreparedCenters { values, sq_norms, n_clusters: k, n_features: d, transposed, padded_norms }
    }

    /// `k` rounded up to a multiple of [`LANES`].
    pub fn padded_k(k: usize) -> usize {
        k.div_ceil(LANES) * LANES
    }

    /// Elements (of the compute type) held by centres prepared for `k`
    /// centres of `d` features: values, norms and the padded transposed copy.
    pub fn len_for(k: usize, d: usize) -> usize {
        let direct = if d <= DIRECT_MAX_FEATURES { Self::padded_k(k) * (d + 1) } else { 0 };
        k * (d + 1) + direct
    }

    /// Elements of per-thread scratch [`assign_rows`] needs for tiles of
    /// `tile_rows` rows and `k_tile` centres.
    pub fn scratch_len(tile_rows: usize, k_tile: usize) -> usize {
        tile_rows * k_tile + tile_rows
    }
}

/// Assigns each row of `x` (row-major `(rows, d)`, `rows <= tile_rows`) to its
/// nearest centre. Writes `labels[i]` and `min_dist[i]` = Σ_f (x_if − c_lf)²
/// computed in `f64`. Ties go to the lowest centre index.
///
/// `scratch` needs [`PreparedCenters::scratch_len`]`(rows, k_tile)` elements.
///
/// # Panics
/// If the buffers are smaller than stated.
pub fn assign_rows<T: Real>(
    x: &[T],
    c: &PreparedCenters<T>,
    k_tile: usize,
    scratch: &mut [T],
    labels: &mut [u32],
    min_dist: &mut [f64],
) {
    let d = c.n_features;
    let rows = labels.len();
    let x = &x[..rows * d];
    if d <= DIRECT_MAX_FEATURES {
        direct_argmin(x, d, &c.transposed, &c.padded_norms, labels);
    } else {
        let (tile, best) = scratch.split_at_mut(rows * k_tile);
        let best = &mut best[..rows];
        let lhs_t = MatRef::from_row_major_slice(x, rows, d).transpose();
        let mut j0 = 0;
        while j0 < c.n_clusters {
            let kt = k_tile.min(c.n_clusters - j0);
            let cen = MatRef::from_row_major_slice(&c.values[j0 * d..(j0 + kt) * d], kt, d);
            // dst is (kt × rows) column-major: row i's kt products are contiguous.
            let dst = MatMut::from_column_major_slice_mut(&mut tile[..kt * rows], kt, rows);
            matmul(dst, Accum::Replace, cen, lhs_t, T::from_f64(-2.0), Par::Seq);
            tile_argmin(&tile[..kt * rows], &c.sq_norms[j0..j0 + kt], j0, best, labels);
            j0 += kt;
        }
    }
    exact_dists(x, d, &c.values, labels, min_dist);
}

/// `out[i]` = Σ_f (x_if − c_{labels[i], f})² in `f64` for every row.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
fn exact_dists<T: Real>(x: &[T], d: usize, centers: &[T], labels: &[u32], out: &mut [f64]) {
    for (i, o) in out.iter_mut().enumerate() {
        *o = exact_sq_dist(&x[i * d..(i + 1) * d], &centers[labels[i] as usize * d..][..d]);
    }
}

/// Lane-wise running minimum: `LANES` independent (value, index) pairs
/// updated with selects (no branches, so the compiler vectorises it); the
/// final reduction keeps the lowest index among equal minima, so the result
/// equals a scalar first-minimum scan.
#[derive(Clone, Copy)]
struct LaneMin<T> {
    value: [T; LANES],
    index: [u32; LANES],
}

// Lane loops index several arrays in step, written so the compiler vectorises them.
#[allow(clippy::needless_range_loop)]
impl<T: Real> LaneMin<T> {
    #[inline(always)]
    fn new() -> Self {
        // Index 0 until a smaller value is seen: a row whose distances are
        // all inf or NaN (overflow) still gets a valid label.
        LaneMin { value: [T::from_f64(f64::INFINITY); LANES], index: [0; LANES] }
    }
    #[inline(always)]
    fn update(&mut self, v: &[T; LANES], base: u32) {
        for l in 0..LANES {
            let take = v[l] < self.value[l];
            self.value[l] = if take { v[l] } else { self.value[l] };
            self.index[l] = if take { base + l as u32 } else { self.index[l] };
        }
    }
    /// The minimum and the lowest index holding it (branch-free reductions).
    #[inline(always)]
    fn reduce(&self) -> (T, u32) {
        let mut min = self.value[0];
        for l in 1..LANES {
            min = if self.value[l] < min { self.value[l] } else { min };
        }
        let mut index = u32::MAX;
        for l in 0..LANES {
            index = index.min(if self.value[l] == min { self.index[l] } else { u32::MAX });
        }
        (min, index)
    }
}

/// Direct kernel for narrow data: for each row, `‖c‖² − 2x·c` for
/// [`LANES`] centres at a time from the transposed centres, with a lane-wise
/// running minimum. Compiled for AVX-512, AVX2+FMA and a portable baseline;
/// the best available is picked at run time.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
fn direct_argmin<T: Real>(x: &[T], d: usize, transposed: &[T], norms: &[T], labels: &mut [u32]) {
    if T::direct_argmin_simd(x, d, transposed, norms, labels) {
        return;
    }
    // A const number of features lets the compiler keep every accumulator
    // in registers and unroll the feature loop.
    macro_rules! fixed {
        ($($n:literal)*) => {
            match d {
                $($n => direct_fixed::<T, $n>(x, transposed, norms, labels),)*
                _ => unreachable!("direct kernel used for d = {d}"),
            }
        };
    }
    fixed!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
}

#[inline(always)]
fn direct_fixed<T: Real, const D: usize>(x: &[T], transposed: &[T], norms: &[T], labels: &mut [u32]) {
    let rows = labels.len();
    let pairs = rows / 2 * 2;
    for r0 in (0..pairs).step_by(2) {
        let (a, b) = direct_two::<T, D>(&x[r0 * D..(r0 + 2) * D], transposed, norms);
        labels[r0] = a;
        labels[r0 + 1] = b;
    }
    if pairs < rows {
        let mut pad = [T::default(); 32];
        pad[..D].copy_from_slice(&x[pairs * D..(pairs + 1) * D]);
        pad[D..2 * D].copy_from_slice(&x[pairs * D..(pairs + 1) * D]);
        labels[pairs] = direct_two::<T, D>(&pad[..2 * D], transposed, norms).0;
    }
}

/// The direct kernel's step for two rows of `D` features, sharing each load
/// of centres (register blocking).
#[inline(always)]
#[allow(clippy::needless_range_loop)] // lane loops index several arrays in step
fn direct_two<T: Real, const D: usize>(x: &[T], transposed: &[T], norms: &[T]) -> (u32, u32) {
    let kp = norms.len();
    let mut xa = [T::default(); D];
    let mut xb = [T::default(); D];
    for f in 0..D {
        xa[f] = T::from_f64(-2.0) * x[f];
        xb[f] = T::from_f64(-2.0) * x[D + f];
    }
    let mut ma = LaneMin::<T>::new();
    let mut mb = LaneMin::<T>::new();
    for c0 in (0..kp).step_by(LANES) {
        let n: [T; LANES] = norms[c0..c0 + LANES].try_into().expect("LANES elements");
        let (mut acca, mut accb) = (n, n);
        for f in 0..D {
            let col: &[T; LANES] = transposed[f * kp + c0..f * kp + c0 + LANES].try_into().expect("LANES elements");
            for l in 0..LANES {
                acca[l] += xa[f] * col[l];
                accb[l] += xb[f] * col[l];
            }
        }
        ma.update(&acca, c0 as u32);
        mb.update(&accb, c0 as u32);
    }
    (ma.reduce().1, mb.reduce().1)
}

/// Argmin over one GEMM tile (`kt` products per row, contiguous per row)
/// plus norms, merged with the running best of earlier centre tiles.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
fn tile_argmin<T: Real>(tile: &[T], norms: &[T], j0: usize, best: &mut [T], labels: &mut [u32]) {
    let kt = norms.len();
    let full = kt / LANES * LANES;
    for (i, (b, label)) in best.iter_mut().zip(labels.iter_mut()).enumerate() {
        let prods = &tile[i * kt..(i + 1) * kt];
        let mut m = LaneMin::<T>::new();
        for c0 in (0..full).step_by(LANES) {
            let mut v: [T; LANES] = prods[c0..c0 + LANES].try_into().expect("LANES elements");
            for (a, &b) in v.iter_mut().zip(&norms[c0..c0 + LANES]) {
                *a += b;
            }
            m.update(&v, (j0 + c0) as u32);
        }
        let (mut bv, mut bj) = m.reduce();
        for j in full..kt {
            let v = prods[j] + norms[j];
            if v < bv {
                bv = v;
                bj = (j0 + j) as u32;
            }
        }
        // Earlier tiles hold lower indices, so they win ties.
        if j0 == 0 || bv < *b {
            *b = bv;
            *label = bj;
        }
    }
}

/// Σ_f (a_f − b_f)² in `f64`, summed in eight interleaved partial sums (so
/// it vectorises) combined in a fixed order.
#[inline(always)]
pub fn exact_sq_dist<T: Real>(a: &[T], b: &[T]) -> f64 {
    let mut acc = [0.0f64; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (p, q) in ca.zip(cb) {
        for l in 0..8 {
            let t = p[l].to_f64() - q[l].to_f64();
            acc[l] += t * t;
        }
    }
    for (l, (p, q)) in ra.iter().zip(rb).enumerate() {
        let t = p.to_f64() - q.to_f64();
        acc[l] += t * t;
    }
    ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
}

/// Assigns every row of a block (row-major `(rows, d)`) in parallel: the block
/// is cut into tiles of `tile_rows` rows (fixed by the plan, not by the thread
/// count), and tiles are dealt to `scratch.len()` workers, each with its own
/// scratch. Results do not depend on the number of workers.
///
/// # Panics
/// If buffers are smaller than stated.
pub fn assign_block<T: Real>(
    x: &[T],
    c: &PreparedCenters<T>,
    tile_rows: usize,
    k_tile: usize,
    scratch: &mut [Vec<T>],
    labels: &mut [u32],
    min_dist: &mut [f64],
) {
    let d = c.n_features;
    let rows = labels.len();
    let n_tiles = rows.div_ceil(tile_rows);
    let per_worker = n_tiles.div_ceil(scratch.len().max(1)).max(1) * tile_rows;
    scratch
        .par_iter_mut()
        .zip(labels.par_chunks_mut(per_worker))
        .zip(min_dist.par_chunks_mut(per_worker))
        .enumerate()
        .for_each(|(w, ((s, lab), dist))| {
            let base = w * per_worker;
            for (t, (l, m)) in lab.chunks_mut(tile_rows).zip(dist.chunks_mut(tile_rows)).enumerate() {
                let r0 = base + t * tile_rows;
                assign_rows(&x[r0 * d..], c, k_tile, s, l, m);
            }
        });
}

/// Slow, obviously-correct twin of [`assign_rows`] for tests: exact squared
/// distances in `f64` to every centre, first minimum wins.
pub fn assign_reference<T: Real>(x: &[T], c: &PreparedCenters<T>, labels: &mut [u32], min_dist: &mut [f64]) {
    let d = c.n_features;
    for i in 0..labels.len() {
        let row = &x[i * d..(i + 1) * d];
        let (mut bj, mut bv) = (0usize, f64::INFINITY);
        for j in 0..c.n_clusters {
            let v = exact_sq_dist(row, &c.values[j * d..(j + 1) * d]);
            if v < bv {
                bv = v;
                bj = j;
            }
        }
        labels[i] = bj as u32;
        min_dist[i] = bv;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn random(n: usize, seed: u64, scale: f64) -> Vec<f64> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        (0..n).map(|_| rng.random_range(-scale..scale)).collect()
    }

    fn check<T: Real>(n: usize, d: usize, k: usize, tile_rows: usize, k_tile: usize, workers: usize) {
        let x64 = random(n * d, 1, 10.0);
        let x: Vec<T> = x64.iter().map(|&v| T::from_f64(v)).collect();
        let c = PreparedCenters::<T>::new(&random(k * d, 2, 10.0), k, d);
        let mut scratch: Vec<Vec<T>> =
            (0..workers).map(|_| vec![T::default(); PreparedCenters::<T>::scratch_len(tile_rows, k_tile)]).collect();
        let (mut l1, mut d1) = (vec![0u32; n], vec![0f64; n]);
        let (mut l2, mut d2) = (vec![0u32; n], vec![0f64; n]);
        assign_block(&x, &c, tile_rows, k_tile, &mut scratch, &mut l1, &mut d1);
        assign_reference(&x, &c, &mut l2, &mut d2);
        for i in 0..n {
            // The GEMM identity may pick a different centre only on a near tie.
            if l1[i] != l2[i] {
                assert!((d1[i] - d2[i]).abs() <= 1e-4 * d2[i].max(1.0), "row {i}: {} vs {}", d1[i], d2[i]);
            } else {
                assert_eq!(d1[i], d2[i]);
            }
        }
        let agree = l1.iter().zip(&l2).filter(|(a, b)| a == b).count();
        assert!(agree as f64 >= 0.999 * n as f64);
    }

    #[test]
    fn matches_reference_f64_ragged_tiles() {
        check::<f64>(1000, 3, 37, 64, 16, 3);
        check::<f64>(777, 17, 5, 100, 512, 2);
        check::<f64>(1, 1, 1, 256, 512, 4);
    }

    #[test]
    fn matches_reference_f32() {
        check::<f32>(2000, 8, 200, 256, 64, 2);
    }

    /// Centres so large that every distance overflows to inf: no panic, a
    /// valid label (0) and an infinite distance, on both the direct (d ≤ 16)
    /// and the GEMM path.
    #[test]
    fn overflowing_distances_give_label_zero() {
        for d in [2, 20] {
            let k = 3;
            let x = vec![0.0f64; 10 * d];
            let c = PreparedCenters::<f64>::new(&vec![1e160; k * d], k, d);
            let mut scratch = vec![vec![0.0; PreparedCenters::<f64>::scratch_len(256, k)]];
            let (mut labels, mut dist) = (vec![7u32; 10], vec![0f64; 10]);
            assign_block(&x, &c, 256, k, &mut scratch, &mut labels, &mut dist);
            assert!(labels.iter().all(|&l| l == 0), "d = {d}: {labels:?}");
            assert!(dist.iter().all(|v| v.is_infinite()));
        }
    }

    #[test]
    fn portable_direct_kernel_matches_reference() {
        // On AVX-512 machines `assign_block` takes the hand-vectorised twin;
        // check the portable kernel directly too.
        let (n, d, k) = (999, 3, 37);
        let x = random(n * d, 5, 10.0);
        let c = PreparedCenters::<f64>::new(&random(k * d, 6, 10.0), k, d);
        let (mut l1, mut l2, mut m) = (vec![0u32; n], vec![0u32; n], vec![0f64; n]);
        direct_fixed::<f64, 3>(&x, &c.transposed, &c.padded_norms, &mut l1);
        assign_reference(&x, &c, &mut l2, &mut m);
        assert_eq!(l1, l2);
    }

    #[test]
    fn worker_count_does_not_change_results() {
        let (n, d, k) = (3000, 5, 50);
        let x = random(n * d, 3, 5.0);
        let c = PreparedCenters::<f64>::new(&random(k * d, 4, 5.0), k, d);
        let mut out = Vec::new();
        for workers in [1, 2, 7] {
            let mut scratch = vec![vec![0.0; PreparedCenters::<f64>::scratch_len(128, 32)]; workers];
            let (mut l, mut m) = (vec![0u32; n], vec![0f64; n]);
            assign_block(&x, &c, 128, 32, &mut scratch, &mut l, &mut m);
            out.push((l, m.iter().map(|v| v.to_bits()).collect::<Vec<_>>()));
        }
        assert!(out.windows(2).all(|w| w[0] == w[1]));
    }
}
