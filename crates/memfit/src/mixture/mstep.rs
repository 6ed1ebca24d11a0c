//! Completing the M-step: parameters from the sufficient statistics of one
//! pass, as scikit-learn's `_estimate_gaussian_parameters` defines them
//! (`N_k` floored by `10 ε`, `reg_covar` added to the diagonal), computed
//! from sums centred on each component's reference mean.

use super::components::{packed_index, packed_len, Params};
use super::params::CovarianceType;
use super::pass::Stats;

/// Turns `stats` into parameters. Covariances are computed in place in
/// `stats.s2` (each value from the sum at the same position), which becomes
/// `Params::cov` (tied allocates its one triangle). `tied_scatter` is
/// `Σ w x xᵀ` (row-major `d × d`, shifted coordinates) for tied. When `init`,
/// weights are `N_k / n_effective` (scikit-learn's `_initialize`);
/// otherwise `N_k / Σ N_k`.
///
/// A variance below the rounding noise of the data's magnitude (see
/// [`rounding_floor`]; `shift` is the origin the data were read relative to)
/// is taken as exactly 0, so a collapsed component is reported (with
/// `reg_covar = 0`) instead of fitted with a variance of 1e-32.
#[allow(clippy::too_many_arguments)]
pub(crate) fn finalize(
    t: CovarianceType,
    d: usize,
    stats: &mut Stats,
    tied_scatter: &[f64],
    shift: &[f64],
    reg_covar: f64,
    n_effective: f64,
    init: bool,
) -> Params {
    let k = stats.nk.len();
    let mut params = Params { cov: std::mem::take(&mut stats.s2), ..Params::default() };
    let floor = 10.0 * f64::EPSILON;
    let nk: Vec<f64> = stats.nk.iter().map(|n| n + floor).collect();
    let total: f64 = nk.iter().sum();
    params.weights = nk.iter().map(|n| n / if init { n_effective } else { total }).collect();
    params.means.resize(k * d, 0.0);
    // δ_k = μ_k − ref_k, with μ_k = (Σ r x) / N_k exactly as scikit-learn's
    // `resp.T @ X / nk` (a component with no responsibility gets mean 0).
    let mut delta = vec![0.0; k * d];
    for c in 0..k {
        for j in 0..d {
            let (s1, r) = (stats.s1[c * d + j], stats.reference[c * d + j]);
            let mean = (s1 + stats.nk[c] * r) / nk[c];
            params.means[c * d + j] = mean;
            delta[c * d + j] = mean - r;
        }
    }
    match t {
        CovarianceType::Full => {
            let p = packed_len(d);
            for c in 0..k {
                let (s1, dl, n_raw) = (&stats.s1[c * d..(c + 1) * d], &delta[c * d..(c + 1) * d], stats.nk[c]);
                let s2 = &mut params.cov[c * p..(c + 1) * p];
                for i in 0..d {
                    for j in 0..=i {
                        let q = packed_index(i, j);
                        let v = (s2[q] - s1[i] * dl[j] - dl[i] * s1[j] + n_raw * dl[i] * dl[j]) / nk[c];
                        s2[q] = if i == j { above_noise(v, params.means[c * d + i], shift[i]) + reg_covar } else { v };
                    }
                }
            }
        }
        CovarianceType::Tied => {
            // (Σ w x xᵀ − Σ_k N_k μ_k μ_kᵀ) / Σ N_k, around the data mean.
            params.cov.resize(packed_len(d), 0.0);
            for i in 0..d {
                for j in 0..=i {
                    let between: f64 = (0..k).map(|c| nk[c] * params.means[c * d + i] * params.means[c * d + j]).sum();
                    let v = (tied_scatter[i * d + j] - between) / total;
                    params.cov[packed_index(i, j)] = if i == j {
                        let scale = (0..k).map(|c| params.means[c * d + i].abs()).fold(0.0, f64::max);
                        above_noise(v, scale, shift[i]) + reg_covar
                    } else {
                        v
                    };
                }
            }
        }
        CovarianceType::Diag | CovarianceType::Spherical => {
            let mut spherical = vec![0.0; k];
            for c in 0..k {
                let n_raw = stats.nk[c];
                for j in 0..d {
                    let (s1, s2, dl) = (stats.s1[c * d + j], params.cov[c * d + j], delta[c * d + j]);
                    let v = (s2 - 2.0 * dl * s1 + n_raw * dl * dl) / nk[c];
                    let v = above_noise(v, params.means[c * d + j], shift[j]) + reg_covar;
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

/// The largest variance that is indistinguishable from rounding noise for
/// values of magnitude `|mean| + |shift|` (the component's mean in the
/// shifted coordinates the engine computes in, and the shift itself):
/// `(16 ε (|mean| + |shift|))²` with ε of float64.
fn rounding_floor(mean: f64, shift: f64) -> f64 {
    let scale = 16.0 * f64::EPSILON * (mean.abs() + shift.abs());
    scale * scale
}

/// `v`, or exactly 0 when it is below [`rounding_floor`].
fn above_noise(v: f64, mean: f64, shift: f64) -> f64 {
    if v <= rounding_floor(mean, shift) {
        0.0
    } else {
        v
    }
}
