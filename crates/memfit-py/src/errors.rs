//! Engine errors as Python exceptions: I/O failures are `OSError` (its
//! `FileNotFoundError` / `PermissionError` subclasses where they apply), a
//! job that cannot fit the memory limit is `MemoryError`, a cancelled run is
//! `KeyboardInterrupt`, and everything else (bad values, shapes, parameters,
//! files that are not `.npy`) is `ValueError`. The message is the engine's
//! one line, cause then hint, with in-memory arrays called "X".

use std::io::ErrorKind;

use memfit::Error;
use pyo3::exceptions::{
    PyFileNotFoundError, PyKeyboardInterrupt, PyMemoryError, PyOSError, PyPermissionError, PyRuntimeError, PyValueError,
};
use pyo3::PyErr;

/// Maps an engine error to the Python exception of the right class.
pub fn to_py(e: Error) -> PyErr {
    let msg = e.to_string().replace("<memory>", "X");
    match &e {
        Error::Io { cause, .. } => match cause.kind() {
            ErrorKind::NotFound => PyFileNotFoundError::new_err(msg),
            ErrorKind::PermissionDenied => PyPermissionError::new_err(msg),
            _ => PyOSError::new_err(msg),
        },
        Error::DoesNotFit { .. } => PyMemoryError::new_err(msg),
        Error::Cancelled => PyKeyboardInterrupt::new_err("memfit: interrupted"),
        _ => PyValueError::new_err(msg),
    }
}

/// An array-shape mismatch inside the shim (a bug, never user input).
pub fn shape(e: numpy::ndarray::ShapeError) -> PyErr {
    PyRuntimeError::new_err(format!("memfit internal error: {e}; please report it"))
}
