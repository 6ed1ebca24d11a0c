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

/// Command-line flags in engine messages and the Python parameters they are
/// (longest first, so no flag is replaced inside another).
const FLAGS: [(&str, &str); 15] = [
    ("use --dtype float64 or ", "pass float64 data or "),
    ("use --dtype float64", "pass float64 data (X.astype(numpy.float64))"),
    ("--dtype float32", "float32 data (X.astype(numpy.float32))"),
    ("--precisions-init", "precisions_init"),
    ("--n-components", "n_components"),
    ("--sample-weight", "sample_weight"),
    ("--memory-limit", "memory_limit"),
    ("--weights-init", "weights_init"),
    ("--means-init", "means_init"),
    ("--reg-covar", "reg_covar"),
    ("--max-iter", "max_iter"),
    ("--threads", "n_jobs"),
    ("--n-init", "n_init"),
    ("--init", "init"),
    ("--tol", "tol"),
];

/// An engine message with its command-line flags named as the Python
/// parameters.
pub fn python_words(message: &str) -> String {
    FLAGS.iter().fold(message.to_string(), |m, (flag, param)| m.replace(flag, param))
}

/// Maps an engine error to the Python exception of the right class. An
/// in-memory array is called "X" where the error is about the data, and
/// left unnamed elsewhere (weights, initial parameters).
pub fn to_py(e: Error) -> PyErr {
    let text = e.to_string();
    let text = match &e {
        Error::NonFinite { .. } | Error::ShapeMismatch { .. } | Error::WrongDimensions { .. } => {
            text.replace("<memory>", "X")
        }
        _ => text.replace("<memory>: ", "").replace("<memory>", "the array"),
    };
    let msg = python_words(&text);
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
