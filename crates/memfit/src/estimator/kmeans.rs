//! k-means jobs: fit, nearest centres (with the weighted inertia `score`
//! needs) and distances to the centres.

use super::{job_warnings, planned_job, prepare, ComputeDtype, Done, KMEANS_DEVICE_OUT};
use crate::cluster::{self, AssignSink, Init, KMeansFit, KMeansParams, LabelSink, Observer};
use crate::error::{Error, Result};
use crate::exec::RunOptions;
use crate::io::Source;
use crate::plan::Plan;

/// A k-means fit of `x` (with optional per-row weights) computed in
/// `compute`.
#[derive(Debug)]
pub struct KMeansJob<'a> {
    /// The hyperparameters.
    pub params: KMeansParams,
    /// The data, `(n_samples, n_features)`.
    pub x: &'a Source<'a>,
    /// Per-row weights, `(n_samples,)` or `(n_samples, 1)`.
    pub sample_weight: Option<&'a Source<'a>>,
    /// The compute dtype.
    pub compute: ComputeDtype,
    /// With a float32 `compute`, centres kept in float64
    /// ([`cluster::fit_centers`]): for data whose values float32 holds
    /// exactly ([`ComputeDtype::exact_for`]), the float64 fit's results
    /// from float32 passes.
    pub float64_centers: bool,
    /// Arrays the caller streams to files (each with a write buffer).
    pub n_outputs: usize,
    /// Other buffers the caller holds for the run (name, bytes).
    pub extra: Vec<(String, u64)>,
    /// How the job runs: memory limit, threads, row split.
    pub run: RunOptions,
}

/// The initialisation named `name` (`"k-means++"`, `"random"`), or the given
/// `centers` (row-major values, rows, columns) whatever the name.
///
/// # Errors
/// [`Error::InvalidParameter`] (`init`) for another name without centres.
pub fn parse_init(name: &str, centers: Option<(Vec<f64>, usize, usize)>) -> Result<Init> {
    match (name, centers) {
        (_, Some((values, n_rows, n_cols))) => Ok(Init::Centers { values, n_rows, n_cols }),
        ("k-means++", None) => Ok(Init::KMeansPlusPlus),
        ("random", None) => Ok(Init::Random),
        (other, None) => {
            Err(Error::param("init", format!("{other:?}; hint: use k-means++, random or an array of initial centres")))
        }
    }
}

impl KMeansJob<'_> {
    /// Checks a given scratch folder, validates the parameters against the
    /// data and plans the fit; when the plan puts scratch files (the
    /// k-means++ sample, the bounds) in a folder, checks that folder.
    ///
    /// # Errors
    /// As [`crate::io::ScratchFile::check_dir`], [`KMeansParams::validate`]
    /// and [`cluster::plan_kmeans`].
    pub fn plan(&self) -> Result<Plan> {
        if let Some(dir) = &self.run.scratch_dir {
            crate::io::ScratchFile::check_dir(dir)?;
        }
        self.params.validate(self.x.n_samples(), self.x.n_features())?;
        let (w, extra) = (self.sample_weight, &self.extra);
        let job = planned_job(self.x, w, self.compute, self.n_outputs, extra, &self.run, KMEANS_DEVICE_OUT);
        let mut plan = cluster::plan_kmeans(&self.params, &job)?;
        plan.disk.extend(self.x.scratch_disk());
        plan.check_scratch_dirs()?;
        Ok(plan)
    }

    /// Fits within `plan` (from [`KMeansJob::plan`]); final labels go to
    /// `labels`. The centres come back in `f64` (exact for either compute
    /// dtype); the fit's warnings include integers the compute dtype rounded.
    ///
    /// # Errors
    /// As [`cluster::fit`].
    pub fn fit(&self, plan: &Plan, labels: LabelSink<'_>, observer: &mut dyn Observer) -> Result<KMeansFit<f64>> {
        let (x, w, p, run) = (self.x, self.sample_weight, &self.params, &self.run);
        prepare(plan, x, w, &*observer)?;
        let mut fit = match self.compute {
            ComputeDtype::Float32 if self.float64_centers => {
                cluster::fit_centers::<f32, f64>(p, x, w, plan, run, labels, observer)?
            }
            ComputeDtype::Float32 => widen(cluster::fit::<f32>(p, x, w, plan, run, labels, observer)?),
            ComputeDtype::Float64 => cluster::fit::<f64>(p, x, w, plan, run, labels, observer)?,
        };
        fit.warnings.extend(job_warnings(plan, x, self.compute.dtype(), w));
        Ok(fit)
    }
}

/// A float32 fit with its centres in `f64` (exact).
fn widen(f: KMeansFit<f32>) -> KMeansFit<f64> {
    KMeansFit {
        cluster_centers: f.cluster_centers.iter().map(|&v| f64::from(v)).collect(),
        n_clusters: f.n_clusters,
        n_features: f.n_features,
        n_samples: f.n_samples,
        inertia: f.inertia,
        n_iter: f.n_iter,
        n_steps: f.n_steps,
        converged: f.converged,
        n_nonempty_clusters: f.n_nonempty_clusters,
        inertia_per_init: f.inertia_per_init,
        best_init: f.best_init,
        tol_abs: f.tol_abs,
        timings: f.timings,
        warnings: f.warnings,
        plot_sample: f.plot_sample,
        skip_share: f.skip_share,
    }
}

/// Fitted centres applied to `x`: nearest centres and the inertia, or the
/// distances to every centre.
#[derive(Debug)]
pub struct CentersJob<'a> {
    /// The data, `(n_samples, n_features)`.
    pub x: &'a Source<'a>,
    /// Row-major `(n_clusters, n_features)` centres.
    pub centers: &'a [f64],
    /// Number of centres.
    pub n_clusters: usize,
    /// Per-row weights of the inertia ([`CentersJob::assign`] only).
    pub sample_weight: Option<&'a Source<'a>>,
    /// The compute dtype.
    pub compute: ComputeDtype,
    /// Whether the labels go to a file writer (whose buffers are planned).
    pub labels_file: bool,
    /// How the job runs: memory limit, threads.
    pub run: RunOptions,
}

/// What [`CentersJob::assign`] returns besides the blocks it hands out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AssignResult {
    /// `Σ_i w_i ‖x_i − c_{label_i}‖²` (`w_i = 1` without weights): the
    /// inertia, `−score`.
    pub inertia: f64,
}

impl CentersJob<'_> {
    /// Fails unless there is at least one centre, the centres are
    /// `(n_clusters, n_features)` and the weights have one value per row.
    fn check(&self) -> Result<()> {
        let k = self.n_clusters;
        self.check_shape(self.centers.len() / k.max(1))?;
        if self.centers.len() != k * self.x.n_features() {
            return Err(Error::ShapeMismatch {
                what: "centers".into(),
                expected: vec![k, self.x.n_features()],
                found: vec![self.centers.len()],
                hint: "the centres need one column per feature of the data",
            });
        }
        Ok(())
    }

    /// [`CentersJob::check`] for `n_clusters` centres of `n_features`.
    fn check_shape(&self, n_features: usize) -> Result<()> {
        let (k, d) = (self.n_clusters, self.x.n_features());
        if k == 0 {
            return Err(Error::param("centers", "no centres (0 rows); hint: give at least one centre"));
        }
        if n_features != d {
            return Err(Error::ShapeMismatch {
                what: "centers".into(),
                expected: vec![k, d],
                found: vec![k, n_features],
                hint: "the centres need one column per feature of the data",
            });
        }
        self.x.check_weights(self.sample_weight)
    }

    /// Checks the shapes and plans [`CentersJob::assign`] (the weights
    /// are read with the data's blocks).
    ///
    /// # Errors
    /// Shape errors; [`Error::DoesNotFit`].
    pub fn plan_assign(&self) -> Result<Plan> {
        self.check()?;
        self.plan_assign_unchecked()
    }

    /// [`CentersJob::plan_assign`] before the centres are read (`centers`
    /// may be empty): `n_clusters` centres of `n_features` each, as a
    /// file's header gives them, so that a plan that does not fit is
    /// refused before they take memory.
    ///
    /// # Errors
    /// As [`CentersJob::plan_assign`].
    pub fn plan_assign_unread(&self, n_features: usize) -> Result<Plan> {
        self.check_shape(n_features)?;
        self.plan_assign_unchecked()
    }

    fn plan_assign_unchecked(&self) -> Result<Plan> {
        let job = planned_job(self.x, self.sample_weight, self.compute, 0, &[], &self.run, KMEANS_DEVICE_OUT);
        let mut plan = cluster::plan_predict(&job, self.n_clusters, self.labels_file)?;
        plan.disk.extend(self.x.scratch_disk());
        Ok(plan)
    }

    /// The nearest centre of each row and its squared distance, handed to
    /// `out` block by block in row order; returns the inertia, weighted by
    /// the sample weights when there are any.
    ///
    /// # Errors
    /// As [`cluster::predict`].
    pub fn assign(&self, plan: &Plan, out: AssignSink<'_>, observer: &dyn Observer) -> Result<Done<AssignResult>> {
        self.check()?;
        let (x, w, c, k) = (self.x, self.sample_weight, self.centers, self.n_clusters);
        prepare(plan, x, w, observer)?;
        let inertia = match self.compute {
            ComputeDtype::Float32 => cluster::predict::<f32>(x, w, c, k, plan, self.run.backend, out, observer)?,
            ComputeDtype::Float64 => cluster::predict::<f64>(x, w, c, k, plan, self.run.backend, out, observer)?,
        };
        Ok(Done { value: AssignResult { inertia }, warnings: job_warnings(plan, x, self.compute.dtype(), None) })
    }

    /// Checks the shapes and plans [`CentersJob::transform`].
    ///
    /// # Errors
    /// Shape errors; [`Error::DoesNotFit`].
    pub fn plan_transform(&self) -> Result<Plan> {
        self.check()?;
        let mut plan =
            cluster::plan_transform(&planned_job(self.x, None, self.compute, 0, &[], &self.run, 0), self.n_clusters)?;
        plan.disk.extend(self.x.scratch_disk());
        Ok(plan)
    }

    /// Euclidean distances of each row to every centre, handed to `out`
    /// block by block (row-major `(rows, n_clusters)`).
    ///
    /// # Errors
    /// As [`cluster::transform`].
    pub fn transform(
        &self,
        plan: &Plan,
        out: &mut dyn FnMut(&[f64]) -> Result<()>,
        observer: &dyn Observer,
    ) -> Result<Done<()>> {
        self.check()?;
        let (x, c, k) = (self.x, self.centers, self.n_clusters);
        prepare(plan, x, None, observer)?;
        match self.compute {
            ComputeDtype::Float32 => cluster::transform::<f32>(x, c, k, plan, out, observer)?,
            ComputeDtype::Float64 => cluster::transform::<f64>(x, c, k, plan, out, observer)?,
        }
        Ok(Done { value: (), warnings: job_warnings(plan, x, self.compute.dtype(), None) })
    }
}

/// The validation pass of a k-means fit of `x` (with optional per-row
/// weights) alone, computed in `compute`: for a mini-batch fit whose
/// caller draws the batches, so that it refuses the data a [`KMeansJob`]
/// refuses, in the same words.
#[derive(Debug)]
pub struct ValidationJob<'a> {
    /// The data, `(n_samples, n_features)`.
    pub x: &'a Source<'a>,
    /// Per-row weights, `(n_samples,)` or `(n_samples, 1)`.
    pub sample_weight: Option<&'a Source<'a>>,
    /// The compute dtype (its range decides which spans overflow).
    pub compute: ComputeDtype,
    /// How the job runs: memory limit, threads.
    pub run: RunOptions,
}

/// What [`ValidationJob::validate`] learns of the data.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Validated {
    /// Mean of the column variances (population variances over the rows,
    /// unweighted): the scale of `tol`.
    pub mean_variance: f64,
}

impl ValidationJob<'_> {
    /// Checks the weights' shape and plans [`ValidationJob::validate`].
    ///
    /// # Errors
    /// Shape errors; [`Error::DoesNotFit`].
    pub fn plan(&self) -> Result<Plan> {
        self.x.check_weights(self.sample_weight)?;
        let job = planned_job(self.x, self.sample_weight, self.compute, 0, &[], &self.run, 0);
        let mut plan = cluster::plan_validation(&job)?;
        plan.disk.extend(self.x.scratch_disk());
        Ok(plan)
    }

    /// Reads the data once and checks it as [`cluster::fit`] does.
    ///
    /// # Errors
    /// As [`cluster::validate`].
    pub fn validate(&self, plan: &Plan, observer: &dyn Observer) -> Result<Done<Validated>> {
        let (x, w) = (self.x, self.sample_weight);
        prepare(plan, x, w, observer)?;
        let scan = match self.compute {
            ComputeDtype::Float32 => cluster::validate::<f32>(x, w, plan, &self.run, observer)?,
            ComputeDtype::Float64 => cluster::validate::<f64>(x, w, plan, &self.run, observer)?,
        };
        let value = Validated { mean_variance: scan.mean_variance };
        Ok(Done { value, warnings: job_warnings(plan, x, self.compute.dtype(), w) })
    }
}
