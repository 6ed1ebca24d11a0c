//! Kernels over rows: per-row quadratic forms and the weighted scatter
//! matrix.

use memfit::estimator::{QuadraticFormJob, ScatterJob};
use numpy::ndarray::Array;
use numpy::{IntoPyArray, PyReadonlyArray2, PyReadwriteArray1};
use pyo3::prelude::*;

use crate::errors;
use crate::runner::run;
use crate::shared::{compute, restore, run_options, split, warn, Fill, Inputs};

/// `q_i = x_iᵀ Q x_i` for each row of `x` (array or `.npy` path) with `q`
/// `(n_features, n_features)` float64 (C-contiguous), into `out` (float64,
/// `(n_samples,)`), computed in float32 when `float32` and every value of
/// `q` keeps its value in float32 (else in float64, as NumPy promotes
/// float32 rows times a float64 matrix). Warnings are issued.
#[pyfunction]
#[pyo3(signature = (x, *, q, memory_limit, out, n_jobs=None, float32=false))]
pub fn row_quadratic_form<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    q: PyReadonlyArray2<'py, f64>,
    memory_limit: u64,
    mut out: PyReadwriteArray1<'py, f64>,
    n_jobs: Option<usize>,
    float32: bool,
) -> PyResult<()> {
    let inputs = Inputs::hold(x, None)?;
    let opts = run_options(memory_limit, n_jobs, Default::default());
    let (src, _) = inputs.open(&opts)?;
    let q_shape = {
        let a = q.as_array();
        [a.nrows(), a.ncols()]
    };
    let q = q.as_slice()?;
    let float32 = float32 && q.iter().all(|&v| memfit::linalg::holds_in_float32(v));
    let mut fill = Fill::new(Some(out.as_slice_mut()?));
    let done = run(py, n_jobs, float32, None, move |obs| {
        let job =
            QuadraticFormJob { x: &src, q, q_shape, q_read: false, compute: compute(float32), n_outputs: 0, run: opts };
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
pub fn weighted_scatter<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    memory_limit: u64,
    w: Option<&Bound<'py, PyAny>>,
    n_jobs: Option<usize>,
    remote: Option<Py<PyAny>>,
    row_bounds: Vec<usize>,
) -> PyResult<Bound<'py, numpy::PyArray2<f64>>> {
    let (row_split, remote) = split(remote, row_bounds);
    let inputs = Inputs::hold(x, w)?;
    let opts = run_options(memory_limit, n_jobs, row_split);
    let (src, ws) = inputs.open(&opts)?;
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
