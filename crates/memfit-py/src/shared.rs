//! What the binding's functions share: a job's inputs and run options, the
//! row split of a job, dry-run results, the compute dtype, caller-owned output arrays filled in row
//! order, and warnings handed to Python.

use std::sync::Arc;

use memfit::estimator::ComputeDtype;
use memfit::{FpException, Warning};
use pyo3::exceptions::{PyFloatingPointError, PyNameError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::inputs::Held;
use crate::{errors, remote};

/// A job's rows as Python gave them: `x` and optional per-row weights `w`
/// (see [`Held::new`]), held (borrowed, marked borrowed) while the engine
/// runs.
pub struct Inputs<'py> {
    x: Held<'py>,
    w: Option<Held<'py>>,
}

impl<'py> Inputs<'py> {
    /// Holds `x` and `w`.
    ///
    /// # Errors
    /// As [`Held::new`].
    pub fn hold(x: &Bound<'py, PyAny>, w: Option<&Bound<'py, PyAny>>) -> PyResult<Self> {
        Ok(Inputs { x: Held::new(x)?, w: w.map(Held::new).transpose()? })
    }

    /// The engine's views of the rows and the weights for a job run as
    /// `run` says (see [`Held::source`], [`Held::weights`]).
    ///
    /// # Errors
    /// As [`Held::source`].
    pub fn open(
        &self,
        run: &memfit::exec::RunOptions,
    ) -> PyResult<(memfit::io::Source<'_>, Option<memfit::io::Source<'_>>)> {
        Ok((self.x.source(run)?, self.w.as_ref().map(|h| h.weights(run)).transpose()?))
    }
}

/// The row split of a fit: passes run through `remote` (a Python callable,
/// see [`remote::PyRemote`]) in ranges cut at `bounds`, or whole, here.
pub fn split(remote: Option<Py<PyAny>>, bounds: Vec<usize>) -> (memfit::exec::RowSplit, Option<Arc<remote::PyRemote>>) {
    match remote {
        Some(r) => {
            let (s, r) = remote::PyRemote::split(r, bounds);
            (s, Some(r))
        }
        None => (memfit::exec::RowSplit::at(bounds), None),
    }
}

/// How a job called with `memory_limit` bytes and `n_jobs` threads runs
/// (the threads of the pool [`crate::runner::run`] starts), its passes
/// split as `row_split`.
pub fn run_options(
    memory_limit: u64,
    n_jobs: Option<usize>,
    row_split: memfit::exec::RowSplit,
) -> memfit::exec::RunOptions {
    let threads = Some(n_jobs.unwrap_or_else(memfit::plan::default_threads));
    memfit::exec::RunOptions { threads, row_split, ..memfit::exec::RunOptions::with_limit(memory_limit) }
}

/// `value` as Python data (dicts, lists, numbers, strings, `None`), through
/// its serde form: how the binding hands Python a plan.
pub fn to_data<'py, T: serde::Serialize>(py: Python<'py>, value: &T) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(value).map_err(|e| PyValueError::new_err(e.to_string()))?;
    py.import("json")?.call_method1("loads", (text,))
}

/// Puts `plan` into `dict`: `plan` as data (see [`to_data`]) and
/// `plan_text`, its printable form (for display only).
pub fn put_plan(dict: &Bound<'_, PyDict>, plan: &memfit::plan::Plan) -> PyResult<()> {
    dict.set_item("plan", to_data(dict.py(), plan)?)?;
    dict.set_item("plan_text", plan.to_string())
}

/// The result of a dry run: `{"plan": data, "plan_text": text}`.
pub fn plan_only<'py>(py: Python<'py>, plan: &memfit::plan::Plan) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    put_plan(&dict, plan)?;
    Ok(dict)
}

/// `e`, or the Python exception a remote call raised behind it.
pub fn restore(remote: &Option<Arc<remote::PyRemote>>, e: PyErr) -> PyErr {
    match remote {
        Some(r) => r.restore(e),
        None => e,
    }
}

/// The compute dtype: float32 when `float32`, else float64.
pub fn compute(float32: bool) -> ComputeDtype {
    if float32 {
        ComputeDtype::Float32
    } else {
        ComputeDtype::Float64
    }
}

/// Whether, asked for `exact` results, rows of `src` read with `metric`
/// compute in float32 with float64 centres: unscaled (euclidean) rows of
/// a dtype whose every value float32 holds ([`ComputeDtype::exact_for`]).
pub fn exact_in_float32(exact: bool, metric: memfit::cluster::Metric, src: &memfit::io::Source<'_>) -> bool {
    exact
        && metric == memfit::cluster::Metric::Euclidean
        && ComputeDtype::exact_for(src.dtype()) == ComputeDtype::Float32
}

/// A caller's output array (or none), filled block by block in row order.
pub struct Fill<'a, E> {
    pub out: Option<&'a mut [E]>,
    at: usize,
}

impl<'a, E: Copy> Fill<'a, E> {
    pub fn new(out: Option<&'a mut [E]>) -> Self {
        Fill { out, at: 0 }
    }

    /// Whether there is an array to fill.
    pub fn wanted(&self) -> bool {
        self.out.is_some()
    }

    /// Writes `values`, each converted by `conv`, after the previous block.
    pub fn put<V: Copy>(&mut self, values: &[V], conv: impl Fn(V) -> E) -> memfit::Result<()> {
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
pub fn warning_tuples(warnings: &[Warning]) -> Vec<(&'static str, &'static str, String)> {
    warnings.iter().map(errors::warning).collect()
}

/// Issues each warning as a Python warning of its category, for the
/// functions that return arrays rather than a dict with `warnings`.
pub fn warn(py: Python<'_>, warnings: &[Warning]) -> PyResult<()> {
    for w in warnings {
        let (_, category, message) = errors::warning(w);
        if let Warning::FloatingPoint { exception, .. } = w {
            floating_point(py, *exception, &message)?;
            continue;
        }
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

/// The floating-point exceptions NumPy's error state (`np.geterr()`, set
/// by `np.errstate`) raises: an array job that writes files fails on them
/// before it commits any (see `memfit::exec::RunOptions::raise_on`).
pub fn raise_on(py: Python<'_>) -> PyResult<Vec<FpException>> {
    let state = py.import("numpy")?.call_method0("geterr")?;
    let mut kinds = Vec::new();
    for (e, key) in
        [(FpException::Overflow, "over"), (FpException::DivideByZero, "divide"), (FpException::Invalid, "invalid")]
    {
        if state.get_item(key)?.extract::<String>()? == "raise" {
            kinds.push(e);
        }
    }
    Ok(kinds)
}

/// A floating-point exception of array evaluation handled as NumPy's error
/// state (`np.geterr()`, set by `np.errstate`) asks for its kind: ignored,
/// a `RuntimeWarning` (the default), a `FloatingPointError` raised (after
/// the evaluation: the result is dropped), passed to `np.geterrcall()`'s
/// function (`"call"`, with NumPy's error name and flag), written to its
/// object (`"log"`) or printed to standard error (`"print"`); without such
/// a function or object, NumPy's `NameError`.
fn floating_point(py: Python<'_>, e: FpException, message: &str) -> PyResult<()> {
    let numpy = py.import("numpy")?;
    // np.errstate's key, NumPy's name for the error and its flag bit.
    let (key, name, flag) = match e {
        FpException::DivideByZero => ("divide", "divide by zero", 1),
        FpException::Overflow => ("over", "overflow", 2),
        FpException::Invalid => ("invalid", "invalid value", 8),
    };
    let mode: String = numpy.call_method0("geterr")?.get_item(key)?.extract()?;
    match mode.as_str() {
        "ignore" => Ok(()),
        "raise" => Err(PyFloatingPointError::new_err(message.to_string())),
        "call" | "log" => {
            let handler = numpy.call_method0("geterrcall")?;
            match mode.as_str() {
                "call" if handler.is_callable() => handler.call1((name, flag)).map(drop),
                "log" if handler.hasattr("write")? => {
                    handler.call_method1("write", (format!("Warning: {message}\n"),)).map(drop)
                }
                "call" => {
                    Err(PyNameError::new_err(format!("Python callback specified for {name} but no function found.")))
                }
                _ => Err(PyNameError::new_err(format!(
                    "log specified for {name} but no object with write method found."
                ))),
            }
        }
        "print" => {
            py.import("sys")?.getattr("stderr")?.call_method1("write", (format!("Warning: {message}\n"),)).map(drop)
        }
        _ => {
            let message = std::ffi::CString::new(message).unwrap_or_default();
            PyErr::warn(py, &py.get_type::<pyo3::exceptions::PyRuntimeWarning>().into_any(), &message, 1)
        }
    }
}

/// A label as the `int32` Python receives.
pub fn label(l: u32) -> i32 {
    l as i32
}
