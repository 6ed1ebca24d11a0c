//! Engine errors and warnings in Python's words. Errors become Python
//! exceptions of the right class: I/O failures are `OSError` (its
//! `FileNotFoundError` / `PermissionError` subclasses where they apply), a
//! job that cannot fit the memory limit is `MemoryError`, a cancelled run is
//! `KeyboardInterrupt`, and everything else (bad values, shapes, parameters,
//! files that are not `.npy`) is `ValueError`. The message is the engine's
//! one line, cause then hint, with its remedies worded by [`Params`] (the
//! estimators' parameter names) and in-memory arrays called "X"; where
//! scikit-learn raises the same error, its sentence comes first. Warnings
//! come as `(kind, category, message)` for the Python layer to issue.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use memfit::io::Dtype;
use memfit::warning::Category;
use memfit::{common_remedy, for_example, Error, Remedy, Spelling, Warning};
use pyo3::exceptions::{
    PyFileExistsError, PyIndexError, PyKeyboardInterrupt, PyMemoryError, PyOSError, PyOverflowError, PyRuntimeError,
    PyTypeError, PyValueError,
};
use pyo3::PyErr;

/// Python's [`Spelling`]: remedies that name a setting name the estimators'
/// parameter (`memory_limit`, `reg_covar`, ...), and a compute dtype is the
/// dtype of the data passed.
pub struct Params;

impl Spelling for Params {
    fn remedy(&self, remedy: &Remedy) -> String {
        match remedy {
            Remedy::RaiseMemoryLimit { to_bytes } => {
                format!(
                    "raise memory_limit to at least {} ({to_bytes} bytes)",
                    memfit::plan::format_bytes_up(*to_bytes)
                )
            }
            Remedy::RaiseMemoryLimitBy { by_bytes } => {
                format!("raise memory_limit by about {} ({by_bytes} bytes)", memfit::plan::format_bytes_up(*by_bytes))
            }
            Remedy::LowerMemoryLimit { to_bytes } => format!(
                "lower memory_limit to at most {} ({to_bytes} bytes) or free memory",
                memfit::plan::format_bytes_down(*to_bytes)
            ),
            Remedy::ComputeIn(d) => {
                let name = if *d == Dtype::F32 { "float32" } else { "float64" };
                format!("pass {name} data (X.astype(numpy.{name}))")
            }
            Remedy::CovarianceType(types) => {
                format!("use a covariance_type with fewer parameters ({})", types.join(", "))
            }
            Remedy::RaiseRegCovar { example } => format!("raise reg_covar{}", for_example(*example)),
            Remedy::RaiseMaxIter => "raise max_iter".into(),
            Remedy::RaiseTol => "raise tol".into(),
            Remedy::RunOnCpu => "use device='cpu'".into(),
            Remedy::RaiseDeviceMemoryLimit { to_bytes } => format!(
                "raise device_memory_limit to at least {} ({to_bytes} bytes)",
                memfit::plan::format_bytes_up(*to_bytes)
            ),
            other => common_remedy(other),
        }
    }
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
    let (class, msg) = message(&e, float32);
    match class {
        // With the errno, as Python's own file functions raise them: OSError
        // then picks the subclass (FileNotFoundError, NotADirectoryError,
        // ...). The numbers are the same on Linux and macOS.
        Class::Os(kind) => match errno_of(kind) {
            Some(errno) => PyOSError::new_err((errno, msg)),
            None => PyOSError::new_err(msg),
        },
        Class::Memory => PyMemoryError::new_err(msg),
        Class::Interrupt => PyKeyboardInterrupt::new_err(msg),
        Class::Value => PyValueError::new_err(msg),
        Class::Type => PyTypeError::new_err(msg),
        Class::Exists => PyFileExistsError::new_err(msg),
        Class::Overflow => PyOverflowError::new_err(msg),
        Class::Index => PyIndexError::new_err(msg),
        Class::Runtime => pyo3::exceptions::PyRuntimeError::new_err(msg),
        Class::FloatingPoint => pyo3::exceptions::PyFloatingPointError::new_err(msg),
    }
}

/// The errno of an I/O error kind, where it has one.
fn errno_of(kind: ErrorKind) -> Option<i32> {
    Some(match kind {
        ErrorKind::NotFound => 2,
        ErrorKind::PermissionDenied => 13,
        ErrorKind::AlreadyExists => 17,
        ErrorKind::NotADirectory => 20,
        ErrorKind::IsADirectory => 21,
        ErrorKind::StorageFull => 28,
        ErrorKind::ReadOnlyFilesystem => 30,
        _ => return None,
    })
}

/// The Python exception class of an engine error.
#[derive(Debug, PartialEq, Eq)]
enum Class {
    Os(ErrorKind),
    Memory,
    Interrupt,
    Value,
    Type,
    Exists,
    Overflow,
    Index,
    Runtime,
    FloatingPoint,
}

/// The class and message of `e` in Python (see [`to_py_for`]).
fn message(e: &Error, float32: bool) -> (Class, String) {
    let text = e.render(&Params).to_string();
    let text = match e {
        Error::NonFinite { .. } | Error::ShapeMismatch { .. } | Error::WrongDimensions { .. } => {
            text.replace("<memory>", "X")
        }
        _ => text.replace("<memory>: ", "").replace("<memory>", "the array"),
    };
    let dtype = if float32 { "float32" } else { "float64" };
    let msg = match e {
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
        // `sklearn.utils.validation._check_sample_weight`'s sentences, then
        // where (as for weights checked in Python, with NumPy's spelling).
        Error::InvalidWeight { row, value, .. } if !value.is_finite() => {
            let (what, shown) = if value.is_nan() {
                ("NaN".to_string(), "nan".to_string())
            } else {
                (format!("infinity or a value too large for dtype('{dtype}')"), value.to_string())
            };
            format!("Input sample_weight contains {what}. memfit: sample_weight[{row}] = {shown}; hint: weights must be finite")
        }
        Error::InvalidParameter { name: "sample_weight", rule, .. } if rule == memfit::ALL_WEIGHTS_ZERO => {
            "Sample weights must contain at least one non-zero number.".to_string()
        }
        Error::Cancelled => "memfit: interrupted".to_string(),
        _ => text,
    };
    let class = match e {
        Error::Io { cause, .. } => Class::Os(cause.kind()),
        Error::DoesNotFit { .. } | Error::DeviceDoesNotFit { .. } => Class::Memory,
        Error::Cancelled => Class::Interrupt,
        Error::DeviceUnavailable { .. } => Class::Runtime,
        Error::FloatingPoint { .. } => Class::FloatingPoint,
        Error::Expression { kind: memfit::ExpressionFault::Type, .. } => Class::Type,
        Error::OutputExists { .. } => Class::Exists,
        Error::NoDiskSpace { .. } => Class::Os(ErrorKind::StorageFull),
        Error::Expression { kind: memfit::ExpressionFault::Overflow, .. } => Class::Overflow,
        Error::Expression { kind: memfit::ExpressionFault::Index, .. } => Class::Index,
        _ => Class::Value,
    };
    (class, msg)
}

/// [`to_py_for`] where no float32 data are involved.
pub fn to_py(e: Error) -> PyErr {
    to_py_for(e, false)
}

/// A warning as the Python layer issues it: `(kind, category, message)`,
/// the kind as [`Warning::kind`] names it, the category `"convergence"`
/// (scikit-learn's `ConvergenceWarning`) or `"user"` (`UserWarning`), the
/// message in Python's words with an in-memory input called "X".
pub fn warning(w: &Warning) -> (&'static str, &'static str, String) {
    let mut w = w.clone();
    if let Warning::InexactIntegers { path, .. } = &mut w {
        if path.as_path() == Path::new("<memory>") {
            *path = PathBuf::from("X");
        }
    }
    let category = match w.category() {
        Category::Convergence => "convergence",
        Category::User => "user",
        Category::Numeric => "runtime",
    };
    // Fewer distinct clusters, also those of a mixture's k-means
    // initialisation: scikit-learn's kind and sentence (its mixtures issue
    // their k-means's warning as it is).
    let fewer = match &w {
        Warning::FewerClusters { found, n_clusters } => Some((*found, *n_clusters)),
        Warning::InKMeansInit(inner) => match **inner {
            Warning::FewerClusters { found, n_clusters } => Some((found, n_clusters)),
            _ => None,
        },
        _ => None,
    };
    if let Some((found, n_clusters)) = fewer {
        let sentence = format!(
            "Number of distinct clusters ({found}) found smaller than n_clusters ({n_clusters}). Possibly due to duplicate points in X."
        );
        return ("fewer_clusters", category, sentence);
    }
    (w.kind(), category, w.render(&Params).to_string())
}

/// An array-shape mismatch inside the shim (a bug, never user input).
pub fn shape(e: numpy::ndarray::ShapeError) -> PyErr {
    PyRuntimeError::new_err(format!("memfit internal error: {e}; please report it"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use memfit::io::InexactInteger;
    use memfit::warning::Estimator;
    use memfit::Count;

    #[test]
    fn memory_errors_name_the_parameters() {
        let e = Error::does_not_fit(
            3 << 20,
            1 << 20,
            "Gaussian mixture".into(),
            vec![
                Remedy::UseFewer(vec![Count::Components, Count::Threads]),
                Remedy::ComputeIn(Dtype::F32),
                Remedy::CovarianceType(vec!["diag", "spherical"]),
            ],
        );
        let (class, msg) = message(&e, false);
        assert_eq!(class, Class::Memory);
        assert!(msg.ends_with(
            "hint: raise memory_limit to at least 3.00 MiB (3145728 bytes), use fewer components or threads, \
             pass float32 data (X.astype(numpy.float32)), or use a covariance_type with fewer parameters (diag, spherical)"
        ), "{msg}");
        assert!(!msg.contains("--"));
    }

    #[test]
    fn scikit_learn_sentences_come_first() {
        let e = Error::NonFinite { path: "<memory>".into(), row: 5, column: 1, value: f64::NAN, count: 1 };
        let (class, msg) = message(&e, false);
        assert_eq!(class, Class::Value);
        assert!(msg.starts_with("Input X contains NaN. X: row 5, column 1 is NaN"), "{msg}");
        let e = Error::IllDefinedCovariance { component: Some(1), reg_covar: 0.0, float32: true };
        let (_, msg) = message(&e, true);
        assert!(msg.starts_with(ILL_DEFINED) && msg.ends_with("hint: increase reg_covar (e.g. 1e-3)"), "{msg}");
        let e = Error::param_with(
            "dtype",
            "X: row 0, column 0 holds 1e39, which overflows float32",
            vec![Remedy::ComputeIn(Dtype::F64)],
        );
        let (_, msg) = message(&e, true);
        assert!(msg.ends_with("hint: pass float64 data (X.astype(numpy.float64))"), "{msg}");
    }

    #[test]
    fn warnings_carry_kind_and_category() {
        let (kind, category, msg) = warning(&Warning::NotConverged { estimator: Estimator::KMeans, max_iter: 2 });
        assert_eq!((kind, category), ("not_converged", "convergence"));
        assert!(msg.ends_with("hint: raise max_iter or raise tol"), "{msg}");
        let found = InexactInteger {
            row: 4,
            column: 1,
            value: (1 << 53) + 1,
            dtype: Dtype::I64,
            compute: Dtype::F64,
            exact_up_to: 1 << 53,
        };
        let (kind, category, msg) = warning(&Warning::InexactIntegers { path: "<memory>".into(), found });
        assert_eq!((kind, category), ("inexact_integers", "user"));
        assert!(
            msg.starts_with(
                "X: column 1 holds int64 values beyond 2^53 in magnitude (first: 9007199254740993 at row 4)"
            ),
            "{msg}"
        );
        assert!(msg.ends_with("float64 holds integers exactly only up to 2^53: subtract a per-column offset (such as the column's minimum) in the integer type first"), "{msg}");
    }
}
