//! Fused nearest-centre assignment with an exact answer: a fast candidate by
//! the GEMM identity ‖c‖² − 2x·c on tiles (faer, or a register kernel for
//! narrow data), certified by an error bound, and decided again from exact
//! differences in `f64` where the bound cannot tell the best two centres
//! apart. No `n_samples × n_clusters` matrix is ever held.
//!
//! # The guarantee
//! Each row's label is the index `j` minimising [`exact_sq_dist`]`(x, c_j)`,
//! Σ_f (x_f − c_jf)² computed in `f64` from the row's values and the `f64`
//! centres, the lowest index on ties; the reported distance is that minimum.
//! So the label is the exact nearest centre unless two centres are tied
//! within `f64` rounding of the squared distances, and the result is the
//! same bits as [`assign_reference`] whatever the tiles, threads or SIMD path.
//!
//! # The bound
//! The fast path shifts rows and centres to an origin `m` (the centres' mean,
//! rounded to the compute type `T` of unit roundoff `u`) and computes, for
//! every centre, g_j = fl(n̂_j − 2 x̂·ĉ_j) in `T` with x̂ = fl(x − m),
//! ĉ_j = fl(c_j − m) and n̂_j = fl(‖ĉ_j‖²). The exact squared distance is
//! D_j = ‖x − m‖² + t_j with t_j = ‖c_j − m‖² − 2 (x − m)·(c_j − m), and the
//! ‖x − m‖² term is common to all centres. With X = ‖x − m‖ and
//! C = max_j ‖c_j − m‖:
//! - rounding x̂ and ĉ_j (relative `u` each, plus `u₆₄` for the `f64`
//!   subtraction of `c_j − m`) moves 2 x̂·ĉ_j by at most (2u + u₆₄)·2XC
//!   (Cauchy–Schwarz) and ‖ĉ_j‖² by (2u + 2u₆₄)C²;
//! - n̂_j is ‖ĉ_j‖² summed in `f64` (γ₆₄(d)) and rounded once (u);
//! - the dot product of `d` terms plus the norm, in any order with or
//!   without fused multiply-adds (GEMM), errs by at most γ(d+1)·(n̂_j + 2Σ|x̂ĉ|)
//!   (Higham, *Accuracy and Stability of Numerical Algorithms*, §3.1),
//!   with γ(n) = nu / (1 − nu).
//!
//! Summed and rounded up: |g_j − t_j| ≤ E = (γ(d + 6) + γ₆₄(d + 6))·(C + X)².
//! The `f64` distance D̃_j = [`exact_sq_dist`] errs by F ≤ γ₆₄(d + 6)·D_j and
//! D_j ≤ (C + X)². With τ = 2(E + F) (inflated by 10⁻⁶ relative for the
//! rounding of X, C and τ themselves, plus an absolute 4(d + 6) times the
//! smallest normal of `T` for underflow):
//! - if the second-best g exceeds the best g_b by more than τ, then for
//!   every other centre D_j − D_b > 2F, so b is also the unique minimiser of
//!   D̃: the label is certified;
//! - otherwise every centre with g'_j ≤ min g' + τ (g' recomputed in `f64`
//!   from the same x̂, ĉ, n̂, also within E) is a candidate: the minimiser of
//!   D̃ and every centre tied with it are among them, so taking the exact
//!   D̃ over the candidates, lowest index first, gives the same label as over
//!   all centres.
//!
//! Rows where (C + X)² could overflow `T` are always decided exactly.
//!
//! References: scikit-learn's `_k_means_lloyd.pyx` (chunked GEMM + argmin);
//! scikit-learn #9354 (the identity's error far from the origin).

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

/// `γ(n) = n u / (1 − n u)`, Higham's bound on `n` roundings of unit
/// roundoff `u`; infinite when `n u ≥ 1/2`.
fn gamma(n: usize, u: f64) -> f64 {
    let nu = n as f64 * u;
    if nu < 0.5 {
        nu / (1.0 - nu)
    } else {
        f64::INFINITY
    }
}

/// Centres prepared for assignment: the `f64` centres that distances are
/// exact against, and for the fast path their values shifted to an origin
/// (the centres' mean) in the compute type, with squared norms; for narrow
/// data also a transposed copy padded to a multiple of [`LANES`] centres.
#[derive(Debug, Clone)]
pub struct PreparedCenters<T> {
    /// Row-major `(n_clusters, n_features)` centres in `f64`.
    pub centers: Vec<f64>,
    /// Number of centres.
    pub n_clusters: usize,
    /// Number of features.
    pub n_features: usize,
    /// The origin `m`: the centres' mean rounded to `T`, `(n_features,)`.
    origin: Vec<T>,
    /// Row-major `(n_clusters, n_features)` values `fl(c − m)`.
    values: Vec<T>,
    /// `‖c_j − m‖²` per centre, computed in `f64` and rounded.
    sq_norms: Vec<T>,
    /// `(n_features, padded_k)` row-major transposed values when
    /// `n_features <= DIRECT_MAX_FEATURES`, else empty.
    transposed: Vec<T>,
    /// Norms padded with `+inf` to `padded_k` (never chosen), or empty.
    padded_norms: Vec<T>,
    /// R_j = ‖c_j − m‖ per centre, in `f64`.
    radii: Vec<f64>,
    /// C = max_j R_j.
    radius: f64,
    /// (γ(d + 6) + 2γ₆₄(d + 6)) · (1 + 10⁻⁶): β_j = coef · (R_j + X)² + floor / 2.
    coef: f64,
    /// The absolute term of τ for underflow.
    floor: f64,
}

impl<T: Real> PreparedCenters<T> {
    /// Prepares the `f64` centres `centers` (row-major `(k, d)`).
    ///
    /// # Panics
    /// If `centers.len() != k * d` or `k == 0`.
    pub fn new(centers: &[f64], k: usize, d: usize) -> Self {
        assert!(k > 0 && centers.len() == k * d);
        let origin: Vec<T> =
            (0..d).map(|f| T::from_f64(centers.iter().skip(f).step_by(d.max(1)).sum::<f64>() / k as f64)).collect();
        let shifted = |c: &[f64]| c.iter().zip(&origin).map(|(v, m)| v - m.to_f64()).collect::<Vec<f64>>();
        let mut values = Vec::with_capacity(k * d);
        let mut sq_norms = Vec::with_capacity(k);
        let mut radii = Vec::with_capacity(k);
        for c in centers.chunks(d.max(1)).take(k) {
            let s = shifted(c);
            radii.push(s.iter().map(|v| v * v).sum::<f64>().sqrt());
            let v: Vec<T> = s.iter().map(|&v| T::from_f64(v)).collect();
            sq_norms.push(T::from_f64(v.iter().map(|v| v.to_f64() * v.to_f64()).sum()));
            values.extend(v);
        }
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
        let coef = (gamma(d + 6, T::UNIT_ROUNDOFF) + 2.0 * gamma(d + 6, f64::EPSILON / 2.0)) * (1.0 + 1e-6);
        PreparedCenters {
            centers: centers.to_vec(),
            n_clusters: k,
            n_features: d,
            origin,
            values,
            sq_norms,
            transposed,
            padded_norms,
            radius: radii.iter().copied().fold(0.0, f64::max),
            radii,
            coef,
            floor: 4.0 * (d + 6) as f64 * T::MIN_POSITIVE,
        }
    }

    /// `k` rounded up to a multiple of [`LANES`].
    pub fn padded_k(k: usize) -> usize {
        k.div_ceil(LANES) * LANES
    }

    /// Bytes held by centres prepared for `k` centres of `d` features in a
    /// compute type of `compute_bytes` bytes: the `f64` centres and radii,
    /// the shifted values, norms and origin, and the padded transposed copy
    /// for narrow data.
    pub fn bytes_for(k: usize, d: usize, compute_bytes: usize) -> u64 {
        let direct = if d <= DIRECT_MAX_FEATURES { Self::padded_k(k) * (d + 1) } else { 0 };
        (k * (d + 1) * 8 + (k * (d + 1) + d + direct) * compute_bytes) as u64
    }

    /// Elements (of the compute type) of per-thread scratch [`assign_rows`]
    /// needs for tiles of `tile_rows` rows, `k` centres in tiles of `k_tile`
    /// and `d` features: the gaps and one row's values for the exact
    /// decision, and for the GEMM path the shifted rows, the running best
    /// and the products.
    pub fn scratch_len(tile_rows: usize, k: usize, k_tile: usize, d: usize) -> usize {
        let common = tile_rows + Self::padded_k(k);
        if d <= DIRECT_MAX_FEATURES {
            common
        } else {
            common + tile_rows * (1 + d + k_tile)
        }
    }

    /// Centre `j`'s `f64` values.
    #[inline]
    fn center(&self, j: usize) -> &[f64] {
        &self.centers[j * self.n_features..(j + 1) * self.n_features]
    }

    /// β_j for a row at distance `x_norm` from the origin: a bound on the
    /// errors of g_j and of the exact distance to centre `j` (see the
    /// module docs); infinite where the fast path could overflow.
    #[inline]
    fn beta(&self, j: usize, x_norm: f64) -> f64 {
        let s = (self.radii[j] + x_norm) * (self.radii[j] + x_norm);
        if s > T::MAX / 8.0 {
            f64::INFINITY
        } else {
            self.coef * s + 0.5 * self.floor
        }
    }

    /// The uniform τ = 2 · coef · s + floor for s ≥ (C + X)²; infinite where
    /// the fast path could overflow.
    #[inline]
    fn tau_uniform(&self, s: f64) -> f64 {
        if s > T::MAX / 8.0 {
            f64::INFINITY
        } else {
            2.0 * self.coef * s + self.floor
        }
    }

    /// τ for a row at distance `x_norm` from the origin whose best centre is
    /// `best` at exact squared distance `dist`: the gap to the runner-up
    /// above which the label is certified (see the module docs).
    #[inline]
    fn tau(&self, x_norm: f64, best: usize, dist: f64) -> f64 {
        let uniform = self.tau_uniform((self.radius + x_norm) * (self.radius + x_norm));
        if uniform.is_infinite() {
            return uniform;
        }
        let reach = x_norm + (dist + 2.5 * uniform).sqrt();
        let local = self.beta(best, x_norm) + self.coef * (reach + x_norm) * (reach + x_norm) + 0.5 * self.floor;
        uniform.min(local)
    }
}

/// Assigns each row of `x` (row-major `(rows, d)`, `rows <= tile_rows`) to its
/// nearest centre (see the module docs for the guarantee). Writes `labels[i]`
/// and `min_dist[i]` = Σ_f (x_if − c_lf)² computed in `f64`.
///
/// `scratch` needs [`PreparedCenters::scratch_len`]`(rows, k_tile, d)` elements.
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
    let (gaps, rest) = scratch.split_at_mut(rows);
    let (buf, rest) = rest.split_at_mut(PreparedCenters::<T>::padded_k(c.n_clusters));
    if d <= DIRECT_MAX_FEATURES {
        direct_argmin(x, d, &c.origin, &c.transposed, &c.padded_norms, labels, gaps);
    } else {
        let (best, rest) = rest.split_at_mut(rows);
        let (xhat, tile) = rest.split_at_mut(rows * d);
        for (o, row) in xhat.chunks_exact_mut(d).zip(x.chunks_exact(d)) {
            for ((o, &v), &m) in o.iter_mut().zip(row).zip(&c.origin) {
                *o = v - m;
            }
        }
        let lhs_t = MatRef::from_row_major_slice(xhat, rows, d).transpose();
        let mut j0 = 0;
        while j0 < c.n_clusters {
            let kt = k_tile.min(c.n_clusters - j0);
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
    }
    certify(x, c, labels, gaps, min_dist, buf);
}

/// Checks each row's gap against τ, decides the rows it cannot certify from
/// exact differences, and writes the exact squared distance to the label.
/// `buf` holds [`PreparedCenters::padded_k`] values for [`refine`].
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
fn certify<T: Real>(x: &[T], c: &PreparedCenters<T>, labels: &mut [u32], gaps: &[T], out: &mut [f64], buf: &mut [T]) {
    // A const width lets the compiler unroll the per-row loops of narrow data.
    macro_rules! fixed {
        ($($n:literal)*) => {
            match c.n_features {
                $($n => certify_rows::<T, $n>(x, c, labels, gaps, out, buf),)*
                _ => certify_rows::<T, 0>(x, c, labels, gaps, out, buf),
            }
        };
    }
    fixed!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
}

/// [`certify`] for rows of `D` features (`D = 0`: any width).
#[inline(always)]
fn certify_rows<T: Real, const D: usize>(
    x: &[T],
    c: &PreparedCenters<T>,
    labels: &mut [u32],
    gaps: &[T],
    out: &mut [f64],
    buf: &mut [T],
) {
    let d = if D == 0 { c.n_features } else { D };
    for (i, (label, o)) in labels.iter_mut().zip(out.iter_mut()).enumerate() {
        let row = &x[i * d..(i + 1) * d];
        let x_sq: f64 = row
            .iter()
            .zip(&c.origin)
            .map(|(v, m)| {
                let t = v.to_f64() - m.to_f64();
                t * t
            })
            .sum();
        *o = exact_sq_dist(row, c.center(*label as usize));
        let gap = gaps[i].to_f64();
        // First the uniform τ with (C + X)² ≤ 2(C² + X²), which needs no
        // square root; then the row's own τ. NaN (overflow) fails both.
        let certified =
            gap > c.tau_uniform(2.0 * (c.radius * c.radius + x_sq)) || gap > c.tau(x_sq.sqrt(), *label as usize, *o);
        if !certified {
            (*label, *o) = refine(row, c, x_sq.sqrt(), buf);
        }
    }
}

/// The exact decision for one row at distance `x_norm` from the origin (see
/// the module docs): g' for every centre in `buf`, the candidates j with
/// g'_j − β_j ≤ min_i (g'_i + β_i), then the smallest exact distance among
/// them, lowest index first; returns the label and its distance.
#[inline(never)]
fn refine<T: Real>(row: &[T], c: &PreparedCenters<T>, x_norm: f64, buf: &mut [T]) -> (u32, f64) {
    let (d, k) = (c.n_features, c.n_clusters);
    let g = &mut buf[..PreparedCenters::<T>::padded_k(k)];
    let minus_two = T::from_f64(-2.0);
    if d <= DIRECT_MAX_FEATURES {
        let kp = g.len();
        g.copy_from_slice(&c.padded_norms);
        for ((&xv, &m), col) in row.iter().zip(&c.origin).zip(c.transposed.chunks_exact(kp)) {
            let a = minus_two * (xv - m);
            for (v, &cv) in g.iter_mut().zip(col) {
                *v += a * cv;
            }
        }
    } else {
        for (j, v) in g[..k].iter_mut().enumerate() {
            let cj = &c.values[j * d..(j + 1) * d];
            let mut dot = T::default();
            for ((&xv, &m), &cv) in row.iter().zip(&c.origin).zip(cj) {
                dot += (xv - m) * cv;
            }
            *v = c.sq_norms[j] + minus_two * dot;
        }
    }
    // Survivors of the uniform bound first (cheap, and a superset of the
    // candidates since every β_j ≤ τ_C / 2), then the per-centre rule.
    let g = &g[..k];
    let gmin = g.iter().map(|v| v.to_f64()).fold(f64::INFINITY, f64::min);
    let cut = gmin + c.tau_uniform((c.radius + x_norm) * (c.radius + x_norm));
    let survives = |v: T| {
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
            let dist = exact_sq_dist(row, c.center(j));
            if dist < best {
                best = dist;
                label = j as u32;
            }
        }
    }
    if best.is_infinite() {
        // Every candidate overflows: label 0, as the reference scan gives.
        (0, exact_sq_dist(row, c.center(0)))
    } else {
        (label, best)
    }
}

/// Lane-wise running minimum and runner-up: `LANES` independent (value,
/// second value, index) triples updated with selects (no branches, so the
/// compiler vectorises it); the final reduction keeps the lowest index among
/// equal minima, so the result equals a scalar first-minimum scan.
#[derive(Clone, Copy)]
struct LaneMin<T> {
    value: [T; LANES],
    second: [T; LANES],
    index: [u32; LANES],
}

// Lane loops index several arrays in step, written so the compiler vectorises them.
#[allow(clippy::needless_range_loop)]
impl<T: Real> LaneMin<T> {
    #[inline(always)]
    fn new() -> Self {
        // Index 0 until a smaller value is seen: a row whose values are all
        // inf or NaN (overflow) still gets a valid label.
        let inf = T::from_f64(f64::INFINITY);
        LaneMin { value: [inf; LANES], second: [inf; LANES], index: [0; LANES] }
    }
    #[inline(always)]
    fn update(&mut self, v: &[T; LANES], base: u32) {
        for l in 0..LANES {
            let take = v[l] < self.value[l];
            let runner = if v[l] < self.second[l] { v[l] } else { self.second[l] };
            self.second[l] = if take { self.value[l] } else { runner };
            self.value[l] = if take { v[l] } else { self.value[l] };
            self.index[l] = if take { base + l as u32 } else { self.index[l] };
        }
    }
    /// The minimum, the lowest index holding it, and the second-smallest
    /// value (equal to the minimum when two centres share it).
    #[inline(always)]
    fn reduce(&self) -> (T, u32, T) {
        let mut min = self.value[0];
        for l in 1..LANES {
            min = if self.value[l] < min { self.value[l] } else { min };
        }
        let mut win = 0;
        let mut index = u32::MAX;
        for l in 0..LANES {
            if self.value[l] == min && self.index[l] < index {
                index = self.index[l];
                win = l;
            }
        }
        if index == u32::MAX {
            // Every value is NaN: no minimum, and no certified gap.
            return (min, 0, min);
        }
        let mut second = self.second[win];
        for l in 0..LANES {
            if l != win && self.value[l] < second {
                second = self.value[l];
            }
        }
        (min, index, second)
    }
}

/// Direct kernel for narrow data: for each row, `‖ĉ‖² − 2x̂·ĉ` for
/// [`LANES`] centres at a time from the transposed centres, with a lane-wise
/// running minimum and runner-up; writes labels and gaps (second − best).
/// Compiled for AVX-512, AVX2+FMA and a portable baseline; the best
/// available is picked at run time.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
fn direct_argmin<T: Real>(
    x: &[T],
    d: usize,
    origin: &[T],
    transposed: &[T],
    norms: &[T],
    labels: &mut [u32],
    gaps: &mut [T],
) {
    if T::direct_argmin_simd(x, d, origin, transposed, norms, labels, gaps) {
        return;
    }
    // A const number of features lets the compiler keep every accumulator
    // in registers and unroll the feature loop.
    macro_rules! fixed {
        ($($n:literal)*) => {
            match d {
                $($n => direct_fixed::<T, $n>(x, origin, transposed, norms, labels, gaps),)*
                _ => unreachable!("direct kernel used for d = {d}"),
            }
        };
    }
    fixed!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
}

#[inline(always)]
fn direct_fixed<T: Real, const D: usize>(
    x: &[T],
    origin: &[T],
    transposed: &[T],
    norms: &[T],
    labels: &mut [u32],
    gaps: &mut [T],
) {
    let rows = labels.len();
    let pairs = rows / 2 * 2;
    for r0 in (0..pairs).step_by(2) {
        let ((la, ga), (lb, gb)) = direct_two::<T, D>(&x[r0 * D..(r0 + 2) * D], origin, transposed, norms);
        (labels[r0], gaps[r0], labels[r0 + 1], gaps[r0 + 1]) = (la, ga, lb, gb);
    }
    if pairs < rows {
        let mut pad = [T::default(); 32];
        pad[..D].copy_from_slice(&x[pairs * D..(pairs + 1) * D]);
        pad[D..2 * D].copy_from_slice(&x[pairs * D..(pairs + 1) * D]);
        (labels[pairs], gaps[pairs]) = direct_two::<T, D>(&pad[..2 * D], origin, transposed, norms).0;
    }
}

/// The direct kernel's step for two rows of `D` features, sharing each load
/// of centres (register blocking): (label, gap) per row.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // lane loops index several arrays in step
fn direct_two<T: Real, const D: usize>(x: &[T], origin: &[T], transposed: &[T], norms: &[T]) -> ((u32, T), (u32, T)) {
    let kp = norms.len();
    let mut xa = [T::default(); D];
    let mut xb = [T::default(); D];
    for f in 0..D {
        xa[f] = T::from_f64(-2.0) * (x[f] - origin[f]);
        xb[f] = T::from_f64(-2.0) * (x[D + f] - origin[f]);
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
    let ((va, ia, sa), (vb, ib, sb)) = (ma.reduce(), mb.reduce());
    ((ia, sa - va), (ib, sb - vb))
}

/// Argmin over one GEMM tile (`kt` products per row, contiguous per row)
/// plus norms, merged with the running best and runner-up of earlier
/// centre tiles (`best`, `second`).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
fn tile_argmin<T: Real>(tile: &[T], norms: &[T], j0: usize, best: &mut [T], second: &mut [T], labels: &mut [u32]) {
    let kt = norms.len();
    let full = kt / LANES * LANES;
    for (i, ((b, s), label)) in best.iter_mut().zip(second.iter_mut()).zip(labels.iter_mut()).enumerate() {
        let prods = &tile[i * kt..(i + 1) * kt];
        let mut m = LaneMin::<T>::new();
        for c0 in (0..full).step_by(LANES) {
            let mut v: [T; LANES] = prods[c0..c0 + LANES].try_into().expect("LANES elements");
            for (a, &b) in v.iter_mut().zip(&norms[c0..c0 + LANES]) {
                *a += b;
            }
            m.update(&v, (j0 + c0) as u32);
        }
        let (mut bv, mut bj, mut sv) = m.reduce();
        bj = if full == 0 { j0 as u32 } else { bj };
        for j in full..kt {
            let v = prods[j] + norms[j];
            if v < bv {
                sv = bv;
                bv = v;
                bj = (j0 + j) as u32;
            } else if v < sv {
                sv = v;
            }
        }
        // Earlier tiles hold lower indices, so they win ties.
        if j0 == 0 {
            (*b, *s, *label) = (bv, sv, bj);
        } else if bv < *b {
            *s = if sv < *b { sv } else { *b };
            (*b, *label) = (bv, bj);
        } else if bv < *s {
            *s = bv;
        }
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
        let sq = |f: usize| {
            let t = x[f].to_f64() - c[f];
            t * t
        };
        let pair = |f: usize| if f + 1 < d { Some(sq(f) + sq(f + 1)) } else { (f < d).then(|| sq(f)) };
        let join = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => Some(a + b),
            (a, None) => a,
            (None, b) => b,
        };
        return join(join(pair(0), pair(2)), join(pair(4), pair(6))).unwrap_or(0.0);
    }
    let mut acc = [0.0f64; 8];
    let (ca, cb) = (x.chunks_exact(8), c.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (p, q) in ca.zip(cb) {
        for l in 0..8 {
            let t = p[l].to_f64() - q[l];
            acc[l] += t * t;
        }
    }
    for (l, (p, q)) in ra.iter().zip(rb).enumerate() {
        let t = p.to_f64() - q;
        acc[l] += t * t;
    }
    ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
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

/// Squared distances of every row of a block (row-major `(rows, d)`) to every
/// centre: `out` (row-major `(rows, n_clusters)`) receives [`exact_sq_dist`]
/// for each pair, the values whose first minimum [`assign_block`] reports.
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
                *v = exact_sq_dist(row, c.center(j));
            }
        }
    });
}

/// Rows per parallel work item of [`sq_distances_block`].
const TILE_CHUNK: usize = 64;

/// Slow, obviously-correct twin of [`assign_rows`]: the exact squared
/// distance in `f64` to every centre, first minimum wins. [`assign_rows`]
/// gives the same bits.
pub fn assign_reference<T: Real>(x: &[T], c: &PreparedCenters<T>, labels: &mut [u32], min_dist: &mut [f64]) {
    let d = c.n_features;
    for i in 0..labels.len() {
        let row = &x[i * d..(i + 1) * d];
        let (mut bj, mut bv) = (0usize, f64::INFINITY);
        for j in 0..c.n_clusters {
            let v = exact_sq_dist(row, c.center(j));
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
        let len = PreparedCenters::<T>::scratch_len(tile_rows, c.n_clusters, k_tile, c.n_features);
        let mut scratch: Vec<Vec<T>> = (0..workers).map(|_| vec![T::default(); len]).collect();
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
            let mut scratch = vec![vec![0.0; PreparedCenters::<f64>::scratch_len(256, k, k, d)]];
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
            let (mut l, mut g, mut m) = (vec![0u32; n], vec![0f64; n], vec![0f64; n]);
            let mut buf = vec![0f64; PreparedCenters::<f64>::padded_k(k)];
            direct_fixed::<f64, 3>(&x, &c.origin, &c.transposed, &c.padded_norms, &mut l, &mut g);
            certify(&x, &c, &mut l, &g, &mut m, &mut buf);
            assert_eq!((l, m.iter().map(|v| v.to_bits()).collect::<Vec<_>>()), reference(&x, &c));
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
