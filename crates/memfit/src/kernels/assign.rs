//! Fused nearest-centre assignment with an exact answer: a fast candidate by
//! the GEMM identity ‖c‖² − 2x·c (register kernel or GEMM tiles, see
//! `argmin.rs`), certified by an error bound, and decided again from exact
//! differences in `f64` where the bound cannot tell the best two centres
//! apart. No `n_samples × n_clusters` matrix is ever held.
//!
//! # The guarantee
//! Each row's label is the index `j` minimising [`exact_sq_dist`]`(x, c_j)`,
//! Σ_f (x_f − c_jf)² computed in `f64` from the row's values and the `f64`
//! centres (for unit rows, [`unit_sq_dist`]: see below), the lowest index on
//! ties; the reported distance is that minimum.
//! So the label is the exact nearest centre unless two centres are tied
//! within `f64` rounding of the squared distances, and the result is the
//! same bits as [`assign_reference`] whatever the tiles, threads or SIMD path.
//!
//! # The bound
//! The fast path works in a kernel type K of unit roundoff `u`: `f32` for
//! narrow data (at most [`DIRECT_MAX_FEATURES`] features, whatever the data's
//! dtype: the certification below makes `f32` candidates exact, at twice
//! the `f64` speed), the compute type for wider data. It shifts rows and
//! centres to an origin `m` (the centres' mean, rounded to K) and computes,
//! for every centre, g_j = fl(n̂_j − 2 x̂·ĉ_j) in K with x̂ = fl(x − m),
//! ĉ_j = fl(c_j − m) and n̂_j = fl(‖ĉ_j‖²). The exact squared distance is
//! D_j = ‖x − m‖² + t_j with t_j = ‖c_j − m‖² − 2 (x − m)·(c_j − m), and the
//! ‖x − m‖² term is common to all centres. With X = ‖x − m‖,
//! R_j = ‖c_j − m‖ and C = max_j R_j:
//! - rounding x̂ and ĉ_j (relative `u` each, plus `u₆₄` where the
//!   subtraction is done in `f64` first) moves 2 x̂·ĉ_j by at most
//!   (2u + u₆₄)·2XR_j (Cauchy–Schwarz) and ‖ĉ_j‖² by (2u + 2u₆₄)R_j²;
//! - n̂_j is ‖ĉ_j‖² summed in `f64` (γ₆₄(d)) and rounded once (u);
//! - the dot product of `d` terms plus the norm, in any order with or
//!   without fused multiply-adds (GEMM), errs by at most
//!   γ(d+1)·(n̂_j + 2Σ|x̂ĉ|) (Higham, *Accuracy and Stability of Numerical
//!   Algorithms*, §3.1), with γ(n) = nu / (1 − nu).
//!
//! Summed and rounded up: |g_j − t_j| ≤ E_j = (γ(d + 6) + γ₆₄(d + 6))·(R_j + X)².
//! The `f64` distance D̃_j = [`exact_sq_dist`] errs by F_j ≤ γ₆₄(d + 6)·D_j + η
//! (η = [`underflow_slack`], what squares below `f64`'s smallest normal
//! lose; more for unit rows, [`PreparedCenters::slack`]) and
//! D_j ≤ (R_j + X)². Let β_j = E_j + F_j (inflated by 10⁻⁶ relative for
//! the rounding of X, R and the bound itself, plus an absolute 2(d + 6) times K's smallest normal for the fast path's underflow) and
//! τ = 2 max_j β_j:
//! - if the runner-up's g exceeds the best g_b by more than τ, then for
//!   every other centre D_j − D_b > F_j + F_b, so b is also the unique
//!   minimiser of D̃: the label is certified. A tighter τ for the row uses
//!   R_b and the fact that any centre within τ of g_b lies within
//!   X + √(D̃_b + 2.5τ) of the origin;
//! - otherwise g' is recomputed for every centre (also within E_j), and
//!   every centre with g'_j − β_j ≤ min_i (g'_i + β_i) is a candidate: the
//!   minimiser of D̃ and every centre tied with it are among them, so the
//!   smallest exact D̃ over the candidates, lowest index first, is the label
//!   the scan over all centres gives.
//!
//! Rows where (C + X)² could overflow K are always decided exactly.
//!
//! # Unit rows (cosine)
//! For rows and centres scaled to unit norm (cosine k-means; centres
//! prepared with `unit`), the distance decided on is [`unit_sq_dist`],
//! 1 + ‖x‖² − 2 x·c in `f64`: it ranks centres by their inner product with
//! the row, largest first and the lowest index on ties, as faiss's
//! spherical k-means does. [`exact_sq_dist`] would rank centres of equal
//! cosine (a row orthogonal to them, a row of zeros) by the rounding of
//! their norms. The fast path then works on g_j = fl(σ² − 2 x̂·ĉ_j) with
//! the origin at 0 (x̂ = fl(σx), ĉ_j = fl(σc_j)): σ² times the true
//! K_j − ‖x‖² = 1 − 2 x·c_j, within the bound above when every R_j is
//! taken as at least σ (which covers the constant; a centre of zeros, the
//! mean of rows of zeros, is then no special case). [`unit_sq_dist`] errs
//! from K_j by at most γ₆₄(d + 3)(1 + ‖x‖² + 2‖x‖‖c_j‖) (sums of `d`
//! products, two additions), an absolute term that joins η in β (see
//! [`PreparedCenters::slack`]), with max_j (‖c_j‖² − 1, 0), as K_j − D_j =
//! 1 − ‖c_j‖² where the bounds of bounded k-means relate it to the
//! Euclidean distance D_j. The per-row τ is not used: the uniform one is as
//! tight for centres of one norm. It assumes rows of norm at most 1 + 2⁻¹⁰
//! (unit rows and rows of zeros are) and centres of norm at most 1 + 2⁻¹⁰.
//!
//! # Scale
//! Rows and centres enter the fast path shifted and then multiplied by a
//! power of two σ chosen so that σC is near 1: x̂ = fl(σ(x − m)), ĉ_j =
//! fl(σ(c_j − m)). Multiplying by σ is exact, so every statement above holds
//! for the scaled values with t_j, R_j, X, C, D̃ and the bounds all in
//! scaled units (σ² t_j, σR_j, …): data of any magnitude (1e−30 or 1e30 as
//! well as 1) stay far from K's underflow and overflow, and the certificate
//! works as it does for data near 1. The exact distances are computed and
//! reported unscaled.
//!
//! References: scikit-learn's `_k_means_lloyd.pyx` (chunked GEMM + argmin);
//! scikit-learn #9354 (the identity's error far from the origin).

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use multiversion::multiversion;
use rayon::prelude::*;

use super::argmin::{direct_argmin, tile_argmin, Shift, LANES};
#[cfg(target_arch = "x86_64")]
use super::sq_avx512::sq_diff_lanes;
use crate::dtype::Real;

/// Elsewhere the portable loops run.
#[cfg(not(target_arch = "x86_64"))]
fn sq_diff_lanes<T>(_: &[T], _: &[f64], _: f64, _: &mut [f64; 8]) -> bool {
    false
}

/// Widest data (in features) assigned by the direct register kernel; wider
/// data go through faer's GEMM on tiles. Measured on 1,000,000 × d rows,
/// k = 200, f64, 2 threads (see BENCHMARKS.md): the direct kernel is several
/// times faster than GEMM + argmin for small d, where GEMM's inner dimension
/// is too short to amortise packing.
pub const DIRECT_MAX_FEATURES: usize = 16;

/// `γ(n) = n u / (1 − n u)`, Higham's bound on `n` roundings of unit
/// roundoff `u`; infinite when `n u ≥ 1/2`.
pub(super) fn gamma(n: usize, u: f64) -> f64 {
    let nu = n as f64 * u;
    if nu < 0.5 {
        nu / (1.0 - nu)
    } else {
        f64::INFINITY
    }
}

/// The constants of the error bound for the fast path's kernel type.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bound {
    /// (γ(d + 6) + 2γ₆₄(d + 6)) · (1 + 10⁻⁶): β_j = coef · (R_j + X)² + floor.
    coef: f64,
    /// The absolute term of β for underflow.
    pub(super) floor: f64,
    /// Above this, (R + X)² could overflow the kernel type.
    max: f64,
}

impl Bound {
    pub(super) fn new(d: usize, unit_roundoff: f64, min_positive: f64, max: f64) -> Self {
        Bound {
            coef: (gamma(d + 6, unit_roundoff) + 2.0 * gamma(d + 6, f64::EPSILON / 2.0)) * (1.0 + 1e-6),
            floor: 2.0 * (d + 6) as f64 * min_positive,
            max: max / 8.0,
        }
    }

    /// coef · s + floor for s ≥ (R + X)²; infinite where the fast path
    /// could overflow.
    #[inline]
    pub(super) fn at(&self, s: f64) -> f64 {
        if s > self.max {
            f64::INFINITY
        } else {
            self.coef * s + self.floor
        }
    }

    /// β for a centre at `radius` and a row at `x_norm` from the origin.
    #[inline]
    pub(super) fn beta(&self, radius: f64, x_norm: f64) -> f64 {
        self.at((radius + x_norm) * (radius + x_norm))
    }
}

/// `own` made a copy of `centers` (rows of `d` values), the rows shared
/// out between threads (a copy of wide centres is as long as a pass over
/// them).
fn copy_rows(own: &mut Vec<f64>, centers: &[f64], d: usize) {
    crate::memory::reserve_huge(own, centers.len());
    own.resize(centers.len(), 0.0);
    let rows = (centers.len() / d.max(1)).div_ceil(rayon::current_num_threads().max(1)).max(1);
    own.par_chunks_mut(rows * d.max(1))
        .zip(centers.par_chunks(rows * d.max(1)))
        .for_each(|(o, c)| o.copy_from_slice(c));
}

/// Centres prepared for assignment: the `f64` centres that distances are
/// exact against, and for the fast path their values shifted to an origin
/// (the centres' mean) in the kernel type, with squared norms: transposed
/// and padded to a multiple of [`LANES`] centres in `f32` for narrow data,
/// row-major in the compute type for wide data.
#[derive(Debug, Clone)]
pub struct PreparedCenters<T> {
    /// Row-major `(n_clusters, n_features)` centres in `f64`.
    pub centers: Vec<f64>,
    /// Number of centres.
    pub n_clusters: usize,
    /// Number of features.
    pub n_features: usize,
    /// The origin `m`, `(n_features,)`, a value of the kernel type.
    origin: Vec<f64>,
    /// σ, a power of two: the fast path works on σ(x − m) (see the module
    /// docs).
    scale: f64,
    /// Narrow data: `(n_features, padded_k)` row-major values `fl(c − m)`
    /// in `f32`; else empty.
    transposed: Vec<f32>,
    /// Narrow data: `fl(‖ĉ_j‖²)` in `f32`, padded with `+inf` (never
    /// chosen); else empty.
    padded_norms: Vec<f32>,
    /// Wide data: row-major `(n_clusters, n_features)` values `fl(c − m)`;
    /// else empty.
    values: Vec<T>,
    /// Wide data: `fl(‖ĉ_j‖²)`; else empty.
    sq_norms: Vec<T>,
    /// σR_j = σ‖c_j − m‖ per centre, in `f64`.
    radii: Vec<f64>,
    /// σC = max_j σR_j.
    radius: f64,
    bound: Bound,
    /// The centres prepared for sparse rows, made on first use.
    sparse: std::sync::OnceLock<super::SparseCenters>,
    /// Prepared for sparse rows only ([`PreparedCenters::for_sparse`]).
    sparse_only: bool,
    /// Unit rows and centres: distances are [`unit_sq_dist`].
    unit: bool,
    /// η of the exact distances, unscaled (see [`PreparedCenters::slack`]).
    slack: f64,
    /// Unit rows: max_j |1 − ‖c_j‖²| (widened), by which the exact
    /// distance K_j exceeds the Euclidean D_j at most; else 0.
    offset: f64,
}

impl<T: Real> PreparedCenters<T> {
    /// Prepares the `f64` centres `centers` (row-major `(k, d)`).
    ///
    /// # Panics
    /// If `centers.len() != k * d` or `k == 0`.
    pub fn new(centers: &[f64], k: usize, d: usize) -> Self {
        Self::build(centers, k, d, Self::empty(), false, false, None)
    }

    /// [`PreparedCenters::new`] for sparse rows only: the `f64` centres and
    /// [`PreparedCenters::sparse`], made now, without the dense kernels'
    /// values (for steps on sparse batches, where those would cost as much
    /// as the step). [`PreparedCenters::renew`] keeps this.
    ///
    /// # Panics
    /// As [`PreparedCenters::new`]; the dense kernels panic on these
    /// centres (a programming error).
    pub fn for_sparse(centers: &[f64], k: usize, d: usize) -> Self {
        Self::build(centers, k, d, Self::empty(), true, false, None)
    }

    /// [`PreparedCenters::for_sparse`] for sparse rows, else
    /// [`PreparedCenters::new`]: what a pass over rows of that kind reads;
    /// with `unit`, for unit rows and centres (cosine: distances are
    /// [`unit_sq_dist`], see the module docs).
    pub fn for_rows(centers: &[f64], k: usize, d: usize, sparse: bool, unit: bool) -> Self {
        Self::build(centers, k, d, Self::empty(), sparse, unit, None)
    }

    /// The same as [`PreparedCenters::new`] for new `centers` of the same
    /// shape, in `self`'s buffers (no allocation: a Lloyd iteration's
    /// centres of any size are prepared without mapping fresh pages); the
    /// centres for sparse rows are prepared again if `self` had them.
    pub fn renew(self, centers: &[f64]) -> Self {
        let (k, d, sparse_only, unit) = (self.n_clusters, self.n_features, self.sparse_only, self.unit);
        Self::build(centers, k, d, self, sparse_only, unit, None)
    }

    /// [`PreparedCenters::renew`] of centres prepared for sparse rows only
    /// ([`PreparedCenters::for_sparse`]), for rows whose stored values all
    /// lie in `columns` (strictly increasing): the transposed values of the
    /// other columns are left stale (see [`super::SparseCenters::renew`]).
    /// A step on a sparse batch renews only what its rows read.
    ///
    /// # Panics
    /// If these centres are not prepared for sparse rows only.
    pub fn renew_for_columns(self, centers: &[f64], columns: &[u32]) -> Self {
        assert!(self.sparse_only, "renew_for_columns on centres prepared for dense rows");
        let (k, d, unit) = (self.n_clusters, self.n_features, self.unit);
        Self::build(centers, k, d, self, true, unit, Some(columns))
    }

    /// No centres: buffers for [`PreparedCenters::build`].
    fn empty() -> Self {
        PreparedCenters {
            centers: Vec::new(),
            n_clusters: 0,
            n_features: 0,
            origin: Vec::new(),
            scale: 1.0,
            transposed: Vec::new(),
            padded_norms: Vec::new(),
            values: Vec::new(),
            sq_norms: Vec::new(),
            radii: Vec::new(),
            radius: 0.0,
            bound: Bound::new(0, 0.0, 0.0, 0.0),
            sparse: std::sync::OnceLock::new(),
            sparse_only: false,
            unit: false,
            slack: 0.0,
            offset: 0.0,
        }
    }

    /// Prepares `centers` in the buffers of `old` (for sparse rows only
    /// when `sparse_only`, then at `columns` only when given; for unit rows
    /// when `unit`).
    fn build(
        centers: &[f64],
        k: usize,
        d: usize,
        old: Self,
        sparse_only: bool,
        unit: bool,
        columns: Option<&[u32]>,
    ) -> Self {
        assert!(k > 0 && centers.len() == k * d);
        let (unit_slack, offset) = if unit { unit_error(centers, d) } else { (0.0, 0.0) };
        let slack = underflow_slack(d) + unit_slack;
        if sparse_only {
            let PreparedCenters { centers: mut own, mut sparse, .. } = old;
            copy_rows(&mut own, centers, d);
            let s = match sparse.take() {
                Some(s) => s.renew(centers, k, d, (slack, unit), columns),
                None => super::SparseCenters::new(centers, k, d, (slack, unit)),
            };
            return PreparedCenters {
                centers: own,
                n_clusters: k,
                n_features: d,
                sparse: std::sync::OnceLock::from(s),
                sparse_only,
                unit,
                slack,
                offset,
                ..Self::empty()
            };
        }
        let PreparedCenters {
            centers: mut own,
            mut origin,
            mut transposed,
            mut padded_norms,
            mut values,
            mut sq_norms,
            mut radii,
            mut sparse,
            ..
        } = old;
        let narrow = d <= DIRECT_MAX_FEATURES;
        let round = |v: f64| if narrow { f64::from(v as f32) } else { T::from_f64(v).to_f64() };
        // Any origin is valid; one that overflows the kernel type is not
        // useful. Each column summed over the centres in order, row by row
        // (the pool's threads take a share of the columns each).
        let threads = rayon::current_num_threads().max(1);
        origin.clear();
        origin.resize(d, -0.0f64);
        let columns = d.div_ceil(threads).max(1);
        origin.par_chunks_mut(columns).enumerate().for_each(|(b, o)| {
            let first = b * columns;
            let n = o.len();
            for c in centers.chunks_exact(d.max(1)) {
                o.iter_mut().zip(&c[first..first + n]).for_each(|(o, v)| *o += v);
            }
        });
        for o in origin.iter_mut() {
            let m = round(*o / k as f64);
            // Unit rows: the origin at 0 (see the module docs).
            *o = if m.is_finite() && !unit { m } else { 0.0 };
        }
        // The pool's threads take a share of the centres each.
        let per = k.div_ceil(threads).max(1);
        let spread = centers.par_chunks(per * d.max(1)).map(|c| largest_offset(c, &origin)).reduce(|| 0.0, f64::max);
        let scale = scale_for(spread);
        let o = &origin;
        let rows = || centers.chunks(d.max(1)).map(|c| shifted(c, o, scale));
        radii.clear();
        radii.resize(k, 0.0);
        let kp = Self::padded_k(k);
        for v in [&mut transposed, &mut padded_norms] {
            v.clear();
        }
        values.clear();
        sq_norms.clear();
        // Unit rows: every centre's g_j holds σ² (see the module docs).
        let least = if unit { scale } else { 0.0 };
        let mut bound = if narrow {
            radii.par_chunks_mut(per).zip(centers.par_chunks(per * d.max(1))).for_each(|(r, c)| {
                r.iter_mut().zip(c.chunks(d.max(1))).for_each(|(r, c)| *r = radius(shifted(c, o, scale)).max(least))
            });
            transposed.resize(d * kp, 0.0);
            padded_norms.resize(kp, f32::INFINITY);
            for (j, s) in rows().enumerate() {
                let mut norm = 0.0;
                for (f, v) in s.enumerate() {
                    let v = v as f32;
                    transposed[f * kp + j] = v;
                    norm += f64::from(v) * f64::from(v);
                }
                padded_norms[j] = if unit { (scale * scale) as f32 } else { norm as f32 };
            }
            Bound::new(d, f64::from(f32::EPSILON) / 2.0, f64::from(f32::MIN_POSITIVE), f64::from(f32::MAX))
        } else {
            values.resize(k * d, T::zero());
            sq_norms.resize(k, T::zero());
            values
                .par_chunks_mut(per * d)
                .zip(sq_norms.par_chunks_mut(per))
                .zip(radii.par_chunks_mut(per))
                .zip(centers.par_chunks(per * d))
                .for_each(|(((v, n), r), c)| {
                    // Each centre's radius (as [`radius`]), values and squared
                    // norm in one loop: two sums in order, whose latencies overlap.
                    for (((v, n), r), c) in v.chunks_exact_mut(d).zip(n).zip(r).zip(c.chunks_exact(d)) {
                        let (mut radius_sq, mut norm) = (-0.0f64, -0.0f64);
                        for (v, s) in v.iter_mut().zip(shifted(c, o, scale)) {
                            radius_sq += s * s;
                            *v = T::from_f64(s);
                            norm += v.to_f64().powi(2);
                        }
                        *r = radius_sq.sqrt().max(least);
                        *n = T::from_f64(if unit { scale * scale } else { norm });
                    }
                });
            Bound::new(d, T::UNIT_ROUNDOFF, T::MIN_POSITIVE, T::MAX)
        };
        // The exact distances' own error (underflow; unit rows' norms), in
        // scaled units.
        bound.floor += slack * scale * scale;
        copy_rows(&mut own, centers, d);
        let sparse = match sparse.take() {
            Some(s) => std::sync::OnceLock::from(s.renew(centers, k, d, (slack, unit), None)),
            None => std::sync::OnceLock::new(),
        };
        PreparedCenters {
            centers: own,
            n_clusters: k,
            n_features: d,
            origin,
            scale,
            transposed,
            padded_norms,
            values,
            sq_norms,
            radius: radii.iter().copied().fold(0.0, f64::max),
            radii,
            bound,
            sparse,
            sparse_only,
            unit,
            slack,
            offset,
        }
    }

    /// The centres prepared for sparse rows ([`super::assign_csr`]), made
    /// on first use ([`super::SparseCenters::bytes_for`] more bytes).
    pub fn sparse(&self) -> &super::SparseCenters {
        self.sparse.get_or_init(|| {
            super::SparseCenters::new(&self.centers, self.n_clusters, self.n_features, (self.slack, self.unit))
        })
    }

    /// Whether these centres are prepared for unit rows (cosine: see the
    /// module docs).
    pub fn is_unit(&self) -> bool {
        self.unit
    }

    /// η, an absolute bound (in the data's squared units) on how far the
    /// exact distance ([`PreparedCenters::exact_dist`]) may lie from the
    /// true one beyond its relative γ₆₄(d + 6) error: the squares'
    /// underflow ([`underflow_slack`]) and, for unit rows, the error of
    /// [`unit_sq_dist`] and how far below it the Euclidean distance may lie
    /// (see the module docs).
    pub fn slack(&self) -> f64 {
        self.slack
    }

    /// The distance the labels are decided on from a row to centre `j`:
    /// [`unit_sq_dist`] for unit rows, else [`exact_sq_dist`].
    #[inline(always)]
    pub fn exact_dist(&self, row: &[T], j: usize) -> f64 {
        decision_dist(self.unit, row, self.center(j))
    }

    /// `k` rounded up to a multiple of [`LANES`].
    pub fn padded_k(k: usize) -> usize {
        k.div_ceil(LANES) * LANES
    }

    /// Bytes held by centres prepared for `k` centres of `d` features in a
    /// compute type of `compute_bytes` bytes: the `f64` centres, radii and
    /// origin, and the fast path's values and norms (`f32` and padded for
    /// narrow data).
    pub fn bytes_for(k: usize, d: usize, compute_bytes: usize) -> u64 {
        let fast =
            if d <= DIRECT_MAX_FEATURES { Self::padded_k(k) * (d + 1) * 4 } else { (k * (d + 1) + d) * compute_bytes };
        ((k * (d + 1) + d) * 8 + fast) as u64
    }

    /// The `f64` centres, row-major `(n_clusters, n_features)`.
    pub fn centers(&self) -> &[f64] {
        &self.centers
    }

    /// Centre `j`'s `f64` values.
    #[inline]
    pub fn center(&self, j: usize) -> &[f64] {
        &self.centers[j * self.n_features..(j + 1) * self.n_features]
    }

    /// β_j for a row at distance `x_norm` from the origin: a bound on the
    /// errors of g_j and of the exact distance to centre `j` (see the
    /// module docs); infinite where the fast path could overflow.
    #[inline]
    fn beta(&self, j: usize, x_norm: f64) -> f64 {
        self.bound.beta(self.radii[j], x_norm)
    }

    /// The uniform τ = 2 · coef · s + 2 · floor for s ≥ (C + X)²; infinite
    /// where the fast path could overflow.
    #[inline]
    fn tau_uniform(&self, s: f64) -> f64 {
        2.0 * self.bound.at(s)
    }

    /// τ for a row at distance `x_norm` from the origin whose best centre is
    /// `best` at exact squared distance `dist`: the gap to the runner-up
    /// above which the label is certified (see the module docs).
    #[inline]
    fn tau(&self, x_norm: f64, best: usize, dist: f64) -> f64 {
        let uniform = self.tau_uniform((self.radius + x_norm) * (self.radius + x_norm));
        if uniform.is_infinite() || self.unit {
            return uniform;
        }
        let reach = x_norm + (dist + 2.5 * uniform).sqrt();
        let local = self.beta(best, x_norm) + self.bound.beta(reach, x_norm);
        uniform.min(local)
    }
}

/// An absolute bound on what underflow adds to the error of an
/// [`exact_sq_dist`] of `d` features: each square that falls below the
/// smallest normal `f64` errs by at most half the smallest subnormal,
/// 2⁻¹⁰⁷⁵ (sums of subnormals are exact), so `F ≤ γ₆₄(d + 6) D + d 2⁻¹⁰⁷⁵`;
/// rounded up to `2 (d + 6) 2⁻¹⁰⁷⁴`. Negligible unless the distances are
/// themselves near `f64`'s smallest values.
pub fn underflow_slack(d: usize) -> f64 {
    2.0 * (d + 6) as f64 * f64::from_bits(1)
}

/// For unit rows of norm at most 1 + 2⁻¹⁰ and `centers` (row-major, rows
/// of `d` values): the part of [`PreparedCenters::slack`] that
/// [`unit_sq_dist`] adds, max_j γ₆₄(d + 3)(1 + ‖x‖² + 2‖x‖‖c_j‖) +
/// max(‖c_j‖² − 1, 0), and max_j |1 − ‖c_j‖²| (see the module docs); each
/// ‖c_j‖² summed in `f64` and widened by that sum's error, the results
/// inflated by 10⁻⁶ relative for their own rounding.
fn unit_error(centers: &[f64], d: usize) -> (f64, f64) {
    let g = gamma(d + 3, f64::EPSILON / 2.0);
    let x = 1.0 + 1.0 / 1024.0;
    let (mut slack, mut offset) = (0.0f64, 0.0f64);
    for c in centers.chunks_exact(d.max(1)) {
        let n: f64 = c.iter().map(|v| v * v).sum();
        let (lo, hi) = (n * (1.0 - 2.0 * g), n * (1.0 + 2.0 * g));
        let r = hi.sqrt();
        slack = slack.max((g * (1.0 + x * x + 2.0 * x * r) + (hi - 1.0).max(0.0)) * (1.0 + 1e-6));
        offset = offset.max((1.0 - lo).abs().max((hi - 1.0).abs()) * (1.0 + 1e-6));
    }
    (slack, offset)
}

/// The power of two σ that brings a centre spread (largest coordinate
/// distance from the origin) near 1: 2^−e with 2^(e−1) ≤ spread < 2^e,
/// clamped so that σ and σ² stay normal `f64` values; 1 for a zero or
/// non-finite spread.
/// A centre's values shifted to `origin` and scaled: `(v − m) · scale`.
fn shifted<'a>(c: &'a [f64], origin: &'a [f64], scale: f64) -> impl Iterator<Item = f64> + 'a {
    c.iter().zip(origin).map(move |(v, m)| (v - m) * scale)
}

/// The largest `|v − m|` over the rows `c` (row-major, rows of
/// `origin.len()` values) and `origin`'s values `m`, 0 for none, found in
/// eight lanes: the largest of exact values, the same in any order.
fn largest_offset(c: &[f64], origin: &[f64]) -> f64 {
    let mut lanes = [0.0f64; 8];
    for row in c.chunks_exact(origin.len().max(1)) {
        let (rows8, origin8) = (row.chunks_exact(8), origin.chunks_exact(8));
        let (rest, origin_rest) = (rows8.remainder(), origin8.remainder());
        // A NaN offset is passed over, as `f64::max` passes it over.
        let larger = |lane: &mut f64, a: f64| *lane = if a > *lane { a } else { *lane };
        for (p, q) in rows8.zip(origin8) {
            for l in 0..8 {
                larger(&mut lanes[l], (p[l] - q[l]).abs());
            }
        }
        for (l, (v, m)) in rest.iter().zip(origin_rest).enumerate() {
            larger(&mut lanes[l], (v - m).abs());
        }
    }
    lanes.into_iter().fold(0.0, f64::max)
}

/// A centre's radius: the norm of its shifted values, summed in order.
fn radius(shifted: impl Iterator<Item = f64>) -> f64 {
    shifted.map(|v| v * v).sum::<f64>().sqrt()
}

pub(super) fn scale_for(spread: f64) -> f64 {
    if !(spread.is_finite() && spread > 0.0) {
        return 1.0;
    }
    let e = spread.log2().floor() as i32 + 1;
    2f64.powi(-e.clamp(-500, 500))
}

/// Per-thread buffers of [`assign_rows`] for tiles of up to `tile_rows` rows:
/// for narrow data the rows' gaps and one row's values for the exact
/// decision, in `f32`; for wide data the shifted rows, the
/// running best and runner-up, the GEMM products of `k_tile` centres, and
/// one row's values, in the compute type.
#[derive(Debug, Clone)]
pub struct Scratch<T> {
    narrow: Vec<f32>,
    wide: Vec<T>,
}

impl<T: Real> Scratch<T> {
    /// Buffers for tiles of `tile_rows` rows, `k` centres in tiles of
    /// `k_tile`, and `d` features.
    pub fn new(tile_rows: usize, k: usize, k_tile: usize, d: usize) -> Self {
        let (narrow, wide) = Self::lens(tile_rows, k, k_tile, d);
        Scratch { narrow: vec![0.0; narrow], wide: vec![T::default(); wide] }
    }

    /// Bytes of [`Scratch::new`]'s buffers for a compute type of
    /// `compute_bytes` bytes.
    pub fn bytes(tile_rows: usize, k: usize, k_tile: usize, d: usize, compute_bytes: usize) -> u64 {
        let (narrow, wide) = Self::lens(tile_rows, k, k_tile, d);
        (narrow * 4 + wide * compute_bytes) as u64
    }

    /// (`f32` elements, compute-type elements).
    fn lens(tile_rows: usize, k: usize, k_tile: usize, d: usize) -> (usize, usize) {
        if d <= DIRECT_MAX_FEATURES {
            (tile_rows + PreparedCenters::<T>::padded_k(k), 0)
        } else {
            (0, tile_rows * (2 + d + k_tile) + k)
        }
    }
}

/// Assigns each row of `x` (row-major `(rows, d)`, `rows <= tile_rows`) to its
/// nearest centre (see the module docs for the guarantee). Writes `labels[i]`
/// and `min_dist[i]` = Σ_f (x_if − c_lf)² computed in `f64`; with `second`,
/// also `second[i]`: a lower bound on the true squared distance from row `i`
/// to every other centre (see [`second_bound`]), for bounded k-means.
///
/// `scratch` must come from [`Scratch::new`] with at least `rows` tile rows
/// and the same `k_tile`.
///
/// # Panics
/// If the buffers are smaller than stated.
pub fn assign_rows<T: Real>(
    x: &[T],
    c: &PreparedCenters<T>,
    k_tile: usize,
    scratch: &mut Scratch<T>,
    labels: &mut [u32],
    min_dist: &mut [f64],
    second: Option<&mut [f64]>,
) {
    let (d, k) = (c.n_features, c.n_clusters);
    let rows = labels.len();
    let x = &x[..rows * d];
    if d <= DIRECT_MAX_FEATURES {
        let (gaps, buf) = scratch.narrow.split_at_mut(rows);
        direct_argmin(x, d, Shift { origin: &c.origin, scale: c.scale }, &c.transposed, &c.padded_norms, labels, gaps);
        certify(x, c, labels, gaps, min_dist, second, &mut |_, row, x_norm| refine_narrow(row, c, x_norm, buf));
    } else {
        let (best, rest) = scratch.wide.split_at_mut(rows);
        let (gaps, rest) = rest.split_at_mut(rows);
        let (xhat, rest) = rest.split_at_mut(rows * d);
        let (buf, tile) = rest.split_at_mut(k);
        shift_rows(x, &c.origin, c.scale, xhat);
        let lhs_t = MatRef::from_row_major_slice(xhat, rows, d).transpose();
        let mut j0 = 0;
        while j0 < k {
            let kt = k_tile.min(k - j0);
            let cen = MatRef::from_row_major_slice(&c.values[j0 * d..(j0 + kt) * d], kt, d);
            // dst is (kt × rows) column-major: row i's kt products are contiguous.
            let dst = MatMut::from_column_major_slice_mut(&mut tile[..kt * rows], kt, rows);
            matmul(dst, Accum::Replace, cen, lhs_t, T::from_f64(-2.0), Par::Seq);
            tile_argmin(&tile[..kt * rows], &c.sq_norms[j0..j0 + kt], j0, best, gaps, labels);
            j0 += kt;
        }
        for (g, b) in gaps.iter_mut().zip(best.iter()) {
            *g -= *b;
        }
        let xhat = &*xhat;
        // With one tile of centres, the tile still holds every product of
        // the row: g' is the tile's g, within the same bound.
        let products = (k <= k_tile).then(|| &tile[..k * rows]);
        certify(x, c, labels, gaps, min_dist, second, &mut |i, row, x_norm| {
            refine_wide(row, &xhat[i * d..(i + 1) * d], products.map(|p| &p[i * k..(i + 1) * k]), c, x_norm, buf)
        });
    }
}

/// `out = fl(σ(x − m))` row by row (`x` row-major with rows of
/// `origin.len()` values): the rows as the fast path sees them.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
fn shift_rows<T: Real>(x: &[T], origin: &[f64], scale: f64, out: &mut [T]) {
    for (o, row) in out.chunks_exact_mut(origin.len()).zip(x.chunks_exact(origin.len())) {
        for ((o, &v), &m) in o.iter_mut().zip(row).zip(origin) {
            *o = T::from_f64((v.to_f64() - m) * scale);
        }
    }
}

/// What decides a row the bound cannot certify: `(index in the tile, row,
/// x_norm)` to `(label, distance)`.
type Refine<'a, T> = &'a mut dyn FnMut(usize, &[T], f64) -> (u32, f64);

/// Checks each row's gap against τ, decides the rows it cannot certify with
/// `refine`, and writes the exact squared distance to the label.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
fn certify<T: Real, G: Real>(
    x: &[T],
    c: &PreparedCenters<T>,
    labels: &mut [u32],
    gaps: &[G],
    out: &mut [f64],
    second: Option<&mut [f64]>,
    refine: Refine<'_, T>,
) {
    // A const width lets the compiler unroll the per-row loops of narrow data.
    macro_rules! fixed {
        ($($n:literal)*) => {
            match c.n_features {
                $($n => certify_rows::<T, G, $n>(x, c, labels, gaps, out, second, refine),)*
                _ => certify_rows::<T, G, 0>(x, c, labels, gaps, out, second, refine),
            }
        };
    }
    fixed!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
}

/// [`certify`] for rows of `D` features (`D = 0`: any width).
#[inline(always)]
fn certify_rows<T: Real, G: Real, const D: usize>(
    x: &[T],
    c: &PreparedCenters<T>,
    labels: &mut [u32],
    gaps: &[G],
    out: &mut [f64],
    mut second: Option<&mut [f64]>,
    refine: Refine<'_, T>,
) {
    let d = if D == 0 { c.n_features } else { D };
    for (i, (label, o)) in labels.iter_mut().zip(out.iter_mut()).enumerate() {
        let row = &x[i * d..(i + 1) * d];
        // Scaled units (see the module docs) but for the reported distance.
        let x_sq = if D == 0 {
            // Wide rows: eight interleaved partial sums (a sum's error bound
            // is no larger than the sequential one's), so it vectorises.
            let mut acc = [0.0f64; 8];
            let (rows8, origin8) = (row.chunks_exact(8), c.origin.chunks_exact(8));
            let (rest, origin_rest) = (rows8.remainder(), origin8.remainder());
            if !sq_diff_lanes(row, &c.origin, c.scale, &mut acc) {
                for (p, q) in rows8.zip(origin8) {
                    for l in 0..8 {
                        let t = (p[l].to_f64() - q[l]) * c.scale;
                        acc[l] += t * t;
                    }
                }
            }
            for (l, (v, m)) in rest.iter().zip(origin_rest).enumerate() {
                let t = (v.to_f64() - m) * c.scale;
                acc[l] += t * t;
            }
            ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]))
        } else {
            let mut x_sq = 0.0;
            for (v, m) in row.iter().zip(&c.origin) {
                let t = (v.to_f64() - m) * c.scale;
                x_sq += t * t;
            }
            x_sq
        };
        *o = c.exact_dist(row, *label as usize);
        let gap = gaps[i].to_f64();
        // First the uniform τ with (C + X)² ≤ 2(C² + X²), which needs no
        // square root; then the row's own τ. NaN (overflow) fails both.
        let tau = c.tau_uniform(2.0 * (c.radius * c.radius + x_sq));
        let certified = gap > tau || gap > c.tau(x_sq.sqrt(), *label as usize, *o * c.scale * c.scale);
        if !certified {
            (*label, *o) = refine(i, row, x_sq.sqrt());
        }
        if let Some(s) = second.as_deref_mut() {
            // The gap's own rounding (one subtraction in G) taken off.
            // Back to unscaled units (an exact division unless it
            // underflows, when the margin is dropped).
            let margin = if certified { gap * (1.0 - 2.0 * G::UNIT_ROUNDOFF) - tau } else { f64::NEG_INFINITY };
            // Unit rows: distances K_j run up to `offset` above the
            // Euclidean D_j (a centre of zeros: 1), so D_j − D_b may be
            // 2·offset below K_j − K_b (see the module docs).
            let margin = margin / (c.scale * c.scale) - 2.0 * c.offset;
            let margin = if margin >= f64::MIN_POSITIVE { margin } else { f64::NEG_INFINITY };
            s[i] = second_bound(*o, margin, d, c.slack + c.offset);
        }
    }
}

/// A lower bound on the true squared distance from a row to every centre
/// but its label, from the label's exact distance `dist` (D̃_b, the
/// [`PreparedCenters::exact_dist`] minimum over centres) and, for a row the
/// fast path certified, `margin` ≤ (g₂ − g_b) − τ: its runner-up's g minus
/// the best's (its rounding taken off) minus the uniform τ = 2 max_j β_j
/// (−∞ or NaN otherwise); `d` features, η = `slack`
/// ([`PreparedCenters::slack`]).
///
/// With F_j ≤ γ₆₄(d + 6) D_j + η (the module docs), every centre has
/// D_j ≥ (D̃_j − η) / (1 + γ₆₄) ≥ (D̃_b − η) / (1 + γ₆₄) (b minimises D̃); a
/// certified row also has D_j − D_b = t_j − t_b ≥ (g_j − g_b) − (E_j + E_b)
/// ≥ margin for j ≠ b, so D_j ≥ (D̃_b − η) / (1 + γ₆₄) + margin. Each result is lowered by
/// the `f64` roundings that made it.
pub fn second_bound(dist: f64, margin: f64, d: usize, slack: f64) -> f64 {
    let own = (dist - slack) / (1.0 + gamma(d + 6, f64::EPSILON / 2.0)) * (1.0 - 4.0 * f64::EPSILON);
    if own.is_nan() {
        return 0.0;
    }
    let own = own.max(0.0);
    if margin > 0.0 && margin.is_finite() {
        own.max((own + margin) * (1.0 - 4.0 * f64::EPSILON))
    } else {
        own
    }
}

/// The exact decision for one row of narrow data at distance `x_norm` from
/// the origin: g' for every centre (in `f32`, as the direct kernel), then
/// [`decide`]. `buf` holds [`PreparedCenters::padded_k`] values.
#[inline(never)]
fn refine_narrow<T: Real>(row: &[T], c: &PreparedCenters<T>, x_norm: f64, buf: &mut [f32]) -> (u32, f64) {
    let g = &mut buf[..c.padded_norms.len()];
    let kp = g.len();
    g.copy_from_slice(&c.padded_norms);
    for ((&v, &m), col) in row.iter().zip(&c.origin).zip(c.transposed.chunks_exact(kp)) {
        let a = -2.0 * (((v.to_f64() - m) * c.scale) as f32);
        for (gv, &cv) in g.iter_mut().zip(col) {
            *gv += a * cv;
        }
    }
    decide(row, c, x_norm, &g[..c.n_clusters])
}

/// The exact decision for one row of wide data at distance `x_norm` from
/// the origin, `xhat` its shifted and scaled values in the compute type (as
/// the GEMM tile had them): g' for every centre, then [`decide`]. g' is
/// `n̂_j + tile_j` where the GEMM tile's products `−2 x̂·ĉ_j` of the row
/// for every centre are given (`tile`), else recomputed. `buf` holds
/// `n_clusters` values.
#[inline(never)]
fn refine_wide<T: Real>(
    row: &[T],
    xhat: &[T],
    tile: Option<&[T]>,
    c: &PreparedCenters<T>,
    x_norm: f64,
    buf: &mut [T],
) -> (u32, f64) {
    let g = &mut buf[..c.n_clusters];
    match tile {
        Some(p) => g.iter_mut().zip(p).zip(&c.sq_norms).for_each(|((g, &p), &n)| *g = n + p),
        None => products(xhat, &c.values, &c.sq_norms, g),
    }
    decide(row, c, x_norm, g)
}

/// g'_j = n̂_j − 2 x̂·ĉ_j for every centre (`values` row-major, one row of
/// `xhat.len()` per entry of `g`), each dot product in [`LANES`] interleaved
/// partial sums so that it vectorises: the bound holds for any order of
/// the sum (see the module docs).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
fn products<T: Real>(xhat: &[T], values: &[T], norms: &[T], g: &mut [T]) {
    let d = xhat.len();
    let (head, tail) = xhat.split_at(d / LANES * LANES);
    for ((g, cj), &n) in g.iter_mut().zip(values.chunks_exact(d)).zip(norms) {
        let (c_head, c_tail) = cj.split_at(head.len());
        let mut acc = [T::default(); LANES];
        for (p, q) in head.chunks_exact(LANES).zip(c_head.chunks_exact(LANES)) {
            for l in 0..LANES {
                acc[l] += p[l] * q[l];
            }
        }
        for (l, (&p, &q)) in tail.iter().zip(c_tail).enumerate() {
            acc[l] += p * q;
        }
        let mut width = LANES;
        while width > 1 {
            width /= 2;
            for l in 0..width {
                let v = acc[l + width];
                acc[l] += v;
            }
        }
        *g = n + T::from_f64(-2.0) * acc[0];
    }
}

/// From g' of every centre (see the module docs): the candidates j with
/// g'_j − β_j ≤ min_i (g'_i + β_i), then the smallest exact distance among
/// them, lowest index first; returns the label and its distance.
fn decide<T: Real, G: Real>(row: &[T], c: &PreparedCenters<T>, x_norm: f64, g: &[G]) -> (u32, f64) {
    // Survivors of the uniform bound first (cheap, and a superset of the
    // candidates since every β_j ≤ τ_C / 2), then the per-centre rule.
    let gmin = g.iter().map(|v| v.to_f64()).fold(f64::INFINITY, f64::min);
    let cut = gmin + c.tau_uniform((c.radius + x_norm) * (c.radius + x_norm));
    let survives = |v: G| {
        let out = v.to_f64() > cut;
        !out
    };
    let upper = g
        .iter()
        .enumerate()
        .filter(|&(_, &v)| survives(v))
        .map(|(j, v)| v.to_f64() + c.beta(j, x_norm))
        .fold(f64::INFINITY, f64::min);
    let (mut best, mut label) = (f64::INFINITY, 0);
    for (j, &v) in g.iter().enumerate() {
        let excluded = !survives(v) || v.to_f64() - c.beta(j, x_norm) > upper;
        if !excluded {
            let dist = c.exact_dist(row, j);
            if dist < best {
                best = dist;
                label = j as u32;
            }
        }
    }
    if best.is_infinite() {
        // Every candidate overflows: label 0, as the reference scan gives.
        (0, c.exact_dist(row, 0))
    } else {
        (label, best)
    }
}

/// Σ_f (x_f − c_f)² in `f64` for a row `x` of the compute type and an `f64`
/// centre `c`, summed in eight interleaved partial sums (so it vectorises)
/// combined in a fixed order.
#[inline(always)]
pub fn exact_sq_dist<T: Real>(x: &[T], c: &[f64]) -> f64 {
    let d = x.len();
    if d <= 8 {
        // One feature per partial sum: the same tree without its +0 terms,
        // which change no bit of a sum of squares (and fold away when the
        // width is a constant).
        let mut a = [0.0f64; 8];
        for f in 0..d {
            let t = x[f].to_f64() - c[f];
            a[f] = t * t;
        }
        let p01 = if d > 1 { a[0] + a[1] } else { a[0] };
        let p23 = if d > 3 { a[2] + a[3] } else { a[2] };
        let p45 = if d > 5 { a[4] + a[5] } else { a[4] };
        let p67 = if d > 7 { a[6] + a[7] } else { a[6] };
        let q0 = if d > 2 { p01 + p23 } else { p01 };
        let q1 = if d > 6 { p45 + p67 } else { p45 };
        return if d > 4 { q0 + q1 } else { q0 };
    }
    let mut acc = [0.0f64; 8];
    let (ca, cb) = (x.chunks_exact(8), c.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    // (x − c) · 1 is x − c exactly: the same bits as the loop below.
    if !sq_diff_lanes(x, c, 1.0, &mut acc) {
        for (p, q) in ca.zip(cb) {
            for l in 0..8 {
                let t = p[l].to_f64() - q[l];
                acc[l] += t * t;
            }
        }
    }
    for (l, (p, q)) in ra.iter().zip(rb).enumerate() {
        let t = p.to_f64() - q;
        acc[l] += t * t;
    }
    lane_sum(acc)
}

/// The eight interleaved partial sums of [`exact_sq_dist`] and
/// [`unit_sq_dist`] combined in their fixed order (a tree of pairs).
#[inline(always)]
pub(super) fn lane_sum(a: [f64; 8]) -> f64 {
    ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
}

/// The distance labels are decided on from a row `x` of the compute type
/// to an `f64` centre `c`: [`unit_sq_dist`] for unit rows (`unit`), else
/// [`exact_sq_dist`] (as [`PreparedCenters::exact_dist`] for its centres).
#[inline(always)]
pub fn decision_dist<T: Real>(unit: bool, x: &[T], c: &[f64]) -> f64 {
    if unit {
        unit_sq_dist(x, c)
    } else {
        exact_sq_dist(x, c)
    }
}

/// The squared distance of unit vectors from their inner product,
/// 1 + Σ_f x_f² − 2 Σ_f x_f c_f in `f64` for a row `x` of the compute type
/// and an `f64` centre `c` (0 where rounding takes it below 0): what cosine
/// k-means decides labels on (see the module docs). Each sum is taken in
/// eight interleaved partial sums, feature `f` in sum `f mod 8`, combined
/// in the order of [`exact_sq_dist`]'s; a feature where `x` is zero
/// changes neither sum, so a sparse row's stored values give the same bits
/// (`kernels::sparse`). Centres of equal inner product with the row (every
/// centre for a row of zeros) are at equal distances, whatever the
/// rounding of their norms.
#[inline(always)]
pub fn unit_sq_dist<T: Real>(x: &[T], c: &[f64]) -> f64 {
    let (mut xx, mut xc) = ([0.0f64; 8], [0.0f64; 8]);
    let (ca, cb) = (x.chunks_exact(8), c.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (p, q) in ca.zip(cb) {
        for l in 0..8 {
            let v = p[l].to_f64();
            xx[l] += v * v;
            xc[l] += v * q[l];
        }
    }
    for (l, (p, q)) in ra.iter().zip(rb).enumerate() {
        let v = p.to_f64();
        xx[l] += v * v;
        xc[l] += v * q;
    }
    unit_distance(xx, xc)
}

/// 1 + Σx² − 2 Σx·c from the eight partial sums of each (see
/// [`unit_sq_dist`]), 0 where rounding takes it below 0 (NaN stays NaN).
#[inline(always)]
pub(super) fn unit_distance(xx: [f64; 8], xc: [f64; 8]) -> f64 {
    let v = (1.0 + lane_sum(xx)) - 2.0 * lane_sum(xc);
    if v < 0.0 {
        0.0
    } else {
        v
    }
}

/// Assigns every row of a block (row-major `(rows, d)`) in parallel: the block
/// is cut into tiles of `tile_rows` rows, and tiles are dealt to
/// `scratch.len()` workers, each with its own scratch. Results do not depend
/// on the number of workers or the tile size.
///
/// # Panics
/// If buffers are smaller than stated.
pub fn assign_block<T: Real>(
    x: &[T],
    c: &PreparedCenters<T>,
    tile_rows: usize,
    k_tile: usize,
    scratch: &mut [Scratch<T>],
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
                assign_rows(&x[r0 * d..], c, k_tile, s, l, m, None);
            }
        });
}

/// Squared distances of every row of a block (row-major `(rows, d)`) to every
/// centre: `out` (row-major `(rows, n_clusters)`) receives
/// [`PreparedCenters::exact_dist`] for each pair, the values whose first
/// minimum [`assign_block`] reports.
/// Rows are dealt to the rayon pool; results do not depend on it.
///
/// # Panics
/// If `out` holds fewer than `rows × n_clusters` values.
pub fn sq_distances_block<T: Real>(x: &[T], c: &PreparedCenters<T>, out: &mut [f64]) {
    let (d, k) = (c.n_features, c.n_clusters);
    let rows = x.len() / d.max(1);
    out[..rows * k].par_chunks_mut(k * TILE_CHUNK).zip(x.par_chunks(d * TILE_CHUNK)).for_each(|(o, xs)| {
        for (orow, row) in o.chunks_exact_mut(k).zip(xs.chunks_exact(d)) {
            for (j, v) in orow.iter_mut().enumerate() {
                *v = c.exact_dist(row, j);
            }
        }
    });
}

/// Rows per parallel work item of [`sq_distances_block`].
const TILE_CHUNK: usize = 64;

/// Slow, obviously-correct twin of [`assign_rows`]: the exact distance
/// ([`PreparedCenters::exact_dist`]) to every centre, first minimum wins.
/// [`assign_rows`] gives the same bits.
pub fn assign_reference<T: Real>(x: &[T], c: &PreparedCenters<T>, labels: &mut [u32], min_dist: &mut [f64]) {
    let d = c.n_features;
    for i in 0..labels.len() {
        let row = &x[i * d..(i + 1) * d];
        let (mut bj, mut bv) = (0usize, f64::INFINITY);
        for j in 0..c.n_clusters {
            let v = c.exact_dist(row, j);
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

    /// Labels and distances of [`assign_block`] with the given tiles and workers.
    fn run<T: Real>(
        x: &[T],
        c: &PreparedCenters<T>,
        tile_rows: usize,
        k_tile: usize,
        workers: usize,
    ) -> (Vec<u32>, Vec<u64>) {
        let n = x.len() / c.n_features;
        let mut scratch: Vec<Scratch<T>> =
            (0..workers).map(|_| Scratch::new(tile_rows, c.n_clusters, k_tile, c.n_features)).collect();
        let (mut l, mut m) = (vec![0u32; n], vec![0f64; n]);
        assign_block(x, c, tile_rows, k_tile, &mut scratch, &mut l, &mut m);
        (l, m.iter().map(|v| v.to_bits()).collect())
    }

    fn reference<T: Real>(x: &[T], c: &PreparedCenters<T>) -> (Vec<u32>, Vec<u64>) {
        let n = x.len() / c.n_features;
        let (mut l, mut m) = (vec![0u32; n], vec![0f64; n]);
        assign_reference(x, c, &mut l, &mut m);
        (l, m.iter().map(|v| v.to_bits()).collect())
    }

    fn check<T: Real>(n: usize, d: usize, k: usize, tile_rows: usize, k_tile: usize, workers: usize) {
        let x: Vec<T> = random(n * d, 1, 10.0).iter().map(|&v| T::from_f64(v)).collect();
        let c = PreparedCenters::<T>::new(&random(k * d, 2, 10.0), k, d);
        assert_eq!(run(&x, &c, tile_rows, k_tile, workers), reference(&x, &c));
    }

    #[test]
    fn matches_reference_f64_ragged_tiles() {
        check::<f64>(1000, 3, 37, 64, 16, 3);
        check::<f64>(777, 17, 5, 100, 512, 2);
        check::<f64>(1, 1, 1, 256, 512, 4);
        check::<f64>(500, 40, 70, 33, 16, 2);
    }

    #[test]
    fn matches_reference_f32() {
        check::<f32>(2000, 8, 200, 256, 64, 2);
        check::<f32>(600, 24, 50, 256, 20, 2);
    }

    /// Data of any magnitude: rows and centres scaled by powers of ten (not of
    /// two, so the scaled values round anew), with exact ties from a grid.
    #[test]
    fn tiny_and_huge_data_match_reference() {
        for scale in [1e-150, 1e-30, 1e-12, 1.0, 1e12, 1e30, 1e150] {
            for d in [3, 40] {
                let grid: Vec<f64> = (0..600 * d).map(|i| ((i * 7) % 5) as f64 * scale).collect();
                let noisy: Vec<f64> = random(600 * d, 3, 10.0).iter().map(|v| v * scale).collect();
                let centres: Vec<f64> = random(12 * d, 4, 10.0).iter().map(|v| (v.round() / 2.0) * scale).collect();
                for x in [&grid, &noisy] {
                    let c = PreparedCenters::<f64>::new(&centres, 12, d);
                    assert_eq!(run(x, &c, 64, 8, 2), reference(x, &c), "scale {scale} d {d}");
                    // One tile of centres: close calls decided from the tile's products.
                    assert_eq!(run(x, &c, 64, 12, 2), reference(x, &c), "scale {scale} d {d}, one tile");
                    if (1e-30..=1e30).contains(&scale) {
                        let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
                        let c32 = PreparedCenters::<f32>::new(&centres, 12, d);
                        assert_eq!(run(&x32, &c32, 64, 8, 2), reference(&x32, &c32), "f32 scale {scale} d {d}");
                    }
                }
            }
        }
    }

    /// Distances that underflow `f64`: rows and centres within 1e-200 of each
    /// other (every exact distance is 0, so the lowest index wins) or 1e-161
    /// apart (distances of a few hundred subnormal units), narrow and wide:
    /// the fast path, whose scaled values are near 1, must not decide them.
    #[test]
    fn underflowing_distances_match_reference() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(29);
        for (scale, spread) in [(1e-200, 0.3e-200), (1e-161, 1e-161), (1e-162, 1e-162)] {
            for d in [3, 16, 17, 40] {
                let k = 10;
                let centres: Vec<f64> = (0..k * d).map(|_| rng.random_range(-1.0..1.0) * scale).collect();
                let mut x = Vec::new();
                for _ in 0..500 {
                    let j = rng.random_range(0..k);
                    x.extend((0..d).map(|f| centres[j * d + f] + spread * rng.random_range(-1.0..1.0)));
                }
                let c = PreparedCenters::<f64>::new(&centres, k, d);
                assert_eq!(run(&x, &c, 64, 8, 2), reference(&x, &c), "scale {scale} d {d}");
            }
        }
    }

    /// Case N1 (scikit-learn #9354): float32 rows 1e4 from the origin, centres
    /// 0.01 apart; the GEMM identity alone gave [0 0 2 2 0 2].
    #[test]
    fn n1_far_from_origin_f32() {
        let x: Vec<f32> = vec![1e4, 0.002, 1e4, 0.008, -1e4, 0.002, -1e4, 0.008, 10000.5, 0.002, -9999.25, 0.008];
        let c = PreparedCenters::<f32>::new(&[1e4, 0.0, 1e4, 0.01, -1e4, 0.0, -1e4, 0.01], 4, 2);
        let (labels, _) = run(&x, &c, 256, 4, 1);
        assert_eq!(labels, [0, 1, 2, 3, 0, 3]);
        assert_eq!((labels, run(&x, &c, 256, 4, 1).1), reference(&x, &c));
    }

    /// Case N1, float64: rows at ±1e6 + U(−1, 1), y ∈ {.002, .008}, centres
    /// (±1e6, 0) and (±1e6, .01), on the direct and the GEMM path.
    #[test]
    fn n1_far_from_origin_f64() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        for d in [2, 20] {
            let n = 2000;
            let mut x = vec![0.0f64; n * d];
            let mut want = Vec::new();
            for i in 0..n {
                let side = if i % 2 == 0 { 1e6 } else { -1e6 };
                let up = rng.random::<bool>();
                x[i * d] = side + rng.random_range(-1.0..1.0);
                x[i * d + 1] = if up { 0.008 } else { 0.002 };
                want.push(u32::from(side < 0.0) * 2 + u32::from(up));
            }
            let mut centers = vec![0.0; 4 * d];
            for (j, (cx, cy)) in [(1e6, 0.0), (1e6, 0.01), (-1e6, 0.0), (-1e6, 0.01)].into_iter().enumerate() {
                centers[j * d] = cx;
                centers[j * d + 1] = cy;
            }
            let c = PreparedCenters::<f64>::new(&centers, 4, d);
            let got = run(&x, &c, 256, 4, 2);
            assert_eq!(got.0, want, "d = {d}");
            assert_eq!(got, reference(&x, &c));
        }
    }

    /// Property: for random offsets (up to 1e7) and centre spacings (down to
    /// 1e-6), rows near the centres, any width and both dtypes, the labels and
    /// distances equal the float64 direct-difference reference bit for bit.
    #[test]
    fn random_offsets_and_spacings_match_reference() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        for case in 0..60 {
            let d = [1, 2, 3, 5, 16, 17, 33][case % 7];
            let k = rng.random_range(1..40);
            let offset = 10f64.powf(rng.random_range(0.0..7.0)) * if rng.random::<bool>() { 1.0 } else { -1.0 };
            let spacing = 10f64.powf(rng.random_range(-6.0..1.0));
            let centers: Vec<f64> = (0..k * d).map(|_| offset + spacing * rng.random_range(-1.0..1.0)).collect();
            let n = 300;
            let x64: Vec<f64> =
                (0..n * d).map(|i| centers[(i / d % k) * d + i % d] + spacing * rng.random_range(-1.0..1.0)).collect();
            let x32: Vec<f32> = x64.iter().map(|&v| v as f32).collect();
            let c64 = PreparedCenters::<f64>::new(&centers, k, d);
            let c32 = PreparedCenters::<f32>::new(&centers, k, d);
            assert_eq!(run(&x64, &c64, 64, 7, 2), reference(&x64, &c64), "f64 case {case}");
            assert_eq!(run(&x32, &c32, 64, 7, 2), reference(&x32, &c32), "f32 case {case}");
            assert_eq!(run(&x64, &c64, 64, k, 2), reference(&x64, &c64), "f64 case {case}, one tile");
            assert_eq!(run(&x32, &c32, 64, k, 2), reference(&x32, &c32), "f32 case {case}, one tile");
        }
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
            let mut scratch = vec![Scratch::new(256, k, k, d)];
            let (mut labels, mut dist) = (vec![7u32; 10], vec![0f64; 10]);
            assign_block(&x, &c, 256, k, &mut scratch, &mut labels, &mut dist);
            assert!(labels.iter().all(|&l| l == 0), "d = {d}: {labels:?}");
            assert!(dist.iter().all(|v| v.is_infinite()));
        }
    }

    #[test]
    fn portable_direct_kernel_matches_reference() {
        // On AVX-512 machines `assign_block` takes the hand-vectorised twin;
        // check the portable kernel (with the same certification) directly too.
        let (n, d, k) = (999, 3, 37);
        for offset in [0.0, 1e5] {
            let x: Vec<f64> = random(n * d, 5, 10.0).iter().map(|v| v + offset).collect();
            let centers: Vec<f64> = random(k * d, 6, 10.0).iter().map(|v| v + offset).collect();
            let c = PreparedCenters::<f64>::new(&centers, k, d);
            let (mut l, mut m) = (vec![0u32; n], vec![0f64; n]);
            let (mut g, mut buf) = (vec![0f32; n], vec![0f32; PreparedCenters::<f64>::padded_k(k)]);
            super::super::argmin::direct_fixed::<f64, 3>(
                &x,
                Shift { origin: &c.origin, scale: c.scale },
                &c.transposed,
                &c.padded_norms,
                &mut l,
                &mut g,
            );
            certify(&x, &c, &mut l, &g, &mut m, None, &mut |_, row, x_norm| refine_narrow(row, &c, x_norm, &mut buf));
            assert_eq!((l, m.iter().map(|v| v.to_bits()).collect::<Vec<_>>()), reference(&x, &c));
        }
    }

    /// The hand-vectorised twins of the direct kernel (AVX2, AVX-512; each
    /// where this CPU has it), certified as `assign_block` certifies them,
    /// give the reference's labels and distances: any width, centres not a
    /// multiple of a vector, rows far from the origin, and integer grids
    /// with many exact ties.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn vectorised_direct_kernels_match_reference() {
        type Twin = fn(&[f64], usize, Shift<'_>, &[f32], &[f32], &mut [u32], &mut [f32]) -> bool;
        let twins: [(&str, Twin); 2] =
            [("avx2", super::super::argmin_avx2::run::<f64>), ("avx512", super::super::argmin_avx512::run::<f64>)];
        for (name, twin) in twins {
            for (d, k, offset, grid) in
                [(1, 5, 0.0, false), (3, 37, 0.0, false), (3, 37, 1e5, false), (7, 200, 0.0, true), (16, 19, 3.0, true)]
            {
                let n = 999;
                let value = |v: f64| if grid { (v / 3.0).round() } else { v + offset };
                let x: Vec<f64> = random(n * d, 5, 10.0).iter().map(|&v| value(v)).collect();
                let centers: Vec<f64> = random(k * d, 6, 10.0).iter().map(|&v| value(v)).collect();
                let c = PreparedCenters::<f64>::new(&centers, k, d);
                let (mut l, mut m) = (vec![0u32; n], vec![0f64; n]);
                let (mut g, mut buf) = (vec![0f32; n], vec![0f32; PreparedCenters::<f64>::padded_k(k)]);
                let shift = Shift { origin: &c.origin, scale: c.scale };
                if !twin(&x, d, shift, &c.transposed, &c.padded_norms, &mut l, &mut g) {
                    continue; // not this CPU's
                }
                certify(&x, &c, &mut l, &g, &mut m, None, &mut |_, row, x_norm| {
                    refine_narrow(row, &c, x_norm, &mut buf)
                });
                let got = (l, m.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
                assert_eq!(got, reference(&x, &c), "{name}, d = {d}, k = {k}");
            }
        }
    }

    #[test]
    fn second_bound_is_below_every_other_centre_and_useful() {
        // Narrow (f32 fast path) and wide data, near and far from the origin.
        for (d, offset) in [(3, 0.0), (3, 1e5), (40, 0.0), (40, 1e4)] {
            let (n, k) = (700, 23);
            let x: Vec<f64> = random(n * d, 11, 10.0).iter().map(|v| v + offset).collect();
            let centers: Vec<f64> = random(k * d, 12, 10.0).iter().map(|v| v + offset).collect();
            let c = PreparedCenters::<f64>::new(&centers, k, d);
            let mut scratch = Scratch::new(n, k, k, d);
            let (mut l, mut m, mut second) = (vec![0u32; n], vec![0f64; n], vec![0f64; n]);
            assign_rows(&x, &c, k, &mut scratch, &mut l, &mut m, Some(&mut second));
            let mut useful = 0;
            for i in 0..n {
                let row = &x[i * d..(i + 1) * d];
                let other = (0..k)
                    .filter(|&j| j != l[i] as usize)
                    .map(|j| exact_sq_dist(row, c.center(j)))
                    .fold(f64::INFINITY, f64::min);
                // Below every other centre's distance (with room for its rounding).
                assert!(second[i] <= other * (1.0 + 1e-12), "d={d} row {i}: {} > {other}", second[i]);
                assert!(second[i] >= m[i] * (1.0 - 1e-9), "at least the label's own distance");
                useful += usize::from(second[i] > m[i] + 0.5 * (other - m[i]));
            }
            assert!(useful > n / 2, "d={d} offset={offset}: {useful} of {n} rows bound tightly");
        }
    }

    /// Unit rows of `d` features (`zeros` of them rows of zeros, the
    /// next `orthogonal` with values in the last column only) and `k` unit
    /// centres with zeros in the last column, so those rows are at equal
    /// cosine (0) to every centre, whose norms round differently.
    fn unit_rows(n: usize, d: usize, k: usize, zeros: usize, orthogonal: usize) -> (Vec<f64>, Vec<f64>) {
        let mut x = random(n * d, 21, 1.0);
        for (i, row) in x.chunks_exact_mut(d).enumerate() {
            if i < zeros {
                row.fill(0.0);
            } else if i < zeros + orthogonal {
                row[..d - 1].fill(0.0);
            }
            crate::kernels::unit_row(row);
        }
        let mut centers = random(k * d, 22, 1.0);
        for c in centers.chunks_exact_mut(d) {
            c[d - 1] = 0.0;
            crate::kernels::unit_row(c);
        }
        (x, centers)
    }

    #[test]
    fn unit_rows_rank_centres_by_inner_product_lowest_index_on_ties() {
        // Narrow (f32 fast path) and wide (GEMM) data, f64 and f32 rows.
        // A centre of zeros (the mean of rows of zeros) has inner product 0.
        for (d, k, zero_centre) in [(3, 5, false), (9, 7, false), (40, 33, false), (3, 5, true), (40, 33, true)] {
            let (n, zeros, orthogonal) = (600, 20, 30);
            let (x, mut centers) = unit_rows(n, d, k, zeros, orthogonal);
            if zero_centre {
                centers[2 * d..3 * d].fill(0.0);
            }
            let norms: Vec<f64> = centers.chunks_exact(d).map(|c| c.iter().map(|v| v * v).sum()).collect();
            assert!(norms.iter().any(|&v| v != norms[0]), "the test needs norms that round differently");
            let c = PreparedCenters::<f64>::for_rows(&centers, k, d, false, true);
            assert_eq!(run(&x, &c, 64, 16, 2), reference(&x, &c));
            let (labels, dist) = run(&x, &c, 64, 16, 2);
            for (i, row) in x.chunks_exact(d).enumerate() {
                let dots: Vec<f64> = (0..k).map(|j| row.iter().zip(c.center(j)).map(|(a, b)| a * b).sum()).collect();
                let best = dots.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                if i < zeros + orthogonal {
                    // Every cosine is 0: the lowest index, at distance 1 + ‖x‖².
                    assert_eq!(labels[i], 0, "d={d} row {i}");
                    let x_sq = if i < zeros { 0.0 } else { 1.0 };
                    assert_eq!(f64::from_bits(dist[i]), 1.0 + x_sq, "d={d} row {i}");
                } else {
                    assert!(dots[labels[i] as usize] >= best - 1e-12, "d={d} row {i}");
                }
            }
            let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            let c32 = PreparedCenters::<f32>::for_rows(&centers, k, d, false, true);
            assert_eq!(run(&x32, &c32, 100, 8, 3), reference(&x32, &c32));
            assert!(run(&x32, &c32, 100, 8, 3).0[..zeros + orthogonal].iter().all(|&l| l == 0));
            // The bounds' lower bound on every other centre holds for them.
            let mut scratch = Scratch::new(n, k, k, d);
            let (mut l, mut m, mut second) = (vec![0u32; n], vec![0f64; n], vec![0f64; n]);
            assign_rows(&x, &c, k, &mut scratch, &mut l, &mut m, Some(&mut second));
            for (i, row) in x.chunks_exact(d).enumerate() {
                let other = (0..k)
                    .filter(|&j| j != l[i] as usize)
                    .map(|j| exact_sq_dist(row, c.center(j)))
                    .fold(f64::INFINITY, f64::min);
                assert!(second[i] <= other, "d={d} row {i}: {} > {other}", second[i]);
            }
        }
    }

    #[test]
    fn distance_matrix_minimum_is_the_label() {
        for (d, offset) in [(3, 1e6), (20, 0.0)] {
            let (n, k) = (500, 30);
            let x: Vec<f32> = random(n * d, 7, 3.0).iter().map(|v| (v + offset) as f32).collect();
            let centers: Vec<f64> = random(k * d, 8, 3.0).iter().map(|v| v + offset).collect();
            let c = PreparedCenters::<f32>::new(&centers, k, d);
            let mut all = vec![0.0; n * k];
            sq_distances_block(&x, &c, &mut all);
            let (labels, dist) = run(&x, &c, 64, 16, 2);
            for i in 0..n {
                let row = &all[i * k..(i + 1) * k];
                let first_min = (0..k).fold(0, |b, j| if row[j] < row[b] { j } else { b });
                assert_eq!((first_min as u32, row[first_min].to_bits()), (labels[i], dist[i]));
            }
        }
    }

    /// The narrow path of [`exact_sq_dist`] gives the bits of the eight
    /// interleaved partial sums.
    #[test]
    fn exact_sq_dist_narrow_path_is_bitwise_the_tree() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(12);
        for d in 1..=8 {
            for _ in 0..1000 {
                let scale = 10f64.powf(rng.random_range(-30.0..30.0));
                let x: Vec<f64> = (0..d).map(|_| rng.random_range(-1.0..1.0) * scale).collect();
                let c: Vec<f64> = (0..d).map(|_| rng.random_range(-1.0..1.0) * scale).collect();
                let mut acc = [0.0f64; 8];
                for f in 0..d {
                    acc[f] += (x[f] - c[f]) * (x[f] - c[f]);
                }
                let tree = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
                assert_eq!(exact_sq_dist(&x, &c).to_bits(), tree.to_bits());
            }
        }
    }

    /// Every centre twice over: each row's best two are tied, so every row
    /// is decided again, from the tile's products when the centres fit in
    /// one tile and from recomputed ones otherwise; the lowest index wins.
    #[test]
    fn tied_centres_match_reference_in_one_tile_or_several() {
        let (n, d, k) = (500, 24, 16);
        let half = random(k / 2 * d, 5, 3.0);
        let centres: Vec<f64> = half.iter().chain(&half).copied().collect();
        let x64 = random(n * d, 6, 3.0);
        let x32: Vec<f32> = x64.iter().map(|&v| v as f32).collect();
        let (c64, c32) = (PreparedCenters::<f64>::new(&centres, k, d), PreparedCenters::<f32>::new(&centres, k, d));
        for k_tile in [k, 5] {
            let (labels, dist) = run(&x64, &c64, 64, k_tile, 2);
            assert!(labels.iter().all(|&l| (l as usize) < k / 2));
            assert_eq!((labels, dist), reference(&x64, &c64), "f64, k_tile {k_tile}");
            assert_eq!(run(&x32, &c32, 64, k_tile, 2), reference(&x32, &c32), "f32, k_tile {k_tile}");
        }
    }

    #[test]
    fn workers_and_tiles_do_not_change_results() {
        for d in [5, 30] {
            let (n, k) = (3000, 50);
            let x = random(n * d, 3, 5.0);
            let c = PreparedCenters::<f64>::new(&random(k * d, 4, 5.0), k, d);
            let first = run(&x, &c, 128, 32, 1);
            for (tile, workers) in [(128, 2), (7, 7), (256, 3)] {
                assert_eq!(run(&x, &c, tile, 32, workers), first);
            }
        }
    }
}
