//! Nearest centres and per-cluster sums for sparse (CSR) rows, with the
//! exact answer of the dense kernels.
//!
//! # The guarantee
//! Each row's label is the one [`super::assign_rows`] gives for the row
//! with its zeros filled in: the index `j` minimising [`super::exact_sq_dist`] of
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
//! exact distance of the densified row, lowest index first, decides.
//!
//! # A first pass from `f16` centres
//! The products are first computed from h_jf = fl₁₆(σc_jf) (the transposed
//! centres in `f16`, a quarter of the bytes of the `f64` rows: the rows are
//! read at random, so bytes bound the kernel's speed) and
//! â_f = fl₃₂(−2σx_f), multiplied and summed in `f32` in the row's order
//! ([`super::half_rows`]), and added to the `f64` norms. With
//! S_j = Σ_f |2σx_f|·|σc_jf| ≤ 2XR_j (Cauchy–Schwarz) and
//! A = Σ_f |2σx_f| ≤ 2X√nnz:
//! - rounding a centre value errs by at most u₁₆|σc_jf| + 2⁻²⁵ (the
//!   subnormals' half spacing), in all at most u₁₆S_j + 2⁻²⁵A;
//! - rounding â and the `nnz` products and sums in `f32`, at most
//!   γ₃₂(nnz + 3)(1 + 2⁻¹⁰)S_j, plus 2(nnz + 3) times `f32`'s smallest
//!   normal for underflow;
//! - the norm and the final addition in `f64`, at most 2γ₆₄(d + 6)(R_j + X)²
//!   (|g_j| ≤ R_j² + 2XR_j).
//!
//! So |g_j − t_j| ≤ e_j, the sum of those terms, each centre its own. The
//! lowest g_b is the exact nearest centre when g_j − e_j > g_b + e_b for
//! every other j (then t_j > t_b). About 98 % of the rows of a TF-IDF fit
//! are certified so; the others go through the `f64` products and, failing
//! those, the exact decision. Rows where (C + X)² could overflow `f32`, and
//! centres that `f16` cannot hold (|σc| ≥ 2¹⁵, never after a normal
//! scaling), skip the first pass.
//!
//! Work per row: O(nnz · k) for the products (each stored value adds a
//! multiple of one row of the transposed centres), the exact decision only
//! where the bound cannot certify. That decision takes each candidate's
//! exact distance over the columns where the row or the centre is nonzero
//! (a feature where both are zero adds +0 to its partial sum, which changes
//! no bit): O(nnz + the centre's nonzeros) for centres with at most d / 8
//! nonzeros (centres that are rows of the data, whose rows often tie
//! exactly: no shared column), O(d) for denser ones; O(nnz) for unit rows.
//! Memory: the transposed centres (d × k in `f64`, d × k rounded up to 32
//! in `f16`), the sparse centres' nonzero columns (at most d / 8 per
//! centre, `u32`), and per worker k products in each of `f64` and `f32`
//! and one dense row.
//!
//! # Unit rows (cosine)
//! Centres prepared for unit rows decide on [`super::unit_sq_dist`]
//! instead (see `assign.rs`), whose error joins the bound's η; the fast
//! path's g_j holds σ² for every centre's norm and R_j is at least σ, as
//! in the dense kernel. A row's
//! distance is then computed from its stored values with the dense row's
//! bits (the zeros add nothing to either of its sums), so a sparse cosine
//! fit's inertia is the dense fit's.
//!
//! Reference: scikit-learn's `_k_means_lloyd.pyx` and
//! `_euclidean_sparse_dense` (sparse rows against dense centres with the
//! same identity).

use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};
use multiversion::multiversion;
use rayon::prelude::*;

use super::accumulate::two_sum;
use super::assign::{gamma, lane_sum, scale_for, unit_distance, Bound};
use super::unit::{max_abs, sq_norms as sq_norms_of};
use super::{ClusterSums, PreparedCenters};
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
    /// The same rounded to `f16` (bits), each row padded with zeros to
    /// [`SparseCenters::padded`] values, from index `half_start` (which puts
    /// the rows on 64-byte lines where the allocation allows).
    half: Vec<u16>,
    half_start: usize,
    /// Whether `f16` holds every σc_jf (|σc| < 2¹⁵).
    half_fits: bool,
    /// ‖σc_j‖², summed over the features in a fixed order (`unit::sq_norms`);
    /// σ² for unit rows (see the module docs).
    sq_norms: Vec<f64>,
    /// ‖c_j‖², summed so (for the distances).
    norms: Vec<f64>,
    /// R_j = ‖σc_j‖.
    radii: Vec<f64>,
    /// max_j R_j.
    radius: f64,
    bound: Bound,
    /// The nonzero columns of each centre with at most [`Self::support_cap`]
    /// of them (`listed`), strictly increasing, from `support_at[j]` to
    /// `support_at[j + 1]` (an empty run for a denser centre). Empty for
    /// unit rows (their distances need no list) and when the centres were
    /// renewed in some columns only.
    support: Vec<u32>,
    support_at: Vec<u32>,
    listed: Vec<bool>,
}

impl SparseCenters {
    /// Prepares `k` centres of `d` features (row-major `f64`), whose exact
    /// distances err by at most `slack` beyond their relative error (η, see
    /// [`PreparedCenters::slack`]), for unit rows when `unit` (see
    /// [`PreparedCenters::for_rows`]).
    pub fn new(centers: &[f64], k: usize, d: usize, (slack, unit): (f64, bool)) -> Self {
        let mut s = Self::build(
            centers,
            k,
            d,
            (slack, unit),
            None,
            [Vec::new(), Vec::new(), Vec::new()],
            Vec::new(),
            Vec::new(),
        );
        s.find_supports(centers, unit);
        s
    }

    /// The same as [`SparseCenters::new`], in `self`'s buffers; with
    /// `columns` (strictly increasing), for rows whose stored values all
    /// lie in those columns: the transposed values of the other columns are
    /// left as they were (stale), which such rows never read.
    pub fn renew(self, centers: &[f64], k: usize, d: usize, of: (f64, bool), columns: Option<&[u32]>) -> Self {
        let SparseCenters { transposed, half, sq_norms, norms, radii, support, support_at, listed, .. } = self;
        let mut s = Self::build(centers, k, d, of, columns, [transposed, sq_norms, norms], half, radii);
        (s.support, s.support_at, s.listed) = (support, support_at, listed);
        s.find_supports(centers, of.1 || columns.is_some());
        s
    }

    #[allow(clippy::too_many_arguments)]
    fn build(
        centers: &[f64],
        k: usize,
        d: usize,
        (slack, unit): (f64, bool),
        columns: Option<&[u32]>,
        [mut transposed, mut sq_norms, mut norms]: [Vec<f64>; 3],
        mut half: Vec<u16>,
        mut radii: Vec<f64>,
    ) -> Self {
        // The largest magnitude, per centre then over the centres (the
        // comparison vectorises; NaN is skipped as by `f64::max`).
        let spread = centers.par_chunks(d.max(1)).map(max_abs).reduce(|| 0.0, |a, b| if b > a { b } else { a });
        let scale = scale_for(spread);
        // Every entry read is written below (resized only when the shape changes).
        crate::memory::reserve_huge(&mut transposed, d * k);
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
        // value per centre row); the f16 rows padded to a multiple of 32
        // centres (zeros, 64 bytes) so that every stored value adds whole
        // vectors. With `columns`, only theirs (the shape is the last
        // build's, whose padding and start stay).
        let kp = Self::padded(k);
        // Room to start the rows on a 64-byte line: the start moves only
        // when the allocation does, which a build of the same shape keeps.
        crate::memory::reserve_huge(&mut half, d * kp + 31);
        half.resize(d * kp + 31, 0);
        let half_start = half.as_ptr().align_offset(64).min(31);
        const BLOCK: usize = 64;
        transposed
            .par_chunks_mut((k * BLOCK).max(1))
            .zip(half[half_start..half_start + d * kp].par_chunks_mut((kp * BLOCK).max(1)))
            .enumerate()
            .for_each(|(b, (rows, rows16))| {
                let f0 = b * BLOCK;
                let width = rows.len() / k.max(1);
                // A column's float16 row from its float64 row, converted
                // in vector lanes (each value as `f16::from_f64` rounds it).
                let halve = |rows: &[f64], rows16: &mut [u16], q: usize| {
                    let to: &mut [half::f16] = rows16[q * kp..q * kp + k].reinterpret_cast_mut();
                    to.convert_from_f64_slice(&rows[q * k..(q + 1) * k]);
                };
                match columns {
                    None => {
                        for j in 0..k {
                            let run = &centers[j * d + f0..j * d + f0 + width];
                            for (q, &v) in run.iter().enumerate() {
                                rows[q * k + j] = v * scale;
                            }
                        }
                        for q in 0..width {
                            halve(rows, rows16, q);
                            rows16[q * kp + k..(q + 1) * kp].fill(0);
                        }
                    }
                    Some(cols) => {
                        let lo = cols.partition_point(|&f| (f as usize) < f0);
                        let hi = lo + cols[lo..].partition_point(|&f| (f as usize) < f0 + width);
                        for j in 0..k {
                            let c = &centers[j * d..(j + 1) * d];
                            for &f in &cols[lo..hi] {
                                rows[(f as usize - f0) * k + j] = c[f as usize] * scale;
                            }
                        }
                        for &f in &cols[lo..hi] {
                            halve(rows, rows16, f as usize - f0);
                        }
                    }
                }
            });
        radii.clear();
        if unit {
            // g_j holds σ² (see the module docs), R_j at least σ.
            radii.extend(sq_norms.iter().map(|s| s.max(scale * scale).sqrt()));
            sq_norms.fill(scale * scale);
        } else {
            radii.extend(sq_norms.iter().map(|s| s.sqrt()));
        }
        let mut bound = Bound::new(d, f64::EPSILON / 2.0, f64::MIN_POSITIVE, f64::MAX);
        bound.floor += slack * scale * scale;
        SparseCenters {
            k,
            d,
            scale,
            transposed,
            half,
            half_start,
            half_fits: spread * scale < 32768.0,
            sq_norms,
            norms,
            radius: radii.iter().copied().fold(0.0, f64::max),
            radii,
            bound,
            support: Vec::new(),
            support_at: Vec::new(),
            listed: Vec::new(),
        }
    }

    /// Most nonzero columns of a centre whose columns are listed (see
    /// [`Self::support`]).
    fn support_cap(d: usize) -> usize {
        d / 8
    }

    /// Lists the nonzero columns of `centers` (row-major `(k, d)`) with at
    /// most [`Self::support_cap`] of them, in the buffers' room; none when
    /// `none` (see [`Self::support`]).
    fn find_supports(&mut self, centers: &[f64], none: bool) {
        let (k, d, cap) = (self.k, self.d, Self::support_cap(self.d));
        let (support, at, listed) = (&mut self.support, &mut self.support_at, &mut self.listed);
        support.clear();
        at.clear();
        listed.clear();
        if none || d <= 8 || k == 0 || u32::try_from(k * cap + 1).is_err() {
            return;
        }
        let counts: Vec<usize> = centers.par_chunks_exact(d).map(|c| c.iter().filter(|&&v| v != 0.0).count()).collect();
        listed.extend(counts.iter().map(|&n| n <= cap));
        let runs = || counts.iter().zip(listed.iter()).map(|(&n, &l)| if l { n } else { 0 });
        at.reserve_exact(k + 1);
        at.push(0);
        let mut total = 0;
        for n in runs() {
            total += n;
            at.push(total as u32);
        }
        support.resize(total, 0);
        // Each listed centre's run of `support`, filled in parallel.
        let mut parts = Vec::with_capacity(k);
        let mut rest = &mut support[..];
        for n in runs() {
            let (part, tail) = rest.split_at_mut(n);
            parts.push(part);
            rest = tail;
        }
        parts.into_par_iter().zip(centers.par_chunks_exact(d)).for_each(|(part, c)| {
            let nonzero = c.iter().enumerate().filter(|(_, &v)| v != 0.0).map(|(f, _)| f as u32);
            for (to, f) in part.iter_mut().zip(nonzero) {
                *to = f;
            }
        });
    }

    /// The nonzero columns of centre `j` (strictly increasing) when listed.
    fn support(&self, j: usize) -> Option<&[u32]> {
        self.listed
            .get(j)
            .is_some_and(|&l| l)
            .then(|| &self.support[self.support_at[j] as usize..self.support_at[j + 1] as usize])
    }

    /// Bytes of the prepared centres for `k` centres of `d` features.
    pub fn bytes_for(k: usize, d: usize) -> u64 {
        ((d + 4) * k * 8 + (d * Self::padded(k) + 31) * 2 + k * Self::support_cap(d) * 4 + (k + 1) * 4 + k) as u64
    }

    /// `k` rounded up to a multiple of 32 (the `f16` rows' length: 64 bytes).
    fn padded(k: usize) -> usize {
        k.div_ceil(32) * 32
    }

    /// The first pass (see the module docs) for a row of stored `values` in
    /// columns `cols` at squared norm `x_sq` (scaled): the exact nearest
    /// centre where the bounds certify it, with `g` (the `f32` products) as
    /// scratch.
    fn first_pass<T: Real>(&self, values: &[T], cols: &[u32], x_sq: f64, g: &mut [f32]) -> Option<usize> {
        // (C + X)² ≤ 2(C² + X²) bounds every product and sum.
        let s = 2.0 * (self.radius * self.radius + x_sq);
        if !self.half_fits || s.is_nan() || s > f64::from(f32::MAX) / 8.0 {
            return None;
        }
        let kp = Self::padded(self.k);
        let rows = &self.half[self.half_start..self.half_start + self.d * kp];
        super::half_rows::weighted_rows(rows, cols, values, -2.0 * self.scale, g);
        let nnz = values.len();
        let x = x_sq.sqrt();
        let u16_ = f64::from(half::f16::EPSILON) / 2.0;
        // e_j = per_radius·R_j + per_square·(R_j + X)² + floor.
        let per_radius = (u16_ + gamma(nnz + 3, f64::from(f32::EPSILON) / 2.0)) * (1.0 + 1.0 / 1024.0) * 2.0 * x;
        let per_square = 2.0 * gamma(self.d + 6, f64::EPSILON / 2.0) * (1.0 + 1e-6);
        let floor = 2f64.powi(-24) * x * (nnz as f64).sqrt() * (1.0 + 1.0 / 1024.0)
            + 2.0 * (nnz + 3) as f64 * f64::from(f32::MIN_POSITIVE)
            + self.bound.floor;
        let e = |j: usize| per_radius * self.radii[j] + per_square * (self.radii[j] + x).powi(2) + floor;
        let (_, b, _) = best_two(self.k, |j| self.sq_norms[j] + f64::from(g[j]));
        let top = self.sq_norms[b] + f64::from(g[b]) + e(b);
        // NaN (never, within the guards above) certifies nothing.
        (0..self.k).all(|j| j == b || self.sq_norms[j] + f64::from(g[j]) - e(j) > top).then_some(b)
    }
}

/// Per-worker buffers of [`assign_csr`]: `k` products in `f64` and in
/// `f32` (padded), and one dense row.
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
    let label = if let Some(b) = s.first_pass(values, cols, x_sq, &mut buf.g32) {
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
    (label as u32, sparse_dist(values, cols, c, s, label))
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
    // The dense row, filled for the first candidate that needs it.
    let mut filled = false;
    let (mut best, mut label) = (f64::INFINITY, 0);
    for j in 0..s.k {
        // NaN (overflow) keeps a centre among the candidates.
        if buf.g[j] - beta(j) > upper {
            continue;
        }
        // Each the dense row's exact distance, bit for bit (module docs).
        let dist = match s.support(j) {
            _ if c.is_unit() => unit_sparse_dist(values, cols, c.center(j)),
            Some(support) => merged_sq_dist(values, cols, c.center(j), support),
            None => {
                if !filled {
                    for (&v, &f) in values.iter().zip(cols) {
                        buf.row[f as usize] = v;
                    }
                    filled = true;
                }
                c.exact_dist(&buf.row, j)
            }
        };
        if dist < best {
            (best, label) = (dist, j);
        }
    }
    if filled {
        for &f in cols {
            buf.row[f as usize] = T::default();
        }
    }
    label
}

/// [`super::exact_sq_dist`] (more than 8 features) of the dense row of
/// stored `values` in strictly increasing columns `cols` to `c`, whose
/// nonzero columns are `support` (strictly increasing): the same bits,
/// from the columns where either is nonzero (each other feature's term is
/// +0, which changes no partial sum of squares).
#[inline]
fn merged_sq_dist<T: Real>(values: &[T], cols: &[u32], c: &[f64], support: &[u32]) -> f64 {
    let mut acc = [0.0f64; 8];
    let (mut i, mut s) = (0, 0);
    loop {
        let at_row = cols.get(i).copied().unwrap_or(u32::MAX);
        let at_centre = support.get(s).copied().unwrap_or(u32::MAX);
        let f = at_row.min(at_centre);
        if f == u32::MAX {
            break;
        }
        let v = if at_row == f {
            i += 1;
            values[i - 1].to_f64()
        } else {
            0.0
        };
        s += usize::from(at_centre == f);
        let t = v - c[f as usize];
        acc[f as usize % 8] += t * t;
    }
    lane_sum(acc)
}

/// The distance of a row's stored `values` (in strictly increasing
/// columns `cols`) to centre `j`: [`unit_sparse_dist`] for unit rows, else
/// [`sparse_sq_dist`].
#[inline]
fn sparse_dist<T: Real>(values: &[T], cols: &[u32], c: &PreparedCenters<T>, s: &SparseCenters, j: usize) -> f64 {
    if c.is_unit() {
        unit_sparse_dist(values, cols, c.center(j))
    } else {
        sparse_sq_dist(values, cols, c.center(j), s.norms[j])
    }
}

/// [`super::unit_sq_dist`] of the dense row from its stored `values` (in
/// strictly increasing columns `cols`): the same bits, since a zero adds
/// nothing to either sum.
#[inline]
fn unit_sparse_dist<T: Real>(values: &[T], cols: &[u32], c: &[f64]) -> f64 {
    let (mut xx, mut xc) = ([0.0f64; 8], [0.0f64; 8]);
    for (&v, &f) in values.iter().zip(cols) {
        let (v, l) = (v.to_f64(), f as usize % 8);
        xx[l] += v * v;
        xc[l] += v * c[f as usize];
    }
    unit_distance(xx, xc)
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
            *v = sparse_dist(&x[p.clone()], &csr.indices[p.clone()], c, s, j);
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
    // Each part's marks (none where any sum may be nonzero already).
    let words = ClusterSums::words_per_cluster(d);
    let ([sums, sums_err, weights, weights_err], marks) = sums.parts_mut();
    let mut marks: Vec<Option<&mut [u64]>> = match marks {
        Some(m) => m.chunks_mut(per * words).map(Some).collect(),
        None => (0..k.div_ceil(per)).map(|_| None).collect(),
    };
    sums.par_chunks_mut(per * d.max(1))
        .zip(sums_err.par_chunks_mut(per * d.max(1)))
        .zip(weights.par_chunks_mut(per))
        .zip(weights_err.par_chunks_mut(per))
        .zip(marks.par_iter_mut())
        .enumerate()
        .for_each(|(p, ((((s, se), w), we), m))| {
            accumulate_csr_range(x, csr, labels, sample_weight, d, p * per, [s, se, w, we], m.as_deref_mut());
        });
}

/// [`accumulate_csr`] for the rows labelled `lo..lo + w.len()`, into the
/// sums `[sums, errors, weights, weight errors]` of those clusters, setting
/// the bit of every sum added to in their `marks` (when kept).
#[allow(clippy::too_many_arguments)]
fn accumulate_csr_range<T: Real>(
    x: &[T],
    csr: CsrIndex<'_>,
    labels: &[u32],
    sample_weight: Option<&[f64]>,
    d: usize,
    lo: usize,
    [sums, sums_err, weights, weights_err]: [&mut [f64]; 4],
    mut marks: Option<&mut [u64]>,
) {
    let words = ClusterSums::words_per_cluster(d);
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
        if let Some(m) = marks.as_deref_mut() {
            for &f in &csr.indices[r.clone()] {
                m[j * words + f as usize / 64] |= 1 << (f % 64);
            }
        }
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

    /// The float16 rows hold each scaled value as `f16::from_f64` rounds
    /// it, padded with zeros, built whole or renewed at some columns (the
    /// others keep the last build's values).
    #[test]
    fn half_rows_round_each_value_as_from_f64() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        for (k, d) in [(1, 1), (3, 70), (37, 130), (100, 64)] {
            let random = |rng: &mut rand_chacha::ChaCha8Rng| -> Vec<f64> {
                (0..k * d).map(|_| rng.random_range(-1.0..1.0) * 10f64.powi(rng.random_range(-9..5))).collect()
            };
            let check = |s: &SparseCenters, c: &[f64], cols: &[usize], old: &[f64]| {
                let kp = SparseCenters::padded(k);
                for f in 0..d {
                    let row = &s.half[s.half_start + f * kp..s.half_start + (f + 1) * kp];
                    let from = if cols.contains(&f) { c } else { old };
                    for j in 0..k {
                        let want = half::f16::from_f64(from[j * d + f] * s.scale).to_bits();
                        assert_eq!(row[j], want, "k {k} d {d} centre {j} feature {f}");
                        assert_eq!(s.transposed[f * k + j], from[j * d + f] * s.scale);
                    }
                    assert!(row[k..].iter().all(|&b| b == 0));
                }
            };
            let first = random(&mut rng);
            let s = SparseCenters::new(&first, k, d, (0.0, false));
            check(&s, &first, &(0..d).collect::<Vec<_>>(), &first);
            // New centres of the same largest magnitude (the same scale),
            // renewed at every third column.
            let largest = first.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            let mut next: Vec<f64> = random(&mut rng).iter().map(|v| v.clamp(-largest, largest)).collect();
            next[0] = largest;
            let cols: Vec<u32> = (0..d as u32).step_by(3).collect();
            let scale = s.scale;
            let s = s.renew(&next, k, d, (0.0, false), Some(&cols));
            assert_eq!(s.scale, scale);
            check(&s, &next, &cols.iter().map(|&f| f as usize).collect::<Vec<_>>(), &first);
        }
    }

    /// Rows close to the midpoints of centres that differ below `f16`'s
    /// precision, at magnitudes from 1e-30 to 1e30, with centre values
    /// spanning eight decades (`f16` subnormals after scaling) and with
    /// centres `f16` cannot hold: every label is the exact nearest centre.
    #[test]
    fn the_f16_first_pass_never_certifies_a_wrong_label() {
        let (n, d, k) = (400, 60, 7);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        for magnitude in [1e-30, 1e-3, 1.0, 1e30] {
            for spread in [1e-4, 1e-7, 1e-11] {
                // Centres: one base with values over eight decades, each
                // centre moved by `spread` (relative) in a few columns.
                let base: Vec<f64> =
                    (0..d).map(|f| magnitude * 10f64.powi(-((f % 9) as i32)) * rng.random::<f64>()).collect();
                let mut centers = Vec::with_capacity(k * d);
                for j in 0..k {
                    centers.extend(base.iter().enumerate().map(|(f, &v)| {
                        if (f + j) % 5 == 0 {
                            v * (1.0 + spread * (rng.random::<f64>() - 0.5))
                        } else {
                            v
                        }
                    }));
                }
                // Rows: a centre's or the midpoint of two centres' values
                // at a third of the columns, nudged by `spread`.
                let (mut indptr, mut indices, mut values, mut dense) =
                    (vec![0], Vec::new(), Vec::new(), vec![0.0; n * d]);
                for i in 0..n {
                    let (a, b) = (rng.random_range(0..k), rng.random_range(0..k));
                    for f in (0..d).filter(|f| (f + i) % 3 == 0) {
                        let mid = 0.5 * (centers[a * d + f] + centers[b * d + f]);
                        let v = mid * (1.0 + spread * (rng.random::<f64>() - 0.5) * 0.1);
                        indices.push(f as u32);
                        values.push(v);
                        dense[i * d + f] = v;
                    }
                    indptr.push(values.len());
                }
                let c = PreparedCenters::<f64>::new(&centers, k, d);
                let csr = CsrIndex { indptr: &indptr, indices: &indices };
                let (mut labels, mut dist) = (vec![0; n], vec![0.0; n]);
                assign_csr(&values, csr, &c, &mut [SparseScratch::new(k, d)], &mut labels, &mut dist);
                let (mut want, mut want_dist) = (vec![0; n], vec![0.0; n]);
                assign_reference(&dense, &c, &mut want, &mut want_dist);
                assert_eq!(labels, want, "magnitude {magnitude} spread {spread}");
            }
        }
        // Centres beyond f16 after scaling (σ is clamped; squared distances
        // overflow) skip the first pass.
        let centers = [1.0, 0.0, 0.0, 3e300];
        assert!(!SparseCenters::new(&centers, 2, 2, (0.0, false)).half_fits);
        let c = PreparedCenters::<f64>::new(&centers, 2, 2);
        let (mut labels, mut dist) = (vec![0; 2], vec![0.0; 2]);
        let csr = CsrIndex { indptr: &[0, 1, 2], indices: &[0, 1] };
        assign_csr(&[2.0, 1e300], csr, &c, &mut [SparseScratch::new(2, 2)], &mut labels, &mut dist);
        let (mut want, mut want_dist) = (vec![0; 2], vec![0.0; 2]);
        assign_reference(&[2.0, 0.0, 0.0, 1e300], &c, &mut want, &mut want_dist);
        assert_eq!(labels, want);
    }

    /// Sums of sparse rows mark what they add to; merging and clearing by
    /// the marks give the bits of dense merging and clearing.
    #[test]
    fn marked_sums_merge_and_clear_as_dense_ones() {
        let (n, d, k) = (300, 130, 6);
        let (indptr, indices, values, dense) = random_csr(n, d, 0.05, 5);
        let labels: Vec<u32> = (0..n as u32).map(|i| (i * 7 + i / 13) % k as u32).collect();
        let w: Vec<f64> = (0..n).map(|i| 0.25 + (i % 5) as f64 * 0.1).collect();
        let half = 170;
        for weights in [None, Some(&w[..])] {
            let (mut a, mut b) = (ClusterSums::new(k, d), ClusterSums::new(k, d));
            let first = CsrIndex { indptr: &indptr[..=half], indices: &indices };
            let second = CsrIndex { indptr: &indptr[half..], indices: &indices };
            accumulate_csr(&values, first, &labels[..half], weights, &mut a, false);
            accumulate_csr(&values, second, &labels[half..], weights.map(|w| &w[half..]), &mut b, true);
            let mut want = (ClusterSums::new(k, d), ClusterSums::new(k, d));
            accumulate_rows(&dense[..half * d], d, &labels[..half], weights, &mut want.0);
            accumulate_rows(&dense[half * d..], d, &labels[half..], weights.map(|w| &w[half..]), &mut want.1);
            want.0.merge(&want.1);
            a.merge(&b);
            assert_eq!((&a.sums, &a.sums_err, &a.weights), (&want.0.sums, &want.0.sums_err, &want.0.weights));
            // Cleared by the marks, then used again: as new.
            a.clear();
            assert!(a.sums.iter().chain(&a.sums_err).chain(&a.weights).all(|&v| v.to_bits() == 0));
            accumulate_csr(&values, first, &labels[..half], weights, &mut a, true);
            let mut fresh = ClusterSums::new(k, d);
            accumulate_csr(&values, first, &labels[..half], weights, &mut fresh, false);
            assert_eq!((&a.sums, &a.sums_err), (&fresh.sums, &fresh.sums_err));
            // A moved row leaves every sum possibly nonzero: cleared in full.
            a.move_row(0, 1, &vec![1.5; d], 1.0);
            a.clear();
            assert!(a.sums.iter().chain(&a.sums_err).all(|&v| v.to_bits() == 0));
        }
    }

    /// A candidate's distance from the columns where the row or the centre
    /// is nonzero has the dense row's bits, for rows of either type; the
    /// centres' listed columns are their nonzero ones.
    #[test]
    fn merged_distances_are_the_dense_rows_bits() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for d in [9, 16, 17, 100, 1000] {
            for _ in 0..50 {
                let (mut row, mut centre) = (vec![0.0f64; d], vec![0.0f64; d]);
                for f in 0..d {
                    if rng.random::<f64>() < 0.1 {
                        row[f] = rng.random::<f64>() * 10.0 - 5.0;
                    }
                    if rng.random::<f64>() < 0.1 {
                        centre[f] = rng.random::<f64>() * 1e-3 - 5e-4;
                    }
                }
                let cols: Vec<u32> = (0..d as u32).filter(|&f| row[f as usize] != 0.0).collect();
                let support: Vec<u32> = (0..d as u32).filter(|&f| centre[f as usize] != 0.0).collect();
                let values: Vec<f64> = cols.iter().map(|&f| row[f as usize]).collect();
                let want = crate::kernels::exact_sq_dist(&row, &centre);
                assert_eq!(merged_sq_dist(&values, &cols, &centre, &support).to_bits(), want.to_bits(), "d {d}");
                let (row32, values32): (Vec<f32>, Vec<f32>) =
                    (row.iter().map(|&v| v as f32).collect(), values.iter().map(|&v| v as f32).collect());
                let want = crate::kernels::exact_sq_dist(&row32, &centre);
                assert_eq!(merged_sq_dist(&values32, &cols, &centre, &support).to_bits(), want.to_bits(), "d {d}");
            }
        }
        // Listed: the centres with at most d / 8 nonzeros, their columns.
        let (k, d) = (3, 64);
        let mut centers = vec![0.0; k * d];
        centers[3] = 1.0;
        centers[60] = -2.0;
        centers[d..2 * d].fill(0.5);
        let s = SparseCenters::new(&centers, k, d, (0.0, false));
        assert_eq!(s.support(0), Some(&[3u32, 60][..]));
        assert_eq!(s.support(1), None);
        assert_eq!(s.support(2), Some(&[][..]));
        assert_eq!(SparseCenters::new(&centers, k, d, (0.0, true)).support(0), None);
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
            // Unit rows (cosine): the dense kernel's labels and distances, bit for bit.
            let (mut unit, mut unit_dense) = (values.clone(), dense.clone());
            for (r, row) in unit_dense.chunks_exact_mut(d).enumerate() {
                crate::kernels::unit_row(row);
                crate::kernels::unit_sparse_row(
                    &mut unit[indptr[r]..indptr[r + 1]],
                    &indices[indptr[r]..indptr[r + 1]],
                );
            }
            let mut unit_centers = centers.clone();
            unit_centers.chunks_exact_mut(d).for_each(crate::kernels::unit_row);
            // A centre of zeros (the mean of rows of zeros).
            unit_centers[d..2 * d].fill(0.0);
            let c = PreparedCenters::<f64>::for_rows(&unit_centers, k, d, true, true);
            let mut scratch = vec![SparseScratch::new(k, d); 2];
            assign_csr(&unit, csr, &c, &mut scratch, &mut labels, &mut dist);
            let (mut want, mut want_dist) = (vec![0; n], vec![0.0; n]);
            assign_reference(
                &unit_dense,
                &PreparedCenters::<f64>::for_rows(&unit_centers, k, d, false, true),
                &mut want,
                &mut want_dist,
            );
            assert_eq!(labels, want, "unit rows: n {n} d {d} k {k}");
            assert_eq!(dist, want_dist, "unit rows: n {n} d {d} k {k}");
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
