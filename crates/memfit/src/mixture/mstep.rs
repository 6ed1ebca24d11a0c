//! Completing the M-step: parameters from the sufficient statistics of one
//! pass, as scikit-learn's `_estimate_gaussian_parameters` defines them
//! (`N_k` floored by `10 ε`, `reg_covar` added to the diagonal), computed
//! from sums centred on each component's reference mean.
//!
//! The scatter is taken around the mean the component reports and the
//! E-step uses, scikit-learn's `resp.T @ X / N_k` with the `10 ε` floor in
//! `N_k`, as scikit-learn's `diff = X - means[k]` takes it: the scatter
//! around the responsibility-weighted mean `m` itself (from sums centred on
//! a reference, without their cancellation) plus `N (m − μ)(m − μ)ᵀ` for the
//! rounded mean `μ`. The floor's offset matters far from the origin: rows
//! on one point at 1e18 have `μ` about 1e3 from `m`, and a variance without
//! that offset would put them a million standard deviations from their own
//! component. Where `μ` rounds to `m`, identical rows have a variance of
//! exactly 0.
//!
//! A covariance is refused later, when it is not positive definite (its
//! Cholesky factorisation fails, or a variance is not positive); tiny
//! positive variances are kept. A diagonal entry of the centred scatter
//! below the rounding error of the sums it is computed from (see [`NOISE`])
//! is taken as 0, since neither its size nor its sign is known.

use super::components::{packed_index, packed_len, Params};
use super::params::CovarianceType;
use super::pass::Stats;

/// Turns `stats` into parameters. Covariances are computed in place in
/// `stats.s2` (each value from the sum at the same position), which becomes
/// `Params::cov` (tied allocates its one triangle). `tied_scatter` is
/// `Σ w x xᵀ` (row-major `d × d`, shifted coordinates) for tied; `shift`
/// (`(d,)`) the origin the rows were read from. `N_k` is
/// floored by `mass.floor`. When `init`, weights are `N_k / mass.total`
/// (scikit-learn's `_initialize`); otherwise `N_k / Σ N_k`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn finalize(
    t: CovarianceType,
    d: usize,
    stats: &mut Stats,
    tied_scatter: &[f64],
    reg_covar: f64,
    mass: Mass,
    init: bool,
    shift: &[f64],
) -> Params {
    let k = stats.nk.len();
    let mut params = Params { cov: std::mem::take(&mut stats.s2), ..Params::default() };
    let nk: Vec<f64> = stats.nk.iter().map(|n| n + mass.floor).collect();
    let total: f64 = nk.iter().sum();
    params.weights = nk.iter().map(|n| n / if init { mass.total } else { total }).collect();
    params.means.resize(k * d, 0.0);
    debug_assert_eq!(shift.len(), d, "one shift per feature");
    for (c, n) in nk.iter().enumerate() {
        for (j, &s) in shift.iter().enumerate() {
            let (s1, r, n_raw) = (stats.s1[c * d + j], stats.reference[c * d + j], stats.nk[c]);
            // `resp.T @ X / nk` as scikit-learn's, in the shifted
            // coordinates (the rows read as x − s), so identical rows keep
            // their mean exactly; a component without responsibility gets
            // scikit-learn's mean 0 of the rows as given, not the shift.
            params.means[c * d + j] = if n_raw == 0.0 { -s } else { (s1 + n_raw * r) / n };
        }
    }
    // Σ r (x − m)(x − m)ᵀ around the weighted mean `m = ref + s1 / N_k`:
    // `S2 − s1 (s1 / N_k)ᵀ` (0 for a component without rows; divided
    // before the product, which would overflow for weights near 1e200).
    let centred = |s2: f64, a: f64, b: f64, n_raw: f64| if n_raw > 0.0 { s2 - a * (b / n_raw) } else { 0.0 };
    // m − μ per component and feature: the floor's offset (module docs).
    let offset: Vec<f64> = (0..k * d)
        .map(|q| {
            let n_raw = stats.nk[q / d];
            if n_raw > 0.0 {
                (stats.reference[q] + stats.s1[q] / n_raw) - params.means[q]
            } else {
                0.0
            }
        })
        .collect();
    match t {
        CovarianceType::Full => {
            let p = packed_len(d);
            for (c, n) in nk.iter().enumerate() {
                let (s1, n_raw) = (&stats.s1[c * d..(c + 1) * d], stats.nk[c]);
                let off = &offset[c * d..(c + 1) * d];
                let s2 = &mut params.cov[c * p..(c + 1) * p];
                for i in 0..d {
                    for j in 0..=i {
                        let q = packed_index(i, j);
                        let v = centred(s2[q], s1[i], s1[j], n_raw) / n;
                        let v = if i == j { above_noise(v, s2[q] / n) } else { v };
                        let v = v + n_raw * off[i] * off[j] / n;
                        s2[q] = if i == j { v + reg_covar } else { v };
                    }
                }
            }
        }
        CovarianceType::Tied => {
            // (Σ w x xᵀ − Σ_k N_k μ_k μ_kᵀ) / Σ N_k, around the data mean; a
            // component without responsibility adds nothing (its mean is 0
            // of the rows as given, as scikit-learn's, where its floored
            // N_k times it vanishes).
            params.cov.resize(packed_len(d), 0.0);
            for i in 0..d {
                for j in 0..=i {
                    let between: f64 = (0..k)
                        .filter(|&c| stats.nk[c] > 0.0)
                        .map(|c| nk[c] * params.means[c * d + i] * params.means[c * d + j])
                        .sum();
                    let v = (tied_scatter[i * d + j] - between) / total;
                    params.cov[packed_index(i, j)] =
                        if i == j { above_noise(v, tied_scatter[i * d + i] / total) + reg_covar } else { v };
                }
            }
        }
        CovarianceType::Diag | CovarianceType::Spherical => {
            let mut spherical = vec![0.0; k];
            for c in 0..k {
                let n_raw = stats.nk[c];
                for j in 0..d {
                    let (s1, s2, off) = (stats.s1[c * d + j], params.cov[c * d + j], offset[c * d + j]);
                    let v = above_noise(centred(s2, s1, s1, n_raw) / nk[c], s2 / nk[c])
                        + n_raw * off * off / nk[c]
                        + reg_covar;
                    params.cov[c * d + j] = v;
                    spherical[c] += v;
                }
            }
            if t == CovarianceType::Spherical {
                for (c, s) in spherical.iter().enumerate() {
                    params.cov[c] = s / d as f64;
                }
            }
        }
    }
    params
}

/// How much larger than a component's scatter around its weighted mean
/// the second moment around the reference may be before the difference
/// (`S2 − s1 s1ᵀ / N_k`) is taken as too inexact: float64's relative
/// error `ε` grows by this factor, to about 1.5e-11 (a component's mean
/// moving 256 of its standard deviations in one iteration: far initial
/// means, a warm start on moved data, never an ordinary EM step).
pub(crate) const MAX_CANCELLATION: f64 = 65536.0;

/// Most passes an M-step's sums are summed again around new references
/// (see [`recentred`]): 1e308 from data of unit scale needs about 24.
pub(crate) const MAX_RECENTRED_PASSES: usize = 32;

/// New references for `stats`' sums when a component's weighted mean lies
/// so far from the reference its sums were centred on (a `means_init` or a
/// warm start far from the data) that some variance would lose more than
/// [`MAX_CANCELLATION`] in relative accuracy: the second moment `S2` of a
/// feature exceeds that many times its scatter `S2 − s1²/N_k`. The sums
/// are then summed again, under the same responsibilities, around the
/// weighted means returned (their `s1` about 0, no cancellation), so the
/// covariances are as exact as scikit-learn's two-pass `X − means`. A
/// reference so far away that `x − ref` kept none of a row's digits
/// (1e30 from data of unit scale) takes a few such passes: each brings
/// the reference some 13 orders of magnitude closer.
///
/// Tied covariances come from the data scatter `tied_scatter` (`Σ w x
/// xᵀ`, row-major `d × d`), not from these sums, but their means do: a
/// mean is as inexact as `ε` times its distance from the reference, so
/// that distance is bounded by `√MAX_CANCELLATION` times the rows'
/// root-mean-square in the feature.
///
/// Only the components beyond the bound move their reference: the others'
/// sums are summed again around the same one, to the same bits, so the
/// result does not depend on which components share a pass (all of them,
/// or a group of them).
///
/// `None` when every variance is within the bound, or when the weighted
/// means are the reference itself (no pass can do better).
pub(crate) fn recentred(t: CovarianceType, d: usize, stats: &Stats, tied_scatter: &[f64]) -> Option<Vec<f64>> {
    if d == 0 {
        return None;
    }
    let p = packed_len(d);
    let total: f64 = stats.nk.iter().sum();
    let inexact = |q: usize| {
        let (c, j, n) = (q / d, q % d, stats.nk[q / d]);
        if n <= 0.0 || n.is_nan() {
            return false;
        }
        let s1 = stats.s1[q];
        let (s2, scatter) = match t {
            // n δ² against n times the mean square of the rows.
            CovarianceType::Tied => {
                let square = tied_scatter.get(j * d + j).map_or(f64::INFINITY, |s| s / total);
                (s1 * (s1 / n), n * square)
            }
            CovarianceType::Full => {
                (stats.s2[c * p + packed_index(j, j)], stats.s2[c * p + packed_index(j, j)] - s1 * (s1 / n))
            }
            _ => (stats.s2[c * d + j], stats.s2[c * d + j] - s1 * (s1 / n)),
        };
        s2 > MAX_CANCELLATION * scatter.max(0.0)
    };
    let mut means = stats.reference.clone();
    for c in 0..stats.nk.len() {
        if (c * d..(c + 1) * d).any(inexact) {
            let (r, s1) = (&stats.reference[c * d..(c + 1) * d], &stats.s1[c * d..(c + 1) * d]);
            for ((m, r), s) in means[c * d..(c + 1) * d].iter_mut().zip(r).zip(s1) {
                *m = r + s / stats.nk[c];
            }
        }
    }
    (means != stats.reference).then_some(means)
}

/// The rows' total weight and the floor added to each `N_k`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mass {
    /// `Σ_i w_i` (`n_samples` without weights).
    pub(crate) total: f64,
    /// scikit-learn's `10 ε` times the mean weight (1 without weights), so
    /// that weights scaled alike give the same mixture: a floor of `10 ε`
    /// against weights of 1e-16 would pull every mean to the origin.
    pub(crate) floor: f64,
}

impl Mass {
    /// For `n_rows` rows of total weight `total`, `weighted` or not.
    pub(crate) fn of(total: f64, n_rows: usize, weighted: bool) -> Self {
        let unit = if weighted && n_rows > 0 { total / n_rows as f64 } else { 1.0 };
        Mass { total, floor: 10.0 * f64::EPSILON * unit }
    }
}

/// Relative rounding error of a variance computed as a difference of `f64`
/// sums: a diagonal entry at most `NOISE` times the second moment it was
/// computed from has lost every significant digit.
const NOISE: f64 = 4.0 * f64::EPSILON;

/// The variance `v`, or exactly 0 when it is within the rounding error of
/// the mean square `moment` it was computed from (see [`NOISE`]).
fn above_noise(v: f64, moment: f64) -> f64 {
    if v <= NOISE * moment {
        0.0
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sums of one component over `rows` (one feature), centred on `reference`.
    fn stats(t: CovarianceType, rows: &[f64], reference: f64) -> Stats {
        let mut s = Stats::zeros(t, 1, 1, &[reference], false);
        s.nk[0] = rows.len() as f64;
        s.s1[0] = rows.iter().map(|x| x - reference).sum();
        s.s2[0] = rows.iter().map(|x| (x - reference).powi(2)).sum();
        s
    }

    #[test]
    fn identical_rows_have_the_scatter_about_the_reported_mean() {
        // Centred on a reference that is not the rows' value (as after an
        // iteration whose mean carried the 10 ε floor). 64 rows: the floor's
        // offset rounds away and the variance is exactly 0; 6 rows: the
        // mean is a few ulps off the rows and the variance is that offset
        // squared, as scikit-learn's `diff = X - means` gives; 1e18: the
        // offset is about 370, far above a `reg_covar` of 1e-6.
        for t in [CovarianceType::Full, CovarianceType::Diag, CovarianceType::Spherical] {
            for (value, rows, reference) in [
                (0.1, 64, 0.1 * 6.0 / (6.0 + 10.0 * f64::EPSILON)),
                (0.1, 6, 0.1 * 6.0 / (6.0 + 10.0 * f64::EPSILON)),
                (-3.0, 6, -3.0),
                (0.0, 6, 1e-17),
                (1e18, 6, 1e18),
            ] {
                let n = rows as f64;
                let mean = value * n / (n + 10.0 * f64::EPSILON);
                let expected = n * (value - mean) * (value - mean) / (n + 10.0 * f64::EPSILON);
                let p = finalize(
                    t,
                    1,
                    &mut stats(t, &vec![value; rows], reference),
                    &[],
                    0.0,
                    Mass::of(n, rows, false),
                    false,
                    &[0.0],
                );
                assert_eq!(p.means[0], mean, "{t:?} {value}");
                assert!(
                    (p.cov[0] - expected).abs() <= 1e-12 * expected,
                    "{t:?} {value} x {rows}: {} vs {expected}",
                    p.cov[0]
                );
                assert_eq!(p.cov[0] == 0.0, value * n / (n + 10.0 * f64::EPSILON) == value, "{t:?} {value} x {rows}");
            }
        }
    }

    #[test]
    fn tiny_positive_variance_is_kept() {
        // Rows a few ulps apart: a variance of about 1e-31, positive.
        let rows: Vec<f64> = (0..8).map(|i| 1.0 + f64::from(i) * f64::EPSILON).collect();
        // The variance of 0, 1, ..., 7 is 5.25 (ulps²), about the mean; about
        // the floored mean (1.25 ulps lower, rounded to 1) it is 6.25.
        let exact = 6.25 * f64::EPSILON * f64::EPSILON;
        for t in [CovarianceType::Full, CovarianceType::Diag, CovarianceType::Spherical] {
            let p = finalize(t, 1, &mut stats(t, &rows, 1.0), &[], 0.0, Mass::of(8.0, 8, false), false, &[0.0]);
            assert!(p.cov[0] > 0.0 && (p.cov[0] - exact).abs() < 1e-6 * exact, "{t:?}: {} vs {exact}", p.cov[0]);
        }
    }
}
