//! Mixture parameters in their two forms: the `f64` parameters the M-step
//! produces ([`Params`]: weights, means, covariances) and the E-step's form
//! ([`Estep`]: log-weights, means and precision Cholesky factors in the
//! compute type, log-determinants), with the conversion between them.
//!
//! Full and tied covariances are stored packed (lower triangle, row by row:
//! `d (d + 1) / 2` values), so that a full model of `K` components holds
//! `K d (d + 1) / 2` doubles besides the compute-type factors.
//!
//! Precision Cholesky factors follow scikit-learn's convention: with
//! `Σ = L Lᵀ` (Cholesky), `U = L⁻ᵀ` is upper triangular and `P = Σ⁻¹ = U Uᵀ`;
//! `log det U = Σ_j ln U_jj` is half the log-determinant of the precision.

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::{cholesky_in_place, cholesky_in_place_scratch};
use faer::linalg::triangular_inverse::invert_lower_triangular;
use faer::{MatMut, MatRef, Par};

use super::params::CovarianceType;
use crate::dtype::Real;
use crate::error::{Error, Result};
use crate::io::Source;
pub(crate) use crate::kernels::{Estep, Prec};

/// Values in a packed lower triangle of a `d × d` matrix.
pub fn packed_len(d: usize) -> usize {
    d * (d + 1) / 2
}

/// Index of `(i, j)`, `j ≤ i`, in a packed lower triangle.
#[inline(always)]
pub(crate) fn packed_index(i: usize, j: usize) -> usize {
    i * (i + 1) / 2 + j
}

/// Doubles of covariance storage (and of second-moment sums) for `k`
/// components of `d` features.
pub fn cov_len(t: CovarianceType, k: usize, d: usize) -> usize {
    match t {
        CovarianceType::Full => k * packed_len(d),
        CovarianceType::Tied => packed_len(d),
        // Spherical sums per feature before averaging.
        CovarianceType::Diag | CovarianceType::Spherical => k * d,
    }
}

/// Elements of the E-step's precision factors in the compute type.
pub fn prec_len(t: CovarianceType, k: usize, d: usize) -> usize {
    match t {
        CovarianceType::Full => k * d * d,
        CovarianceType::Tied => d * d,
        CovarianceType::Diag => k * d,
        CovarianceType::Spherical => k,
    }
}

/// The M-step's parameters, in `f64`, means in shifted coordinates.
#[derive(Debug, Clone, Default)]
pub struct Params {
    /// Mixture weights, `(K,)`.
    pub weights: Vec<f64>,
    /// Means, row-major `(K, d)`, in the shifted coordinates the engine reads.
    pub means: Vec<f64>,
    /// Covariances: full `K` packed triangles, tied one packed triangle,
    /// diag `(K, d)`, spherical `(K,)` (the first `K` of `K × d` values).
    pub cov: Vec<f64>,
}

/// Reused `d × d` work matrices (row-major `f64`): the first two serve the
/// Cholesky factorisations between passes; during a pass all of them serve
/// as the per-thread products of the full M-step ([`super::pass`]).
pub(crate) struct CholWork {
    d: usize,
    pub(crate) mats: Vec<Vec<f64>>,
    stack: MemBuffer,
}

impl CholWork {
    /// Bytes held by a workspace of `n_mats` matrices for `d` features.
    pub(crate) fn bytes(d: usize, n_mats: usize) -> u64 {
        (n_mats * d * d * 8 + d * 8 + 4096) as u64
    }

    /// `n_mats` (at least 2 when `d > 0`) matrices of `d × d`.
    pub(crate) fn new(d: usize, n_mats: usize) -> Self {
        let n_mats = if d > 0 { n_mats.max(2) } else { 0 };
        CholWork {
            d,
            mats: (0..n_mats).map(|_| vec![0.0; d * d]).collect(),
            stack: MemBuffer::new(cholesky_in_place_scratch::<f64>(d, Par::Seq, Default::default())),
        }
    }

    /// The work matrices of a fit with `t` covariances over `d` features on
    /// `threads` threads ([`work_mats`] of them; none for diag and spherical).
    pub(crate) fn for_fit(t: CovarianceType, d: usize, threads: usize) -> Self {
        let full = matches!(t, CovarianceType::Full | CovarianceType::Tied);
        CholWork::new(if full { d } else { 0 }, work_mats(t, threads))
    }

    /// The factor `U` left in the second matrix by the last factorisation
    /// (row-major, upper triangular, zeros below).
    pub(crate) fn u(&self) -> &[f64] {
        &self.mats[1]
    }

    fn factor_in_place(&mut self, which: usize) -> Option<()> {
        let d = self.d;
        cholesky_in_place(
            MatMut::from_row_major_slice_mut(&mut self.mats[which], d, d),
            Default::default(),
            Par::Seq,
            MemStack::new(&mut self.stack),
            Default::default(),
        )
        .ok()
        .map(|_| ())
    }

    fn log_det_of_u(&self) -> Option<f64> {
        let (d, u) = (self.d, &self.mats[1]);
        let ld = (0..d).map(|i| u[i * d + i].ln()).sum::<f64>();
        (ld.is_finite() && u.iter().all(|v| v.is_finite())).then_some(ld)
    }

    /// Factor `U` of the covariance in the first matrix's lower triangle
    /// (left in [`Self::u`]); returns `Σ_j ln U_jj`, or `None` when the
    /// matrix is not positive definite.
    fn precision_cholesky_of_cov(&mut self) -> Option<f64> {
        let d = self.d;
        self.factor_in_place(0)?;
        let (a, inv) = self.mats.split_at_mut(1);
        invert_lower_triangular(
            MatMut::from_row_major_slice_mut(&mut inv[0], d, d),
            MatRef::from_row_major_slice(&a[0], d, d),
            Par::Seq,
        );
        // U = L⁻ᵀ: transpose the lower triangle into the upper one.
        let u = &mut inv[0];
        for i in 0..d {
            for j in i + 1..d {
                u[i * d + j] = u[j * d + i];
                u[j * d + i] = 0.0;
            }
        }
        self.log_det_of_u()
    }

    /// Factor `U` with `P = U Uᵀ` of the precision in the first matrix
    /// (full, symmetric; left in [`Self::u`]): the Cholesky factor of `P`
    /// flipped up-down and left-right, as scikit-learn's
    /// `_compute_precision_cholesky_from_precisions`.
    fn precision_cholesky_of_precision(&mut self) -> Option<f64> {
        let d = self.d;
        let (a, b) = self.mats.split_at_mut(1);
        for i in 0..d {
            for j in 0..d {
                b[0][i * d + j] = a[0][(d - 1 - i) * d + (d - 1 - j)];
            }
        }
        self.factor_in_place(1)?;
        let (a, b) = self.mats.split_at_mut(1);
        for i in 0..d {
            for j in 0..d {
                a[0][i * d + j] = if j >= i { b[0][(d - 1 - i) * d + (d - 1 - j)] } else { 0.0 };
            }
        }
        self.mats.swap(0, 1);
        self.log_det_of_u()
    }
}

fn ill_defined<T: Real>(component: Option<usize>, reg_covar: f64) -> Error {
    Error::IllDefinedCovariance { component, reg_covar, float32: T::DTYPE == crate::io::Dtype::F32 }
}

impl<T: Real> Estep<T> {
    /// Buffers for `k` components of `d` features.
    pub(crate) fn new(t: CovarianceType, k: usize, d: usize) -> Self {
        let prec = match t {
            CovarianceType::Full => Prec::Full(vec![T::default(); k * d * d], vec![0.0; k * d]),
            CovarianceType::Tied => Prec::Tied(vec![T::default(); d * d], vec![0.0; k * d]),
            CovarianceType::Diag => Prec::Diag(vec![0.0; k * d]),
            CovarianceType::Spherical => Prec::Spherical(vec![0.0; k]),
        };
        Estep {
            k,
            d,
            log_weights: vec![0.0; k],
            means: vec![0.0; k * d],
            means_t: vec![T::default(); k * d],
            log_det: vec![0.0; k],
            prec,
        }
    }

    /// Holds `k` components (at most the number it was created for, whose
    /// buffers it keeps); factors are cleared.
    pub(crate) fn resize(&mut self, k: usize) {
        let d = self.d;
        self.k = k;
        self.log_weights.resize(k, 0.0);
        self.means.resize(k * d, 0.0);
        self.means_t.resize(k * d, T::default());
        self.log_det.resize(k, 0.0);
        match &mut self.prec {
            Prec::Full(u, mu) => {
                u.clear();
                u.resize(k * d * d, T::default());
                mu.resize(k * d, 0.0);
            }
            Prec::Tied(_, mu) => mu.resize(k * d, 0.0),
            Prec::Diag(p) => p.resize(k * d, 0.0),
            Prec::Spherical(p) => p.resize(k, 0.0),
        }
    }

    /// Per component, a lower bound of the covariance's condition number:
    /// `(max_j U_jj / min_j U_jj)²` from the precision factor's diagonal.
    pub(crate) fn condition_estimates(&self) -> Vec<f64> {
        let (k, d) = (self.k, self.d);
        let ratio = |diag: &mut dyn Iterator<Item = f64>| {
            let (lo, hi) = diag.fold((f64::INFINITY, 0.0f64), |(lo, hi), v| (lo.min(v.abs()), hi.max(v.abs())));
            (hi / lo).powi(2)
        };
        match &self.prec {
            Prec::Full(u, _) => (0..k).map(|c| ratio(&mut (0..d).map(|j| u[j * k * d + c * d + j].to_f64()))).collect(),
            Prec::Tied(u, _) => vec![ratio(&mut (0..d).map(|j| u[j * d + j].to_f64())); k],
            Prec::Diag(p) => (0..k).map(|c| ratio(&mut p[c * d..(c + 1) * d].iter().copied())).collect(),
            Prec::Spherical(_) => vec![1.0; k],
        }
    }

    /// Sets weights and means (shifted coordinates).
    pub(crate) fn set_weights_means(&mut self, weights: &[f64], means: &[f64]) {
        for (l, w) in self.log_weights.iter_mut().zip(weights) {
            *l = w.ln();
        }
        self.means.copy_from_slice(means);
        for (m, v) in self.means_t.iter_mut().zip(means) {
            *m = T::from_f64(*v);
        }
        self.update_tied_means();
    }

    /// `μ_k U_k` for tied and full factors.
    pub(crate) fn update_tied_means(&mut self) {
        let (k, d) = (self.k, self.d);
        let (u, mu, stride, step) = match &mut self.prec {
            Prec::Tied(u, mu) => (&u[..], mu, d, 0),
            Prec::Full(u, mu) => (&u[..], mu, k * d, d),
            _ => return,
        };
        for c in 0..k {
            let m = &self.means[c * d..(c + 1) * d];
            for j in 0..d {
                mu[c * d + j] = (0..=j).map(|i| m[i] * u[i * stride + c * step + j].to_f64()).sum();
            }
        }
    }

    /// Computes the precision factors from `p` (weights, means, covariances).
    ///
    /// # Errors
    /// [`Error::IllDefinedCovariance`] naming the first component whose
    /// covariance is not positive definite.
    pub(crate) fn set_params(&mut self, p: &Params, reg_covar: f64, work: &mut CholWork) -> Result<()> {
        let (t, d) = (self.covariance_type(), self.d);
        let per = component_cov_len(t, d);
        let mut factor = vec![0.0; factor_len(t, d)];
        for c in 0..if t == CovarianceType::Tied { 1 } else { self.k } {
            let ld = factor_of_cov(t, d, &p.cov[c * per..(c + 1) * per], work, &mut factor)
                .ok_or_else(|| ill_defined::<T>((t != CovarianceType::Tied).then_some(c), reg_covar))?;
            self.put_factor(c, &factor, ld);
        }
        self.set_weights_means(&p.weights, &p.means);
        Ok(())
    }

    /// The covariance form of the factors held.
    pub(crate) fn covariance_type(&self) -> CovarianceType {
        match self.prec {
            Prec::Full(..) => CovarianceType::Full,
            Prec::Tied(..) => CovarianceType::Tied,
            Prec::Diag(_) => CovarianceType::Diag,
            Prec::Spherical(_) => CovarianceType::Spherical,
        }
    }

    /// Sets component `c`'s precision factor from `factor` (as
    /// [`factor_of_cov`] writes it) and its log-determinant; tied sets the
    /// shared factor. Call [`Self::set_weights_means`] (or
    /// [`Self::update_tied_means`]) after the last one.
    pub(crate) fn put_factor(&mut self, c: usize, factor: &[f64], log_det: f64) {
        let (k, d) = (self.k, self.d);
        match &mut self.prec {
            Prec::Full(u, _) => {
                for i in 0..d {
                    let row = &factor[upper_row(i, d)..upper_row(i + 1, d)];
                    for (dst, v) in u[i * k * d + c * d + i..i * k * d + (c + 1) * d].iter_mut().zip(row) {
                        *dst = T::from_f64(*v);
                    }
                }
                self.log_det[c] = log_det;
            }
            Prec::Tied(u, _) => {
                for i in 0..d {
                    let row = &factor[upper_row(i, d)..upper_row(i + 1, d)];
                    for (dst, v) in u[i * d + i..(i + 1) * d].iter_mut().zip(row) {
                        *dst = T::from_f64(*v);
                    }
                }
                self.log_det.fill(log_det);
            }
            Prec::Diag(pc) => {
                pc[c * d..(c + 1) * d].copy_from_slice(factor);
                self.log_det[c] = log_det;
            }
            Prec::Spherical(pc) => {
                pc[c] = factor[0];
                self.log_det[c] = log_det;
            }
        }
    }

    /// Sets the precision factors from given precisions or their Cholesky
    /// factors (see [`super::PrecisionsInit`]), read one component at a time
    /// into the buffers [`precision_read_bytes`] counts. With `cov` (of
    /// [`cov_len`] values), also writes their inverses there in
    /// [`Params::cov`]'s layout, from the `f64` factors.
    ///
    /// # Errors
    /// Read errors; [`Error::InvalidParameter`] (`precisions_init`, or
    /// `model` for factors from a saved model) for a non-finite value, a
    /// precision that is not positive definite or a factor with a
    /// non-positive diagonal.
    pub(crate) fn set_precisions(
        &mut self,
        src: &Source<'_>,
        cholesky: bool,
        work: &mut CholWork,
        mut cov: Option<&mut [f64]>,
        first: usize,
    ) -> Result<()> {
        let (k, d) = (self.k, self.d);
        let what = if cholesky { "precisions_cholesky" } else { "precisions_init" };
        let bad = |c: Option<usize>, why: &str| {
            let which = c.map_or(String::new(), |c| format!("component {c}: "));
            let hint = if cholesky {
                "the model folder is damaged, fit it again"
            } else {
                "give symmetric positive definite precision matrices (inverse covariances)"
            };
            Error::param(
                if cholesky { "model" } else { "precisions_init" },
                format!("{}: {which}{what} {why}; hint: {hint}", src.name().display()),
            )
        };
        let rows_per = match self.prec {
            Prec::Full(..) => d,
            Prec::Tied(..) => d,
            Prec::Diag(_) | Prec::Spherical(_) => 1,
        };
        let n_mats = if matches!(self.prec, Prec::Full(..)) { k } else { 1 };
        let per = src.n_features();
        let mut raw = vec![0.0; rows_per * per];
        let mut scratch = vec![0u8; rows_per * src.scratch_bytes_per_row()];
        let zero = vec![0.0; per];
        let groups = if matches!(self.prec, Prec::Full(..) | Prec::Tied(..)) { n_mats } else { k };
        for c in 0..groups {
            src.read_rows::<f64>((first + c) * rows_per, rows_per, &zero, &mut scratch, &mut raw)?;
            if raw.iter().any(|v| !v.is_finite()) {
                return Err(bad(Some(first + c), "holds a non-finite value"));
            }
            match &mut self.prec {
                Prec::Full(..) | Prec::Tied(..) => {
                    let (ld, u) = if cholesky {
                        // The factor itself: upper triangular, as
                        // scikit-learn's precisions_cholesky_. Rounding below
                        // the diagonal (a factor from an inverse, not a
                        // triangular solve) is dropped; a value that is
                        // not negligible beside the diagonal is a damaged
                        // file.
                        let mut ld = 0.0;
                        let scale = (0..d).map(|i| raw[i * d + i].abs()).fold(0.0, f64::max);
                        for i in 0..d {
                            if raw[i * d..i * d + i].iter().any(|v| v.abs() > 1e-8 * scale) {
                                return Err(bad(Some(first + c), "is not upper triangular"));
                            }
                            raw[i * d..i * d + i].fill(0.0);
                            if raw[i * d + i] <= 0.0 {
                                return Err(bad(Some(first + c), "has a non-positive diagonal"));
                            }
                            ld += raw[i * d + i].ln();
                        }
                        (ld, &raw[..])
                    } else {
                        // scikit-learn's test: numpy.allclose(P, P.T) (the
                        // factorisation reads one triangle only).
                        let close = |a: f64, b: f64| (a - b).abs() <= 1e-8 + 1e-5 * b.abs();
                        if (0..d).any(|i| (0..i).any(|j| !close(raw[i * d + j], raw[j * d + i]))) {
                            return Err(bad(Some(first + c), "is not symmetric"));
                        }
                        std::mem::swap(&mut work.mats[0], &mut raw);
                        let ld = work
                            .precision_cholesky_of_precision()
                            .ok_or_else(|| bad(Some(first + c), "is not symmetric positive definite"))?;
                        (ld, work.u())
                    };

                    match &mut self.prec {
                        Prec::Full(uc, _) => {
                            self.log_det[c] = ld;
                            put_stacked(uc, k, d, c, u);
                        }
                        Prec::Tied(uc, _) => {
                            self.log_det.fill(ld);
                            for (dst, v) in uc.iter_mut().zip(u) {
                                *dst = T::from_f64(*v);
                            }
                        }
                        _ => unreachable!("matched above"),
                    }
                    if let Some(cov) = cov.as_deref_mut() {
                        // The factor is in `raw` or in the second work matrix.
                        let (w, rest) = work.mats.split_at_mut(1);
                        let u = if cholesky { &raw[..] } else { &rest[0][..] };
                        let p = packed_len(d);
                        covariance_of_factor(u, d, &mut w[0], &mut cov[c * p..(c + 1) * p]);
                    }
                }
                Prec::Diag(pc) => {
                    let mut ld = 0.0;
                    for j in 0..d {
                        let v = raw[j];
                        if v <= 0.0 {
                            return Err(bad(Some(first + c), "must be positive"));
                        }
                        pc[c * d + j] = if cholesky { v } else { v.sqrt() };
                        ld += pc[c * d + j].ln();
                        if let Some(cov) = cov.as_deref_mut() {
                            cov[c * d + j] = 1.0 / (pc[c * d + j] * pc[c * d + j]);
                        }
                    }
                    self.log_det[c] = ld;
                }
                Prec::Spherical(pc) => {
                    if raw[0] <= 0.0 {
                        return Err(bad(Some(first + c), "must be positive"));
                    }
                    pc[c] = if cholesky { raw[0] } else { raw[0].sqrt() };
                    self.log_det[c] = d as f64 * pc[c].ln();
                    if let Some(cov) = cov.as_deref_mut() {
                        cov[c] = 1.0 / (pc[c] * pc[c]);
                    }
                }
            }
        }
        self.update_tied_means();
        Ok(())
    }
}

/// `d × d` work matrices a fit holds: one per thread for the full M-step
/// (at least the two the factorisations use), two for tied, none otherwise.
pub(crate) fn work_mats(t: CovarianceType, threads: usize) -> usize {
    match t {
        CovarianceType::Full => threads.max(2),
        CovarianceType::Tied => 2,
        CovarianceType::Diag | CovarianceType::Spherical => 0,
    }
}

/// Values of one component's covariance as stored: full and tied a packed
/// lower triangle, diag `d`, spherical 1.
pub(crate) fn component_cov_len(t: CovarianceType, d: usize) -> usize {
    match t {
        CovarianceType::Full | CovarianceType::Tied => packed_len(d),
        CovarianceType::Diag => d,
        CovarianceType::Spherical => 1,
    }
}

/// Values of one component's precision factor as stored: full and tied the
/// upper triangle of `U` packed row by row, diag the `d` values `1 / σ_j`,
/// spherical `1 / σ`.
pub(crate) fn factor_len(t: CovarianceType, d: usize) -> usize {
    component_cov_len(t, d)
}

/// Offset of row `i` in a packed upper triangle of a `d × d` matrix (row `i`
/// holds columns `i..d`).
fn upper_row(i: usize, d: usize) -> usize {
    i * d - i * i.saturating_sub(1) / 2
}

/// The precision factor of one component's covariance `cov` (as
/// [`component_cov_len`] stores it) into `factor` ([`factor_len`] values);
/// returns `Σ_j ln U_jj`, or `None` when the covariance is not positive
/// definite (a variance that is not positive and finite).
pub(crate) fn factor_of_cov(
    t: CovarianceType,
    d: usize,
    cov: &[f64],
    work: &mut CholWork,
    factor: &mut [f64],
) -> Option<f64> {
    match t {
        CovarianceType::Full | CovarianceType::Tied => {
            unpack_lower(cov, d, &mut work.mats[0]);
            let ld = work.precision_cholesky_of_cov()?;
            let u = work.u();
            for i in 0..d {
                factor[upper_row(i, d)..upper_row(i + 1, d)].copy_from_slice(&u[i * d + i..(i + 1) * d]);
            }
            Some(ld)
        }
        CovarianceType::Diag => {
            let mut ld = 0.0;
            for (p, &v) in factor.iter_mut().zip(cov) {
                if !(v > 0.0 && v.is_finite()) {
                    return None;
                }
                *p = 1.0 / v.sqrt();
                ld += p.ln();
            }
            Some(ld)
        }
        CovarianceType::Spherical => {
            let v = cov[0];
            if !(v > 0.0 && v.is_finite()) {
                return None;
            }
            factor[0] = 1.0 / v.sqrt();
            Some(d as f64 * factor[0].ln())
        }
    }
}

/// Bytes [`Estep::set_precisions`] holds while reading one component's
/// precision (or factor) from a source of `itemsize`-byte values: the values
/// in `f64` and the raw read scratch.
pub(crate) fn precision_read_bytes(t: CovarianceType, d: usize, itemsize: usize) -> u64 {
    let per = match t {
        CovarianceType::Full | CovarianceType::Tied => d * d,
        CovarianceType::Diag => d,
        CovarianceType::Spherical => 1,
    };
    (per * (8 + itemsize)) as u64
}

/// The covariance `(U Uᵀ)⁻¹ = W Wᵀ`, `W = (Uᵀ)⁻¹` lower triangular, of the
/// precision factor `u` (row-major `d × d`, upper), as a packed lower
/// triangle in `out`; `w` (`d × d`) is scratch.
fn covariance_of_factor(u: &[f64], d: usize, w: &mut [f64], out: &mut [f64]) {
    invert_lower_triangular(
        MatMut::from_row_major_slice_mut(w, d, d),
        MatRef::from_row_major_slice(u, d, d).transpose(),
        Par::Seq,
    );
    for i in 0..d {
        for j in 0..=i {
            out[packed_index(i, j)] = (0..=j).map(|q| w[i * d + q] * w[j * d + q]).sum();
        }
    }
}

/// Writes factor `c` (row-major `d × d` `f64`) into the stacked `(d, K·d)` layout.
fn put_stacked<T: Real>(stacked: &mut [T], k: usize, d: usize, c: usize, u: &[f64]) {
    for i in 0..d {
        for (dst, v) in stacked[i * k * d + c * d..i * k * d + (c + 1) * d].iter_mut().zip(&u[i * d..(i + 1) * d]) {
            *dst = T::from_f64(*v);
        }
    }
}

/// Unpacks a packed lower triangle into the lower triangle of `a`
/// (row-major `d × d`).
fn unpack_lower(packed: &[f64], d: usize, a: &mut [f64]) {
    for i in 0..d {
        a[i * d..i * d + i + 1].copy_from_slice(&packed[packed_index(i, 0)..packed_index(i, 0) + i + 1]);
    }
}

/// The covariance of component `c` as a full row-major `d × d` matrix (for
/// output), from `cov` in the engine's layout: full `K` packed lower
/// triangles, tied one packed triangle, diag `(K, d)`, spherical `(K,)`.
pub fn full_covariance(t: CovarianceType, cov: &[f64], c: usize, d: usize, out: &mut [f64]) {
    match t {
        CovarianceType::Full | CovarianceType::Tied => {
            let base = if t == CovarianceType::Full { c * packed_len(d) } else { 0 };
            for i in 0..d {
                for j in 0..=i {
                    let v = cov[base + packed_index(i, j)];
                    out[i * d + j] = v;
                    out[j * d + i] = v;
                }
            }
        }
        CovarianceType::Diag | CovarianceType::Spherical => {
            out.fill(0.0);
            for i in 0..d {
                out[i * d + i] = if t == CovarianceType::Diag { cov[c * d + i] } else { cov[c] };
            }
        }
    }
}

/// Precision Cholesky factor `U` (row-major `d × d`, upper) of a full
/// covariance given as a row-major matrix; `None` when not positive definite.
pub(crate) fn precision_cholesky(cov_full: &[f64], work: &mut CholWork, u: &mut [f64]) -> Option<()> {
    work.mats[0].copy_from_slice(cov_full);
    work.precision_cholesky_of_cov()?;
    u.copy_from_slice(work.u());
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precision_cholesky_inverts_the_covariance() {
        let d = 3;
        let cov = [4.0, 1.0, 0.5, 1.0, 3.0, 0.2, 0.5, 0.2, 2.0];
        let mut work = CholWork::new(d, 2);
        let mut u = vec![0.0; 9];
        precision_cholesky(&cov, &mut work, &mut u).unwrap();
        // Σ U Uᵀ = I
        for i in 0..d {
            for j in 0..d {
                let p = |a: usize, b: usize| (0..d).map(|q| u[a * d + q] * u[b * d + q]).sum::<f64>();
                let v: f64 = (0..d).map(|q| cov[i * d + q] * p(q, j)).sum();
                assert!((v - f64::from(u8::from(i == j))).abs() < 1e-12, "({i},{j}) {v}");
            }
            for j in 0..i {
                assert_eq!(u[i * d + j], 0.0);
            }
        }
        // From the precision, the flipped Cholesky gives the same factor.
        let prec: Vec<f64> = (0..9).map(|ij| (0..d).map(|q| u[(ij / d) * d + q] * u[(ij % d) * d + q]).sum()).collect();
        work.mats[0].copy_from_slice(&prec);
        work.precision_cholesky_of_precision().unwrap();
        for (a, b) in u.iter().zip(work.u()) {
            assert!((a - b).abs() < 1e-12, "{a} vs {b}");
        }
        // And the factor gives back the covariance.
        let mut w = vec![0.0; 9];
        let mut packed = vec![0.0; packed_len(d)];
        covariance_of_factor(&u, d, &mut w, &mut packed);
        for i in 0..d {
            for j in 0..=i {
                assert!((packed[packed_index(i, j)] - cov[i * d + j]).abs() < 1e-12, "({i},{j})");
            }
        }
        let singular = [1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0];
        assert!(precision_cholesky(&singular, &mut work, &mut u).is_none());
    }
}
