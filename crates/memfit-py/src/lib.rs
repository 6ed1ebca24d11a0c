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
mod kernels;
mod kmeans;
mod minibatch;
mod mixture;
mod remote;
mod runner;
mod shared;
mod system;

use pyo3::prelude::*;

/// The extension module.
#[pymodule]
fn _memfit(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Freed engine buffers go back to the kernel: resident memory follows
    // the plan across a fit's phases and across fits.
    memfit::memory::return_freed_buffers();
    m.add_function(wrap_pyfunction!(kmeans::kmeans_fit, m)?)?;
    m.add_function(wrap_pyfunction!(kmeans::assign, m)?)?;
    m.add_function(wrap_pyfunction!(kmeans::kmeans_validate, m)?)?;
    m.add_function(wrap_pyfunction!(kmeans::transform, m)?)?;
    m.add_function(wrap_pyfunction!(minibatch::gather_rows, m)?)?;
    m.add_function(wrap_pyfunction!(minibatch::minibatch_step, m)?)?;
    m.add_function(wrap_pyfunction!(minibatch::minibatch_plan, m)?)?;
    m.add_function(wrap_pyfunction!(minibatch::minibatch_start_centers, m)?)?;
    m.add_class::<minibatch::MiniBatchEarlyStop>()?;
    m.add_class::<minibatch::MiniBatchWork>()?;
    m.add_class::<remote::Cancelled>()?;
    m.add_function(wrap_pyfunction!(mixture::gmm_fit, m)?)?;
    m.add_function(wrap_pyfunction!(mixture::gmm_predict, m)?)?;
    m.add_function(wrap_pyfunction!(kernels::row_quadratic_form, m)?)?;
    m.add_function(wrap_pyfunction!(kernels::weighted_scatter, m)?)?;
    m.add_function(wrap_pyfunction!(mixture::n_parameters, m)?)?;
    m.add_function(wrap_pyfunction!(system::parse_size, m)?)?;
    m.add_function(wrap_pyfunction!(system::default_memory_limit, m)?)?;
    m.add_function(wrap_pyfunction!(system::check_scratch_dir, m)?)?;
    m.add_function(wrap_pyfunction!(system::check_device, m)?)?;
    m.add_class::<system::DeviceBackend>()?;
    m.add_function(wrap_pyfunction!(system::default_threads, m)?)?;
    m.add_function(wrap_pyfunction!(system::available_cpus, m)?)?;
    m.add_function(wrap_pyfunction!(system::most_threads, m)?)?;
    m.add_function(wrap_pyfunction!(system::npy_info, m)?)?;
    m.add_function(wrap_pyfunction!(inputs::inexact_integer_limit, m)?)?;
    m.add_function(wrap_pyfunction!(inputs::inexact_integer_warning, m)?)?;
    m.add_function(wrap_pyfunction!(remote::run_task, m)?)?;
    m.add_function(wrap_pyfunction!(remote::run_array_task, m)?)?;
    m.add_function(wrap_pyfunction!(cli::cli_main, m)?)?;
    m.add_class::<array::Expr>()?;
    m.add_class::<array::RowBlocks>()?;
    m.add_function(wrap_pyfunction!(array::expr_from_ndarray, m)?)?;
    m.add_function(wrap_pyfunction!(array::expr_from_npy, m)?)?;
    m.add_function(wrap_pyfunction!(array::expr_from_zarr, m)?)?;
    m.add_function(wrap_pyfunction!(array::compute_all, m)?)?;
    m.add_function(wrap_pyfunction!(array::explain_all_exprs, m)?)?;
    m.add_function(wrap_pyfunction!(array::expr_op, m)?)?;
    system::add_constants(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
