//! K-means hyperparameters, checked once into a valid configuration.

use crate::error::{Error, Result};

/// How the initial centres are chosen.
#[derive(Debug, Clone, PartialEq)]
pub enum Init {
    /// Greedy k-means++ (Arthur & Vassilvitskii 2007, with scikit-learn's
    /// `2 + ln k` local trials per centre), on a uniform sample of at most
    /// [`KMeansParams::init_sample_rows`] rows.
    KMeansPlusPlus,
    /// `n_clusters` distinct rows drawn at random (with probability
    /// proportional to `sample_weight` when given), as scikit-learn's `"random"`.
    Random,
    /// Given centres in the data's original coordinates: row-major
    /// `(n_rows, n_cols)`, which must equal `(n_clusters, n_features)`.
    Centers {
        /// Row-major values; empty while a caller plans before it reads
        /// them (a command line's file), which needs only the shape: a fit
        /// refuses empty values.
        values: Vec<f64>,
        /// Rows of the given array.
        n_rows: usize,
        /// Columns of the given array.
        n_cols: usize,
    },
}

impl Init {
    /// scikit-learn's name for the method (`"k-means++"`, `"random"`, `"array"`).
    pub fn name(&self) -> &'static str {
        match self {
            Init::KMeansPlusPlus => "k-means++",
            Init::Random => "random",
            Init::Centers { .. } => "array",
        }
    }
}

/// How the Lloyd iterations assign rows to centres. Every choice gives the
/// same labels, centres, inertia and iteration count, bit for bit: bounds
/// skip only distances that cannot change a label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Algorithm {
    /// Two plain passes (the second, warm, timed), then bounded ones while
    /// they are faster: a bounded pass slower than the latest plain one, or
    /// over 90 % of its time while its skip share has stopped rising,
    /// pauses the bounds for 4, then 8, 16, … plain passes, after which they
    /// start afresh (early passes, whose centres move far, may not pay where
    /// later ones do). See `cluster::auto`.
    #[default]
    Auto,
    /// Plain Lloyd: every row against every centre, every iteration.
    Lloyd,
    /// Hamerly's bounds every iteration (G. Hamerly, "Making k-means even
    /// faster", SDM 2010): a row whose distance to its centre is below a
    /// lower bound on its distance to every other centre keeps its label
    /// without computing the other distances.
    Bounded,
}

impl Algorithm {
    /// The name fronts show (`"auto"`, `"lloyd"`, `"bounded"`).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Auto => "auto",
            Algorithm::Lloyd => "lloyd",
            Algorithm::Bounded => "bounded",
        }
    }
}

/// How k-means measures how far a row is from a centre.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Metric {
    /// Squared Euclidean distance (Lloyd's k-means).
    #[default]
    Euclidean,
    /// Cosine: spherical k-means (I. S. Dhillon and D. S. Modha, "Concept
    /// decompositions for large sparse text data using clustering", Machine
    /// Learning 2001; faiss's `spherical=True`). Rows are read scaled to unit
    /// norm ([`crate::io::Source::unit_rows`]), each is assigned to the centre
    /// of largest cosine similarity (largest inner product, the lowest index
    /// on ties as in faiss: see [`crate::kernels::unit_sq_dist`]), and each centre
    /// is its rows' weighted mean scaled to unit norm. The inertia is
    /// `Σ w ‖x/‖x‖ − c‖² = 2 Σ w (1 − cos(x, c))`.
    Cosine,
}

impl Metric {
    /// The name fronts show (`"euclidean"`, `"cosine"`).
    pub fn name(self) -> &'static str {
        match self {
            Metric::Euclidean => "euclidean",
            Metric::Cosine => "cosine",
        }
    }
}

/// K-means hyperparameters, named and defaulted as scikit-learn's `KMeans`
/// (how the fit runs, its memory limit included, is the job's
/// [`crate::exec::RunOptions`]).
#[derive(Debug, Clone, PartialEq)]
pub struct KMeansParams {
    /// Number of clusters `k` (≥ 1, ≤ `n_samples`). Default 8.
    pub n_clusters: usize,
    /// Initialisation method. Default k-means++.
    pub init: Init,
    /// Number of initialisations; the run with the lowest inertia is kept.
    /// `None` is scikit-learn's `"auto"`: 1 for k-means++ and given centres,
    /// 10 for random (3 for mini-batch, as scikit-learn's `MiniBatchKMeans`).
    pub n_init: Option<usize>,
    /// Maximum Lloyd iterations (mini-batch: passes' worth of steps) per
    /// initialisation. Default 300.
    pub max_iter: usize,
    /// Relative tolerance: a run stops when the sum of squared centre shifts
    /// is at most `tol × mean(var(X, axis=0))` (scikit-learn's meaning), or
    /// when no label changes. Default 1e-4.
    pub tol: f64,
    /// Seed of every random choice; the same seed gives bitwise-identical
    /// results for any thread count. Default 0.
    pub random_state: u64,
    /// Rows in the k-means++ sample; `None` picks
    /// [`super::default_init_sample_rows`] (all rows when `n_samples` is
    /// smaller), whatever the memory limit (a limit too small for it spills it
    /// to scratch files).
    pub init_sample_rows: Option<usize>,
    /// Rows to keep (with their labels) for a scatter plot; 0 for none.
    pub plot_sample_rows: usize,
    /// How iterations assign rows. Default [`Algorithm::Auto`].
    pub algorithm: Algorithm,
    /// Mini-batch steps instead of Lloyd iterations (see
    /// [`MiniBatchParams`]); `None`, the default, is Lloyd.
    pub mini_batch: Option<MiniBatchParams>,
    /// The distance. Default [`Metric::Euclidean`].
    pub metric: Metric,
}

/// Mini-batch k-means (D. Sculley, "Web-scale k-means clustering", WWW
/// 2010; scikit-learn's `MiniBatchKMeans`): each step draws `batch_size`
/// rows uniformly with replacement (with probability proportional to
/// `sample_weight` when given), assigns them to their exact nearest centres
/// and moves each centre to the running mean of the rows it has absorbed
/// ([`super::MiniBatch::step`]). A fit runs `max_iter × n_samples /
/// batch_size` steps at most and stops early as scikit-learn's
/// ([`super::EarlyStop`]); `tol` applies to the squared centre change of a
/// step. Rows are drawn by a seeded generator, so a fit does not depend on
/// threads, the memory limit or how the data are stored.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MiniBatchParams {
    /// Rows per batch (≥ 1; at most `n_samples` are used). Default 1024.
    pub batch_size: usize,
    /// Consecutive steps without a new minimum of the smoothed batch
    /// inertia before stopping; `None` never stops on it. Default 10.
    pub max_no_improvement: Option<usize>,
    /// Centres that absorbed less than this share of the heaviest centre's
    /// weight are moved to rows of the batch (≥ 0). Default 0.01.
    pub reassignment_ratio: f64,
}

impl Default for MiniBatchParams {
    fn default() -> Self {
        MiniBatchParams { batch_size: 1024, max_no_improvement: Some(10), reassignment_ratio: 0.01 }
    }
}

impl Default for KMeansParams {
    fn default() -> Self {
        KMeansParams {
            n_clusters: 8,
            init: Init::KMeansPlusPlus,
            n_init: None,
            max_iter: 300,
            tol: 1e-4,
            random_state: 0,
            init_sample_rows: None,
            plot_sample_rows: 0,
            algorithm: Algorithm::Auto,
            mini_batch: None,
            metric: Metric::Euclidean,
        }
    }
}

impl KMeansParams {
    /// The number of initialisations actually run (see [`KMeansParams::n_init`]).
    pub fn effective_n_init(&self) -> usize {
        match (&self.init, self.n_init) {
            (Init::Centers { .. }, _) => 1,
            (_, Some(n)) => n,
            (Init::Random, None) if self.mini_batch.is_some() => 3,
            (Init::Random, None) => 10,
            (_, None) => 1,
        }
    }

    /// Checks every rule against a data set of shape `(n_samples, n_features)`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] naming the parameter, or
    /// [`Error::ShapeMismatch`] for given centres of the wrong shape, or
    /// [`Error::NonFinite`] for non-finite given centres.
    pub fn validate(&self, n_samples: usize, n_features: usize) -> Result<()> {
        if n_samples == 0 || n_features == 0 {
            return Err(Error::param(
                "X",
                format!("the data has shape ({n_samples}, {n_features}); at least one row and one column are needed"),
            ));
        }
        if self.n_clusters == 0 {
            return Err(Error::param("n_clusters", "must be at least 1, got 0"));
        }
        if self.n_clusters > n_samples {
            return Err(Error::param(
                "n_clusters",
                format!(
                    "n_clusters = {} exceeds n_samples = {n_samples}; hint: use at most {n_samples} cluster{}",
                    self.n_clusters,
                    if n_samples == 1 { "" } else { "s" }
                ),
            ));
        }
        if self.n_clusters > u32::MAX as usize {
            return Err(Error::param("n_clusters", "must be below 2^32"));
        }
        if self.n_init == Some(0) {
            return Err(Error::param("n_init", "must be at least 1, got 0"));
        }
        if self.max_iter == 0 {
            return Err(Error::param("max_iter", "must be at least 1, got 0"));
        }
        if !(self.tol.is_finite() && self.tol >= 0.0) {
            return Err(Error::param("tol", format!("must be finite and >= 0, got {}", self.tol)));
        }
        if let Init::Centers { values: c, n_rows, n_cols } = &self.init {
            // Empty values: not read yet (see `Init::Centers`); a fit checks them.
            if (*n_rows, *n_cols) != (self.n_clusters, n_features) || (!c.is_empty() && c.len() != n_rows * n_cols) {
                return Err(Error::ShapeMismatch {
                    what: "init".into(),
                    expected: vec![self.n_clusters, n_features],
                    found: vec![*n_rows, *n_cols],
                    hint: "give one row per cluster and one column per feature of the data",
                });
            }
            if let Some(i) = c.iter().position(|v| !v.is_finite()) {
                return Err(Error::param(
                    "init",
                    format!(
                        "centre {} feature {} is {}; hint: init centres must be finite",
                        i / n_features,
                        i % n_features,
                        c[i]
                    ),
                ));
            }
        }
        if let Some(mb) = &self.mini_batch {
            if mb.batch_size == 0 {
                return Err(Error::param("batch_size", "must be at least 1, got 0"));
            }
            if !(mb.reassignment_ratio.is_finite() && mb.reassignment_ratio >= 0.0) {
                return Err(Error::param(
                    "reassignment_ratio",
                    format!("must be finite and >= 0, got {}", mb.reassignment_ratio),
                ));
            }
        }
        if self.init_sample_rows == Some(0) {
            return Err(Error::param("init_sample_rows", "must be at least 1"));
        }
        Ok(())
    }
}
