//! `memfit._memfit.Expr` and its constructors: the engine's lazy array
//! expressions ([`memfit::array`]) for the Python front `memfit.array`.
//! NumPy arrays are borrowed, never copied: the expression keeps a
//! reference to the array, whose memory it reads while evaluating.

use std::path::PathBuf;
use std::sync::Arc;

use memfit::array::{
    check_on_cluster, default_zarr_chunks, explain, explain_all, run as run_expr, run_all, run_on, Array, Computed,
    ExprRows, OnCluster, Options, Output, Place, Shards, Stored,
};
use memfit::dtype::Dtype;
use memfit::io::RowSource;
use numpy::{PyArray1, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::errors::to_py;
use crate::runner::run;

/// A node of a lazy array expression (immutable).
#[pyclass(frozen, module = "memfit._memfit")]
pub struct Expr(Array);

fn options(memory_limit: u64, n_jobs: Option<usize>) -> Options {
    Options { threads: n_jobs, ..Options::with_limit(memory_limit) }
}

/// An iterator over the row blocks of a 2-D expression ([`Expr::row_blocks`]).
#[pyclass(module = "memfit._memfit")]
pub struct RowBlocks {
    rows: Arc<ExprRows>,
    next: usize,
    block: usize,
    done: bool,
}

#[pymethods]
impl RowBlocks {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next block (rows, columns), or the end; at the end, the
    /// evaluation's warnings.
    fn __next__<'py>(mut slf: PyRefMut<'py, Self>, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let n = slf.rows.n_rows();
        if slf.next >= n {
            if !slf.done {
                slf.done = true;
                crate::shared::warn(py, &slf.rows.warnings())?;
            }
            return Ok(None);
        }
        let (start, count) = (slf.next, slf.block.min(n - slf.next));
        let rows = slf.rows.clone();
        let bytes = py.detach(move || rows.read_bytes(start, count)).map_err(to_py)?;
        slf.next += count;
        let shape = vec![count, slf.rows.n_cols()];
        to_numpy(py, Computed { shape, dtype: slf.rows.dtype(), bytes }).map(Some)
    }
}

/// The NumPy array holding `c`'s bytes, with its dtype and shape (no copy).
fn to_numpy<'py>(py: Python<'py>, c: Computed) -> PyResult<Bound<'py, PyAny>> {
    let flat = PyArray1::from_vec(py, c.bytes);
    flat.call_method1("view", (c.dtype.name(),))?.call_method1("reshape", (c.shape,))
}

impl Expr {
    /// The expression.
    pub fn array(&self) -> &Array {
        &self.0
    }
}

#[pymethods]
impl Expr {
    /// The shape.
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.0.shape().to_vec()
    }

    /// NumPy's name of the dtype.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.0.dtype().name()
    }

    /// Number of dimensions.
    #[getter]
    fn ndim(&self) -> usize {
        self.0.shape().len()
    }

    /// Evaluates into a new NumPy array within `memory_limit` bytes.
    #[pyo3(signature = (memory_limit, n_jobs=None))]
    fn compute<'py>(&self, py: Python<'py>, memory_limit: u64, n_jobs: Option<usize>) -> PyResult<Bound<'py, PyAny>> {
        let a = self.0.clone();
        let (computed, report) = run(py, n_jobs, false, None, move |w| {
            run_expr(&a, &Output::Memory, &options(memory_limit, n_jobs), &mut memfit::exec::Context::new(w))
        })?;
        crate::shared::warn(py, &report.warnings)?;
        to_numpy(py, computed.expect("a memory result"))
    }

    /// What the expression reads from outside itself: `("memory", start,
    /// stop)` for each borrowed span of addresses, `("file", path)` for each
    /// `.npy` file or Zarr directory (see `memfit::array::Array::places`).
    fn places<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self.0.places().into_iter().map(|p| match p {
            Place::Memory { start, len } => ("memory", start, start + len).into_pyobject(py).map(|t| t.into_any()),
            Place::File(path) => ("file", path.into_os_string()).into_pyobject(py).map(|t| t.into_any()),
        });
        PyList::new(py, items.collect::<PyResult<Vec<_>>>()?)
    }

    /// The positions a `take` node selects (negative ones counted from the
    /// end) as a new int64 array; None for any other node.
    fn take_indices<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyArray1<i64>>> {
        self.0.take_indices().map(|ix| PyArray1::from_slice(py, ix))
    }

    /// The rows of this 2-D expression as NumPy arrays of consecutive row
    /// blocks, in order, in its dtype: its intermediates are computed
    /// within a quarter of `memory_limit` on `n_jobs` threads before the
    /// first block, and each block is as large as the rest allows
    /// (`memfit::array::ExprRows::block_rows`).
    #[pyo3(signature = (memory_limit, n_jobs=None))]
    fn row_blocks(&self, memory_limit: u64, n_jobs: Option<usize>) -> PyResult<RowBlocks> {
        let run = memfit::exec::RunOptions { threads: n_jobs, ..memfit::exec::RunOptions::with_limit(memory_limit) };
        let rows = ExprRows::for_job(&self.0, &run).map_err(to_py)?;
        let block = rows.block_rows(memory_limit - memory_limit / 4);
        Ok(RowBlocks { rows: Arc::new(rows), next: 0, block, done: false })
    }

    /// Streams the result into a `.npy` file.
    #[pyo3(signature = (path, memory_limit, n_jobs=None, overwrite=false))]
    fn to_npy(
        &self,
        py: Python<'_>,
        path: PathBuf,
        memory_limit: u64,
        n_jobs: Option<usize>,
        overwrite: bool,
    ) -> PyResult<()> {
        let a = self.0.clone();
        let out = Output::Npy { path, overwrite };
        let opts = Options { raise_on: crate::shared::raise_on(py)?, ..options(memory_limit, n_jobs) };
        let (_, report) =
            run(py, n_jobs, false, None, move |w| run_expr(&a, &out, &opts, &mut memfit::exec::Context::new(w)))?;
        crate::shared::warn(py, &report.warnings)
    }

    /// Streams the result into a Zarr v3 array: `shards` a shard shape,
    /// or None for none (`auto_shards`: the engine's choice).
    #[pyo3(signature = (path, chunks, memory_limit, n_jobs=None, overwrite=false, shards=None, auto_shards=true))]
    #[allow(clippy::too_many_arguments)]
    fn to_zarr(
        &self,
        py: Python<'_>,
        path: PathBuf,
        chunks: Option<Vec<usize>>,
        memory_limit: u64,
        n_jobs: Option<usize>,
        overwrite: bool,
        shards: Option<Vec<usize>>,
        auto_shards: bool,
    ) -> PyResult<()> {
        let a = self.0.clone();
        let shards = match shards {
            Some(s) => Shards::Shape(s),
            None if auto_shards => Shards::Auto,
            None => Shards::Off,
        };
        let out = Output::Zarr { path, chunks, shards, overwrite };
        let opts = Options { raise_on: crate::shared::raise_on(py)?, ..options(memory_limit, n_jobs) };
        let (_, report) =
            run(py, n_jobs, false, None, move |w| run_expr(&a, &out, &opts, &mut memfit::exec::Context::new(w)))?;
        crate::shared::warn(py, &report.warnings)
    }

    /// Evaluates into a new NumPy array (`path` None; returned) or streams
    /// into the `.npy` file `path`, its reductions as tasks on a cluster:
    /// `run_tasks(task: bytes, ranges: list[tuple[int, int]]) ->
    /// list[bytes]` runs the task over each range of a stage's
    /// accumulation chunks (where it runs: `run_array_task`), at most
    /// `tasks` ranges a stage, each task within `task_limit` bytes; the
    /// rest runs here within `memory_limit` (see `memfit::array::run_on`).
    /// A Python exception `run_tasks` raised is raised unchanged.
    #[pyo3(signature = (run_tasks, tasks, task_limit, memory_limit, n_jobs=None, path=None, overwrite=false))]
    #[allow(clippy::too_many_arguments)]
    fn run_on_cluster<'py>(
        &self,
        py: Python<'py>,
        run_tasks: Py<PyAny>,
        tasks: usize,
        task_limit: u64,
        memory_limit: u64,
        n_jobs: Option<usize>,
        path: Option<PathBuf>,
        overwrite: bool,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let a = self.0.clone();
        let remote = crate::remote::PyRemote::new(run_tasks);
        let r = remote.clone();
        let out = match path {
            Some(path) => Output::Npy { path, overwrite },
            None => Output::Memory,
        };
        let opts = Options { raise_on: crate::shared::raise_on(py)?, ..options(memory_limit, n_jobs) };
        let (computed, report) = run(py, n_jobs, false, None, move |w| {
            let cluster = OnCluster { remote: &*r, tasks, task_limit };
            run_on(&a, &out, &opts, &cluster, &mut memfit::exec::Context::new(w))
        })
        .map_err(|e| remote.restore(e))?;
        crate::shared::warn(py, &report.warnings)?;
        computed.map(|c| to_numpy(py, c)).transpose()
    }

    /// Why the array cannot be evaluated with its reductions on a cluster
    /// (`run_on_cluster`), or None when it can (reads no data; a plan that
    /// does not fit is left for the run to report).
    #[pyo3(signature = (memory_limit, n_jobs=None))]
    fn cluster_refusal(&self, memory_limit: u64, n_jobs: Option<usize>) -> Option<String> {
        let threads = n_jobs.unwrap_or_else(memfit::plan::default_threads);
        match check_on_cluster(&self.0, &Output::Memory, &options(memory_limit, Some(threads))) {
            Err(e @ memfit::Error::Expression { .. }) => Some(e.to_string()),
            _ => None,
        }
    }

    /// The chunk shape `to_zarr` picks when none is given (the engine's
    /// rule; reads no data).
    #[pyo3(signature = (memory_limit, n_jobs=None))]
    fn default_chunks(&self, memory_limit: u64, n_jobs: Option<usize>) -> PyResult<Vec<usize>> {
        let threads = n_jobs.unwrap_or_else(rayon::current_num_threads);
        default_zarr_chunks(&self.0, &options(memory_limit, Some(threads))).map_err(to_py)
    }

    /// The plan, printable.
    #[pyo3(signature = (memory_limit, n_jobs=None, output=None))]
    fn explain(&self, memory_limit: u64, n_jobs: Option<usize>, output: Option<PathBuf>) -> PyResult<String> {
        let out = output_of(output);
        let threads = n_jobs.unwrap_or_else(memfit::plan::default_threads);
        Ok(explain(&self.0, &out, &options(memory_limit, Some(threads))).map_err(to_py)?.to_string())
    }

    /// The plan as data (a dict).
    #[pyo3(signature = (memory_limit, n_jobs=None, output=None))]
    fn plan<'py>(
        &self,
        py: Python<'py>,
        memory_limit: u64,
        n_jobs: Option<usize>,
        output: Option<PathBuf>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let out = output_of(output);
        let threads = n_jobs.unwrap_or_else(memfit::plan::default_threads);
        let plan = explain(&self.0, &out, &options(memory_limit, Some(threads))).map_err(to_py)?;
        crate::shared::to_data(py, &plan)
    }

    fn __repr__(&self) -> String {
        format!("Expr(shape={:?}, dtype={})", self.0.shape(), self.0.dtype().name())
    }
}

/// A destination of `compute_all`: None (memory), `("npy", path,
/// overwrite)` or `("zarr", path, chunks, overwrite)`.
type Destination = Option<(String, PathBuf, Option<Vec<usize>>, bool)>;

fn outputs_of(destinations: Vec<Destination>) -> PyResult<Vec<Output>> {
    destinations
        .into_iter()
        .map(|d| match d {
            None => Ok(Output::Memory),
            Some((kind, path, _, overwrite)) if kind == "npy" => Ok(Output::Npy { path, overwrite }),
            Some((kind, path, chunks, overwrite)) if kind == "zarr" => {
                Ok(Output::Zarr { path, chunks, shards: Shards::Auto, overwrite })
            }
            Some((kind, ..)) => Err(PyValueError::new_err(format!("unknown destination kind {kind:?}"))),
        })
        .collect()
}

fn arrays_of(exprs: &Bound<'_, PyList>) -> PyResult<Vec<Array>> {
    exprs
        .iter()
        .map(|x| x.cast::<Expr>().map(|e| e.get().0.clone()).map_err(|_| PyTypeError::new_err("inputs must be Expr")))
        .collect()
}

/// Evaluates several expressions in one job (shared intermediates computed
/// once): result `k` goes to `destinations[k]` (see [`Destination`]);
/// returns a list with the NumPy array of each result in memory, None for
/// the others.
#[pyfunction]
#[pyo3(signature = (exprs, destinations, memory_limit, n_jobs=None))]
pub fn compute_all<'py>(
    py: Python<'py>,
    exprs: &Bound<'py, PyList>,
    destinations: Vec<Destination>,
    memory_limit: u64,
    n_jobs: Option<usize>,
) -> PyResult<Vec<Option<Bound<'py, PyAny>>>> {
    let (roots, outputs) = (arrays_of(exprs)?, outputs_of(destinations)?);
    let opts = Options { raise_on: crate::shared::raise_on(py)?, ..options(memory_limit, n_jobs) };
    let (computed, report) =
        run(py, n_jobs, false, None, move |w| run_all(&roots, &outputs, &opts, &mut memfit::exec::Context::new(w)))?;
    crate::shared::warn(py, &report.warnings)?;
    computed.into_iter().map(|c| c.map(|c| to_numpy(py, c)).transpose()).collect()
}

/// The plan of `compute_all`, printable and as data (reads no data).
#[pyfunction]
#[pyo3(signature = (exprs, destinations, memory_limit, n_jobs=None))]
pub fn explain_all_exprs<'py>(
    py: Python<'py>,
    exprs: &Bound<'py, PyList>,
    destinations: Vec<Destination>,
    memory_limit: u64,
    n_jobs: Option<usize>,
) -> PyResult<(String, Bound<'py, PyAny>)> {
    let (roots, outputs) = (arrays_of(exprs)?, outputs_of(destinations)?);
    let threads = n_jobs.unwrap_or_else(memfit::plan::default_threads);
    let plan = explain_all(&roots, &outputs, &options(memory_limit, Some(threads))).map_err(to_py)?;
    Ok((plan.to_string(), crate::shared::to_data(py, &plan)?))
}

/// The output a plan is for: a `.npy` or `.zarr` path, or memory.
fn output_of(path: Option<PathBuf>) -> Output {
    match path {
        Some(p) if p.extension().is_some_and(|e| e == "zarr") => {
            Output::Zarr { path: p, chunks: None, shards: Shards::Auto, overwrite: true }
        }
        Some(p) => Output::Npy { path: p, overwrite: true },
        None => Output::Memory,
    }
}

/// The engine dtype of a NumPy dtype (native byte order only).
fn dtype_of(a: &Bound<'_, PyUntypedArray>) -> PyResult<Dtype> {
    let d = a.dtype();
    let (k, size, order) = (d.kind(), d.itemsize(), d.byteorder());
    let found = match (k, size) {
        (b'b', 1) => Some(Dtype::Bool),
        (b'i', 1) => Some(Dtype::I8),
        (b'i', 2) => Some(Dtype::I16),
        (b'i', 4) => Some(Dtype::I32),
        (b'i', 8) => Some(Dtype::I64),
        (b'u', 1) => Some(Dtype::U8),
        (b'u', 2) => Some(Dtype::U16),
        (b'u', 4) => Some(Dtype::U32),
        (b'u', 8) => Some(Dtype::U64),
        (b'f', 2) => Some(Dtype::F16),
        (b'f', 4) => Some(Dtype::F32),
        (b'f', 8) => Some(Dtype::F64),
        _ => None,
    };
    match found {
        Some(dt) if order != b'>' => Ok(dt),
        _ => Err(PyTypeError::new_err(format!("memfit.array does not support dtype {d}"))),
    }
}

/// Borrows a NumPy array (no copy): the expression keeps a reference to it.
#[pyfunction]
pub fn expr_from_ndarray(a: &Bound<'_, PyAny>) -> PyResult<Expr> {
    let arr = a.cast::<PyUntypedArray>().map_err(|_| PyTypeError::new_err("expected a numpy.ndarray"))?;
    let dtype = dtype_of(arr)?;
    let size = dtype.itemsize() as isize;
    let shape = arr.shape().to_vec();
    let strides = arr.strides().to_vec();
    if strides.iter().any(|s| s % size != 0) {
        return Err(PyValueError::new_err("strides that are not a multiple of the item size: pass a copy"));
    }
    // SAFETY: a live ndarray's data pointer.
    let data = unsafe { (*arr.as_array_ptr()).fields.data } as *const u8;
    let n: usize = shape.iter().product();
    // The span of memory the elements occupy, from the lowest address.
    let (mut lo, mut hi) = (0isize, 0isize);
    if n > 0 {
        for (&len, &s) in shape.iter().zip(&strides) {
            let reach = (len as isize - 1) * s;
            if reach < 0 {
                lo += reach;
            } else {
                hi += reach;
            }
        }
    }
    let len = if n > 0 { (hi - lo + size) as usize } else { 0 };
    // SAFETY: `lo` is within the array's allocation (the lowest element).
    let ptr = unsafe { data.offset(lo) };
    let owner: Arc<dyn std::any::Any + Send + Sync> = Arc::new(a.clone().unbind());
    let strides_elems: Vec<i64> = strides.iter().map(|&s| (s / size) as i64).collect();
    // SAFETY: every element lies in the span; the owner keeps the array alive,
    // and the front end documents that the array must not change meanwhile.
    let stored = unsafe { Stored::borrowed(ptr, len, owner, dtype, shape, strides_elems, (-lo / size) as i64) };
    Ok(Expr(Array::stored(stored)))
}

/// A `.npy` file, read lazily.
#[pyfunction]
pub fn expr_from_npy(path: PathBuf) -> PyResult<Expr> {
    Ok(Expr(Array::from_npy(path).map_err(to_py)?))
}

/// A Zarr array directory, read lazily.
#[pyfunction]
pub fn expr_from_zarr(path: PathBuf) -> PyResult<Expr> {
    Ok(Expr(Array::from_zarr(path).map_err(to_py)?))
}

/// Builds the operation `op` over `inputs` with `params` (see
/// `memfit::array::Array::build`).
#[pyfunction]
pub fn expr_op(py: Python<'_>, op: &str, inputs: &Bound<'_, PyList>, params: &Bound<'_, PyDict>) -> PyResult<Expr> {
    let inputs = arrays_of(inputs)?;
    // `take`'s indices as an int64 array: read once, 8 bytes each (not a
    // list through JSON).
    if let (["take"], [x], Some(ix)) = ([op], inputs.as_slice(), params.get_item("indices")?) {
        if let Ok(ix) = ix.extract::<numpy::PyReadonlyArray1<'_, i64>>() {
            let axis: usize = params.get_item("axis")?.ok_or_else(|| PyValueError::new_err("take: axis"))?.extract()?;
            let taken = match ix.as_slice() {
                Ok(s) => x.take(axis, s),
                Err(_) => x.take(axis, &ix.as_array().to_vec()),
            };
            return Ok(Expr(taken.map_err(to_py)?));
        }
    }
    // JSON has no NaN or infinity: send them as strings.
    let clean = PyDict::new(py);
    for (k, v) in params.iter() {
        match v.extract::<f64>() {
            Ok(x) if !x.is_finite() && v.is_instance_of::<pyo3::types::PyFloat>() => clean.set_item(
                k,
                if x.is_nan() {
                    "nan"
                } else if x > 0.0 {
                    "inf"
                } else {
                    "-inf"
                },
            )?,
            _ => clean.set_item(k, v)?,
        }
    }
    let text: String = py.import("json")?.call_method1("dumps", (clean,))?.extract()?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(Expr(Array::build(op, &inputs, &value).map_err(to_py)?))
}
