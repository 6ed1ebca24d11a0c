//! Per-cluster weighted sums for the centre update, accumulated in `f64` in
//! row order with the rounding error of every addition and product kept
//! beside them, so the result does not depend on how the work is split
//! between threads (the pass folds these per-chunk sums in order, see
//! [`crate::exec`]) nor on how far the data lie from the origin.
//!
//! # Compensated sums
//! `sums` is the plain `f64` sum `Σ w_i x_i` in row order and `sums_err` the
//! sum of the exact rounding errors of its additions (Knuth's TwoSum) and
//! products (by a fused multiply-add), as in the `Sum2`/`Dot2` algorithms of
//! Ogita, Rump and Oishi, "Accurate sum and dot product", SIAM J. Sci.
//! Comput. 26(6), 2005: `sums + sums_err` is the sum as if accumulated in
//! twice the working precision. A mean is then exact wherever it is
//! representable (a cluster of identical rows gets that row; `1e14 + i`
//! integers keep their integer means), which plain sums of values far from
//! the origin lose (scikit-learn centres its data instead; memfit cannot,
//! as its data are read once per pass).

use multiversion::multiversion;
use rayon::prelude::*;

use crate::dtype::Real;

/// Largest set of per-cluster sums (`n_clusters × (n_features + 1)` values
/// and their errors, in bytes) for which accumulation chunks are summed in
/// parallel, each row by row; larger sets split the clusters between
/// threads instead.
pub const MAX_PARTIAL_BYTES: usize = 512 << 10;

/// `n` zeros written into fresh memory (not `vec![0.0; n]`, whose pages
/// the kernel maps to its shared zero page until each is first written:
/// sums read before they are written would then fault twice per page, the
/// second time flushing every thread's TLB, which costs more than the
/// writes).
fn written_zeros(n: usize) -> Vec<f64> {
    let mut v = Vec::new();
    crate::memory::reserve_huge(&mut v, n);
    v.resize(n, 0.0);
    v
}

/// `a + b` and its exact rounding error (Knuth's TwoSum, branch-free).
#[inline(always)]
/// `(hi + lo) / (wh + wl)` as a double word: the plain quotient corrected
/// by its exact remainder (so a representable quotient comes out exactly).
fn quotient((hi, lo): (f64, f64), (wh, wl): (f64, f64)) -> (f64, f64) {
    let m = hi / wh;
    let r = (-m).mul_add(wh, hi);
    two_sum(m, ((-m).mul_add(wl, r + lo)) / wh)
}

pub(super) fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

/// Per-cluster compensated sums `Σ w_i x_i` (row-major `(n_clusters,
/// n_features)`) and weights `Σ w_i` (see the module docs).
///
/// Code outside this module writes zeros only into `sums` and `sums_err`:
/// after sparse rows, the sums that no row added to are known to be zero,
/// and clearing and merging skip them.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct ClusterSums {
    /// Plain `f64` sums in row order, `(n_clusters, n_features)`.
    #[serde(with = "crate::wire::zero_runs")]
    pub sums: Vec<f64>,
    /// Sums of the rounding errors of `sums`.
    #[serde(with = "crate::wire::zero_runs")]
    pub sums_err: Vec<f64>,
    /// Plain `f64` weights in row order, `(n_clusters,)`.
    pub weights: Vec<f64>,
    /// Sums of the rounding errors of `weights`.
    pub weights_err: Vec<f64>,
    /// Which sums may be nonzero (not sent: a received set has `Marks::All`).
    #[serde(skip)]
    marks: Marks,
}

/// Which per-cluster sums may be nonzero. Sparse rows add to few of them
/// (a fifth of a TF-IDF fit's 100 × 100,000 per chunk): with marks,
/// clearing and merging visit those alone, with the same bits (a sum and
/// its error that no row added to are `+0.0`, and adding them changes
/// nothing).
#[derive(Debug, Clone, Default)]
enum Marks {
    /// Any sum may be nonzero (after dense rows, a moved row, or received).
    #[default]
    All,
    /// Only the sums at set bits: one bit per sum, each cluster's bits in
    /// [`ClusterSums::words_per_cluster`] words (no words yet: none).
    Bits(Vec<u64>),
}

impl ClusterSums {
    /// Zero sums for `n_clusters` clusters of `n_features` features.
    pub fn new(n_clusters: usize, n_features: usize) -> Self {
        ClusterSums {
            sums: written_zeros(n_clusters * n_features),
            sums_err: written_zeros(n_clusters * n_features),
            weights: vec![0.0; n_clusters],
            weights_err: vec![0.0; n_clusters],
            marks: Marks::Bits(Vec::new()),
        }
    }

    /// Bytes of the sums of `n_clusters` clusters of `n_features` features.
    pub const fn bytes(n_clusters: usize, n_features: usize) -> usize {
        n_clusters * (n_features + 1) * 16
    }

    /// Bytes of the sums ([`ClusterSums::bytes`]) and, for `sparse` rows,
    /// of the marks of what they add to.
    pub const fn bytes_for_rows(n_clusters: usize, n_features: usize, sparse: bool) -> usize {
        let marks = if sparse { n_clusters * Self::words_per_cluster(n_features) * 8 } else { 0 };
        Self::bytes(n_clusters, n_features) + marks
    }

    /// 64-bit words of marks per cluster.
    pub(super) const fn words_per_cluster(n_features: usize) -> usize {
        if n_features == 0 {
            1
        } else {
            n_features.div_ceil(64)
        }
    }

    /// The marks' words of every cluster, zeroed on first use, for rows
    /// that mark what they add to; `None` where any sum may be nonzero.
    fn marks_mut(&mut self) -> Option<&mut [u64]> {
        self.parts_mut().1
    }

    /// `[sums, sums_err, weights, weights_err]` and the marks (as
    /// [`ClusterSums::marks_mut`]), to write apart.
    pub(super) fn parts_mut(&mut self) -> ([&mut [f64]; 4], Option<&mut [u64]>) {
        let words = self.n_clusters() * Self::words_per_cluster(self.sums.len() / self.n_clusters().max(1));
        let ClusterSums { sums, sums_err, weights, weights_err, marks } = self;
        let marks = match marks {
            Marks::All => None,
            Marks::Bits(b) => {
                b.resize(words, 0);
                Some(&mut b[..])
            }
        };
        ([sums, sums_err, weights, weights_err], marks)
    }

    /// Calls `f(q)` for every marked sum `q` (row-major index) of `marks`.
    fn each_marked(marks: &[u64], d: usize, mut f: impl FnMut(usize)) {
        for (j, words) in marks.chunks(Self::words_per_cluster(d)).enumerate() {
            for (w, &word) in words.iter().enumerate() {
                let mut m = word;
                while m != 0 {
                    f(j * d + w * 64 + m.trailing_zeros() as usize);
                    m &= m - 1;
                }
            }
        }
    }

    /// Number of clusters.
    pub fn n_clusters(&self) -> usize {
        self.weights.len()
    }

    /// Adds `next` (the sums of later rows) to these.
    pub fn merge(&mut self, next: &Self) {
        fn add(hi: &mut [f64], lo: &mut [f64], nhi: &[f64], nlo: &[f64]) {
            for (((h, l), nh), nl) in hi.iter_mut().zip(lo.iter_mut()).zip(nhi).zip(nlo) {
                let (s, e) = two_sum(*h, *nh);
                *h = s;
                *l += e + nl;
            }
        }
        match &next.marks {
            Marks::Bits(theirs) => {
                let d = self.sums.len() / self.n_clusters().max(1);
                Self::each_marked(theirs, d, |q| {
                    let (s, e) = two_sum(self.sums[q], next.sums[q]);
                    self.sums[q] = s;
                    self.sums_err[q] += e + next.sums_err[q];
                });
                if let Some(ours) = self.marks_mut() {
                    ours.iter_mut().zip(theirs).for_each(|(a, b)| *a |= b);
                }
            }
            Marks::All => {
                add(&mut self.sums, &mut self.sums_err, &next.sums, &next.sums_err);
                self.marks = Marks::All;
            }
        }
        add(&mut self.weights, &mut self.weights_err, &next.weights, &next.weights_err);
    }

    /// Zeroes every sum.
    pub fn clear(&mut self) {
        match &mut self.marks {
            Marks::Bits(marks) => {
                let d = self.sums.len() / self.weights.len().max(1);
                Self::each_marked(marks, d, |q| {
                    self.sums[q] = 0.0;
                    self.sums_err[q] = 0.0;
                });
                marks.fill(0);
            }
            Marks::All => {
                self.sums.fill(0.0);
                self.sums_err.fill(0.0);
                self.marks = Marks::Bits(Vec::new());
            }
        }
        self.weights.fill(0.0);
        self.weights_err.fill(0.0);
    }

    /// Cluster `j`'s weight `Σ w_i`.
    pub fn weight(&self, j: usize) -> f64 {
        self.weights[j] + self.weights_err[j]
    }

    /// Cluster `j`'s mean of feature `q` (of `d`): the compensated sum over
    /// the compensated weight, a double-word division (the exact remainder
    /// of the plain quotient corrects it), so a representable mean, such as
    /// that of identical rows, comes out exactly.
    pub fn mean(&self, j: usize, q: usize, d: usize) -> f64 {
        self.mean_double(j, q, d).0
    }

    /// [`Self::mean`] as a double word `(hi, lo)`: `hi` is the mean rounded
    /// to `f64` and `lo` (the division's remainder over the weight) the
    /// sign and size of what that rounding dropped, so that a narrower
    /// type can round the mean once ([`Real::from_double_word`]).
    pub fn mean_double(&self, j: usize, q: usize, d: usize) -> (f64, f64) {
        let w = two_sum(self.weights[j], self.weights_err[j]);
        quotient(two_sum(self.sums[j * d + q], self.sums_err[j * d + q]), w)
    }

    /// Cluster `j`'s weighted sum (`out.len()` features) over the magnitude
    /// of its largest value (compared as double words), each value a
    /// double-word division as [`Self::mean`]'s, rounded to `f64`: values
    /// in `[-1, 1]`, the largest ±1. Rows of one direction give the same
    /// values whatever their weights (their sum is the row times the
    /// weight), and rows of zeros, which add weight and nothing to the sum,
    /// change none. A sum of zeros gives zeros.
    pub fn direction(&self, j: usize, out: &mut [f64]) {
        let d = out.len();
        let at = |q: usize| two_sum(self.sums[j * d + q], self.sums_err[j * d + q]);
        let size = |(hi, lo): (f64, f64)| if hi < 0.0 { (-hi, -lo) } else { (hi, lo) };
        let largest = (0..d).map(|q| size(at(q))).fold((0.0, 0.0), |m, v| if v > m { v } else { m });
        for (q, o) in out.iter_mut().enumerate() {
            *o = if largest.0 > 0.0 { quotient(at(q), largest).0 } else { 0.0 };
        }
    }

    /// Cluster `j`'s mean of feature `q` (of `d`) rounded once to `T`.
    pub fn mean_as<T: Real>(&self, j: usize, q: usize, d: usize) -> T {
        let (hi, lo) = self.mean_double(j, q, d);
        T::from_double_word(hi, lo)
    }

    /// Moves a row of values `v` and weight `w` from cluster `from` to the
    /// (empty) cluster `to`, which then holds only that row.
    pub fn move_row(&mut self, from: usize, to: usize, v: &[f64], w: f64) {
        self.marks = Marks::All;
        let d = v.len();
        for (q, &x) in v.iter().enumerate() {
            let p = w * x;
            let pe = w.mul_add(x, -p);
            let (s, e) = two_sum(self.sums[from * d + q], -p);
            self.sums[from * d + q] = s;
            self.sums_err[from * d + q] += e - pe;
            self.sums[to * d + q] = p;
            self.sums_err[to * d + q] = pe;
        }
        let (s, e) = two_sum(self.weights[from], -w);
        self.weights[from] = s;
        self.weights_err[from] += e;
        self.weights[to] = w;
        self.weights_err[to] = 0.0;
    }
}

/// Adds `w_i · x_i` to the sums of cluster `labels[i]` and `w_i` to its
/// weight for every row of the block `x` (row-major `(rows, d)`); `w_i = 1`
/// when `sample_weight` is `None`. The clusters are split between threads.
///
/// # Panics
/// If a label is `>= n_clusters` or buffers are smaller than stated.
pub fn accumulate_block<T: Real>(
    x: &[T],
    d: usize,
    labels: &[u32],
    sample_weight: Option<&[f64]>,
    sums: &mut ClusterSums,
) {
    let k = sums.n_clusters();
    let parts = rayon::current_num_threads().clamp(1, k);
    let per = k.div_ceil(parts);
    sums.marks = Marks::All;
    let ClusterSums { sums, sums_err, weights, weights_err, .. } = sums;
    sums.par_chunks_mut(per * d)
        .zip(sums_err.par_chunks_mut(per * d))
        .zip(weights.par_chunks_mut(per))
        .zip(weights_err.par_chunks_mut(per))
        .enumerate()
        .for_each(|(p, (((s, se), w), we))| {
            accumulate_range(x, d, labels, sample_weight, (p * per) as u32, Range { s, se, w, we });
        });
}

/// Adds `w_i · x_i` and `w_i` to the sums of cluster `labels[i]` for every
/// row, one thread, in row order (the same bits as [`accumulate_block`]).
///
/// # Panics
/// If a label is `>= n_clusters` or buffers are smaller than stated.
pub fn accumulate_rows<T: Real>(
    x: &[T],
    d: usize,
    labels: &[u32],
    sample_weight: Option<&[f64]>,
    sums: &mut ClusterSums,
) {
    sums.marks = Marks::All;
    let ClusterSums { sums: s, sums_err: se, weights: w, weights_err: we, .. } = sums;
    accumulate_range(x, d, labels, sample_weight, 0, Range { s, se, w, we });
}

/// The sums of a range of clusters.
struct Range<'a> {
    s: &'a mut [f64],
    se: &'a mut [f64],
    w: &'a mut [f64],
    we: &'a mut [f64],
}

/// Adds the rows of `x` whose label lies in `[lo, lo + r.w.len())`, in row
/// order, to the sums `r` (indexed from `lo`).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
fn accumulate_range<T: Real>(x: &[T], d: usize, labels: &[u32], sample_weight: Option<&[f64]>, lo: u32, r: Range<'_>) {
    let Range { s, se, w, we } = r;
    let hi = lo + w.len() as u32;
    for (i, &l) in labels.iter().enumerate() {
        if l < lo || l >= hi {
            continue;
        }
        let j = (l - lo) as usize;
        let row = &x[i * d..(i + 1) * d];
        let (hs, es) = (&mut s[j * d..(j + 1) * d], &mut se[j * d..(j + 1) * d]);
        match sample_weight {
            None => {
                let (a, e) = two_sum(w[j], 1.0);
                (w[j], we[j]) = (a, we[j] + e);
                for ((h, er), v) in hs.iter_mut().zip(es.iter_mut()).zip(row) {
                    let (a, e) = two_sum(*h, v.to_f64());
                    *h = a;
                    *er += e;
                }
            }
            Some(sw) => {
                let wi = sw[i];
                let (a, e) = two_sum(w[j], wi);
                (w[j], we[j]) = (a, we[j] + e);
                for ((h, er), v) in hs.iter_mut().zip(es.iter_mut()).zip(row) {
                    let v = v.to_f64();
                    let p = wi * v;
                    let pe = wi.mul_add(v, -p);
                    let (a, e) = two_sum(*h, p);
                    *h = a;
                    *er += e + pe;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(x: &[f32], d: usize, labels: &[u32], w: &[f64], k: usize) -> (Vec<f64>, Vec<f64>) {
        let (mut s, mut c) = (vec![0.0; k * d], vec![0.0; k]);
        for (i, &l) in labels.iter().enumerate() {
            let l = l as usize;
            c[l] += w[i];
            for f in 0..d {
                s[l * d + f] += w[i] * f64::from(x[i * d + f]);
            }
        }
        (s, c)
    }

    #[test]
    fn plain_part_is_the_row_order_sum_and_splits_agree() {
        let (n, d, k) = (500, 3, 7);
        let x: Vec<f32> = (0..n * d).map(|i| (i as f32 * 0.37).sin()).collect();
        let labels: Vec<u32> = (0..n).map(|i| ((i * 31) % k) as u32).collect();
        let w: Vec<f64> = (0..n).map(|i| (i % 5) as f64 * 0.3).collect();
        let mut a = ClusterSums::new(k, d);
        accumulate_block(&x, d, &labels, Some(&w), &mut a);
        let (s, c) = naive(&x, d, &labels, &w, k);
        assert_eq!((&a.sums, &a.weights), (&s, &c));
        let mut b = ClusterSums::new(k, d);
        accumulate_rows(&x, d, &labels, Some(&w), &mut b);
        assert_eq!((a.sums, a.sums_err, a.weights, a.weights_err), (b.sums, b.sums_err, b.weights, b.weights_err));
    }

    #[test]
    fn means_are_exact_far_from_the_origin() {
        // 1e14 + small integers: plain float64 sums of n rows lose the units.
        let vals: Vec<f64> = (0..3000).map(|i| 1e14 + f64::from(i % 7)).collect();
        let labels = vec![0u32; vals.len()];
        let mut a = ClusterSums::new(1, 1);
        accumulate_rows(&vals, 1, &labels, None, &mut a);
        let exact = vals.iter().map(|v| v - 1e14).sum::<f64>() / vals.len() as f64 + 1e14;
        assert_eq!(a.mean(0, 0, 1), exact);
        assert_ne!(a.sums[0] / a.weights[0], exact, "the plain mean should miss (else the test proves nothing)");
        // Identical rows get exactly that row, weighted or not, split or not.
        for v in [0.1f64, -3.3e-7, 1e14 + 0.5, 0.0] {
            let x = vec![v; 1001];
            let labels = vec![0u32; 1001];
            let w: Vec<f64> = (0..1001).map(|i| 0.1 + f64::from(i % 3)).collect();
            for sw in [None, Some(&w[..])] {
                let (mut a, mut b) = (ClusterSums::new(1, 1), ClusterSums::new(1, 1));
                accumulate_rows(&x[..500], 1, &labels[..500], sw.map(|w| &w[..500]), &mut a);
                accumulate_rows(&x[500..], 1, &labels[500..], sw.map(|w| &w[500..]), &mut b);
                a.merge(&b);
                assert_eq!(a.mean(0, 0, 1), v, "{v} {}", sw.is_some());
            }
        }
    }

    #[test]
    fn moving_a_row_leaves_the_exact_remainder() {
        let x = [1e14 + 1.0, 1e14 + 2.0, 1e14 + 6.0];
        let mut a = ClusterSums::new(2, 1);
        accumulate_rows(&x, 1, &[0, 0, 0], None, &mut a);
        a.move_row(0, 1, &[1e14 + 6.0], 1.0);
        assert_eq!((a.mean(0, 0, 1), a.weight(0)), (1e14 + 1.5, 2.0));
        assert_eq!((a.mean(1, 0, 1), a.weight(1)), (1e14 + 6.0, 1.0));
    }

    /// Rows of one direction, any count and weights, with rows of zeros
    /// or not, give the same direction to the bit: the row over its
    /// largest magnitude.
    #[test]
    fn directions_do_not_depend_on_weights_or_rows_of_zeros() {
        let rows: [&[f64]; 4] = [&[0.5773502691896258; 3], &[0.1, -0.7, 0.3], &[-2.5, 1e-300, 0.0], &[0.0; 3]];
        for u in rows {
            let largest = u.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            let want: Vec<f64> = u.iter().map(|v| if largest > 0.0 { v / largest } else { 0.0 }).collect();
            for (n, zeros) in [(1, 0), (2, 0), (1000, 0), (7, 3), (999, 500)] {
                for weighted in [false, true] {
                    let mut x: Vec<f64> = u.repeat(n);
                    x.extend(std::iter::repeat_n(0.0, 3 * zeros));
                    let w: Vec<f64> =
                        (0..n + zeros).map(|i| if weighted { 0.1 + (i % 7) as f64 } else { 1.0 }).collect();
                    let mut a = ClusterSums::new(1, 3);
                    accumulate_rows(&x, 3, &vec![0; n + zeros], Some(&w), &mut a);
                    let mut got = [f64::NAN; 3];
                    a.direction(0, &mut got);
                    assert_eq!(got.map(f64::to_bits).to_vec(), want.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
                }
            }
        }
    }

    /// A float32 mean just above a midpoint of float32 values that float64
    /// rounds onto the midpoint: rounding twice (to float64, then to
    /// float32, ties to even) gives the lower neighbour; once, the upper.
    #[test]
    fn float32_means_are_rounded_once() {
        let x = [1.0f32, 1.0 + f32::EPSILON];
        let w = [1.0, 1.0 + 2f64.powi(-40)];
        let mut a = ClusterSums::new(1, 1);
        accumulate_rows(&x, 1, &[0, 0], Some(&w), &mut a);
        let (hi, lo) = a.mean_double(0, 0, 1);
        assert_eq!(hi, 1.0 + 2f64.powi(-24), "float64 rounds onto the midpoint");
        assert!(lo > 0.0);
        assert_eq!(hi as f32, 1.0, "rounding twice gives the lower neighbour (else the test proves nothing)");
        assert_eq!(a.mean_as::<f32>(0, 0, 1), 1.0 + f32::EPSILON);
        assert_eq!(a.mean_as::<f64>(0, 0, 1), hi);
        // Below the midpoint, and exactly on it (equal weights), stay down.
        let mut b = ClusterSums::new(1, 1);
        accumulate_rows(&x, 1, &[0, 0], Some(&[1.0 + 2f64.powi(-40), 1.0]), &mut b);
        assert_eq!(b.mean_as::<f32>(0, 0, 1), 1.0);
        let mut c = ClusterSums::new(1, 1);
        accumulate_rows(&x, 1, &[0, 0], None, &mut c);
        assert_eq!(c.mean_as::<f32>(0, 0, 1), 1.0);
    }
}
