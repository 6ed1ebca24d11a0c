//! k-means jobs: fit, nearest centres (with the weighted inertia `score`
//! needs) and distances to the centres.

use super::{inexact_warnings, ComputeDtype, Done};
use crate::cluster::{self, AssignSink, Init, KMeansFit, KMeansParams, LabelSink, Observer};
use crate::error::{Error, Result};
use crate::io::Source;
use crate::plan::{Job, Plan, PlannedBuffer};

/// A k-means fit of `x` (with optional per-row weights) computed in
/// `compute`.
#[derive(Debug)]
pub struct KMeansJob<'a> {
    /// The parameters (`memory_limit_bytes` is the job's limit).
    pub params: KMeansParams,
    /// The data, `(n_samples, n_features)`.
    pub x: &'a Source<'a>,
    /// Per-row weights, `(n_samples,)` or `(n_samples, 1)`.
    pub sample_weight: Option<&'a Source<'a>>,
    /// The compute dtype.
    pub compute: ComputeDtype,
    /// Arrays the caller streams to files (each with a write buffer).
    pub n_outputs: usize,
    /// Other buffers the caller holds for the run (name, bytes).
    pub extra: Vec<(String, u64)>,
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
    /// Validates the parameters against the data and plans the fit.
    ///
    /// # Errors
    /// As [`KMeansParams::validate`] and [`cluster::plan_kmeans`].
    pub fn plan(&self) -> Result<Plan> {
        self.params.validate(self.x.n_samples(), self.x.n_features())?;
        let job = Job {
            extra: self.extra.clone(),
            ..Job::new(self.x, self.sample_weight, self.compute.bytes(), self.n_outputs)
        };
        cluster::plan_kmeans(&self.params, &job)
    }

    /// Fits within `plan` (from [`KMeansJob::plan`]); final labels go to
    /// `labels`. The centres come back in `f64` (exact for either compute
    /// dtype); the fit's warnings include integers the compute dtype rounded.
    ///
    /// # Errors
    /// As [`cluster::fit`].
    pub fn fit(&self, plan: &Plan, labels: LabelSink<'_>, observer: &mut dyn Observer) -> Result<KMeansFit<f64>> {
        let (x, w) = (self.x, self.sample_weight);
        let mut fit = match self.compute {
            ComputeDtype::Float32 => widen(cluster::fit::<f32>(&self.params, x, w, plan, labels, observer)?),
            ComputeDtype::Float64 => cluster::fit::<f64>(&self.params, x, w, plan, labels, observer)?,
        };
        fit.warnings.extend(inexact_warnings(x, self.compute.dtype(), w));
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
        converged: f.converged,
        n_nonempty_clusters: f.n_nonempty_clusters,
        inertia_per_init: f.inertia_per_init,
        best_init: f.best_init,
        tol_abs: f.tol_abs,
        timings: f.timings,
        warnings: f.warnings,
        plot_sample: f.plot_sample,
    }
}

/// Rows of weights read at a time by [`CentersJob::assign`] (a buffer the
/// plan holds beside its own).
pub const WEIGHT_CHUNK_ROWS: usize = 4096;

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
    /// The memory limit in bytes.
    pub memory_limit_bytes: u64,
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
        let (k, d) = (self.n_clusters, self.x.n_features());
        if k == 0 {
            return Err(Error::param("centers", "no centres (0 rows); hint: give at least one centre"));
        }
        if self.centers.len() != k * d {
            return Err(Error::ShapeMismatch {
                what: "centers".into(),
                expected: vec![k, d],
                found: vec![k, self.centers.len() / k],
                hint: "the centres need one column per feature of the data",
            });
        }
        self.x.check_weights(self.sample_weight)
    }

    /// Checks the shapes and plans [`CentersJob::assign`] (with a
    /// [`WEIGHT_CHUNK_ROWS`]-row weight buffer when weighted).
    ///
    /// # Errors
    /// Shape errors; [`Error::DoesNotFit`].
    pub fn plan_assign(&self) -> Result<Plan> {
        self.check()?;
        let Some(w) = self.sample_weight else {
            return cluster::plan_predict(
                self.x,
                self.n_clusters,
                self.compute.bytes(),
                self.labels_file,
                self.memory_limit_bytes,
            );
        };
        let rows = WEIGHT_CHUNK_ROWS.min(w.n_samples().max(1));
        let bytes = (rows * (8 + w.scratch_bytes_per_row())) as u64;
        let limit = self.memory_limit_bytes.saturating_sub(bytes);
        let mut plan = cluster::plan_predict(self.x, self.n_clusters, self.compute.bytes(), self.labels_file, limit)
            .map_err(|e| match e {
                Error::DoesNotFit { required_bytes, limit_bytes, what, .. } => {
                    Error::does_not_fit(required_bytes + bytes, limit_bytes + bytes, what, vec![])
                }
                e => e,
            })?;
        plan.limit_bytes = self.memory_limit_bytes;
        plan.buffers.push(PlannedBuffer {
            name: "sample weights (float64)".into(),
            bytes,
            detail: format!("{rows} rows × (8 + {}) B", w.scratch_bytes_per_row()),
        });
        plan.total_bytes += bytes;
        Ok(plan)
    }

    /// The nearest centre of each row and its squared distance, handed to
    /// `out` block by block in row order; returns the (weighted) inertia.
    ///
    /// # Errors
    /// As [`cluster::predict`]; [`Error::InvalidWeight`] for a non-finite
    /// weight.
    pub fn assign(&self, plan: &Plan, out: AssignSink<'_>, observer: &dyn Observer) -> Result<Done<AssignResult>> {
        self.check()?;
        let (x, c, k) = (self.x, self.centers, self.n_clusters);
        let mut weighted = 0.0;
        let mut next = 0;
        let mut wbuf = Vec::new();
        let mut scratch = Vec::new();
        let mut sink = |labels: &[u32], dist: &[f64]| -> Result<()> {
            if let Some(w) = self.sample_weight {
                for part in dist.chunks(WEIGHT_CHUNK_ROWS) {
                    wbuf.resize(part.len(), 0.0);
                    scratch.resize(part.len() * w.scratch_bytes_per_row(), 0);
                    w.read_rows::<f64>(next, part.len(), &[0.0], &mut scratch, &mut wbuf)?;
                    for (i, (&wi, &di)) in wbuf.iter().zip(part).enumerate() {
                        if !wi.is_finite() {
                            return Err(Error::InvalidWeight { path: w.name(), row: next + i, value: wi });
                        }
                        weighted += wi * di;
                    }
                    next += part.len();
                }
            }
            out(labels, dist)
        };
        let inertia = match self.compute {
            ComputeDtype::Float32 => cluster::predict::<f32>(x, c, k, plan, &mut sink, observer)?,
            ComputeDtype::Float64 => cluster::predict::<f64>(x, c, k, plan, &mut sink, observer)?,
        };
        let inertia = if self.sample_weight.is_some() { weighted } else { inertia };
        Ok(Done { value: AssignResult { inertia }, warnings: inexact_warnings(x, self.compute.dtype(), None) })
    }

    /// Checks the shapes and plans [`CentersJob::transform`].
    ///
    /// # Errors
    /// Shape errors; [`Error::DoesNotFit`].
    pub fn plan_transform(&self) -> Result<Plan> {
        self.check()?;
        cluster::plan_transform(self.x, self.n_clusters, self.compute.bytes(), self.memory_limit_bytes)
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
        match self.compute {
            ComputeDtype::Float32 => cluster::transform::<f32>(x, c, k, plan, out, observer)?,
            ComputeDtype::Float64 => cluster::transform::<f64>(x, c, k, plan, out, observer)?,
        }
        Ok(Done { value: (), warnings: inexact_warnings(x, self.compute.dtype(), None) })
    }
}
