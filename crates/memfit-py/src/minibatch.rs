//! Mini-batch k-means: rows drawn from any input, and one step on a batch.

use memfit::cluster::{EarlyStop, Metric, MiniBatch, StepWork, Stop};
use memfit::exec::{Block, CsrIndex};
use memfit::io::{CsrRef, Index, Source, SparseValues};
use memfit::Real;
use numpy::{
    IntoPyArray, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyReadwriteArray1, PyReadwriteArray2,
    PyUntypedArrayMethods,
};
use pyo3::prelude::*;

use crate::errors::to_py;
use crate::kmeans::parse_metric;
use crate::runner::run_brief;
use crate::shared::{exact_in_float32, run_options, Inputs};

/// The rows `rows` (int64 indices, any order, repeats allowed) of `x` (an
/// array, `.npy` path or expression) as a new C-contiguous
/// `(len(rows), n_features)` array, float32 when `float32` else float64,
/// read with positioned reads (never mapped); with `metric="cosine"` each
/// row scaled to unit norm as the engine reads rows for spherical k-means.
/// The array and the indices (16 B per row: the caller's and the engine's
/// copy) count against `memory_limit` (bytes). With `out` (a
/// C-contiguous array of that shape and dtype, such as the previous
/// batch's) the rows are written there and `out` is returned: a loop of
/// batches then reuses one array. Reads on `n_jobs` threads (the calling
/// thread's pool, as every engine call). With `exact` (dense rows, not
/// scaled), the rows are float32 also where float32 holds every value of
/// `x`'s dtype exactly (uint8, int16, float16; see
/// `memfit::estimator::ComputeDtype::exact_for`): the values of the
/// float64 rows in half the bytes, which a k-means step reads with the
/// same results.
///
/// A sparse `x` (a CSR matrix) gives its rows as CSR arrays instead,
/// `(data, indices, indptr)` (values of the compute dtype, int32 columns,
/// or int64 where the columns need them, int64 offsets from 0), counted at
/// the densest row's size each; `out` is not used.
#[pyfunction]
#[pyo3(signature = (x, *, rows, memory_limit, float32=false, metric="euclidean", out=None, n_jobs=None, exact=false))]
#[allow(clippy::too_many_arguments)]
pub fn gather_rows<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    rows: PyReadonlyArray1<'py, i64>,
    memory_limit: u64,
    float32: bool,
    metric: &str,
    out: Option<Bound<'py, PyAny>>,
    n_jobs: Option<usize>,
    exact: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let metric = parse_metric(metric)?;
    let rows: Vec<usize> = rows
        .as_array()
        .iter()
        .map(|&r| {
            usize::try_from(r).map_err(|_| pyo3::exceptions::PyIndexError::new_err(format!("row {r} is negative")))
        })
        .collect::<PyResult<_>>()?;
    let value_bytes = if float32 { 4 } else { 8 };
    if x.hasattr("indptr")? {
        // Only the drawn rows are checked and copied, never all of X.
        let shape: (usize, usize) = x.getattr("shape")?.extract()?;
        let (p, j, v) = crate::inputs::CsrArrays::new(x)?.take_rows(shape, &rows).map_err(to_py)?;
        let bytes = drawn_csr_bytes(rows.len(), v.len(), value_bytes);
        if bytes > memory_limit {
            return Err(to_py(memfit::Error::does_not_fit(
                bytes,
                memory_limit,
                format!("{} sparse rows ({} stored values) drawn from the data", rows.len(), v.len()),
                Vec::new(),
            )));
        }
        let csr =
            CsrRef::new(Index::I64(&p), Index::I64(&j), SparseValues::F64(&v), rows.len(), shape.1).map_err(to_py)?;
        let src = Source::csr(csr).unit_rows(metric == Metric::Cosine);
        return if float32 {
            gather_csr::<f32>(py, &src, &rows, n_jobs)
        } else {
            gather_csr::<f64>(py, &src, &rows, n_jobs)
        };
    }
    let inputs = Inputs::hold(x, None)?;
    let (src, _) = inputs.open(&run_options(memory_limit, Some(1), Default::default()))?;
    let src = src.unit_rows(metric == Metric::Cosine);
    let float32 = float32 || exact_in_float32(exact, metric, &src);
    let value_bytes = if float32 { 4 } else { 8 };
    let d = src.n_features();
    let bytes = drawn_dense_bytes(rows.len(), d, value_bytes);
    if bytes > memory_limit {
        return Err(to_py(memfit::Error::does_not_fit(
            bytes,
            memory_limit,
            format!("{} rows of {d} features drawn from the data, with their indices", rows.len()),
            Vec::new(),
        )));
    }
    fn read<'py, T: Real + numpy::Element>(
        py: Python<'py>,
        src: &memfit::io::Source<'_>,
        rows: &[usize],
        out: Option<Bound<'py, PyAny>>,
        n_jobs: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let d = src.n_features();
        let out = match out {
            Some(o) => {
                let a = o.cast_into::<numpy::PyArray2<T>>().map_err(|_| {
                    pyo3::exceptions::PyValueError::new_err(format!(
                        "out must be a C-contiguous {} array of shape ({}, {d})",
                        T::DTYPE.name(),
                        rows.len()
                    ))
                })?;
                if a.shape() != [rows.len(), d] || !a.is_c_contiguous() {
                    return Err(pyo3::exceptions::PyValueError::new_err(format!(
                        "out must be a C-contiguous {} array of shape ({}, {d}), not of shape {:?}",
                        T::DTYPE.name(),
                        rows.len(),
                        a.shape()
                    )));
                }
                a
            }
            // SAFETY: `gather_rows` writes every value before the array is
            // read (on an error it is dropped unread); any bits are a valid `T`.
            None => unsafe { numpy::PyArray2::<T>::new(py, [rows.len(), d], false) },
        };
        {
            let mut view = out.try_readwrite()?;
            let values = view.as_slice_mut()?;
            run_brief(py, n_jobs, T::DTYPE == memfit::io::Dtype::F32, move || src.gather_rows(rows, values))?;
        }
        Ok(out.into_any())
    }
    if float32 {
        read::<f32>(py, &src, &rows, out, n_jobs)
    } else {
        read::<f64>(py, &src, &rows, out, n_jobs)
    }
}

/// Bytes [`gather_rows`] holds for `rows` dense rows of `n_features`
/// values of `value_bytes`: the rows' values, and their indices twice (the
/// caller's int64 array and the engine's copy).
fn drawn_dense_bytes(rows: usize, n_features: usize, value_bytes: usize) -> u64 {
    (rows * (n_features * value_bytes + 16)) as u64
}

/// Bytes [`gather_rows`] holds for `rows` sparse rows of `values` stored
/// values in all, computed in a type of `value_bytes`: the rows taken
/// (int64 offsets and columns, float64 values) and the arrays returned
/// (int64 offsets, int32 columns, the compute type's values), together.
fn drawn_csr_bytes(rows: usize, values: usize, value_bytes: usize) -> u64 {
    ((rows + 1) * 16 + values * (24 + 4 + value_bytes)) as u64
}

/// All rows of the sparse `src`, the rows `taken` of the caller's matrix, as
/// `(data, indices, indptr)` arrays (see [`gather_rows`]); a non-finite
/// value is named by its row in the caller's matrix.
fn gather_csr<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    src: &Source<'_>,
    taken: &[usize],
    n_jobs: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    let (indptr, indices, values) = run_brief(py, n_jobs, T::DTYPE == memfit::io::Dtype::F32, move || {
        let (mut indptr, mut indices, mut values) = (Vec::new(), Vec::new(), Vec::<T>::new());
        let all: Vec<usize> = (0..taken.len()).collect();
        src.gather_csr(&all, &mut indptr, &mut indices, &mut values).map_err(|e| match e {
            memfit::Error::NonFinite { path, row, column, value, count } => {
                memfit::Error::NonFinite { path, row: taken[row], column, value, count }
            }
            e => e,
        })?;
        Ok((indptr, indices, values))
    })?;
    let indptr: Vec<i64> = indptr.into_iter().map(|o| o as i64).collect();
    let indices = if src.n_features() > i32::MAX as usize {
        indices.into_iter().map(i64::from).collect::<Vec<_>>().into_pyarray(py).into_any()
    } else {
        indices.into_iter().map(|j| j as i32).collect::<Vec<_>>().into_pyarray(py).into_any()
    };
    Ok((values.into_pyarray(py), indices, indptr.into_pyarray(py)).into_pyobject(py)?.into_any())
}

/// A fit's step buffers (`memfit::cluster::StepWork`), made by its first
/// step and reused by the next ones: pass the same object as `work=` to
/// each [`minibatch_step`] of a fit. Holds nothing until then.
#[pyclass(module = "memfit._memfit")]
#[derive(Default)]
pub struct MiniBatchWork {
    f32: Option<StepWork<f32>>,
    f64: Option<StepWork<f64>>,
}

#[pymethods]
impl MiniBatchWork {
    #[new]
    fn new() -> Self {
        MiniBatchWork::default()
    }
}

/// The buffers of `work` for compute type `T`.
trait WorkOf<T> {
    fn of(&mut self) -> &mut Option<StepWork<T>>;
}
impl WorkOf<f32> for MiniBatchWork {
    fn of(&mut self) -> &mut Option<StepWork<f32>> {
        &mut self.f32
    }
}
impl WorkOf<f64> for MiniBatchWork {
    fn of(&mut self) -> &mut Option<StepWork<f64>> {
        &mut self.f64
    }
}

/// What [`minibatch_step`] returns to Python (see its docs).
type StepOutcome = (f64, f64, Vec<usize>, Vec<usize>, usize);

/// One mini-batch k-means step (see `memfit::cluster::MiniBatch::step`) on
/// `batch` (C-contiguous `(rows, n_features)`, float32 or float64: the
/// compute type; or a CSR matrix of float32 or float64 values, read in
/// place, copied once into the step's CSR form) with optional
/// `sample_weight` (`(rows,)` float64), moving
/// `centers` (`(n_clusters, n_features)` float64) and `counts`
/// (`(n_clusters,)` float64) in place. `seen` rows count towards the
/// reassignment check, whose counter is `n_since_last_reassign`. Returns
/// `(inertia, centers_squared_diff, to_reassign, pool, n_since_last_reassign)`,
/// `pool` the batch rows they may move to (one each, see
/// `memfit::cluster::Step::pool`), `to_reassign` every centre (increasing)
/// whose count is below `reassignment_ratio` times the largest when the step
/// checked reassignment: the caller picks those it replaces by rows of the
/// batch and raises their counts (scikit-learn's rule, with NumPy's
/// `argsort` for ties; see `memfit::cluster::MiniBatch::caller_reassigns`). The step's buffers count against `memory_limit` (bytes). With
/// `metric="cosine"` the batch's rows are unit rows (from [`gather_rows`])
/// and each moved centre is scaled to unit norm (spherical mini-batch).
/// `work` ([`MiniBatchWork`]) keeps the step's buffers for the fit's next
/// steps; without it they are made and freed here. The centres are rounded
/// to float32 after a float32 batch's step unless `float64_centers` (a
/// float32 batch of values float64 rows would hold alike, from
/// [`gather_rows`] with `exact`).
#[pyfunction]
#[pyo3(signature = (batch, *, centers, counts, n_since_last_reassign, seen, reassignment_ratio, memory_limit,
    sample_weight=None, n_jobs=None, metric="euclidean", work=None, float64_centers=false))]
#[allow(clippy::too_many_arguments)]
pub fn minibatch_step<'py>(
    py: Python<'py>,
    batch: &Bound<'py, PyAny>,
    mut centers: PyReadwriteArray2<'py, f64>,
    mut counts: PyReadwriteArray1<'py, f64>,
    n_since_last_reassign: usize,
    seen: usize,
    reassignment_ratio: f64,
    memory_limit: u64,
    sample_weight: Option<PyReadonlyArray1<'py, f64>>,
    n_jobs: Option<usize>,
    metric: &str,
    work: Option<PyRefMut<'py, MiniBatchWork>>,
    float64_centers: bool,
) -> PyResult<StepOutcome> {
    let unit_centers = parse_metric(metric)? == Metric::Cosine;
    let (k, d) = (centers.as_array().nrows(), centers.as_array().ncols());
    // The centres are moved where they lie (a copy would cost as much as a
    // step on wide sparse rows).
    let centers = centers.as_slice_mut()?;
    let mut state = MiniBatch {
        n_clusters: k,
        n_features: d,
        counts: counts.as_slice()?.to_vec(),
        n_since_last_reassign,
        unit_centers,
        float64_centers,
        // NumPy's `argsort` picks among ties (see `_minibatch._step`).
        caller_reassigns: true,
    };
    if state.counts.len() != k {
        return Err(pyo3::exceptions::PyValueError::new_err(format!("{} counts for {k} centres", state.counts.len())));
    }
    let w = sample_weight.as_ref().map(|w| w.as_slice()).transpose()?;
    let threads = n_jobs.unwrap_or_else(memfit::plan::default_threads);
    let mut own = MiniBatchWork::default();
    let mut work = work;
    let work: &mut MiniBatchWork = match work.as_deref_mut() {
        Some(w) => w,
        None => &mut own,
    };
    /// A batch as the step reads it: dense values, or a CSR matrix.
    enum Batch<'a, T> {
        Dense(&'a [T]),
        Sparse(&'a Source<'a>),
    }
    /// What every step call takes besides the state, the centres and the batch.
    struct Args<'a> {
        w: Option<&'a [f64]>,
        threads: usize,
        seen: usize,
        reassignment_ratio: f64,
        memory_limit: u64,
    }
    fn step_on<T: Real>(
        py: Python<'_>,
        state: &mut MiniBatch,
        centers: &mut [f64],
        b: Batch<'_, T>,
        a: &Args<'_>,
        work: &mut Option<StepWork<T>>,
    ) -> PyResult<memfit::cluster::Step> {
        let d = state.n_features;
        let Args { w, threads, seen, reassignment_ratio, memory_limit } = *a;
        run_brief(py, Some(threads), T::DTYPE == memfit::io::Dtype::F32, move || match b {
            Batch::Dense(x) => {
                state.plan_steps(x.len() / d.max(1), threads, size_of::<T>(), false, &[], memory_limit)?;
                state.step(centers, &Block::dense(0, x, w, d), seen, reassignment_ratio, work)
            }
            Batch::Sparse(src) => {
                let rows = src.n_samples();
                if src.n_features() != d {
                    return Err(memfit::Error::param(
                        "X",
                        format!("a batch of {} features for centres of {d}", src.n_features()),
                    ));
                }
                let nnz = src.sparse_row_nnz().unwrap_or(0);
                let copy = (
                    "batch as the step reads it (CSR)".to_string(),
                    ((rows + 1) * 8 + nnz * rows * (4 + size_of::<T>())) as u64,
                );
                state.plan_steps(rows, threads, size_of::<T>(), true, &[copy], memory_limit)?;
                let (mut indptr, mut indices, mut values, mut raw) =
                    (Vec::new(), Vec::new(), Vec::<T>::new(), Vec::new());
                src.read_csr(0, rows, &mut indptr, &mut indices, &mut values, &mut raw)?;
                let csr = CsrIndex { indptr: &indptr, indices: &indices };
                state.step(centers, &Block::sparse(0, &values, csr, w, d), seen, reassignment_ratio, work)
            }
        })
    }
    let args = Args { w, threads, seen, reassignment_ratio, memory_limit };
    let step = if batch.hasattr("indptr")? {
        let held = crate::inputs::Held::new(batch)?;
        let src = held.source(&memfit::exec::RunOptions::default())?;
        if src.sparse_row_nnz().is_none() {
            return Err(pyo3::exceptions::PyTypeError::new_err("memfit: a sparse batch must be a CSR matrix"));
        }
        if batch.getattr("data")?.cast::<numpy::PyArray1<f32>>().is_ok() {
            step_on(py, &mut state, centers, Batch::Sparse(&src), &args, WorkOf::<f32>::of(work))?
        } else {
            step_on(py, &mut state, centers, Batch::Sparse(&src), &args, WorkOf::<f64>::of(work))?
        }
    } else if let Ok(b) = batch.cast::<numpy::PyArray2<f32>>() {
        let b = b.readonly();
        step_on(py, &mut state, centers, Batch::Dense(b.as_slice()?), &args, WorkOf::<f32>::of(work))?
    } else {
        let b = batch.extract::<PyReadonlyArray2<'py, f64>>()?;
        step_on(py, &mut state, centers, Batch::Dense(b.as_slice()?), &args, WorkOf::<f64>::of(work))?
    };
    counts.as_slice_mut()?.copy_from_slice(&state.counts);
    Ok((step.inertia, step.centers_squared_diff, step.to_reassign, step.pool, state.n_since_last_reassign))
}

/// Initial centres (`(n_clusters, n_features)` float64, C-contiguous) made
/// in place what the steps hold (see `memfit::cluster::MiniBatch::start_centers`):
/// scaled to unit norm for `metric="cosine"`, then rounded to float32 when
/// `float32`.
#[pyfunction]
#[pyo3(signature = (centers, *, float32=false, metric="euclidean"))]
pub fn minibatch_start_centers(mut centers: PyReadwriteArray2<'_, f64>, float32: bool, metric: &str) -> PyResult<()> {
    let unit = parse_metric(metric)? == Metric::Cosine;
    let d = centers.as_array().ncols();
    let c = centers.as_slice_mut()?;
    if float32 {
        MiniBatch::start_centers::<f32>(c, d, unit);
    } else {
        MiniBatch::start_centers::<f64>(c, d, unit);
    }
    Ok(())
}

/// The plan (as text) of steps on batches of `batch_size` rows
/// (`n_clusters` centres of `n_features`, on `n_jobs` threads, computing in
/// float32 when `float32`) beside `held`, the `(name, bytes)` buffers the
/// caller holds for the whole fit; raises `MemoryError` when it does not
/// fit `memory_limit` bytes. Called before those buffers are allocated.
/// For a sparse `sparse_x` (the CSR matrix the steps draw from, checked
/// here; its densest row sizes the batches) the plan counts the step's
/// sparse buffers, the drawn batch in CSR form (as [`gather_rows`] holds
/// it) and the step's copy of it. With `gathered` (dense rows) the plan
/// counts a batch drawn by [`gather_rows`] beside the step.
#[pyfunction]
#[pyo3(signature = (n_clusters, n_features, batch_size, *, memory_limit, held, n_jobs=None, float32=false,
    sparse_x=None, gathered=false))]
#[allow(clippy::too_many_arguments)]
pub fn minibatch_plan(
    n_clusters: usize,
    n_features: usize,
    batch_size: usize,
    memory_limit: u64,
    mut held: Vec<(String, u64)>,
    n_jobs: Option<usize>,
    float32: bool,
    sparse_x: Option<Bound<'_, PyAny>>,
    gathered: bool,
) -> PyResult<String> {
    let state = MiniBatch {
        n_clusters,
        n_features,
        counts: Vec::new(),
        n_since_last_reassign: 0,
        unit_centers: false,
        float64_centers: false,
        caller_reassigns: true,
    };
    let threads = n_jobs.unwrap_or_else(memfit::plan::default_threads);
    let value_bytes = if float32 { 4 } else { 8 };
    let max_row_nnz = match &sparse_x {
        Some(x) => crate::inputs::Held::new(x)?.source(&memfit::exec::RunOptions::default())?.sparse_row_nnz(),
        None => None,
    };
    if let Some(nnz) = max_row_nnz {
        let values = batch_size * nnz;
        held.push(("drawn batch (CSR, returned to Python)".into(), drawn_csr_bytes(batch_size, values, value_bytes)));
        // The step's copy: offsets, u32 columns and values.
        let copy = ((batch_size + 1) * 8 + values * (4 + value_bytes)) as u64;
        held.push(("batch as the step reads it (CSR)".into(), copy));
    } else if gathered {
        held.push((
            format!("{batch_size} rows of {n_features} features drawn from the data, with their indices"),
            drawn_dense_bytes(batch_size, n_features, value_bytes),
        ));
    }
    let plan = state
        .plan_steps(batch_size, threads, value_bytes, max_row_nnz.is_some(), &held, memory_limit)
        .map_err(to_py)?;
    Ok(plan.to_string())
}

/// scikit-learn's early stopping of a mini-batch fit, as the engine's
/// (`memfit::cluster::EarlyStop`): the smoothed batch inertia and the steps
/// since its last new minimum.
#[pyclass(module = "memfit._memfit")]
#[derive(Default)]
pub struct MiniBatchEarlyStop(EarlyStop);

#[pymethods]
impl MiniBatchEarlyStop {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    /// Takes step `step` (zero-based): its batch inertia (the sum over the
    /// batch) and squared centre change. Returns why the fit stops
    /// (`"small centers change"`, `"lack of improvement in inertia"`) or
    /// None.
    #[pyo3(signature = (step, batch_inertia, *, batch_size, n_samples, centers_squared_diff, tol,
        max_no_improvement=None))]
    #[allow(clippy::too_many_arguments)]
    fn update(
        &mut self,
        step: usize,
        batch_inertia: f64,
        batch_size: usize,
        n_samples: usize,
        centers_squared_diff: f64,
        tol: f64,
        max_no_improvement: Option<usize>,
    ) -> Option<&'static str> {
        let stop =
            self.0.update(step, batch_inertia, batch_size, n_samples, centers_squared_diff, tol, max_no_improvement)?;
        Some(match stop {
            Stop::SmallCentersChange => "small centers change",
            Stop::NoImprovement => "lack of improvement in inertia",
        })
    }

    /// The smoothed mean batch inertia (None before the second step).
    #[getter]
    fn ewa_inertia(&self) -> Option<f64> {
        self.0.ewa_inertia
    }
}
