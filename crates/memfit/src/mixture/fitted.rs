//! What a Gaussian-mixture fit returns ([`GmmFit`], [`GmmTimings`]) and
//! where its per-sample results go ([`Outputs`]).

use std::sync::Arc;

use super::components::{component_cov_len, full_covariance, packed_index, packed_len, precision_cholesky, CholWork};
use super::groups::ParamStore;
use super::params::CovarianceType;
use crate::error::{Error, Result};

/// Seconds spent per phase.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct GmmTimings {
    /// Validation pass (non-finite check, means, init sample).
    pub validate_secs: f64,
    /// Initialisation (k-means runs, initial responsibilities pass).
    pub init_secs: f64,
    /// EM iterations, all initialisations.
    pub em_secs: f64,
    /// Of `em_secs`: E-steps (log-densities, log-sum-exp, responsibilities).
    pub e_step_secs: f64,
    /// Of `em_secs`: M-step sums.
    pub m_step_secs: f64,
    /// Final E-step pass (score, labels, outputs).
    pub final_pass_secs: f64,
}

/// Where per-sample results of an E-step pass go, in row order, block by
/// block: labels (`u32`, the most probable component), probabilities
/// (row-major `(rows, n_components)`) and `log p(x_i)`.
#[derive(Default)]
pub struct Outputs<'f> {
    /// Receives labels.
    pub labels: Option<Sink<'f, u32>>,
    /// Receives per-sample log-likelihoods (`score_samples`).
    pub log_likelihood: Option<Sink<'f, f64>>,
    /// Receives responsibilities (`predict_proba`) by blocks of rows and
    /// columns: `(first_row, first_component, n_components, values)` with
    /// `values` row-major `(rows, n_components)`; rows count from the data's
    /// first row. A mixture in memory sends every column of a block at once;
    /// one fitted in component groups sends each group's columns in turn.
    pub proba: Option<ColumnSink<'f>>,
}

/// A callback fed blocks of responsibilities for some rows and components
/// (see [`Outputs::proba`]).
pub type ColumnSink<'f> = &'f mut dyn FnMut(usize, usize, usize, &[f64]) -> Result<()>;

/// A callback fed per-sample results in row order, one block at a time.
pub type Sink<'f, E> = &'f mut dyn FnMut(&[E]) -> Result<()>;

/// A fitted Gaussian mixture and what the fit measured.
#[derive(Debug, Clone)]
pub struct GmmFit {
    /// Covariance form.
    pub covariance_type: CovarianceType,
    /// Number of components `K`.
    pub n_components: usize,
    /// Number of features `d`.
    pub n_features: usize,
    /// Number of rows.
    pub n_samples: usize,
    /// Mixture weights, `(K,)`, summing to 1.
    pub weights: Vec<f64>,
    /// Means in the data's coordinates, row-major `(K, d)`.
    pub means: Vec<f64>,
    /// Covariances in the compact layout: full `K` packed lower triangles,
    /// tied one, diag `(K, d)`, spherical the first `K` values; empty when
    /// the fit ran in component groups (they are then on disk). Use
    /// [`GmmFit::covariance`] or [`GmmFit::parameter_blocks`], which read
    /// either.
    pub covariances: Vec<f64>,
    /// The covariances of a fit in component groups, in its scratch file
    /// (removed when the last clone of the fit is dropped).
    pub(crate) stored: Option<Arc<StoredCovariances>>,
    /// The column means the engine shifted the data by (the E-step's origin).
    pub shift: Vec<f64>,
    /// Lower bound (mean log-likelihood per sample) of the kept run's last
    /// iteration, as scikit-learn's `lower_bound_` (−∞ when `max_iter` is 0).
    pub lower_bound: f64,
    /// Lower bound of every iteration of the kept run (`lower_bounds_`).
    pub lower_bounds: Vec<f64>,
    /// Iterations of the kept run.
    pub n_iter: usize,
    /// Whether the kept run met `tol` before `max_iter`.
    pub converged: bool,
    /// Final lower bound of each initialisation.
    pub lower_bound_per_init: Vec<f64>,
    /// Index of the kept initialisation.
    pub best_init: usize,
    /// Mean log-likelihood per sample of the fitted model (`score(X)`).
    pub score: f64,
    /// Sum of sample weights (`n_samples` without weights).
    pub n_effective: f64,
    /// Free parameters of the model.
    pub n_parameters: usize,
    /// Floating-point operations of one E-step pass (the log-density
    /// products; `d (d + 1)` per row and component for full).
    pub e_step_flops: f64,
    /// E-step throughput over the EM iterations, in GFLOP/s.
    pub e_step_gflops_per_sec: f64,
    /// Bayesian information criterion, `−2 · score · n + p · ln n`.
    pub bic: f64,
    /// Akaike information criterion, `−2 · score · n + 2 p`.
    pub aic: f64,
    /// Seconds per phase.
    pub timings: GmmTimings,
    /// Warnings for the user (no convergence, ...).
    pub warnings: Vec<crate::warning::Warning>,
}

/// Covariances a fit in component groups keeps in its scratch file.
#[derive(Debug)]
pub struct StoredCovariances {
    store: ParamStore,
    slot: usize,
}

impl StoredCovariances {
    pub(crate) fn new(store: ParamStore, slot: usize) -> Self {
        StoredCovariances { store, slot }
    }
}

impl GmmFit {
    /// Checks that float32 holds every variance of the covariances in
    /// memory with a finite inverse (at least `1 / f32::MAX`), as a
    /// float32 model needs: scikit-learn, computing in float32, finds such
    /// a covariance not positive definite (a variance that rounds to 0), or
    /// its precision infinite.
    ///
    /// # Errors
    /// [`Error::IllDefinedCovariance`] (float32) naming the first component
    /// (or the shared covariance) with a variance below that.
    pub(crate) fn check_float32_variances(&self, reg_covar: f64) -> Result<()> {
        let (k, d, t) = (self.n_components, self.n_features, self.covariance_type);
        if self.covariances_on_disk() {
            return Ok(());
        }
        let held = |v: f64| v as f32 >= 1.0 / f32::MAX;
        let bad = match t {
            CovarianceType::Full | CovarianceType::Tied => {
                let count = if t == CovarianceType::Full { k } else { 1 };
                let cov = &self.covariances;
                (0..count).find(|c| (0..d).any(|i| !held(cov[c * packed_len(d) + packed_index(i, i)])))
            }
            CovarianceType::Diag => (0..k).find(|c| self.covariances[c * d..(c + 1) * d].iter().any(|&v| !held(v))),
            CovarianceType::Spherical => (0..k).find(|&c| !held(self.covariances[c])),
        };
        match bad {
            Some(c) => Err(Error::IllDefinedCovariance {
                component: (t != CovarianceType::Tied).then_some(c),
                reg_covar,
                float32: true,
            }),
            None => Ok(()),
        }
    }

    /// Whether the covariances are on disk (a fit in component groups).
    pub fn covariances_on_disk(&self) -> bool {
        self.stored.is_some()
    }

    /// Covariance of component `c` as a row-major `(d, d)` matrix in `out`
    /// (tied: the shared one).
    ///
    /// # Errors
    /// [`Error::Io`] when the covariances are on disk and cannot be read.
    ///
    /// # Panics
    /// If `out` is not `d × d` or `c ≥ n_components`.
    pub fn covariance(&self, c: usize, out: &mut [f64]) -> Result<()> {
        let (d, t) = (self.n_features, self.covariance_type);
        assert!(c < self.n_components && out.len() == d * d);
        match &self.stored {
            Some(s) => {
                let mut one = vec![0.0; component_cov_len(t, d)];
                s.store.cov(s.slot, c, &mut one)?;
                full_covariance(t, &one, 0, d, out);
            }
            None => full_covariance(t, &self.covariances, c, d, out),
        }
        Ok(())
    }

    /// Hands `covariances_` and `precisions_cholesky_` to `f` in
    /// scikit-learn's layout (shape [`CovarianceType::param_shape`], row-major
    /// `f64`), piece by piece in order: full one `(d, d)` pair per component,
    /// tied one pair, diag and spherical all values at once (one component
    /// at a time when they are on disk). At most one `d × d` matrix of each
    /// is held at a time.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] if a covariance is not positive definite
    /// (cannot happen for a fitted model); scratch read errors; whatever `f`
    /// returns.
    pub fn parameter_blocks(&self, mut f: impl FnMut(&[f64], &[f64]) -> Result<()>) -> Result<()> {
        let (k, d, t) = (self.n_components, self.n_features, self.covariance_type);
        match t {
            CovarianceType::Full | CovarianceType::Tied => {
                let mut cov = vec![0.0; d * d];
                let mut u = vec![0.0; d * d];
                let mut work = CholWork::new(d, 2);
                for c in 0..if t == CovarianceType::Full { k } else { 1 } {
                    self.covariance(c, &mut cov)?;
                    precision_cholesky(&cov, &mut work, &mut u).ok_or_else(|| {
                        Error::param("covariances", format!("component {c} is not positive definite"))
                    })?;
                    f(&cov, &u)?;
                }
                Ok(())
            }
            CovarianceType::Diag | CovarianceType::Spherical => {
                let inv = |cov: &[f64]| cov.iter().map(|v| 1.0 / v.sqrt()).collect::<Vec<f64>>();
                match &self.stored {
                    Some(s) => {
                        let mut cov = vec![0.0; component_cov_len(t, d)];
                        for c in 0..k {
                            s.store.cov(s.slot, c, &mut cov)?;
                            f(&cov, &inv(&cov))?;
                        }
                        Ok(())
                    }
                    None => {
                        let cov = &self.covariances[..if t == CovarianceType::Diag { k * d } else { k }];
                        f(cov, &inv(cov))
                    }
                }
            }
        }
    }

    /// Precision Cholesky factor of component `c` (upper triangular,
    /// row-major `(d, d)`) from its covariance, as scikit-learn's
    /// `precisions_cholesky_`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] if the covariance is not positive definite
    /// (cannot happen for a fitted model); scratch read errors.
    pub fn precision_cholesky(&self, c: usize, out: &mut [f64]) -> Result<()> {
        let d = self.n_features;
        let mut cov = vec![0.0; d * d];
        self.covariance(c, &mut cov)?;
        precision_cholesky(&cov, &mut CholWork::new(d, 2), out)
            .ok_or_else(|| Error::param("covariances", format!("component {c} is not positive definite")))
    }
}
