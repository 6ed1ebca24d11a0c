//! The `memfit` command of the Python package: the same tool as the binary.

use std::ffi::OsString;

use pyo3::prelude::*;

/// Runs the `memfit` command-line tool on `argv` (the program name first)
/// with the GIL released and returns its exit status (see
/// `memfit_cli::main_with_args`). Python's `str` arguments become the
/// operating system's bytes as `os.fsencode` gives them, so `sys.argv`
/// passes non-UTF-8 paths through unchanged.
#[pyfunction]
pub fn cli_main(py: Python<'_>, argv: Vec<OsString>) -> i32 {
    py.detach(|| memfit_cli::main_with_args(argv))
}
