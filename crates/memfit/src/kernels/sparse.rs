//! Nearest centres and per-cluster sums for sparse (CSR) rows, with the
//! exact answer of the dense kernels.
//!
//! # The guarantee
//! Each row's label is the one [`super::assign_rows`] gives for the row
//! with its zeros filled in: the index `j` minimising [`exact_sq_dist`] of
//! the dense row and `c_j`, the lowest index on ties. The reported distance
//! is the label's squared distance, within a relative (2 nnz + 2)·7·u₆₄ of
//! the exact one (so a sparse fit's inertia may differ from the dense fit's
//! in its last bits while its labels and centres are the same):
//! - from the stored values alone, ‖c‖² + Σ_{stored f} ((x_f − c_f)² − c_f²)
//!   in `f64` (‖c‖² summed over all features in a fixed order, eight
//!   interleaved partial sums as [`super::unit_row`]'s), O(nnz) work, when
//!   that is at least half of ‖c‖²: its error, at most γ₆₄(2 nnz + 2) times
//!   the sum of the magnitudes (Higham, *Accuracy and Stability of
//!   Numerical Algorithms*, §3.1), is then at most 7 γ₆₄(2 nnz + 2) of it;
//! - otherwise (the centre's norm would cancel: rows near a centre far from
//!   the origin), or when `d` is not much larger than nnz, as the sum of
//!   positive terms Σ_{stored f} (x_f − c_f)² + Σ_{other f} c_f², O(d).
//!
//! # The bound
//! The fast path computes g_j = fl(σ²‖c_j‖² − 2 Σ_{stored f} σx_f·σc_jf) in
//! `f64` with σ a power of two that brings the centres near 1 (exact, as in
//! the dense kernel; no origin shift, which would fill in the zeros). The
//! exact t_j = ‖σc_j‖² − 2σx·σc_j errs from g_j by at most
//! γ₆₄(d + 2)(R_j² + 2XR_j) ≤ β_j, the dense kernel's β with unit roundoff
//! `u₆₄`, R_j = ‖σc_j‖ and X = ‖σx‖ (the norm is a sum of `d` squares, the
//! product of at most `d` stored terms; nothing is rounded before them).
//! So, as in the dense kernel, a runner-up more than τ = 2 max_j β_j above
//! the best certifies the label; otherwise every centre with
//! g_j − β_j ≤ min_i (g_i + β_i) is a candidate and the smallest
//! [`exact_sq_dist`] of the densified row, lowest index first, decides.
//!
//! # A first pass in `f32`
//! The products are first computed in `f32` from ĉ = fl₃₂(σc) and
//! â_f = fl₃₂(−2σx_f), summed in `f32` in the row's order, and added to
//! the `f64` norms: this halves the bytes read per stored value (the
//! transposed centres' rows), which bounds the kernel's speed. Each of the
//! `2 nnz` roundings of the inputs and the `nnz` of the sum errs by at most
//! `u₃₂` relative (with Σ|âĉ| ≤ (1 + u₃₂)²·2XR), the norm and the final
//! addition as before, so |g_j − t_j| ≤ (γ₃₂(nnz + 3) + γ₆₄(d + 3))(R_j + X)²,
//! plus 2(nnz + 3) times `f32`'s smallest normal for underflow. A row whose
//! runner-up clears that τ is certified; the others go through the `f64`
//! products and, failing those, the exact decision. Rows where
//! (C + X)² could overflow `f32` never pass the first test.
//!
//! Work per row: O(nnz · k) for the products (each stored value adds a
//! multiple of one row of the transposed centres), the O(d · candidates)
//! exact decision only where the bound cannot certify. Memory: the
//! transposed centres (d × k, `f64` and `f32`) and per worker k products
//! in each type and one dense row.
//!
//! Reference: scikit-learn's `_k_means_lloyd.pyx` and
//! `_euclidean_sparse_dense` (sparse rows against dense centres with the
//! same identity).

use multiversion::multiversion;
use rayon::prelude::*;

use super::accumulate::two_sum;
use super::assign::{gamma, scale_for, underflow_slack, Bound};
use super::unit::{max_abs, sq_norms as sq_norms_of};
use super::{exact_sq_dist, ClusterSums, PreparedCenters};
use crate::dtype::Real;
use crate::exec::CsrIndex;

/// Centres prepared for sparse rows (see the module docs).
#[derive(Debug, Clone)]
pub struct SparseCenters {
    k: usize,
    d: usize,
    /// σ, a power of two.
    scale: f64,
    /// `(n_features, n_clusters)` row-major σc_jf.
    transposed: Vec<f64>,
    /// The same rounded to `f32`.
    transposed32: Vec<f32>,
    /// ‖σc_j‖², summed over the features in a fixed order (`unit::sq_norms`).
    sq_norms: Vec<f64>,
    /// ‖c_j‖², summed so (for the distances).
    norms: Vec<f64>,
    /// R_j = ‖σc_j‖.
    radii: Vec<f64>,
    /// max_j R_j.
    radius: f64,
    bound: Bound,
}

impl SparseCenters {
    /// Prepares `k` centres of `d` features (row-major `f64`).
    pub fn new(centers: &[f64], k: usize, d: usize) -> Self {
        Self::build(centers, k, d, None, [Vec::new(), Vec::new(), Vec::new()], Vec::new(), Vec::new())
    }

    /// The same as [`SparseCenters::new`], in `self`'s buffers; with
    /// `columns` (strictly increasing), for rows whose stored values all
    /// lie in those columns: the transposed values of the other columns are
    /// left as they were (stale), which such rows never read.
    pub fn renew(self, centers: &[f64], k: usize, d: usize, columns: Option<&[u32]>) -> Self {
        let SparseCenters { transposed, transposed32, sq_norms, norms, radii, .. } = self;
        Self::build(centers, k, d, columns, [transposed, sq_norms, norms], transposed32, radii)
    }

    fn build(
        centers: &[f64],
        k: usize,
        d: usize,
        columns: Option<&[u32]>,
        [mut transposed, mut sq_norms, mut norms]: [Vec<f64>; 3],
        mut transposed32: Vec<f32>,
        mut radii: Vec<f64>,
    ) -> Self {
        // The largest magnitude, per centre then over the centres (the
        // comparison vectorises; NaN is skipped as by `f64::max`).
        let spread = centers.par_chunks(d.max(1)).map(max_abs).reduce(|| 0.0, |a, b| if b > a { b } else { a });
        let scale = scale_for(spread);
        // Every entry read is written below (resized only when the shape changes).
        transposed.resize(d * k, 0.0);
        for v in [&mut sq_norms, &mut norms] {
            v.clear();
            v.resize(k, 0.0);
        }
        // Norms in the fixed order of `sq_norms` (centres shared out between threads).
        sq_norms
            .par_iter_mut()
            .zip(norms.par_iter_mut())
            .zip(centers.par_chunks_exact(d.max(1)))
            .for_each(|((sq, n), c)| (*sq, *n) = sq_norms_of(c, scale));
        // The transposed copies, in blocks of features shared out between
        // threads (each block reads a short run of every centre, not one
        // value per centre row); the f32 rows padded to a multiple of 16
        // centres (zeros) so that every stored value adds whole vectors.
        // With `columns`, only theirs (the shape is the last build's, whose
        // padding stays zero).
        let kp = Self::padded(k);
        transposed32.resize(d * kp, 0.0);
        const BLOCK: usize = 64;
        transposed
            .par_chunks_mut((k * BLOCK).max(1))
            .zip(transposed32.par_chunks_mut((kp * BLOCK).max(1)))
            .enumerate()
            .for_each(|(b, (rows, rows32))| {
                let f0 = b * BLOCK;
                let width = rows.len() / k.max(1);
                let write = |rows: &mut [f64], rows32: &mut [f32], q: usize, j: usize, v: f64| {
                    let t = v * scale;
                    rows[q * k + j] = t;
                    rows32[q * kp + j] = t as f32;
                };
                match columns {
                    None => {
                        for j in 0..k {
                            let run = &centers[j * d + f0..j * d + f0 + width];
                            for (q, &v) in run.iter().enumerate() {
                                write(rows, rows32, q, j, v);
                            }
                        }
                        for q in 0..width {
                            rows32[q * kp + k..(q + 1) * kp].fill(0.0);
                        }
                    }
                    Some(cols) => {
                        let lo = cols.partition_point(|&f| (f as usize) < f0);
                        let hi = lo + cols[lo..].partition_point(|&f| (f as usize) < f0 + width);
                        for j in 0..k {
                            let c = &centers[j * d..(j + 1) * d];
                            for &f in &cols[lo..hi] {
                                write(rows, rows32, f as usize - f0, j, c[f as usize]);
                            }
                        }
                    }
                }
            });
        radii.clear();
        radii.extend(sq_norms.iter().map(|s| s.sqrt()));
        let mut bound = Bound::new(d, f64::EPSILON / 2.0, f64::MIN_POSITIVE, f64::MAX);
        bound.floor += underflow_slack(d) * scale * scale;
        SparseCenters {
            k,
            d,
            scale,
            transposed,
            transposed32,
            sq_norms,
            norms,
            radius: radii.iter().copied().fold(0.0, f64::max),
            radii,
            bound,
        }
    }

    /// Bytes of the prepared centres for `k` centres of `d` features.
    pub fn bytes_for(k: usize, d: usize) -> u64 {
        ((d + 4) * k * 8 + d * Self::padded(k) * 4) as u64
    }

    /// `k` rounded up to a multiple of 16 (the `f32` rows' length).
    fn padded(k: usize) -> usize {
        k.div_ceil(16) * 16
    }

    /// τ of the `f32` first pass for a row of `nnz` stored values at
    /// squared norm `x_sq` (scaled): infinite where `f32` could overflow.
    fn tau32(&self, nnz: usize, x_sq: f64) -> f64 {
        // (C + X)² ≤ 2(C² + X²).
        let s = 2.0 * (self.radius * self.radius + x_sq);
        if s.is_nan() || s > f64::from(f32::MAX) / 8.0 {
            return f64::INFINITY;
        }
        let coef = (gamma(nnz + 3, f64::from(f32::EPSILON) / 2.0) + 2.0 * gamma(self.d + 6, f64::EPSILON / 2.0))
            * (1.0 + 1e-6);
        2.0 * (coef * s + 2.0 * (nnz + 3) as f64 * f64::from(f32::MIN_POSITIVE) + self.bound.floor)
    }
}

/// Per-worker buffers of [`assign_csr`]: `k` products and one dense row.
#[derive(Debug, Clone)]
pub struct SparseScratch<T> {
    g: Vec<f64>,
    g32: Vec<f32>,
    row: Vec<T>,
}

impl<T: Real> SparseScratch<T> {
    /// Buffers for `k` centres of `d` features.
    pub fn new(k: usize, d: usize) -> Self {
        SparseScratch { g: vec![0.0; k], g32: vec![0.0; SparseCenters::padded(k)], row: vec![T::default(); d] }
    }

    /// Bytes of [`SparseScratch::new`]'s buffers in a compute type of
    /// `compute_bytes` bytes.
    pub fn bytes(k: usize, d: usize, compute_bytes: usize) -> u64 {
        (k * 8 + SparseCenters::padded(k) * 4 + d * compute_bytes) as u64
    }
}

/// Rows per parallel work item.
const ROWS_PER_ITEM: usize = 256;

/// Assigns every row of a CSR block (values `x`, structure `csr`) to its
/// nearest centre (see the module docs), in parallel over `scratch.len()`
/// workers; the result does not depend on them. Writes `labels` and
/// `min_dist` (one per row).
///
/// # Panics
/// If buffers are smaller than stated.
pub fn assign_csr<T: Real>(
    x: &[T],
    csr: CsrIndex<'_>,
    c: &PreparedCenters<T>,
    scratch: &mut [SparseScratch<T>],
    labels: &mut [u32],
    min_dist: &mut [f64],
) {
    let s = c.sparse();
    let rows = labels.len();
    let items = rows.div_ceil(ROWS_PER_ITEM);
    let per_worker = items.div_ceil(scratch.len().max(1)).max(1) * ROWS_PER_ITEM;
    scratch
        .par_iter_mut()
        .zip(labels.par_chunks_mut(per_worker))
        .zip(min_dist.par_chunks_mut(per_worker))
        .enumerate()
        .for_each(|(w, ((buf, lab), dist))| {
            let base = w * per_worker;
            for (r, (l, o)) in lab.iter_mut().zip(dist.iter_mut()).enumerate() {
                let p = csr.indptr[base + r]..csr.indptr[base + r + 1];
                (*l, *o) = assign_one(&x[p.clone()], &csr.indices[p], c, s, buf);
            }
        });
}

/// g_j for every centre: σ²‖c_j‖² − 2 Σ σx_f σc_jf over the stored values.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
fn products<T: Real>(values: &[T], cols: &[u32], s: &SparseCenters, g: &mut [f64]) {
    let k = s.k;
    g.copy_from_slice(&s.sq_norms);
    for (&v, &f) in values.iter().zip(cols) {
        let a = -2.0 * (v.to_f64() * s.scale);
        let ct = &s.transposed[f as usize * k..(f as usize + 1) * k];
        for (gj, &cj) in g.iter_mut().zip(ct) {
            *gj += a * cj;
        }
    }
}

/// Σ â_f ĉ_jf in `f32` for every centre (the first pass, see the module docs).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
fn products32<T: Real>(values: &[T], cols: &[u32], s: &SparseCenters, g: &mut [f32]) {
    let kp = SparseCenters::padded(s.k);
    g.fill(0.0);
    for (&v, &f) in values.iter().zip(cols) {
        let a = (-2.0 * (v.to_f64() * s.scale)) as f32;
        let ct = &s.transposed32[f as usize * kp..(f as usize + 1) * kp];
        for (gj, &cj) in g.iter_mut().zip(ct) {
            *gj += a * cj;
        }
    }
}

/// The best and second-best of `g(j)` over `k` centres: (best, its index,
/// second).
#[inline]
fn best_two(k: usize, g: impl Fn(usize) -> f64) -> (f64, usize, f64) {
    let (mut best, mut b, mut second) = (f64::INFINITY, 0usize, f64::INFINITY);
    for j in 0..k {
        let v = g(j);
        if v < best {
            second = best;
            (best, b) = (v, j);
        } else if v < second {
            second = v;
        }
    }
    (best, b, second)
}

/// One row's label and reported distance.
fn assign_one<T: Real>(
    values: &[T],
    cols: &[u32],
    c: &PreparedCenters<T>,
    s: &SparseCenters,
    buf: &mut SparseScratch<T>,
) -> (u32, f64) {
    let x_sq: f64 = values.iter().map(|v| (v.to_f64() * s.scale).powi(2)).sum();
    // The f32 pass; NaN (overflow) fails the test.
    products32(values, cols, s, &mut buf.g32);
    let (best, b, second) = best_two(s.k, |j| s.sq_norms[j] + f64::from(buf.g32[j]));
    let label = if second - best > s.tau32(values.len(), x_sq) {
        b
    } else {
        let g = &mut buf.g[..s.k];
        products(values, cols, s, g);
        let (best, b, second) = best_two(s.k, |j| g[j]);
        // τ with (C + X)² ≤ 2(C² + X²).
        let tau = 2.0 * s.bound.at(2.0 * (s.radius * s.radius + x_sq));
        if second - best > tau {
            b
        } else {
            decide(values, cols, c, s, x_sq.sqrt(), buf)
        }
    };
    (label as u32, sparse_sq_dist(values, cols, c.center(label), s.norms[label]))
}

/// The exact decision (see the module docs) from the products in `buf.g`.
#[inline(never)]
fn decide<T: Real>(
    values: &[T],
    cols: &[u32],
    c: &PreparedCenters<T>,
    s: &SparseCenters,
    x_norm: f64,
    buf: &mut SparseScratch<T>,
) -> usize {
    let beta = |j: usize| s.bound.beta(s.radii[j], x_norm);
    let upper = (0..s.k).map(|j| buf.g[j] + beta(j)).filter(|v| v.is_finite()).fold(f64::INFINITY, f64::min);
    for (&v, &f) in values.iter().zip(cols) {
        buf.row[f as usize] = v;
    }
    let (mut best, mut label) = (f64::INFINITY, 0);
    for j in 0..s.k {
        // NaN (overflow) keeps a centre among the candidates.
        if buf.g[j] - beta(j) > upper {
            continue;
        }
        let dist = exact_sq_dist(&buf.row, c.center(j));
        if dist < best {
            (best, label) = (dist, j);
        }
    }
    for &f in cols {
        buf.row[f as usize] = T::default();
    }
    label
}

/// The squared distance of a row's stored `values` (in strictly
/// increasing columns `cols`) to `c` of norm² `norm`: see the module docs.
#[inline]
fn sparse_sq_dist<T: Real>(values: &[T], cols: &[u32], c: &[f64], norm: f64) -> f64 {
    let mut acc = norm;
    for (&v, &f) in values.iter().zip(cols) {
        let cf = c[f as usize];
        let t = v.to_f64() - cf;
        acc += t * t - cf * cf;
    }
    if acc >= 0.5 * norm && c.len() > 4 * values.len() + 16 {
        return acc;
    }
    // Positive terms only: the stored columns' differences, the others' c_f².
    let (mut near, mut far, mut next) = (0.0f64, 0.0f64, 0usize);
    for (f, &cf) in c.iter().enumerate() {
        if cols.get(next).is_some_and(|&col| col as usize == f) {
            let t = values[next].to_f64() - cf;
            near += t * t;
            next += 1;
        } else {
            far += cf * cf;
        }
    }
    near + far
}

/// Squared distances of every row of a CSR block to every centre: `out`
/// (row-major `(rows, n_clusters)`) receives each pair's distance from the
/// stored values (as [`assign_csr`] reports its label's).
///
/// # Panics
/// If `out` holds fewer than `rows × n_clusters` values.
pub fn sq_distances_csr<T: Real>(x: &[T], csr: CsrIndex<'_>, c: &PreparedCenters<T>, out: &mut [f64]) {
    let (k, s) = (c.n_clusters, c.sparse());
    let rows = csr.indptr.len() - 1;
    out[..rows * k].par_chunks_mut(k).enumerate().for_each(|(i, o)| {
        let p = csr.indptr[i]..csr.indptr[i + 1];
        for (j, v) in o.iter_mut().enumerate() {
            *v = sparse_sq_dist(&x[p.clone()], &csr.indices[p.clone()], c.center(j), s.norms[j]);
        }
    });
}

/// Adds `w_i · x_i` and `w_i` to the sums of cluster `labels[i]` for every
/// row of a CSR block, in row order: the same bits as the dense
/// accumulation of the rows with their zeros (adding a zero changes
/// neither a sum nor its error term). With `split_clusters` the clusters
/// are shared out between the pool's threads (the same bits).
///
/// # Panics
/// If a label is `>= n_clusters` or buffers are smaller than stated.
pub fn accumulate_csr<T: Real>(
    x: &[T],
    csr: CsrIndex<'_>,
    labels: &[u32],
    sample_weight: Option<&[f64]>,
    sums: &mut ClusterSums,
    split_clusters: bool,
) {
    let k = sums.n_clusters();
    let d = sums.sums.len().checked_div(k).unwrap_or(0);
    let parts = if split_clusters { rayon::current_num_threads().clamp(1, k.max(1)) } else { 1 };
    let per = k.div_ceil(parts).max(1);
    let ClusterSums { sums, sums_err, weights, weights_err } = sums;
    sums.par_chunks_mut(per * d.max(1))
        .zip(sums_err.par_chunks_mut(per * d.max(1)))
        .zip(weights.par_chunks_mut(per))
        .zip(weights_err.par_chunks_mut(per))
        .enumerate()
        .for_each(|(p, (((s, se), w), we))| {
            accumulate_csr_range(x, csr, labels, sample_weight, d, p * per, [s, se, w, we]);
        });
}

/// [`accumulate_csr`] for the rows labelled `lo..lo + w.len()`, into the
/// sums `[sums, errors, weights, weight errors]` of those clusters.
fn accumulate_csr_range<T: Real>(
    x: &[T],
    csr: CsrIndex<'_>,
    labels: &[u32],
    sample_weight: Option<&[f64]>,
    d: usize,
    lo: usize,
    [sums, sums_err, weights, weights_err]: [&mut [f64]; 4],
) {
    let hi = lo + weights.len();
    for (i, &l) in labels.iter().enumerate() {
        let l = l as usize;
        if l < lo || l >= hi {
            continue;
        }
        let j = l - lo;
        let wi = sample_weight.map_or(1.0, |w| w[i]);
        let (a, e) = two_sum(weights[j], wi);
        (weights[j], weights_err[j]) = (a, weights_err[j] + e);
        let r = csr.indptr[i]..csr.indptr[i + 1];
        for (&f, v) in csr.indices[r.clone()].iter().zip(&x[r]) {
            let q = j * d + f as usize;
            let v = v.to_f64();
            let (prod, pe) = match sample_weight {
                None => (v, 0.0),
                Some(_) => {
                    let prod = wi * v;
                    (prod, wi.mul_add(v, -prod))
                }
            };
            let (a, e) = two_sum(sums[q], prod);
            sums[q] = a;
            sums_err[q] += e + pe;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::{accumulate_rows, assign_reference};
    use rand::{Rng, SeedableRng};

    /// A random CSR matrix with about `density` of its values stored, some
    /// rows empty, and its dense twin.
    fn random_csr(n: usize, d: usize, density: f64, seed: u64) -> (Vec<usize>, Vec<u32>, Vec<f64>, Vec<f64>) {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let (mut indptr, mut indices, mut values, mut dense) = (vec![0], Vec::new(), Vec::new(), vec![0.0; n * d]);
        for i in 0..n {
            for f in 0..d {
                if rng.random::<f64>() < density {
                    // Integers: many exact ties between centres.
                    let v = f64::from(rng.random_range(1..4u8));
                    indices.push(f as u32);
                    values.push(v);
                    dense[i * d + f] = v;
                }
            }
            indptr.push(values.len());
        }
        (indptr, indices, values, dense)
    }

    #[test]
    fn labels_and_sums_are_the_dense_kernels() {
        for (n, d, k, density) in [(700, 40, 9, 0.1), (300, 5, 4, 0.5), (200, 300, 30, 0.02)] {
            let (indptr, indices, values, dense) = random_csr(n, d, density, n as u64);
            // Centres: some rows of the data (exact ties), some shifted.
            let mut centers: Vec<f64> = dense[..k * d].to_vec();
            centers[..d].iter_mut().for_each(|v| *v += 0.5);
            let c = PreparedCenters::<f64>::new(&centers, k, d);
            let csr = CsrIndex { indptr: &indptr, indices: &indices };
            let (mut labels, mut dist) = (vec![0; n], vec![0.0; n]);
            for workers in [1, 3] {
                let mut scratch: Vec<_> = (0..workers).map(|_| SparseScratch::new(k, d)).collect();
                assign_csr(&values, csr, &c, &mut scratch, &mut labels, &mut dist);
                let (mut want, mut want_dist) = (vec![0; n], vec![0.0; n]);
                assign_reference(&dense, &c, &mut want, &mut want_dist);
                assert_eq!(labels, want, "n {n} d {d} k {k}");
                for (a, b) in dist.iter().zip(&want_dist) {
                    assert!((a - b).abs() <= 1e-12 * (1.0 + b), "{a} {b}");
                }
            }
            let mut all = vec![0.0; n * k];
            sq_distances_csr(&values, csr, &c, &mut all);
            assert_eq!(all[..k].iter().position(|&v| v == dist[0]), Some(labels[0] as usize));
            let w: Vec<f64> = (0..n).map(|i| (i % 4) as f64 * 0.7).collect();
            for weights in [None, Some(&w[..])] {
                let (mut a, mut b) = (ClusterSums::new(k, d), ClusterSums::new(k, d));
                accumulate_csr(&values, csr, &labels, weights, &mut a, weights.is_some());
                accumulate_rows(&dense, d, &labels, weights, &mut b);
                assert_eq!((a.sums, a.sums_err, a.weights), (b.sums, b.sums_err, b.weights));
            }
        }
    }
}
