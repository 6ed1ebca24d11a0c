//! k-means: the fit, and assigning or measuring rows against centres.

use memfit::cluster::{Algorithm, KMeansParams, LabelSink, Metric};
use memfit::estimator::{parse_init, CentersJob, KMeansJob, ValidationJob};
use memfit::exec::RunOptions;
use numpy::ndarray::Array;
use numpy::{IntoPyArray, PyReadonlyArray2, PyReadwriteArray1, PyReadwriteArray2};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{self, to_py};
use crate::runner::run;
use crate::shared::{
    compute, exact_in_float32, label, plan_only, put_plan, restore, run_options, split, warn, warning_tuples, Fill,
    Inputs,
};
use crate::system::{on_device, DeviceBackend};

/// Fits k-means. `x` and `sample_weight` are arrays of shape
/// `(n_samples, n_features)` and `(n_samples, 1)` or `.npy` paths; `init` is
/// `"k-means++"` or `"random"`, unless `init_centers` holds the
/// `(n_clusters, n_features)` float64 centres. `labels` (int32,
/// `(n_samples,)`), when given, receives the final labels. Returns a dict
/// with `cluster_centers` (`(n_clusters, n_features)`, float32 when
/// `float32` else float64), `inertia`, `n_iter`, `converged`,
/// `n_nonempty_clusters`, `warnings` (`(kind, category, message)` tuples)
/// and `plan`. `progress`, when given, is called with each progress event
/// (see `runner::run`). The assignments run on `device` when given (see
/// [`crate::system::check_device`]). With `exact` (euclidean, not
/// `float32`), the passes compute in float32 where float32 holds every
/// value of `x`'s dtype exactly (uint8, int16, float16; see
/// `ComputeDtype::exact_for`) and the centres stay float64: the float64
/// fit's results (`memfit::cluster::fit_centers`).
#[pyfunction]
#[pyo3(signature = (x, *, n_clusters, memory_limit, sample_weight=None, init="k-means++", init_centers=None,
    n_init=None, max_iter=300, tol=1e-4, random_state=0, n_jobs=None, float32=false, labels=None, progress=None,
    remote=None, row_bounds=vec![], dry_run=false, algorithm="auto", scratch_dir=None, metric="euclidean", device=None,
    exact=false))]
#[allow(clippy::too_many_arguments)]
pub fn kmeans_fit<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    n_clusters: usize,
    memory_limit: u64,
    sample_weight: Option<&Bound<'py, PyAny>>,
    init: &str,
    init_centers: Option<PyReadonlyArray2<'py, f64>>,
    n_init: Option<usize>,
    max_iter: usize,
    tol: f64,
    random_state: u64,
    n_jobs: Option<usize>,
    float32: bool,
    mut labels: Option<PyReadwriteArray1<'py, i32>>,
    progress: Option<&Bound<'py, PyAny>>,
    remote: Option<Py<PyAny>>,
    row_bounds: Vec<usize>,
    dry_run: bool,
    algorithm: &str,
    scratch_dir: Option<std::path::PathBuf>,
    metric: &str,
    device: Option<Bound<'py, DeviceBackend>>,
    exact: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let metric = parse_metric(metric)?;
    let algorithm = match algorithm {
        "auto" => Algorithm::Auto,
        "lloyd" => Algorithm::Lloyd,
        "bounded" => Algorithm::Bounded,
        other => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "algorithm must be 'auto', 'lloyd' or 'bounded', got {other:?}"
            )))
        }
    };
    let inputs = Inputs::hold(x, sample_weight)?;
    let (row_split, remote) = split(remote, row_bounds);
    let centers = init_centers.map(|c| {
        let c = c.as_array();
        (c.iter().copied().collect(), c.nrows(), c.ncols())
    });
    let params = KMeansParams {
        n_clusters,
        init: parse_init(init, centers).map_err(to_py)?,
        n_init,
        max_iter,
        tol,
        random_state,
        init_sample_rows: None,
        plot_sample_rows: 0,
        algorithm,
        mini_batch: None,
        metric,
    };
    let opts = RunOptions { scratch_dir, ..run_options(memory_limit, n_jobs, row_split) };
    let opts = on_device(opts, device.as_ref(), remote.is_some(), "k-means on a Dask cluster")?;
    let (src, w) = inputs.open(&opts)?;
    let src = src.unit_rows(metric == Metric::Cosine);
    let float64_centers = !float32 && exact_in_float32(exact, metric, &src);
    let mut fill = Fill::new(labels.as_mut().map(|l| l.as_slice_mut()).transpose()?);
    let with_labels = fill.wanted();
    let (fit, plan) = run(py, n_jobs, float32, progress, move |obs| {
        let mut job = KMeansJob {
            params,
            x: &src,
            sample_weight: w.as_ref(),
            compute: compute(float32 || float64_centers),
            float64_centers,
            n_outputs: 0,
            extra: Vec::new(),
            run: opts,
        };
        if with_labels {
            job.extra.push(("labels_ (int32, returned to Python)".into(), src.n_samples() as u64 * 4));
        }
        let plan = job.plan()?;
        if dry_run {
            return Ok((None, plan));
        }
        let mut put = |l: &[u32]| fill.put(l, label);
        let sink: LabelSink<'_> = if with_labels { Some(&mut put) } else { None };
        Ok((Some(job.fit(&plan, sink, obs)?), plan))
    })
    .map_err(|e| restore(&remote, e))?;
    let Some(fit) = fit else { return plan_only(py, &plan) };
    let centers =
        Array::from_shape_vec((fit.n_clusters, fit.n_features), fit.cluster_centers).map_err(errors::shape)?;
    let dict = PyDict::new(py);
    if float32 {
        // The centres were computed in float32: the round trip is exact.
        dict.set_item("cluster_centers", centers.mapv(|v| v as f32).into_pyarray(py))?;
    } else {
        dict.set_item("cluster_centers", centers.into_pyarray(py))?;
    }
    dict.set_item("inertia", fit.inertia)?;
    dict.set_item("n_iter", fit.n_iter)?;
    dict.set_item("converged", fit.converged)?;
    dict.set_item("n_nonempty_clusters", fit.n_nonempty_clusters)?;
    dict.set_item("skip_share", fit.skip_share)?;
    dict.set_item("warnings", warning_tuples(&fit.warnings))?;
    put_plan(&dict, &plan)?;
    Ok(dict)
}

/// The validation pass of a k-means fit alone ([`ValidationJob`]), for a
/// mini-batch fit that draws its own batches: reads `x` (array, sparse
/// matrix or `.npy` path; rows scaled to unit norm for `metric="cosine"`)
/// and `sample_weight` (`(n_samples, 1)` or a path) once, computing in
/// float32 when `float32`, and raises what `kmeans_fit` raises for the same
/// data. Returns the mean column variance (`tol`'s scale). Warnings are
/// issued.
#[pyfunction]
#[pyo3(signature = (x, *, memory_limit, sample_weight=None, n_jobs=None, float32=false, metric="euclidean"))]
pub fn kmeans_validate<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    memory_limit: u64,
    sample_weight: Option<&Bound<'py, PyAny>>,
    n_jobs: Option<usize>,
    float32: bool,
    metric: &str,
) -> PyResult<f64> {
    let metric = parse_metric(metric)?;
    let inputs = Inputs::hold(x, sample_weight)?;
    let opts = run_options(memory_limit, n_jobs, Default::default());
    let (src, w) = inputs.open(&opts)?;
    let src = src.unit_rows(metric == Metric::Cosine);
    let done = run(py, n_jobs, float32, None, move |obs| {
        let job = ValidationJob { x: &src, sample_weight: w.as_ref(), compute: compute(float32), run: opts };
        let plan = job.plan()?;
        job.validate(&plan, obs)
    })?;
    warn(py, &done.warnings)?;
    Ok(done.value.mean_variance)
}

/// `"euclidean"` or `"cosine"` (rows read scaled to unit norm).
pub(crate) fn parse_metric(metric: &str) -> PyResult<Metric> {
    match metric {
        "euclidean" => Ok(Metric::Euclidean),
        "cosine" => Ok(Metric::Cosine),
        other => Err(pyo3::exceptions::PyValueError::new_err(format!(
            "metric must be 'euclidean' or 'cosine', got {other:?}"
        ))),
    }
}

/// Nearest of `centers` (`(n_clusters, n_features)` float64, C-contiguous)
/// for each row of `x` (array or `.npy` path), computed in float32 when
/// `float32`: labels go to `labels` (int32, `(n_samples,)`) and squared
/// distances, when given, to `distances` (float64, `(n_samples,)`). Returns
/// the inertia: the sum of the squared distances, each times its row's
/// `sample_weight` when given (`(n_samples, 1)` or a path). Warnings are
/// issued. The assignment runs on `device` when given (see
/// [`crate::system::check_device`]).
#[pyfunction]
#[pyo3(signature = (x, *, centers, memory_limit, labels, sample_weight=None, distances=None, n_jobs=None, float32=false,
    metric="euclidean", device=None))]
#[allow(clippy::too_many_arguments)]
pub fn assign<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    centers: PyReadonlyArray2<'py, f64>,
    memory_limit: u64,
    mut labels: PyReadwriteArray1<'py, i32>,
    sample_weight: Option<&Bound<'py, PyAny>>,
    mut distances: Option<PyReadwriteArray1<'py, f64>>,
    n_jobs: Option<usize>,
    float32: bool,
    metric: &str,
    device: Option<Bound<'py, DeviceBackend>>,
) -> PyResult<f64> {
    let metric = parse_metric(metric)?;
    let inputs = Inputs::hold(x, sample_weight)?;
    let opts = on_device(run_options(memory_limit, n_jobs, Default::default()), device.as_ref(), false, "")?;
    let (src, w) = inputs.open(&opts)?;
    let src = src.unit_rows(metric == Metric::Cosine);
    let k = centers.as_array().nrows();
    let centers = centers.as_slice()?;
    let mut fill_labels = Fill::new(Some(labels.as_slice_mut()?));
    let mut fill_distances = Fill::new(distances.as_mut().map(|d| d.as_slice_mut()).transpose()?);
    let done = run(py, n_jobs, float32, None, move |obs| {
        let job = CentersJob {
            x: &src,
            centers,
            n_clusters: k,
            sample_weight: w.as_ref(),
            compute: compute(float32),
            labels_file: false,
            run: opts,
        };
        let plan = job.plan_assign()?;
        let mut put = |l: &[u32], dist: &[f64]| {
            fill_labels.put(l, label)?;
            fill_distances.put(dist, |v| v)
        };
        job.assign(&plan, &mut put, obs)
    })?;
    warn(py, &done.warnings)?;
    Ok(done.value.inertia)
}

/// Euclidean distances of each row of `x` (array or `.npy` path) to every one
/// of `centers` (`(n_clusters, n_features)` float64, C-contiguous), computed
/// from `x` converted to float32 when `float32`, into `out` (C-contiguous
/// `(n_samples, n_clusters)`, float32 or float64). Warnings are issued.
#[pyfunction]
#[pyo3(signature = (x, *, centers, memory_limit, out, n_jobs=None, float32=false, metric="euclidean"))]
#[allow(clippy::too_many_arguments)]
pub fn transform<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    centers: PyReadonlyArray2<'py, f64>,
    memory_limit: u64,
    out: &Bound<'py, PyAny>,
    n_jobs: Option<usize>,
    float32: bool,
    metric: &str,
) -> PyResult<()> {
    let metric = parse_metric(metric)?;
    let inputs = Inputs::hold(x, None)?;
    let opts = run_options(memory_limit, n_jobs, Default::default());
    let (src, _) = inputs.open(&opts)?;
    let src = src.unit_rows(metric == Metric::Cosine);
    let k = centers.as_array().nrows();
    let centers = centers.as_slice()?;
    let (mut out64, mut out32) = (out.extract::<PyReadwriteArray2<'py, f64>>().ok(), None);
    if out64.is_none() {
        out32 = Some(out.extract::<PyReadwriteArray2<'py, f32>>()?);
    }
    let mut fill64 = Fill::new(out64.as_mut().map(|o| o.as_slice_mut()).transpose()?);
    let mut fill32 = Fill::new(out32.as_mut().map(|o| o.as_slice_mut()).transpose()?);
    let done = run(py, n_jobs, float32, None, move |obs| {
        let job = CentersJob {
            x: &src,
            centers,
            n_clusters: k,
            sample_weight: None,
            compute: compute(float32),
            labels_file: false,
            run: opts,
        };
        let plan = job.plan_transform()?;
        let mut put = |dist: &[f64]| {
            fill64.put(dist, |v| v)?;
            fill32.put(dist, |v| v as f32)
        };
        job.transform(&plan, &mut put, obs)
    })?;
    warn(py, &done.warnings)
}
