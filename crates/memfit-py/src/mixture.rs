//! Gaussian mixtures: the EM fit, the E-step pass of a fitted model, and
//! the parameter count BIC and AIC use.

use memfit::estimator::{GmmJob, GmmPredictJob};
use memfit::exec::RunOptions;
use memfit::io::{npy_file_bytes, Dtype, NpyWriter};
use memfit::mixture::{
    load_model, model_dir_bytes, param_dtype, save_model, CovarianceType, GmmParams, InitMethod, MixtureModel, Outputs,
    PrecisionsInit,
};
use numpy::ndarray::Array;
use numpy::{IntoPyArray, PyReadonlyArray1, PyReadonlyArray2, PyReadwriteArray1, PyReadwriteArray2};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{self, to_py};
use crate::inputs::Held;
use crate::runner::run;
use crate::shared::{compute, plan_only, put_plan, restore, run_options, split, warn, warning_tuples, Fill, Inputs};
use crate::system::{on_device, DeviceBackend};

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
/// receives the final labels; `progress` as in [`crate::kmeans::kmeans_fit`].
/// `max_iter = 0` returns the (last) initialisation. Returns a dict with
/// `weights`, `means`, `covariances`, `precisions_cholesky`, `precisions` (scikit-learn's
/// shapes, float64), `lower_bound` (−inf without iterations),
/// `lower_bounds`, `n_iter`, `converged`, `score`, `bic`, `aic`,
/// `n_parameters`, `warnings` (`(kind, category, message)` tuples) and
/// `plan`. The log-densities run on `device` when given (see
/// [`crate::system::check_device`]).
#[pyfunction]
#[pyo3(signature = (x, *, n_components, memory_limit, sample_weight=None, covariance_type="full", tol=1e-3,
    reg_covar=1e-6, max_iter=100, n_init=1, init_params="kmeans", weights_init=None, means_init=None,
    precisions_init=None, warm_weights=None, warm_means=None, warm_precisions_cholesky=None, warm_lower_bound=None,
    random_state=0, n_jobs=None, float32=false, labels=None, progress=None, remote=None, row_bounds=vec![],
    dry_run=false, scratch_dir=None, model_dir=None, warm_model_dir=None, device=None))]
#[allow(clippy::too_many_arguments)]
pub fn gmm_fit<'py>(
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
    device: Option<Bound<'py, DeviceBackend>>,
) -> PyResult<Bound<'py, PyDict>> {
    let inputs = Inputs::hold(x, sample_weight)?;
    let (row_split, remote) = split(remote, row_bounds);
    let held_p = precisions_init.map(Held::new).transpose()?;
    let held_warm = warm_precisions_cholesky.map(Held::new).transpose()?;
    let t = self::covariance_type(covariance_type)?;
    let opts = RunOptions { scratch_dir, ..run_options(memory_limit, n_jobs, row_split) };
    let opts = on_device(opts, device.as_ref(), remote.is_some(), "Gaussian mixtures on a Dask cluster")?;
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
    let (src, w) = inputs.open(&opts)?;
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
        if let Some(dir) = model_dir.as_ref().filter(|_| plan.schedule.component_groups.is_some()) {
            // The model folder a fit in component groups writes, with the
            // precisions.npy added to it (see `save_precisions`).
            let (k, d) = (n_components, src.n_features());
            let precisions = npy_file_bytes(Dtype::F64, &t.param_shape(k, d));
            plan.add_output("model folder", dir, model_dir_bytes(t, k, d).saturating_add(precisions));
        }
        if dry_run {
            return Ok((None, plan));
        }
        let mut put = |l: &[u32]| fill.put(l, i64::from);
        let mut outputs = Outputs { labels: with_labels.then_some(&mut put as _), ..Outputs::default() };
        let fit = job.fit(&plan, &mut outputs, obs)?;
        let (mut cov, mut chol, mut prec) = (Vec::new(), Vec::new(), Vec::new());
        match model_dir.as_ref().filter(|_| fit.covariances_on_disk()) {
            // Parameters larger than the limit go to a model folder, read
            // from there by the caller.
            Some(dir) => {
                // float32 arrays for float32 data, as the Python layer
                // holds parameters in memory.
                save_model(dir, &fit, serde_json::json!({}), float32)?;
                save_precisions(dir, &fit, float32)?;
            }
            None => fit.parameter_blocks(|c, u| {
                cov.extend_from_slice(c);
                chol.extend_from_slice(u);
                push_precisions(fit.covariance_type, fit.n_features, u, &mut prec);
                Ok(())
            })?,
        }
        Ok((Some((fit, cov, chol, prec)), plan))
    })
    .map_err(|e| restore(&remote, e))?;
    let Some((fit, covariances, precisions_cholesky, precisions)) = done else { return plan_only(py, &plan) };
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
            Array::from_shape_vec(shape.clone(), precisions_cholesky).map_err(errors::shape)?.into_pyarray(py),
        )?;
        dict.set_item("precisions", Array::from_shape_vec(shape, precisions).map_err(errors::shape)?.into_pyarray(py))?;
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
    put_plan(&dict, &plan)?;
    Ok(dict)
}

/// Appends to `out` the precisions of one block of Cholesky factors `u` of
/// the precisions (as [`memfit::mixture::GmmFit::parameter_blocks`] gives
/// them): `U Uᵀ` of each `d × d` factor (full, tied), `u²` elementwise
/// (diag, spherical), as scikit-learn derives `precisions_`.
fn push_precisions(t: CovarianceType, d: usize, u: &[f64], out: &mut Vec<f64>) {
    match t {
        CovarianceType::Full | CovarianceType::Tied => {
            for f in u.chunks_exact(d * d) {
                for i in 0..d {
                    for l in 0..d {
                        out.push(f[i * d..][..d].iter().zip(&f[l * d..][..d]).map(|(a, b)| a * b).sum());
                    }
                }
            }
        }
        CovarianceType::Diag | CovarianceType::Spherical => out.extend(u.iter().map(|v| v * v)),
    }
}

/// Writes `precisions.npy` (scikit-learn's shape of `precisions_`, float64
/// or with `float32` float32, as [`save_model`] writes the other arrays)
/// into the model folder `dir` of `fit`, one block of factors at a time.
///
/// # Errors
/// [`memfit::Error::Io`] when writing fails.
fn save_precisions(dir: &std::path::Path, fit: &memfit::mixture::GmmFit, float32: bool) -> memfit::Result<()> {
    let (t, d) = (fit.covariance_type, fit.n_features);
    let (dtype, put) = param_dtype(float32);
    let mut w = NpyWriter::create(dir.join("precisions.npy"), dtype, &t.param_shape(fit.n_components, d))?;
    let mut block = Vec::new();
    fit.parameter_blocks(|_, u| {
        block.clear();
        push_precisions(t, d, u, &mut block);
        w.write_with(&block, put)
    })?;
    w.commit()
}

/// One E-step pass of a fitted mixture (`weights` `(n_components,)`, `means`
/// `(n_components, n_features)`, `precisions_cholesky` in scikit-learn's
/// shape, all float64) over `x` (array or `.npy` path): labels (int64),
/// responsibilities (float64, `(n_samples, n_components)`) and per-sample
/// log-likelihoods (float64) go to the arrays given. Returns a dict with
/// `score` (the mean log-likelihood per sample), `bic`, `aic` and
/// `n_parameters`. Warnings are issued. The log-densities run on `device`
/// when given (see [`crate::system::check_device`]).
#[pyfunction]
#[pyo3(signature = (x, *, covariance_type, weights, means, precisions_cholesky, memory_limit, n_jobs=None,
    float32=false, labels=None, proba=None, log_likelihood=None, remote=None, row_bounds=vec![], model_dir=None,
    device=None))]
#[allow(clippy::too_many_arguments)]
pub fn gmm_predict<'py>(
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
    device: Option<Bound<'py, DeviceBackend>>,
) -> PyResult<Bound<'py, PyDict>> {
    let (row_split, remote) = split(remote, row_bounds);
    let opts = run_options(memory_limit, n_jobs, row_split);
    let opts = on_device(opts, device.as_ref(), remote.is_some(), "Gaussian mixtures on a Dask cluster")?;
    let inputs = Inputs::hold(x, None)?;
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
    let (src, _) = inputs.open(&opts)?;
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

/// Free parameters of a mixture of `n_components` Gaussians of
/// `covariance_type` over `n_features` features (covariances, means and
/// `n_components - 1` weights), as BIC and AIC count them.
#[pyfunction]
#[pyo3(signature = (*, covariance_type, n_components, n_features))]
pub fn n_parameters(covariance_type: &str, n_components: usize, n_features: usize) -> PyResult<usize> {
    Ok(memfit::estimator::n_parameters(self::covariance_type(covariance_type)?, n_components, n_features))
}
