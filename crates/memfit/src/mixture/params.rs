//! Gaussian-mixture hyperparameters, named and defaulted as scikit-learn's
//! `GaussianMixture`, checked once into a valid configuration.

use crate::error::{Error, Result};
use crate::io::Source;

/// The form of each component's covariance (scikit-learn's `covariance_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CovarianceType {
    /// Each component has its own general covariance matrix.
    Full,
    /// All components share one general covariance matrix.
    Tied,
    /// Each component has its own diagonal covariance matrix.
    Diag,
    /// Each component has its own single variance.
    Spherical,
}

impl CovarianceType {
    /// scikit-learn's name (`"full"`, `"tied"`, `"diag"`, `"spherical"`).
    pub fn name(self) -> &'static str {
        match self {
            CovarianceType::Full => "full",
            CovarianceType::Tied => "tied",
            CovarianceType::Diag => "diag",
            CovarianceType::Spherical => "spherical",
        }
    }

    /// Parses scikit-learn's name.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for any other name.
    pub fn parse(name: &str) -> Result<Self> {
        Ok(match name {
            "full" => CovarianceType::Full,
            "tied" => CovarianceType::Tied,
            "diag" => CovarianceType::Diag,
            "spherical" => CovarianceType::Spherical,
            other => {
                return Err(Error::param(
                    "covariance_type",
                    format!("{other:?}; hint: use one of full, tied, diag, spherical"),
                ))
            }
        })
    }

    /// Shape of the `covariances_` / `precisions_cholesky_` arrays for
    /// `k` components of `d` features: `(k, d, d)`, `(d, d)`, `(k, d)`, `(k,)`.
    pub fn param_shape(self, k: usize, d: usize) -> Vec<usize> {
        match self {
            CovarianceType::Full => vec![k, d, d],
            CovarianceType::Tied => vec![d, d],
            CovarianceType::Diag => vec![k, d],
            CovarianceType::Spherical => vec![k],
        }
    }

    /// [`Self::param_shape`] seen as a matrix `(rows, columns)`, as a
    /// source of precisions holds it (see [`PrecisionsInit`]).
    pub fn param_matrix(self, k: usize, d: usize) -> (usize, usize) {
        match self {
            CovarianceType::Full => (k * d, d),
            CovarianceType::Tied => (d, d),
            CovarianceType::Diag => (k, d),
            CovarianceType::Spherical => (k, 1),
        }
    }

    /// Free parameters of the covariances (for BIC / AIC).
    pub fn n_cov_parameters(self, k: usize, d: usize) -> usize {
        match self {
            CovarianceType::Full => k * d * (d + 1) / 2,
            CovarianceType::Tied => d * (d + 1) / 2,
            CovarianceType::Diag => k * d,
            CovarianceType::Spherical => k,
        }
    }
}

/// How initial responsibilities are drawn (scikit-learn's `init_params`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitMethod {
    /// Labels of memfit's k-means (k-means++ init, one run) as one-hot
    /// responsibilities. scikit-learn's default.
    KMeans,
    /// One-hot responsibilities at `n_components` rows chosen by greedy
    /// k-means++ (on the same uniform sample k-means uses).
    KMeansPlusPlus,
    /// Uniform random responsibilities, normalised per row.
    Random,
    /// One-hot responsibilities at `n_components` distinct rows drawn uniformly.
    RandomFromData,
}

impl InitMethod {
    /// scikit-learn's name.
    pub fn name(self) -> &'static str {
        match self {
            InitMethod::KMeans => "kmeans",
            InitMethod::KMeansPlusPlus => "k-means++",
            InitMethod::Random => "random",
            InitMethod::RandomFromData => "random_from_data",
        }
    }

    /// Parses scikit-learn's name.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for any other name.
    pub fn parse(name: &str) -> Result<Self> {
        Ok(match name {
            "kmeans" => InitMethod::KMeans,
            "k-means++" => InitMethod::KMeansPlusPlus,
            "random" => InitMethod::Random,
            "random_from_data" => InitMethod::RandomFromData,
            other => {
                return Err(Error::param(
                    "init_params",
                    format!("{other:?}; hint: use one of kmeans, k-means++, random, random_from_data"),
                ))
            }
        })
    }
}

/// Given initial precisions: either the precision matrices themselves
/// (scikit-learn's `precisions_init`) or their Cholesky factors `U` with
/// `P = U Uᵀ`, `U` upper triangular (a saved model's `precisions_cholesky`).
/// The source is seen as a matrix: `(n_components × n_features,
/// n_features)` for full, `(n_features, n_features)` for tied,
/// `(n_components, n_features)` for diag, `(n_components, 1)` for spherical.
#[derive(Debug)]
pub enum PrecisionsInit<'a> {
    /// Precision matrices (full, tied) or precisions (diag, spherical).
    Precisions(Source<'a>),
    /// Cholesky factors of the precisions, as scikit-learn's `precisions_cholesky_`.
    Cholesky(Source<'a>),
}

impl<'a> PrecisionsInit<'a> {
    /// The source holding the values.
    pub fn source(&self) -> &Source<'a> {
        match self {
            PrecisionsInit::Precisions(s) | PrecisionsInit::Cholesky(s) => s,
        }
    }
}

/// Gaussian-mixture hyperparameters, named and defaulted as scikit-learn's
/// `GaussianMixture` (how the fit runs, its memory limit included, is the
/// job's [`crate::exec::RunOptions`]).
#[derive(Debug)]
pub struct GmmParams<'a> {
    /// Number of mixture components `K` (≥ 1, ≤ `n_samples`). Default 1.
    pub n_components: usize,
    /// Covariance form. Default full.
    pub covariance_type: CovarianceType,
    /// Convergence threshold: EM stops when the lower bound (mean
    /// log-likelihood per sample) changes by less than `tol`. Default 1e-3.
    pub tol: f64,
    /// Non-negative regularisation added to the covariances' diagonal.
    /// Default 1e-6.
    pub reg_covar: f64,
    /// Maximum EM iterations per initialisation. Default 100. With 0 a fit
    /// runs none and returns the (last) initialisation, as scikit-learn's.
    pub max_iter: usize,
    /// Initialisations; the one with the highest final lower bound is kept.
    /// Default 1.
    pub n_init: usize,
    /// How initial responsibilities are drawn for parameters not given.
    pub init_params: InitMethod,
    /// Initial weights, shape `(n_components,)`, summing to 1.
    pub weights_init: Option<Vec<f64>>,
    /// Initial means in the data's coordinates, row-major `(n_components, n_features)`.
    pub means_init: Option<Vec<f64>>,
    /// Initial precisions (see [`PrecisionsInit`] for shapes).
    pub precisions_init: Option<PrecisionsInit<'a>>,
    /// Seed of every random choice; the same seed gives the same result for
    /// any thread count and memory limit. Default 0.
    pub random_state: u64,
    /// For a warm start: the lower bound the initial parameters reached in
    /// the earlier fit. The first iteration's change is measured from it (as
    /// scikit-learn's `warm_start`), so a converged model refitted is
    /// converged after one iteration. Default `None` (−∞).
    pub lower_bound_init: Option<f64>,
}

impl Default for GmmParams<'_> {
    fn default() -> Self {
        GmmParams {
            n_components: 1,
            covariance_type: CovarianceType::Full,
            tol: 1e-3,
            reg_covar: 1e-6,
            max_iter: 100,
            n_init: 1,
            init_params: InitMethod::KMeans,
            weights_init: None,
            means_init: None,
            precisions_init: None,
            random_state: 0,
            lower_bound_init: None,
        }
    }
}

impl GmmParams<'_> {
    /// Whether weights, means and precisions are all given (no initial
    /// responsibilities are needed).
    pub fn fully_initialised(&self) -> bool {
        self.weights_init.is_some() && self.means_init.is_some() && self.precisions_init.is_some()
    }

    /// The k-means fit that initialises the responsibilities when
    /// `init_params` is `kmeans` (one k-means++ run seeded by `seed`).
    pub(crate) fn kmeans_init(&self, seed: u64) -> crate::cluster::KMeansParams {
        crate::cluster::KMeansParams {
            n_clusters: self.n_components,
            init: crate::cluster::Init::KMeansPlusPlus,
            n_init: Some(1),
            random_state: seed,
            ..crate::cluster::KMeansParams::default()
        }
    }

    /// Checks every rule against data of shape `(n_samples, n_features)`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] naming the parameter, or
    /// [`Error::ShapeMismatch`] for initial arrays of the wrong shape.
    pub fn validate(&self, n_samples: usize, n_features: usize) -> Result<()> {
        let (k, d) = (self.n_components, n_features);
        if n_samples == 0 || n_features == 0 {
            return Err(Error::param(
                "X",
                format!("the data has shape ({n_samples}, {n_features}); at least one row and one column are needed"),
            ));
        }
        if n_samples == 1 {
            // As scikit-learn's (its minimum of 2 samples): one row gives no covariance.
            return Err(Error::param(
                "X",
                "the data has 1 row, but a mixture needs at least 2 (one row gives no covariance to estimate)",
            ));
        }
        if k == 0 {
            return Err(Error::param("n_components", "must be at least 1, got 0"));
        }
        if k > n_samples {
            return Err(Error::param(
                "n_components",
                format!(
                    "n_components = {k} exceeds n_samples = {n_samples}; hint: use at most {n_samples} component{}",
                    if n_samples == 1 { "" } else { "s" }
                ),
            ));
        }
        if self.n_init == 0 {
            return Err(Error::param("n_init", "must be at least 1, got 0"));
        }
        if !(self.tol.is_finite() && self.tol >= 0.0) {
            return Err(Error::param("tol", format!("must be finite and >= 0, got {}", self.tol)));
        }
        if !(self.reg_covar.is_finite() && self.reg_covar >= 0.0) {
            return Err(Error::param("reg_covar", format!("must be finite and >= 0, got {}", self.reg_covar)));
        }
        if let Some(w) = &self.weights_init {
            if w.len() != k {
                return Err(Error::ShapeMismatch {
                    what: "weights_init".into(),
                    expected: vec![k],
                    found: vec![w.len()],
                    hint: "give one weight per component",
                });
            }
            if let Some(i) = w.iter().position(|v| !(v.is_finite() && *v >= 0.0 && *v <= 1.0)) {
                return Err(Error::param(
                    "weights_init",
                    format!("weights_init[{i}] = {}; hint: weights must lie in [0, 1]", w[i]),
                ));
            }
            let s: f64 = w.iter().sum();
            if (s - 1.0).abs() > 1e-6 {
                return Err(Error::param(
                    "weights_init",
                    format!("the weights sum to {s}; hint: they must sum to 1 (divide by their sum)"),
                ));
            }
        }
        if let Some(m) = &self.means_init {
            if m.len() != k * d {
                return Err(Error::ShapeMismatch {
                    what: "means_init".into(),
                    expected: vec![k, d],
                    found: vec![m.len() / d.max(1), d],
                    hint: "give one row per component and one column per feature",
                });
            }
            if let Some(i) = m.iter().position(|v| !v.is_finite()) {
                return Err(Error::param(
                    "means_init",
                    format!("component {} feature {} is {}; hint: means must be finite", i / d, i % d, m[i]),
                ));
            }
        }
        if let Some(p) = &self.precisions_init {
            let s = p.source();
            if (s.n_samples(), s.n_features()) != self.covariance_type.param_matrix(k, d) {
                return Err(Error::ShapeMismatch {
                    what: format!("precisions_init ({})", s.name().display()),
                    expected: self.covariance_type.param_shape(k, d),
                    found: vec![s.n_samples(), s.n_features()],
                    hint: "give the shape scikit-learn uses for this covariance_type",
                });
            }
        }
        Ok(())
    }
}
