//! Engine errors as Python exceptions: I/O failures are `OSError` (its
//! `FileNotFoundError` / `PermissionError` subclasses where they apply), a
//! job that cannot fit the memory limit is `MemoryError`, a cancelled run is
//! `KeyboardInterrupt`, and everything else (bad values, shapes, parameters,
//! files that are not `.npy`) is `ValueError`. The message is the engine's
//! one line, cause then hint, with in-memory arrays called "X"; where
//! scikit-learn raises the same error, its sentence comes first.

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

/// scikit-learn's sentence for a covariance that is not positive definite
/// (`sklearn.mixture._gaussian_mixture._compute_precision_cholesky`).
const ILL_DEFINED: &str = "Fitting the mixture model failed because some components have ill-defined empirical \
covariance (for instance caused by singleton or collapsed samples). Try to decrease the number of components, \
increase reg_covar, or scale the input data.";

/// Maps an engine error to the Python exception of the right class. An
/// in-memory array is called "X" where the error is about the data, and
/// left unnamed elsewhere (weights, initial parameters). Errors that
/// scikit-learn also raises start with its sentence (data that are not
/// finite, a covariance that is not positive definite), then give memfit's
/// details; `float32` says whether the data were computed in float32 (the
/// dtype scikit-learn names).
pub fn to_py_for(e: Error, float32: bool) -> PyErr {
    let text = e.to_string();
    let text = match &e {
        Error::NonFinite { .. } | Error::ShapeMismatch { .. } | Error::WrongDimensions { .. } => {
            text.replace("<memory>", "X")
        }
        _ => text.replace("<memory>: ", "").replace("<memory>", "the array"),
    };
    let dtype = if float32 { "float32" } else { "float64" };
    let msg = match &e {
        // `sklearn.utils.validation._assert_all_finite_element_wise`.
        Error::NonFinite { value, .. } if value.is_nan() => format!("Input X contains NaN. {text}"),
        Error::NonFinite { .. } => {
            format!("Input X contains infinity or a value too large for dtype('{dtype}'). {text}")
        }
        Error::IllDefinedCovariance { component, reg_covar, float32 } => {
            let accuracy = if *float32 {
                " The numerical accuracy can also be improved by passing float64 data instead of float32."
            } else {
                ""
            };
            let which =
                component.map_or("the shared covariance".to_string(), |c| format!("component {c}'s covariance"));
            format!(
                "{ILL_DEFINED}{accuracy} memfit: {which} is not positive definite with reg_covar={reg_covar:?}; \
                 hint: increase reg_covar (e.g. 1e-3)"
            )
        }
        _ => python_words(&text),
    };
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

/// [`to_py_for`] where no float32 data are involved.
pub fn to_py(e: Error) -> PyErr {
    to_py_for(e, false)
}

/// An array-shape mismatch inside the shim (a bug, never user input).
pub fn shape(e: numpy::ndarray::ShapeError) -> PyErr {
    PyRuntimeError::new_err(format!("memfit internal error: {e}; please report it"))
}
