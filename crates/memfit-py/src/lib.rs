//! `memfit._memfit`: the Python extension over the memfit engine.
//!
//! A shim only: each function converts its arguments (NumPy arrays are
//! borrowed, never copied; a `str` is a `.npy` path read in blocks), runs the
//! engine on a worker thread with the GIL released, turns Ctrl-C into
//! `KeyboardInterrupt` and maps engine errors to Python exceptions
//! (module `errors`). Validation of Python-level arguments, defaults, units and
//! docstrings live in the pure-Python package `memfit`.

mod array;
mod cli;
mod errors;
mod inputs;
mod remote;
mod runner;

use memfit::cluster::{KMeansParams, LabelSink};
use memfit::estimator::{
    parse_init, CentersJob, ComputeDtype, GmmJob, GmmPredictJob, KMeansJob, QuadraticFormJob, ScatterJob,
};
use memfit::exec::RunOptions;
use memfit::io::{npy_file_bytes, Dtype};
use memfit::mixture::{
    load_model, model_dir_bytes, save_model, CovarianceType, GmmParams, InitMethod, MixtureModel, Outputs,
    PrecisionsInit,
};
use memfit::Warning;
use numpy::ndarray::Array;
use numpy::{IntoPyArray, PyReadonlyArray1, PyReadonlyArray2, PyReadwriteArray1, PyReadwriteArray2};
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use errors::to_py;
use inputs::Held;
use runner::run;

/// The row split of a fit: passes run through `remote` (a Python callable,
/// see [`remote::PyRemote`]) in ranges cut at `bounds`, or whole, here.
fn split(remote: Option<Py<PyAny>>, bounds: Vec<usize>) -> (memfit::exec::RowSplit, Option<Arc<remote::PyRemote>>) {
    match remote {
        Some(r) => {
            let (s, r) = remote::PyRemote::split(r, bounds);
            (s, Some(r))
        }
        None => (memfit::exec::RowSplit::at(bounds), None),
    }
}

/// How a job called with `memory_limit` bytes and `n_jobs` threads runs
/// (the threads of the pool [`runner::run`] starts), its passes split as
/// `row_split`.
pub(crate) fn run_options(memory_limit: u64, n_jobs: Option<usize>, row_split: memfit::exec::RowSplit) -> RunOptions {
    let threads = Some(n_jobs.unwrap_or_else(memfit::plan::default_threads));
    RunOptions { threads, row_split, ..RunOptions::with_limit(memory_limit) }
}

/// The result of a dry run: `{"plan": text}`.
fn plan_only<'py>(py: Python<'py>, plan: &memfit::plan::Plan) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("plan", plan.to_string())?;
    Ok(dict)
}

/// `e`, or the Python exception a remote call raised behind it.
fn restore(remote: &Option<Arc<remote::PyRemote>>, e: PyErr) -> PyErr {
    match remote {
        Some(r) => r.restore(e),
        None => e,
    }
}

/// The compute dtype: float32 when `float32`, else float64.
fn compute(float32: bool) -> ComputeDtype {
    if float32 {
        ComputeDtype::Float32
    } else {
        ComputeDtype::Float64
    }
}

/// A caller's output array (or none), filled block by block in row order.
struct Fill<'a, E> {
    out: Option<&'a mut [E]>,
    at: usize,
}

impl<'a, E: Copy> Fill<'a, E> {
    fn new(out: Option<&'a mut [E]>) -> Self {
        Fill { out, at: 0 }
    }

    /// Whether there is an array to fill.
    fn wanted(&self) -> bool {
        self.out.is_some()
    }

    /// Writes `values`, each converted by `conv`, after the previous block.
    fn put<V: Copy>(&mut self, values: &[V], conv: impl Fn(V) -> E) -> memfit::Result<()> {
        if let Some(out) = self.out.as_deref_mut() {
            for (o, &v) in out[self.at..self.at + values.len()].iter_mut().zip(values) {
                *o = conv(v);
            }
            self.at += values.len();
        }
        Ok(())
    }
}

/// The warnings as `(kind, category, message)` tuples (see
/// [`errors::warning`]).
fn warning_tuples(warnings: &[Warning]) -> Vec<(&'static str, &'static str, String)> {
    warnings.iter().map(errors::warning).collect()
}

/// Issues each warning as a Python warning of its category, for the
/// functions that return arrays rather than a dict with `warnings`.
fn warn(py: Python<'_>, warnings: &[Warning]) -> PyResult<()> {
    for w in warnings {
        let (_, category, message) = errors::warning(w);
        let message = std::ffi::CString::new(message).unwrap_or_default();
        let class = if category == "convergence" {
            py.import("sklearn.exceptions")?.getattr("ConvergenceWarning")?
        } else if category == "runtime" {
            py.get_type::<pyo3::exceptions::PyRuntimeWarning>().into_any()
        } else {
            py.get_type::<pyo3::exceptions::PyUserWarning>().into_any()
        };
        PyErr::warn(py, &class, &message, 1)?;
    }
    Ok(())
}

/// A label as the `int32` Python receives.
fn label(l: u32) -> i32 {
    l as i32
}

/// Fits k-means. `x` and `sample_weight` are arrays of shape
/// `(n_samples, n_features)` and `(n_samples, 1)` or `.npy` paths; `init` is
/// `"k-means++"` or `"random"`, unless `init_centers` holds the
/// `(n_clusters, n_features)` float64 centres. `labels` (int32,
/// `(n_samples,)`), when given, receives the final labels. Returns a dict
/// with `cluster_centers` (`(n_clusters, n_features)`, float32 when
/// `float32` else float64), `inertia`, `n_iter`, `converged`,
/// `n_nonempty_clusters`, `warnings` (`(kind, category, message)` tuples)
/// and `plan`. `progress`, when given, is called with each progress event
/// (see `runner::run`).
#[pyfunction]
#[pyo3(signature = (x, *, n_clusters, memory_limit, sample_weight=None, init="k-means++", init_centers=None,
    n_init=None, max_iter=300, tol=1e-4, random_state=0, n_jobs=None, float32=false, labels=None, progress=None,
    remote=None, row_bounds=vec![], dry_run=false))]
#[allow(clippy::too_many_arguments)]
fn kmeans_fit<'py>(
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
) -> PyResult<Bound<'py, PyDict>> {
    let held = Held::new(x)?;
    let held_w = sample_weight.map(Held::new).transpose()?;
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
    };
    let opts = run_options(memory_limit, n_jobs, row_split);
    let src = held.source(&opts)?;
    let w = held_w.as_ref().map(|h| h.weights(&opts)).transpose()?;
    let mut fill = Fill::new(labels.as_mut().map(|l| l.as_slice_mut()).transpose()?);
    let with_labels = fill.wanted();
    let (fit, plan) = run(py, n_jobs, float32, progress, move |obs| {
        let mut job = KMeansJob {
            params,
            x: &src,
            sample_weight: w.as_ref(),
            compute: compute(float32),
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
    dict.set_item("warnings", warning_tuples(&fit.warnings))?;
    dict.set_item("plan", plan.to_string())?;
    Ok(dict)
}

/// Nearest of `centers` (`(n_clusters, n_features)` float64, C-contiguous)
/// for each row of `x` (array or `.npy` path), computed in float32 when
/// `float32`: labels go to `labels` (int32, `(n_samples,)`) and squared
/// distances, when given, to `distances` (float64, `(n_samples,)`). Returns
/// the inertia: the sum of the squared distances, each times its row's
/// `sample_weight` when given (`(n_samples, 1)` or a path). Warnings are
/// issued.
#[pyfunction]
#[pyo3(signature = (x, *, centers, memory_limit, labels, sample_weight=None, distances=None, n_jobs=None, float32=false))]
#[allow(clippy::too_many_arguments)]
fn assign<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    centers: PyReadonlyArray2<'py, f64>,
    memory_limit: u64,
    mut labels: PyReadwriteArray1<'py, i32>,
    sample_weight: Option<&Bound<'py, PyAny>>,
    mut distances: Option<PyReadwriteArray1<'py, f64>>,
    n_jobs: Option<usize>,
    float32: bool,
) -> PyResult<f64> {
    let held = Held::new(x)?;
    let held_w = sample_weight.map(Held::new).transpose()?;
    let opts = run_options(memory_limit, n_jobs, Default::default());
    let src = held.source(&opts)?;
    let w = held_w.as_ref().map(|h| h.weights(&opts)).transpose()?;
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
#[pyo3(signature = (x, *, centers, memory_limit, out, n_jobs=None, float32=false))]
fn transform<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    centers: PyReadonlyArray2<'py, f64>,
    memory_limit: u64,
    out: &Bound<'py, PyAny>,
    n_jobs: Option<usize>,
    float32: bool,
) -> PyResult<()> {
    let held = Held::new(x)?;
    let opts = run_options(memory_limit, n_jobs, Default::default());
    let src = held.source(&opts)?;
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

/// Parses a covariance type name.
fn covariance_type(name: &str) -> PyResult<CovarianceType> {
    CovarianceType::parse(name).map_err(to_py)
}

/// Fits a Gaussian mixture by EM. `x`, `sample_weight` as [`kmeans_fit`];
/// `weights_init` `(n_components,)`, `means_init` `(n_components,
/// n_features)` and `precisions_init` (scikit-learn's shape for the
/// covariance type, seen as a matrix: all axes but the last are rows) are
/// float64. A warm start continues a fitted model instead: `warm_weights`,
/// `warm_means`, `warm_precisions_cholesky` (as `precisions_init`, Cholesky
/// factors) and its `warm_lower_bound`. `labels` (int64, `(n_samples,)`)
/// receives the final labels; `progress` as in [`kmeans_fit`].
/// `max_iter = 0` returns the (last) initialisation. Returns a dict with
/// `weights`, `means`, `covariances`, `precisions_cholesky` (scikit-learn's
/// shapes, float64), `lower_bound` (−inf without iterations),
/// `lower_bounds`, `n_iter`, `converged`, `score`, `bic`, `aic`,
/// `n_parameters`, `warnings` (`(kind, category, message)` tuples) and
/// `plan`.
#[pyfunction]
#[pyo3(signature = (x, *, n_components, memory_limit, sample_weight=None, covariance_type="full", tol=1e-3,
    reg_covar=1e-6, max_iter=100, n_init=1, init_params="kmeans", weights_init=None, means_init=None,
    precisions_init=None, warm_weights=None, warm_means=None, warm_precisions_cholesky=None, warm_lower_bound=None,
    random_state=0, n_jobs=None, float32=false, labels=None, progress=None, remote=None, row_bounds=vec![],
    dry_run=false, scratch_dir=None, model_dir=None, warm_model_dir=None))]
#[allow(clippy::too_many_arguments)]
fn gmm_fit<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    n_components: usize,
    memory_limit: u64,
    sample_weight: Option<&Bound<'py, PyAny>>,
    covariance_type: &str,
    tol: f64,
    reg_covar: f64,
    max_iter: usize,
    n_init: usize,
    init_params: &str,
    weights_init: Option<PyReadonlyArray1<'py, f64>>,
    means_init: Option<PyReadonlyArray2<'py, f64>>,
    precisions_init: Option<&Bound<'py, PyAny>>,
    warm_weights: Option<PyReadonlyArray1<'py, f64>>,
    warm_means: Option<PyReadonlyArray2<'py, f64>>,
    warm_precisions_cholesky: Option<&Bound<'py, PyAny>>,
    warm_lower_bound: Option<f64>,
    random_state: u64,
    n_jobs: Option<usize>,
    float32: bool,
    mut labels: Option<PyReadwriteArray1<'py, i64>>,
    progress: Option<&Bound<'py, PyAny>>,
    remote: Option<Py<PyAny>>,
    row_bounds: Vec<usize>,
    dry_run: bool,
    scratch_dir: Option<std::path::PathBuf>,
    model_dir: Option<std::path::PathBuf>,
    warm_model_dir: Option<std::path::PathBuf>,
) -> PyResult<Bound<'py, PyDict>> {
    let held = Held::new(x)?;
    let held_w = sample_weight.map(Held::new).transpose()?;
    let (row_split, remote) = split(remote, row_bounds);
    let held_p = precisions_init.map(Held::new).transpose()?;
    let held_warm = warm_precisions_cholesky.map(Held::new).transpose()?;
    let t = self::covariance_type(covariance_type)?;
    let opts = RunOptions { scratch_dir, ..run_options(memory_limit, n_jobs, row_split) };
    let params = GmmParams {
        n_components,
        covariance_type: t,
        tol,
        reg_covar,
        max_iter,
        n_init,
        init_params: InitMethod::parse(init_params).map_err(to_py)?,
        weights_init: weights_init.map(|w| w.as_array().iter().copied().collect()),
        means_init: means_init.map(|m| m.as_array().iter().copied().collect()),
        precisions_init: held_p.as_ref().map(|h| h.source(&opts)).transpose()?.map(PrecisionsInit::Precisions),
        random_state,
        lower_bound_init: None,
    };
    let warm_dir = warm_model_dir.map(load_model).transpose().map_err(to_py)?;
    let saved_to = model_dir.clone();
    let warm = match (warm_weights, warm_means, held_warm.as_ref()) {
        (Some(w), Some(m), Some(p)) => Some(MixtureModel {
            covariance_type: t,
            weights: w.as_array().iter().copied().collect(),
            means: m.as_array().iter().copied().collect(),
            precisions_cholesky: p.source(&opts)?,
            shift: None,
            lower_bound: warm_lower_bound,
        }),
        _ => None,
    };
    let src = held.source(&opts)?;
    let w = held_w.as_ref().map(|h| h.weights(&opts)).transpose()?;
    let mut fill = Fill::new(labels.as_mut().map(|l| l.as_slice_mut()).transpose()?);
    let with_labels = fill.wanted();
    let (done, plan) = run(py, n_jobs, float32, progress, move |obs| {
        let mut job = GmmJob {
            params,
            x: &src,
            sample_weight: w.as_ref(),
            compute: compute(float32),
            n_outputs: 0,
            extra: Vec::new(),
            run: opts,
        };
        if let Some(mut model) = warm.or(warm_dir) {
            // The Python layer runs one initialisation for a warm start.
            model.shift = None;
            job.warm_start(model)?;
        }
        if with_labels {
            job.extra.push(("labels (int64, returned to Python)".into(), src.n_samples() as u64 * 8));
        }
        let mut plan = job.plan()?;
        if let Some(dir) = model_dir.as_ref().filter(|_| plan.component_groups.is_some()) {
            // The model folder a fit in component groups writes, with the
            // precisions.npy the Python layer adds to it for full covariances.
            let (k, d) = (n_components, src.n_features());
            let precisions =
                if t == CovarianceType::Full { npy_file_bytes(Dtype::F64, &t.param_shape(k, d)) } else { 0 };
            plan.add_output("model folder", dir, model_dir_bytes(t, k, d).saturating_add(precisions));
        }
        if dry_run {
            return Ok((None, plan));
        }
        let mut put = |l: &[u32]| fill.put(l, i64::from);
        let mut outputs = Outputs { labels: with_labels.then_some(&mut put as _), ..Outputs::default() };
        let fit = job.fit(&plan, &mut outputs, obs)?;
        let (mut cov, mut prec) = (Vec::new(), Vec::new());
        match model_dir.as_ref().filter(|_| fit.covariances_on_disk()) {
            // Parameters larger than the limit go to a model folder, read
            // from there by the caller.
            Some(dir) => save_model(dir, &fit, serde_json::json!({}))?,
            None => fit.parameter_blocks(|c, p| {
                cov.extend_from_slice(c);
                prec.extend_from_slice(p);
                Ok(())
            })?,
        }
        Ok((Some((fit, cov, prec)), plan))
    })
    .map_err(|e| restore(&remote, e))?;
    let Some((fit, covariances, precisions_cholesky)) = done else { return plan_only(py, &plan) };
    let (k, d) = (fit.n_components, fit.n_features);
    let shape = t.param_shape(k, d);
    let dict = PyDict::new(py);
    dict.set_item("weights", fit.weights.clone().into_pyarray(py))?;
    dict.set_item("means", Array::from_shape_vec((k, d), fit.means.clone()).map_err(errors::shape)?.into_pyarray(py))?;
    if fit.covariances_on_disk() && saved_to.is_some() {
        dict.set_item("model_dir", saved_to)?;
    } else {
        dict.set_item(
            "covariances",
            Array::from_shape_vec(shape.clone(), covariances).map_err(errors::shape)?.into_pyarray(py),
        )?;
        dict.set_item(
            "precisions_cholesky",
            Array::from_shape_vec(shape, precisions_cholesky).map_err(errors::shape)?.into_pyarray(py),
        )?;
    }
    dict.set_item("lower_bound", fit.lower_bound)?;
    dict.set_item("lower_bounds", fit.lower_bounds.clone())?;
    dict.set_item("n_iter", fit.n_iter)?;
    dict.set_item("converged", fit.converged)?;
    dict.set_item("score", fit.score)?;
    dict.set_item("bic", fit.bic)?;
    dict.set_item("aic", fit.aic)?;
    dict.set_item("n_parameters", fit.n_parameters)?;
    dict.set_item("warnings", warning_tuples(&fit.warnings))?;
    dict.set_item("plan", plan.to_string())?;
    Ok(dict)
}

/// One E-step pass of a fitted mixture (`weights` `(n_components,)`, `means`
/// `(n_components, n_features)`, `precisions_cholesky` in scikit-learn's
/// shape, all float64) over `x` (array or `.npy` path): labels (int64),
/// responsibilities (float64, `(n_samples, n_components)`) and per-sample
/// log-likelihoods (float64) go to the arrays given. Returns a dict with
/// `score` (the mean log-likelihood per sample), `bic`, `aic` and
/// `n_parameters`. Warnings are issued.
#[pyfunction]
#[pyo3(signature = (x, *, covariance_type, weights, means, precisions_cholesky, memory_limit, n_jobs=None,
    float32=false, labels=None, proba=None, log_likelihood=None, remote=None, row_bounds=vec![], model_dir=None))]
#[allow(clippy::too_many_arguments)]
fn gmm_predict<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    covariance_type: &str,
    weights: PyReadonlyArray1<'py, f64>,
    means: PyReadonlyArray2<'py, f64>,
    precisions_cholesky: &Bound<'py, PyAny>,
    memory_limit: u64,
    n_jobs: Option<usize>,
    float32: bool,
    mut labels: Option<PyReadwriteArray1<'py, i64>>,
    mut proba: Option<PyReadwriteArray2<'py, f64>>,
    mut log_likelihood: Option<PyReadwriteArray1<'py, f64>>,
    remote: Option<Py<PyAny>>,
    row_bounds: Vec<usize>,
    model_dir: Option<std::path::PathBuf>,
) -> PyResult<Bound<'py, PyDict>> {
    let (row_split, remote) = split(remote, row_bounds);
    let opts = run_options(memory_limit, n_jobs, row_split);
    let held = Held::new(x)?;
    let held_p = Held::new(precisions_cholesky)?;
    let model = match model_dir {
        // A model whose parameters are on disk: factors read one group at a time.
        Some(dir) => MixtureModel { shift: None, ..load_model(dir).map_err(to_py)? },
        None => MixtureModel {
            covariance_type: self::covariance_type(covariance_type)?,
            weights: weights.as_array().iter().copied().collect(),
            means: means.as_array().iter().copied().collect(),
            precisions_cholesky: held_p.source(&opts)?,
            shift: None,
            lower_bound: None,
        },
    };
    let src = held.source(&opts)?;
    let mut fill_labels = Fill::new(labels.as_mut().map(|a| a.as_slice_mut()).transpose()?);
    let mut fill_proba = Fill::new(proba.as_mut().map(|a| a.as_slice_mut()).transpose()?);
    let mut fill_log_likelihood = Fill::new(log_likelihood.as_mut().map(|a| a.as_slice_mut()).transpose()?);
    let done = run(py, n_jobs, float32, None, move |obs| {
        // Results go to the caller's arrays: no file writers to plan.
        let job = GmmPredictJob { model: &model, x: &src, compute: compute(float32), n_outputs: 0, run: opts };
        let plan = job.plan()?;
        let wanted = (fill_labels.wanted(), fill_proba.wanted(), fill_log_likelihood.wanted());
        let k = model.n_components();
        let mut put_l = |l: &[u32]| fill_labels.put(l, i64::from);
        // Probabilities by column groups (a mixture fitted in groups sends
        // each group's columns in turn).
        let mut put_p = |row: usize, first: usize, g: usize, p: &[f64]| {
            if let Some(out) = fill_proba.out.as_deref_mut() {
                for (i, r) in p.chunks_exact(g).enumerate() {
                    out[(row + i) * k + first..(row + i) * k + first + g].copy_from_slice(r);
                }
            }
            Ok(())
        };
        let mut put_q = |q: &[f64]| fill_log_likelihood.put(q, |v| v);
        let mut outputs = Outputs {
            labels: wanted.0.then_some(&mut put_l as _),
            proba: wanted.1.then_some(&mut put_p as _),
            log_likelihood: wanted.2.then_some(&mut put_q as _),
        };
        job.predict(&plan, &mut outputs, obs)
    })
    .map_err(|e| restore(&remote, e))?;
    warn(py, &done.warnings)?;
    let dict = PyDict::new(py);
    dict.set_item("score", done.value.score)?;
    dict.set_item("bic", done.value.bic)?;
    dict.set_item("aic", done.value.aic)?;
    dict.set_item("n_parameters", done.value.n_parameters)?;
    Ok(dict)
}

/// `q_i = x_iᵀ Q x_i` for each row of `x` (array or `.npy` path) with `q`
/// `(n_features, n_features)` float64 (C-contiguous), into `out` (float64,
/// `(n_samples,)`). Warnings are issued.
#[pyfunction]
#[pyo3(signature = (x, *, q, memory_limit, out, n_jobs=None, float32=false))]
fn row_quadratic_form<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    q: PyReadonlyArray2<'py, f64>,
    memory_limit: u64,
    mut out: PyReadwriteArray1<'py, f64>,
    n_jobs: Option<usize>,
    float32: bool,
) -> PyResult<()> {
    let held = Held::new(x)?;
    let opts = run_options(memory_limit, n_jobs, Default::default());
    let src = held.source(&opts)?;
    let q_shape = {
        let a = q.as_array();
        [a.nrows(), a.ncols()]
    };
    let q = q.as_slice()?;
    let mut fill = Fill::new(Some(out.as_slice_mut()?));
    let done = run(py, n_jobs, float32, None, move |obs| {
        let job = QuadraticFormJob { x: &src, q, q_shape, compute: compute(float32), run: opts };
        let plan = job.plan()?;
        job.run(&plan, &mut |r: &[f64]| fill.put(r, |v| v), obs)
    })?;
    warn(py, &done.warnings)
}

/// `S = Σ_i w_i x_i x_iᵀ` (float64, `(n_features, n_features)`) of `x`
/// (array or `.npy` path) with optional weights `w` (`(n_samples, 1)` or a
/// path; all ones when `None`). Warnings are issued.
#[pyfunction]
#[pyo3(signature = (x, *, memory_limit, w=None, n_jobs=None, remote=None, row_bounds=vec![]))]
fn weighted_scatter<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    memory_limit: u64,
    w: Option<&Bound<'py, PyAny>>,
    n_jobs: Option<usize>,
    remote: Option<Py<PyAny>>,
    row_bounds: Vec<usize>,
) -> PyResult<Bound<'py, numpy::PyArray2<f64>>> {
    let (row_split, remote) = split(remote, row_bounds);
    let held = Held::new(x)?;
    let held_w = w.map(Held::new).transpose()?;
    let opts = run_options(memory_limit, n_jobs, row_split);
    let src = held.source(&opts)?;
    let ws = held_w.as_ref().map(|h| h.weights(&opts)).transpose()?;
    let d = src.n_features();
    let done = run(py, n_jobs, false, None, move |obs| {
        let job = ScatterJob { x: &src, weights: ws.as_ref(), run: opts };
        let plan = job.plan()?;
        job.run(&plan, obs)
    })
    .map_err(|e| restore(&remote, e))?;
    warn(py, &done.warnings)?;
    Ok(Array::from_shape_vec((d, d), done.value).map_err(errors::shape)?.into_pyarray(py))
}

/// Free parameters of a mixture of `n_components` Gaussians of
/// `covariance_type` over `n_features` features (covariances, means and
/// `n_components - 1` weights), as BIC and AIC count them.
#[pyfunction]
#[pyo3(signature = (*, covariance_type, n_components, n_features))]
fn n_parameters(covariance_type: &str, n_components: usize, n_features: usize) -> PyResult<usize> {
    Ok(memfit::estimator::n_parameters(self::covariance_type(covariance_type)?, n_components, n_features))
}

/// Parses a byte size (`"2GiB"`, `"512MiB"`, `"2GB"`, `"1000"`) into bytes.
#[pyfunction]
fn parse_size(text: &str) -> PyResult<u64> {
    memfit::plan::parse_size(text).map_err(to_py)
}

/// Checks that `path` can hold scratch files (an existing, writable
/// folder), before any work.
#[pyfunction]
fn check_scratch_dir(path: std::path::PathBuf) -> PyResult<()> {
    memfit::io::ScratchFile::check_dir(&path).map_err(to_py)
}

/// The default memory limit in bytes: half of the available memory.
#[pyfunction]
fn default_memory_limit() -> u64 {
    memfit::plan::default_limit_bytes()
}

/// Worker threads when `n_jobs` is None: the CPUs this process may use
/// (affinity mask, cgroup CPU quota), at most `OMP_NUM_THREADS`.
#[pyfunction]
fn default_threads() -> usize {
    memfit::plan::default_threads()
}

/// CPUs this process may run on (affinity mask, cgroup CPU quota).
#[pyfunction]
fn available_cpus() -> usize {
    memfit::plan::available_cpus()
}

/// The `.npy` file at `path`: its shape, dtype name (NumPy's, with the
/// file's byte order), whether it is in Fortran order, and the byte offset
/// of its data.
#[pyfunction]
fn npy_info(path: std::path::PathBuf) -> PyResult<(Vec<usize>, String, bool, u64)> {
    let f = memfit::io::NpyFile::open(path).map_err(to_py)?;
    let h = f.header();
    let order = if h.dtype.itemsize() == 1 || h.endian == memfit::io::Endian::Little { "<" } else { ">" };
    Ok((
        h.shape.clone(),
        format!("{order}{}", h.dtype.descr().trim_start_matches(['<', '>', '|'])),
        h.fortran_order,
        h.data_offset,
    ))
}

/// The extension module.
#[pymodule]
fn _memfit(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(kmeans_fit, m)?)?;
    m.add_function(wrap_pyfunction!(assign, m)?)?;
    m.add_function(wrap_pyfunction!(transform, m)?)?;
    m.add_function(wrap_pyfunction!(gmm_fit, m)?)?;
    m.add_function(wrap_pyfunction!(gmm_predict, m)?)?;
    m.add_function(wrap_pyfunction!(row_quadratic_form, m)?)?;
    m.add_function(wrap_pyfunction!(weighted_scatter, m)?)?;
    m.add_function(wrap_pyfunction!(n_parameters, m)?)?;
    m.add_function(wrap_pyfunction!(parse_size, m)?)?;
    m.add_function(wrap_pyfunction!(default_memory_limit, m)?)?;
    m.add_function(wrap_pyfunction!(check_scratch_dir, m)?)?;
    m.add_function(wrap_pyfunction!(default_threads, m)?)?;
    m.add_function(wrap_pyfunction!(available_cpus, m)?)?;
    m.add_function(wrap_pyfunction!(npy_info, m)?)?;
    m.add_function(wrap_pyfunction!(remote::run_task, m)?)?;
    m.add_function(wrap_pyfunction!(cli::cli_main, m)?)?;
    m.add_class::<array::Expr>()?;
    m.add_function(wrap_pyfunction!(array::expr_from_ndarray, m)?)?;
    m.add_function(wrap_pyfunction!(array::expr_from_npy, m)?)?;
    m.add_function(wrap_pyfunction!(array::expr_from_zarr, m)?)?;
    m.add_function(wrap_pyfunction!(array::expr_op, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
