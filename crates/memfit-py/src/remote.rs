//! Passes on a cluster: the Python front's side of [`memfit::exec::Remote`]
//! (a Python callable that runs tasks, for example on Dask workers), the
//! task entry points those workers call (`run_task` over rows,
//! `run_array_task` over an expression's chunks), and rows read through a
//! Python object (a Dask array read chunk by chunk).

use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};

use memfit::exec::{Cancel, Remote, RowSplit, Task};
use memfit::io::{CsrBlock, CsrRowSource, Dtype, RowSource, Source};
use numpy::{PyArray1, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::runner::{run, running};

/// Runs tasks by calling `run(task: bytes, ranges: list[tuple[int, int]])`
/// (ranges of rows, or of an array reduction's chunks), which returns an
/// iterable of each range's result (`bytes`), in order, and, called within
/// a run, is given `cancelled=` (a [`Cancelled`]: true once the run is
/// interrupted, so that a wait for tasks that no worker is left to run
/// stops on Ctrl-C); a task with per-row
/// state is also given `row_state=(id, fresh)` (see
/// [`memfit::exec::RowStateUse`]: the callable keeps each range's state, as
/// `run_task` returns it, for the next task of that id). Keeps the Python
/// exception a call (or the iteration) raised, so that the
/// caller sees it unchanged (a worker's `ValueError` naming a row, say).
#[derive(Debug)]
pub struct PyRemote {
    run: Py<PyAny>,
    raised: Mutex<Option<PyErr>>,
}

impl PyRemote {
    /// Tasks run through `run`.
    pub fn new(run: Py<PyAny>) -> Arc<PyRemote> {
        Arc::new(PyRemote { run, raised: Mutex::new(None) })
    }

    /// The split of a job whose passes run through `run` in the ranges cut
    /// at `bounds`, and the remote (to [`PyRemote::restore`] its error).
    pub fn split(run: Py<PyAny>, bounds: Vec<usize>) -> (RowSplit, Arc<PyRemote>) {
        let remote = PyRemote::new(run);
        (RowSplit::remote(bounds, remote.clone()), remote)
    }

    /// `e`, or the Python exception behind it when a call raised one.
    pub fn restore(&self, e: PyErr) -> PyErr {
        self.raised.lock().unwrap_or_else(PoisonError::into_inner).take().unwrap_or(e)
    }

    /// The error of a Python exception `e`, which is kept for
    /// [`PyRemote::restore`]; [`memfit::Error::Cancelled`] when the run was
    /// interrupted (the call stopped because of it: the run reports the
    /// interrupt).
    fn keep(&self, e: PyErr) -> memfit::Error {
        if running().is_some_and(|c| c.is_cancelled()) {
            return memfit::Error::Cancelled;
        }
        let reason = e.to_string();
        *self.raised.lock().unwrap_or_else(PoisonError::into_inner) = Some(e);
        memfit::Error::Remote { reason }
    }
}

impl Remote for PyRemote {
    fn run(&self, task: &Task, ranges: &[Range<usize>]) -> memfit::Result<Vec<Vec<u8>>> {
        let mut out = Vec::with_capacity(ranges.len());
        self.run_each(task, ranges, &mut |part| {
            out.push(part);
            Ok(())
        })?;
        Ok(out)
    }

    fn run_each(
        &self,
        task: &Task,
        ranges: &[Range<usize>],
        each: &mut dyn FnMut(Vec<u8>) -> memfit::Result<()>,
    ) -> memfit::Result<()> {
        Python::attach(|py| {
            let ranges: Vec<(usize, usize)> = ranges.iter().map(|r| (r.start, r.end)).collect();
            let args = (PyBytes::new(py, &task.encode()), ranges);
            let kwargs = PyDict::new(py);
            // Only tasks with per-row state name it (array reductions' callables take none).
            if let Some(s) = task.row_state {
                kwargs.set_item("row_state", (s.id, s.fresh)).map_err(|e| self.keep(e))?;
            }
            if let Some(cancel) = running() {
                kwargs.set_item("cancelled", Cancelled(cancel)).map_err(|e| self.keep(e))?;
            }
            let parts = self
                .run
                .call(py, args, Some(&kwargs))
                .and_then(|parts| parts.into_bound(py).try_iter())
                .map_err(|e| self.keep(e))?;
            for part in parts {
                // The Python bytes are dropped before `each` merges the copy.
                let part = part.and_then(|p| p.extract::<Vec<u8>>()).map_err(|e| self.keep(e))?;
                each(part)?;
            }
            Ok(())
        })
    }
}

/// Whether a run was interrupted: `cancelled()` is true once it was.
#[pyclass(module = "memfit._memfit")]
pub struct Cancelled(Cancel);

#[pymethods]
impl Cancelled {
    fn __call__(&self) -> bool {
        self.0.is_cancelled()
    }
}

/// The Python exception a [`Reader`] raised last (a Dask chunk's task that
/// failed in this process, say), kept so that the run's caller sees it
/// unchanged: [`crate::runner::run`] clears it when a run starts and
/// raises it when the run fails.
static READ_RAISED: Mutex<Option<PyErr>> = Mutex::new(None);

/// Takes the exception a reader raised (see [`READ_RAISED`]).
pub fn take_read_error() -> Option<PyErr> {
    READ_RAISED.lock().unwrap_or_else(PoisonError::into_inner).take()
}

/// A Python object that hands out rows (see [`PyRows`], [`PyCsrRows`]):
/// its `shape` (`(n_samples, n_features)`), `dtype` (NumPy's name) and
/// `held_bytes` (what it keeps between reads, such as one computed chunk).
#[derive(Debug, Clone)]
struct Reader {
    reader: Arc<Py<PyAny>>,
    n: usize,
    d: usize,
    dtype: Dtype,
    held: u64,
}

impl Reader {
    /// Reads `reader`'s attributes; `what` names its values in the error
    /// for a dtype that `accept` refuses.
    fn new(reader: &Bound<'_, PyAny>, what: &str, accept: fn(Dtype) -> bool) -> PyResult<Self> {
        let (n, d): (usize, usize) = reader.getattr("shape")?.extract()?;
        let name: String = reader.getattr("dtype")?.extract()?;
        let dtype = Dtype::from_name(&name).filter(|&t| accept(t)).ok_or_else(|| {
            pyo3::exceptions::PyTypeError::new_err(format!("memfit: {what} of dtype {name} are not supported"))
        })?;
        let held: u64 = reader.getattr("held_bytes")?.extract()?;
        Ok(Reader { reader: Arc::new(reader.clone().unbind()), n, d, dtype, held })
    }

    /// `method(start, start + rows)` of the reader, its result turned into
    /// `T` by `take`; a Python error is the input's (read in this process,
    /// no task elsewhere), kept in [`READ_RAISED`].
    fn read<T>(
        &self,
        method: &str,
        start: usize,
        rows: usize,
        take: impl FnOnce(Bound<'_, PyAny>) -> PyResult<T>,
    ) -> memfit::Result<T> {
        Python::attach(|py| take(self.reader.call_method1(py, method, (start, start + rows))?.into_bound(py))).map_err(
            |e| {
                let error = memfit::Error::param("X", format!("reading rows {start}..{}: {e}", start + rows));
                *READ_RAISED.lock().unwrap_or_else(PoisonError::into_inner) = Some(e);
                error
            },
        )
    }
}

/// Rows read through a Python object with `shape`, `dtype`, `held_bytes`
/// (see [`Reader`]) and `read_rows(start, stop)` returning rows
/// `start..stop` as a C-contiguous float64 array.
#[derive(Debug, Clone)]
pub struct PyRows(Reader);

impl PyRows {
    /// The rows of `reader` when it is such an object (it has `read_rows`).
    pub fn new(reader: &Bound<'_, PyAny>) -> PyResult<Self> {
        Reader::new(reader, "rows", |_| true).map(PyRows)
    }
}

impl RowSource for PyRows {
    fn n_rows(&self) -> usize {
        self.0.n
    }
    fn n_cols(&self) -> usize {
        self.0.d
    }
    fn dtype(&self) -> Dtype {
        self.0.dtype
    }
    fn bytes_per_row(&self) -> usize {
        self.0.d * 8
    }
    fn held_bytes(&self) -> u64 {
        self.0.held
    }
    /// In-memory rows, named by the Python front as its argument (`X`).
    fn name(&self) -> std::path::PathBuf {
        std::path::PathBuf::from("<memory>")
    }
    fn read(&self, start: usize, rows: usize) -> memfit::Result<Vec<f64>> {
        self.0.read("read_rows", start, rows, |a| {
            let a: PyReadonlyArray2<'_, f64> = a.extract()?;
            Ok(a.as_array().iter().copied().collect())
        })
    }
}

/// A sparse matrix read through a Python object with `shape`, `dtype`
/// (float32 or float64: the stored values'), `held_bytes` (see
/// [`Reader`]), `max_row_nnz` (the most values a row stores) and
/// `read_csr(start, stop)` returning rows `start..stop` as `(indptr,
/// indices, data)`: int64 offsets from 0, int64 columns and float64 values.
/// The engine checks each block (see [`memfit::io::CsrRowSource`]).
#[derive(Debug, Clone)]
pub struct PyCsrRows {
    reader: Reader,
    max_row_nnz: usize,
}

impl PyCsrRows {
    /// The rows of `reader` when it is such an object (it has `read_csr`).
    pub fn new(reader: &Bound<'_, PyAny>) -> PyResult<Self> {
        let max_row_nnz: usize = reader.getattr("max_row_nnz")?.extract()?;
        let reader = Reader::new(reader, "sparse values", |t| matches!(t, Dtype::F32 | Dtype::F64))?;
        Ok(PyCsrRows { reader, max_row_nnz })
    }
}

impl CsrRowSource for PyCsrRows {
    fn n_rows(&self) -> usize {
        self.reader.n
    }
    fn n_cols(&self) -> usize {
        self.reader.d
    }
    fn dtype(&self) -> Dtype {
        self.reader.dtype
    }
    fn max_row_nnz(&self) -> usize {
        self.max_row_nnz
    }
    fn held_bytes(&self) -> u64 {
        self.reader.held
    }
    fn read(&self, start: usize, rows: usize) -> memfit::Result<CsrBlock> {
        self.reader.read("read_csr", start, rows, |parts| {
            let (p, i, v): (PyReadonlyArray1<'_, i64>, PyReadonlyArray1<'_, i64>, PyReadonlyArray1<'_, f64>) =
                parts.extract()?;
            Ok(CsrBlock {
                indptr: p.as_array().to_vec(),
                indices: i.as_array().to_vec(),
                values: v.as_array().to_vec(),
            })
        })
    }
}

/// Plans (and with `execute`, runs) the task encoded in `task` over `x`, the
/// rows `first_row..first_row + len(x)` of the data, with optional
/// per-row weights `sample_weight` (the same rows), within `memory_limit`
/// bytes on `n_jobs` threads (the GIL released). Returns the plan as data
/// (a dict, see [`crate::shared::to_data`]), when run the encoded
/// statistics, and the rows' state after the task when it keeps one (a
/// float64 array to pass as `row_state` to the next task of the same
/// state id over the same rows; `row_state=None`: there is none, and the
/// task starts afresh with the same statistics).
#[pyfunction]
#[pyo3(signature = (task, x, *, first_row, memory_limit, sample_weight=None, n_jobs=None, execute=true, row_state=None))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub fn run_task<'py>(
    py: Python<'py>,
    task: &[u8],
    x: &Bound<'py, PyAny>,
    first_row: usize,
    memory_limit: u64,
    sample_weight: Option<&Bound<'py, PyAny>>,
    n_jobs: Option<usize>,
    execute: bool,
    row_state: Option<PyReadonlyArray1<'py, f64>>,
) -> PyResult<(Bound<'py, PyAny>, Option<Bound<'py, PyBytes>>, Option<Bound<'py, PyArray1<f64>>>)> {
    let mut state = row_state.map(|s| s.as_array().to_vec());
    let inputs = crate::shared::Inputs::hold(x, sample_weight)?;
    let opts = crate::shared::run_options(memory_limit, n_jobs, memfit::exec::RowSplit::default());
    let (src, w) = inputs.open(&opts)?;
    let decoded = Task::decode(task).ok();
    let float32 = decoded.as_ref().is_some_and(|t| t.compute == Dtype::F32);
    let unit_rows = decoded.as_ref().is_some_and(|t| t.unit_rows);
    let src: Source<'_> = src.starting_at(first_row).unit_rows(unit_rows);
    let w = w.map(|w| w.starting_at(first_row));
    let (plan, out, state) = run(py, n_jobs, float32, None, move |obs| {
        use memfit::cluster::Observer;
        let (plan, out) =
            memfit::estimator::run_task(task, &src, w.as_ref(), memory_limit, execute, &obs.cancel(), &mut state)?;
        Ok((plan, out, state))
    })?;
    Ok((
        crate::shared::to_data(py, &plan)?,
        out.map(|b| PyBytes::new(py, &b)),
        state.map(|s| PyArray1::from_vec(py, s)),
    ))
}

/// Plans (and with `execute`, runs) the array reduction task encoded in
/// `task` over the accumulation chunks `chunks` (`(start, stop)`) of the
/// expression `expr`, within `memory_limit` bytes on `n_jobs` threads (the
/// GIL released). Returns the plan as data (a dict) and, when run, the
/// chunks' encoded statistics (see [`memfit::array::run_task`]).
#[pyfunction]
#[pyo3(signature = (task, expr, chunks, *, memory_limit, n_jobs=None, execute=true))]
pub fn run_array_task<'py>(
    py: Python<'py>,
    task: &[u8],
    expr: &crate::array::Expr,
    chunks: (usize, usize),
    memory_limit: u64,
    n_jobs: Option<usize>,
    execute: bool,
) -> PyResult<(Bound<'py, PyAny>, Option<Bound<'py, PyBytes>>)> {
    let root = expr.array().clone();
    let (plan, out) = run(py, n_jobs, false, None, move |obs| {
        use memfit::cluster::Observer;
        memfit::array::run_task(task, &root, chunks.0..chunks.1, memory_limit, execute, &obs.cancel())
    })?;
    Ok((crate::shared::to_data(py, &plan)?, out.map(|b| PyBytes::new(py, &b))))
}
