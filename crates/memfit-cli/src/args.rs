//! Command-line arguments.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Large-array numerical work within a memory limit.
#[derive(Debug, Parser)]
#[command(name = "memfit", version, about, long_about = None)]
pub struct Cli {
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// memfit's commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Cluster the rows of a .npy file with k-means (Lloyd), out of core.
    ///
    /// With no INPUT, runs on a built-in default: 2,000,000 × 3 Gaussian blobs, n_clusters = 200.
    Kmeans(KmeansArgs),
    /// Assign the rows of a .npy file to the nearest of saved centres.
    Predict(PredictArgs),
    /// Fit a Gaussian mixture by EM to the rows of a .npy file, out of core.
    Gmm(GmmArgs),
    /// Labels, probabilities and log-likelihoods of rows under a saved mixture.
    GmmPredict(GmmPredictArgs),
    /// Row-wise quadratic form q_i = x_iᵀ Q x_i (NumPy: np.sum((X @ Q) * X, axis=1)), out of core.
    QuadraticForm(QuadraticFormArgs),
    /// Weighted scatter matrix Xᵀ diag(w) X (NumPy: (X.T * w) @ X), out of core.
    Scatter(ScatterArgs),
    /// Write a synthetic data set to .npy, streamed in blocks.
    #[command(subcommand)]
    Generate(Generate),
}

/// Options shared by every command that reads data.
#[derive(Debug, Args)]
pub struct Common {
    /// Memory limit for all buffers: 512MiB, 2GiB, 1.5GiB (powers of 1024),
    /// 2GB or 2G (powers of 1000), or plain bytes. Default: half of the
    /// available memory (MemAvailable, or the cgroup limit if lower).
    #[arg(long, allow_negative_numbers = true, value_name = "SIZE")]
    pub memory_limit: Option<String>,
    /// Worker threads. Default: the CPUs this process may use (affinity
    /// mask, cgroup CPU quota), at most OMP_NUM_THREADS when set;
    /// RAYON_NUM_THREADS sets it outright (at most 4 per CPU, at least 64).
    /// Results do not depend on it.
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub threads: Option<usize>,
    /// Compute dtype; integer and float16 input is converted per block, and
    /// sums always accumulate in float64. Default: float64 for float64,
    /// int32, int64, uint32 and uint64 input, and for big-endian float32
    /// ('>f4', as NumPy converts it) (as in Python); float32 for
    /// float32, float16, bool, int8, uint8, int16 and uint16 input (exact in
    /// float32), where kmeans keeps float64 centres (the float64 fit's
    /// results, as in Python); predict: float32 only for float32 input on
    /// float32 centres (as in Python); gmm-predict: the dtype the model was
    /// fitted in; scatter: float64 only (its sums of products). With
    /// float32, integers beyond 2^24 in magnitude are rounded, and a warning
    /// names the first one's column.
    #[arg(long, value_enum)]
    pub dtype: Option<ComputeDtype>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

impl Common {
    /// The compute dtype: `--dtype`, else float64 for input whose values
    /// float32 may round (float64, and integers of 32 or 64 bits) and
    /// float32 for the rest (float32, float16, bool and integers of 8 or 16
    /// bits), whose values float32 holds exactly; a `.npy` file of
    /// float32 in the other byte order computes in float64, as scikit-learn
    /// and the Python package compute it.
    pub fn compute_dtype(&self, x: &memfit::io::Source<'_>) -> memfit::estimator::ComputeDtype {
        use memfit::estimator::ComputeDtype;
        let auto = if x.dtype() == memfit::io::Dtype::F32 && !x.native_order() {
            ComputeDtype::Float64
        } else {
            ComputeDtype::exact_for(x.dtype())
        };
        self.dtype.map_or(auto, Into::into)
    }

    /// The compute dtype of an assignment of `x` to centres stored as
    /// `centers`: `--dtype`, else float32 for float32 data (in this
    /// machine's byte order) on float32 centres and float64 otherwise (the
    /// Python package's `predict`).
    pub fn assign_dtype(
        &self,
        x: &memfit::io::Source<'_>,
        centers: memfit::io::Dtype,
    ) -> memfit::estimator::ComputeDtype {
        use memfit::estimator::ComputeDtype;
        let float32 = x.dtype() == memfit::io::Dtype::F32 && x.native_order() && centers == memfit::io::Dtype::F32;
        self.dtype.map_or(if float32 { ComputeDtype::Float32 } else { ComputeDtype::Float64 }, Into::into)
    }

    /// How the job runs: `--memory-limit` (or the default limit) and
    /// `--threads` (the pool the command runs in has that many).
    ///
    /// # Errors
    /// A `--memory-limit` that does not parse.
    pub fn run_options(&self) -> anyhow::Result<memfit::exec::RunOptions> {
        let limit = crate::memory_limit(self.memory_limit.as_deref())?;
        Ok(memfit::exec::RunOptions { threads: self.threads, ..memfit::exec::RunOptions::with_limit(limit) })
    }
}

/// Where a job's kernels run (k-means and Gaussian mixtures).
#[derive(Debug, Args)]
pub struct DeviceArgs {
    /// Where the kernels run: cpu, cuda (device 0) or cuda:N. CUDA needs a
    /// memfit built with the `cuda` cargo feature and an NVIDIA driver; the
    /// job is planned within --device-memory-limit, and the dry run shows
    /// that plan. k-means (kmeans, predict) then runs its assignments on the
    /// device, with the CPU's bits; mixtures (gmm, gmm-predict) their
    /// E-step's log-densities, the CPU's to rounding (mixtures held in
    /// component groups are refused).
    #[arg(long, value_name = "cpu|cuda|cuda:N", default_value = "cpu")]
    pub device: String,
    /// Device memory limit for a CUDA job, in the units of --memory-limit.
    /// Default: 90 % of the device's memory.
    #[arg(long, allow_negative_numbers = true, value_name = "SIZE")]
    pub device_memory_limit: Option<String>,
}

/// A CUDA device and its memory limit in bytes (`None`: the default).
pub type DeviceTarget = (memfit::device::Device, Option<u64>);

impl DeviceArgs {
    /// Where the job runs: `None` on the CPU, else the device and its
    /// limit. Read before any work, so a bad flag is refused first.
    ///
    /// # Errors
    /// A `--device` or `--device-memory-limit` that does not parse, or a
    /// device memory limit for a CPU job.
    pub fn target(&self) -> anyhow::Result<Option<DeviceTarget>> {
        let device: memfit::device::Device = self.device.parse()?;
        let limit = self
            .device_memory_limit
            .as_deref()
            .map(|t| memfit::plan::parse_size_as("device_memory_limit", t))
            .transpose()?;
        if device.is_cpu() {
            if limit.is_some() {
                anyhow::bail!("--device-memory-limit needs --device cuda (the job runs on the CPU)");
            }
            return Ok(None);
        }
        Ok(Some((device, limit)))
    }
}

impl From<ComputeDtype> for memfit::estimator::ComputeDtype {
    fn from(d: ComputeDtype) -> Self {
        match d {
            ComputeDtype::Float32 => memfit::estimator::ComputeDtype::Float32,
            ComputeDtype::Float64 => memfit::estimator::ComputeDtype::Float64,
        }
    }
}

/// A floating-point dtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ComputeDtype {
    /// 32-bit floats.
    Float32,
    /// 64-bit floats.
    Float64,
}

/// How k-means iterations assign rows (the same bits whichever).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KmeansAlgorithm {
    /// Bounded while a bounded pass is clearly faster than a full one, plain Lloyd otherwise.
    Auto,
    /// Every row against every centre, every iteration.
    Lloyd,
    /// Hamerly's bounds every iteration (`elkan` is accepted as an alias).
    #[value(alias = "elkan")]
    Bounded,
}

impl From<KmeansAlgorithm> for memfit::cluster::Algorithm {
    fn from(a: KmeansAlgorithm) -> Self {
        match a {
            KmeansAlgorithm::Auto => memfit::cluster::Algorithm::Auto,
            KmeansAlgorithm::Lloyd => memfit::cluster::Algorithm::Lloyd,
            KmeansAlgorithm::Bounded => memfit::cluster::Algorithm::Bounded,
        }
    }
}

/// How k-means measures distance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KmeansMetric {
    /// Squared Euclidean distance (Lloyd's k-means).
    Euclidean,
    /// Cosine: spherical k-means (rows scaled to unit norm as they are read,
    /// centres scaled to unit norm each iteration, as faiss's spherical=True).
    Cosine,
}

impl From<KmeansMetric> for memfit::cluster::Metric {
    fn from(m: KmeansMetric) -> Self {
        match m {
            KmeansMetric::Euclidean => memfit::cluster::Metric::Euclidean,
            KmeansMetric::Cosine => memfit::cluster::Metric::Cosine,
        }
    }
}

/// `memfit kmeans`.
#[derive(Debug, Args)]
pub struct KmeansArgs {
    /// Input .npy file of shape (n_samples, n_features): float16/32/64,
    /// bool, int8/16/32/64, uint8/16/32/64, C or Fortran order, either byte
    /// order; or a sparse (CSR)
    /// matrix, read in row blocks: a .npz of scipy.sparse.save_npz (its
    /// arrays unpacked into unnamed files in --scratch-dir), or a folder of
    /// indptr.npy, indices.npy, data.npy and shape.npy (an unzipped .npz).
    /// Omit to run the built-in default.
    #[arg(value_name = "INPUT.npy")]
    pub input: Option<PathBuf>,
    /// Number of clusters (default 8; 200 for the built-in default input).
    #[arg(long, allow_negative_numbers = true, short = 'k', value_name = "K")]
    pub n_clusters: Option<usize>,
    /// k-means++, random, or a .npy of initial centres (n_clusters, n_features).
    #[arg(long, default_value = "k-means++", value_name = "k-means++|random|FILE.npy")]
    pub init: std::ffi::OsString,
    /// Number of initialisations; the lowest inertia wins
    /// (default: 1 for k-means++ and a file, 10 for random).
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub n_init: Option<usize>,
    /// Maximum iterations per initialisation (default: 300, and 100 with
    /// --mini-batch, as scikit-learn's MiniBatchKMeans).
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub max_iter: Option<usize>,
    /// Stop when the sum of squared centre shifts is at most
    /// tol × mean feature variance (scikit-learn's meaning; default: 1e-4,
    /// and 0 with --mini-batch, as scikit-learn's MiniBatchKMeans).
    #[arg(long, allow_negative_numbers = true, value_name = "T")]
    pub tol: Option<f64>,
    /// Random seed; the same seed gives identical results for any thread count.
    #[arg(long, allow_negative_numbers = true, default_value_t = 0, value_name = "S")]
    pub seed: u64,
    /// How iterations assign rows: bounded (Hamerly's bounds skip the
    /// distances that cannot change a label), lloyd (all distances), or
    /// auto (bounded while it pays). All give the same labels, centres and
    /// inertia, bit for bit. Not with --mini-batch (its steps assign each
    /// batch in full).
    #[arg(long, value_enum, default_value = "auto", conflicts_with = "mini_batch")]
    pub algorithm: KmeansAlgorithm,
    /// The distance: euclidean, or cosine (spherical k-means; the inertia is
    /// then Σ ‖x/‖x‖ − c‖² = 2 Σ (1 − cos)).
    #[arg(long, value_enum, default_value = "euclidean")]
    pub metric: KmeansMetric,
    /// Mini-batch k-means (scikit-learn's MiniBatchKMeans) with batches of
    /// SIZE rows drawn at random (by weight with --sample-weight) and read
    /// where they lie: up to max-iter × n_samples / SIZE steps, then one
    /// pass for the labels and inertia. Faster than full passes on large
    /// data, at a slightly higher inertia.
    #[arg(long, value_name = "SIZE", allow_negative_numbers = true)]
    pub mini_batch: Option<usize>,
    /// With --mini-batch: stop after N steps without a new minimum of the
    /// smoothed batch inertia (0: never).
    #[arg(long, default_value_t = 10, value_name = "N", requires = "mini_batch", allow_negative_numbers = true)]
    pub max_no_improvement: usize,
    /// With --mini-batch: move centres that absorbed less than R times the
    /// heaviest centre's weight to rows of the batch.
    #[arg(long, default_value_t = 0.01, value_name = "R", requires = "mini_batch", allow_negative_numbers = true)]
    pub reassignment_ratio: f64,
    /// Per-sample weights, a 1-D .npy of shape (n_samples,) (as scikit-learn's sample_weight).
    #[arg(long, value_name = "FILE.npy")]
    pub sample_weight: Option<PathBuf>,
    /// Write labels (int32, shape (n_samples,)).
    #[arg(long, value_name = "OUT.npy")]
    pub labels: Option<PathBuf>,
    /// Write centres (compute dtype, shape (n_clusters, n_features)).
    #[arg(long, value_name = "OUT.npy")]
    pub centers: Option<PathBuf>,
    /// Write a JSON summary (inertia, n_iter, converged, timings, peak_rss_bytes, plan);
    /// `-` prints it to stdout.
    #[arg(long, value_name = "OUT.json")]
    pub summary: Option<PathBuf>,
    /// Draw a scatter plot of a sample of points coloured by cluster.
    #[arg(long, value_name = "OUT.png")]
    pub plot: Option<PathBuf>,
    /// With --plot: project onto the first two principal components instead
    /// of plotting features 0 and 1.
    #[arg(long, requires = "plot")]
    pub plot_pca: bool,
    /// Folder for scratch files: the k-means++ sample when it exceeds the
    /// memory limit, the bounds when they do (default: the system's
    /// temporary folder, TMPDIR). The files have no name there and vanish
    /// when the run ends, however it ends.
    #[arg(long, value_name = "DIR")]
    pub scratch_dir: Option<PathBuf>,
    /// Print the memory plan and exit without reading data.
    #[arg(long)]
    pub dry_run: bool,
    /// Where the kernels run.
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Shared options.
    #[command(flatten)]
    pub common: Common,
}

/// `memfit predict`.
#[derive(Debug, Args)]
pub struct PredictArgs {
    /// Input .npy file of shape (n_samples, n_features), or a sparse (CSR)
    /// .npz or folder as `memfit kmeans` reads them.
    #[arg(value_name = "INPUT.npy")]
    pub input: PathBuf,
    /// Centres, a .npy of shape (n_clusters, n_features).
    #[arg(long, value_name = "C.npy")]
    pub centers: PathBuf,
    /// Where to write the labels (int32, shape (n_samples,)).
    #[arg(long, value_name = "OUT.npy")]
    pub labels: PathBuf,
    /// The distance the centres were fitted with (cosine: rows are scaled to
    /// unit norm as they are read).
    #[arg(long, value_enum, default_value = "euclidean")]
    pub metric: KmeansMetric,
    /// Folder where a deflated .npz input's arrays are unpacked (default:
    /// the system's temporary folder, TMPDIR). The files have no name there
    /// and vanish when the run ends, however it ends.
    #[arg(long, value_name = "DIR")]
    pub scratch_dir: Option<PathBuf>,
    /// Print the memory plan and exit without reading data.
    #[arg(long)]
    pub dry_run: bool,
    /// Where the kernels run.
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Shared options.
    #[command(flatten)]
    pub common: Common,
}

/// `memfit gmm`.
#[derive(Debug, Args)]
pub struct GmmArgs {
    /// Input .npy file of shape (n_samples, n_features): float16/32/64,
    /// bool, int8/16/32/64, uint8/16/32/64, C or Fortran order, either byte
    /// order.
    #[arg(value_name = "INPUT.npy")]
    pub input: PathBuf,
    /// Number of mixture components.
    #[arg(long, allow_negative_numbers = true, short = 'k', default_value_t = 1, value_name = "K")]
    pub n_components: usize,
    /// Covariance form of the components.
    #[arg(long, default_value = "full", value_name = "full|tied|diag|spherical")]
    pub covariance_type: String,
    /// Non-negative regularisation added to the covariances' diagonal.
    #[arg(long, allow_negative_numbers = true, default_value_t = 1e-6, value_name = "R")]
    pub reg_covar: f64,
    /// How initial responsibilities are drawn (not with --warm-start, which starts from the model).
    #[arg(
        long,
        default_value = "kmeans",
        value_name = "kmeans|k-means++|random|random_from_data",
        conflicts_with = "warm_start"
    )]
    pub init: String,
    /// Initial means, a .npy of shape (n_components, n_features).
    #[arg(long, value_name = "F.npy")]
    pub means_init: Option<PathBuf>,
    /// Initial weights, a .npy of shape (n_components,) summing to 1.
    #[arg(long, value_name = "F.npy")]
    pub weights_init: Option<PathBuf>,
    /// Initial precisions (inverse covariances), shaped as scikit-learn's
    /// precisions_init for the covariance type.
    #[arg(long, value_name = "F.npy")]
    pub precisions_init: Option<PathBuf>,
    /// Start from a saved model folder (its weights, means and precision
    /// factors), as scikit-learn's warm_start; implies --n-init 1.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["means_init", "weights_init", "precisions_init"])]
    pub warm_start: Option<PathBuf>,
    /// Number of initialisations; the highest lower bound wins.
    #[arg(long, allow_negative_numbers = true, default_value_t = 1, value_name = "N")]
    pub n_init: usize,
    /// Maximum EM iterations per initialisation.
    #[arg(long, allow_negative_numbers = true, default_value_t = 100, value_name = "N")]
    pub max_iter: usize,
    /// Stop when the lower bound (mean log-likelihood) changes by less than T.
    #[arg(long, allow_negative_numbers = true, default_value_t = 1e-3, value_name = "T")]
    pub tol: f64,
    /// Random seed; the same seed gives identical results for any thread count.
    #[arg(long, allow_negative_numbers = true, default_value_t = 0, value_name = "S")]
    pub seed: u64,
    /// Per-sample weights, a 1-D .npy of shape (n_samples,) (as scikit-learn's sample_weight).
    #[arg(long, value_name = "FILE.npy")]
    pub sample_weight: Option<PathBuf>,
    /// Write the fitted model as a folder (weights.npy, means.npy,
    /// covariances.npy, precisions_cholesky.npy, model.json).
    #[arg(long, value_name = "DIR")]
    pub model: Option<PathBuf>,
    /// Write labels of the fitted model (int32, shape (n_samples,)).
    #[arg(long, value_name = "OUT.npy")]
    pub labels: Option<PathBuf>,
    /// Write a JSON summary (lower_bound, lower_bounds, n_iter, converged,
    /// bic, aic, timings, peak_rss_bytes, plan); `-` prints it to stdout.
    #[arg(long, value_name = "OUT.json")]
    pub summary: Option<PathBuf>,
    /// Plot the lower bound per iteration.
    #[arg(long, value_name = "OUT.png")]
    pub plot: Option<PathBuf>,
    /// Folder for scratch files: the components' parameters of a mixture
    /// that exceed the memory limit and are processed in groups, the
    /// k-means++ sample when it exceeds the limit (default: the system's
    /// temporary folder, TMPDIR). The files have no name there and vanish
    /// when the run ends, however it ends.
    #[arg(long, value_name = "DIR")]
    pub scratch_dir: Option<PathBuf>,
    /// Print the memory plan and exit without reading data.
    #[arg(long)]
    pub dry_run: bool,
    /// Where the kernels run.
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Shared options.
    #[command(flatten)]
    pub common: Common,
}

/// `memfit gmm-predict`.
#[derive(Debug, Args)]
pub struct GmmPredictArgs {
    /// Input .npy file of shape (n_samples, n_features).
    #[arg(value_name = "INPUT.npy")]
    pub input: PathBuf,
    /// Model folder written by `memfit gmm --model`.
    #[arg(long, value_name = "DIR")]
    pub model: PathBuf,
    /// Write labels (int32, shape (n_samples,)).
    #[arg(long, value_name = "OUT.npy")]
    pub labels: Option<PathBuf>,
    /// Write component probabilities (float64, shape (n_samples, n_components)).
    #[arg(long, value_name = "OUT.npy")]
    pub proba: Option<PathBuf>,
    /// Write per-sample log-likelihoods (float64, shape (n_samples,)).
    #[arg(long, value_name = "OUT.npy")]
    pub log_likelihood: Option<PathBuf>,
    /// Print the memory plan and exit without reading data.
    #[arg(long)]
    pub dry_run: bool,
    /// Where the kernels run.
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Shared options.
    #[command(flatten)]
    pub common: Common,
}

/// `memfit quadratic-form`.
#[derive(Debug, Args)]
pub struct QuadraticFormArgs {
    /// Input .npy file of shape (n_samples, n_features).
    #[arg(value_name = "INPUT.npy")]
    pub input: PathBuf,
    /// Q, a .npy of shape (n_features, n_features).
    #[arg(long, value_name = "Q.npy")]
    pub q: PathBuf,
    /// Where to write q (float64, shape (n_samples,)).
    #[arg(long, value_name = "OUT.npy")]
    pub out: PathBuf,
    /// Print the memory plan and exit without reading data.
    #[arg(long)]
    pub dry_run: bool,
    /// Shared options.
    #[command(flatten)]
    pub common: Common,
}

/// `memfit scatter`.
#[derive(Debug, Args)]
pub struct ScatterArgs {
    /// Input .npy file of shape (n_samples, n_features).
    #[arg(value_name = "INPUT.npy")]
    pub input: PathBuf,
    /// Per-row weights w, a .npy of shape (n_samples,) (default: all ones).
    #[arg(long, value_name = "W.npy")]
    pub weights: Option<PathBuf>,
    /// Where to write the scatter matrix (float64, shape (n_features, n_features)).
    #[arg(long, value_name = "OUT.npy")]
    pub out: PathBuf,
    /// Print the memory plan and exit without reading data.
    #[arg(long)]
    pub dry_run: bool,
    /// Shared options (--dtype float32 is refused: the scatter computes in float64).
    #[command(flatten)]
    pub common: Common,
}

/// `memfit generate`.
#[derive(Debug, Subcommand)]
pub enum Generate {
    /// Isotropic Gaussian blobs (as scikit-learn's make_blobs), any size.
    Blobs(BlobsArgs),
}

/// `memfit generate blobs`.
#[derive(Debug, Args)]
pub struct BlobsArgs {
    /// Rows.
    #[arg(long, allow_negative_numbers = true, value_name = "N")]
    pub n_samples: usize,
    /// Columns.
    #[arg(long, allow_negative_numbers = true, default_value_t = 2, value_name = "D")]
    pub n_features: usize,
    /// Number of blobs.
    #[arg(long, allow_negative_numbers = true, default_value_t = 3, value_name = "K")]
    pub centers: usize,
    /// Standard deviation of each blob.
    #[arg(long, allow_negative_numbers = true, default_value_t = 1.0, value_name = "STD")]
    pub cluster_std: f64,
    /// Random seed.
    #[arg(long, allow_negative_numbers = true, default_value_t = 0, value_name = "S")]
    pub seed: u64,
    /// Output dtype.
    #[arg(long, value_enum, default_value = "float64")]
    pub dtype: ComputeDtype,
    /// Output .npy file.
    #[arg(long, value_name = "FILE.npy")]
    pub out: PathBuf,
    /// Also write the true blob of each row (int32).
    #[arg(long, value_name = "FILE.npy")]
    pub labels: Option<PathBuf>,
    /// Memory limit for the generation buffer (same syntax as kmeans).
    #[arg(long, allow_negative_numbers = true, value_name = "SIZE")]
    pub memory_limit: Option<String>,
    /// No progress bar: generate shows none; accepted as every other
    /// command accepts it.
    #[arg(long)]
    pub quiet: bool,
}
