//! The engine's error type: one enum whose variants carry the fields a caller
//! needs (path, row, column, bytes) and whose messages end with a hint.

use std::io;
use std::path::PathBuf;

/// Every failure the engine reports. Messages are one line: the cause, then
/// `; hint: …` saying what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be opened, created, read or written.
    #[error("{path}: {action} failed: {cause}{hint}", path = .path.display(), hint = io_hint(.cause))]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// What was being done ("open", "read", "write", "rename", ...).
        action: &'static str,
        /// The operating system's error (part of the message, so not a
        /// separate source in the error chain).
        cause: io::Error,
    },
    /// The file is not a well-formed `.npy` file.
    #[error("{path}: not a valid .npy file: {reason}; hint: write it with numpy.save(path, array)", path = .path.display())]
    NotNpy {
        /// The file concerned.
        path: PathBuf,
        /// What is wrong with the header.
        reason: String,
    },
    /// The data section is shorter than the header's shape says.
    #[error("{path}: truncated: the header promises {expected_bytes} bytes of data but the file holds {found_bytes}; hint: the file was cut short, write it again", path = .path.display())]
    Truncated {
        /// The file concerned.
        path: PathBuf,
        /// Bytes of data the shape and dtype require.
        expected_bytes: u64,
        /// Bytes of data present after the header.
        found_bytes: u64,
    },
    /// The array's dtype is not one memfit reads.
    #[error("{path}: unsupported dtype {descr}; hint: supported are float16/32/64, uint8/32/64, int16/32/64; convert with array.astype(numpy.float64)", path = .path.display())]
    UnsupportedDtype {
        /// The file concerned.
        path: PathBuf,
        /// The dtype descriptor found in the header.
        descr: String,
    },
    /// The array has the wrong number of dimensions.
    #[error("{path}: expected a {expected}-D array, found shape {shape:?}; hint: {hint}", path = .path.display())]
    WrongDimensions {
        /// The file (or `<memory>`) concerned.
        path: PathBuf,
        /// The number of dimensions required.
        expected: usize,
        /// The shape found.
        shape: Vec<usize>,
        /// How to fix it.
        hint: &'static str,
    },
    /// A value in the data is NaN or infinite.
    #[error("{path}: row {row}, column {column} is {value} (not finite){more}; hint: remove or impute missing values first, e.g. X[~numpy.isfinite(X).all(axis=1)] finds the rows", path = .path.display(), more = non_finite_more(*.count))]
    NonFinite {
        /// The file (or `<memory>`) concerned.
        path: PathBuf,
        /// Zero-based row of the first non-finite value.
        row: usize,
        /// Zero-based column of the first non-finite value.
        column: usize,
        /// The value as read from the input (before any dtype conversion).
        value: f64,
        /// How many non-finite values the whole input holds.
        count: u64,
    },
    /// A sample weight is negative or not finite.
    #[error("{path}: sample_weight[{row}] = {value}; hint: sample weights must be finite and >= 0", path = .path.display())]
    InvalidWeight {
        /// The weights file (or `<memory>`).
        path: PathBuf,
        /// Zero-based index of the first bad weight.
        row: usize,
        /// The bad weight.
        value: f64,
    },
    /// A parameter breaks its rule.
    #[error("invalid {name}: {rule}")]
    InvalidParameter {
        /// The parameter's name as the user spells it (`n_clusters`, `tol`, ...).
        name: &'static str,
        /// The rule it breaks and the value given, with a hint.
        rule: String,
    },
    /// An array's shape does not match what the job needs.
    #[error("{what}: shape {found:?}, but {expected:?} is required; hint: {hint}")]
    ShapeMismatch {
        /// What array this is ("init centres", "sample_weight", ...).
        what: String,
        /// The required shape.
        expected: Vec<usize>,
        /// The shape found.
        found: Vec<usize>,
        /// How to fix it.
        hint: &'static str,
    },
    /// A mixture component's covariance is not positive definite, so EM
    /// cannot go on (singleton or collapsed samples, too little
    /// regularisation).
    #[error("fitting the mixture failed because {which} has an ill-defined empirical covariance (not positive definite with reg_covar = {reg_covar:e}; e.g. singleton or collapsed samples); hint: increase --reg-covar (e.g. 1e-3), decrease --n-components, or scale the input data",
        which = .component.map_or("the shared covariance".to_string(), |c| format!("component {c}")))]
    IllDefinedCovariance {
        /// The component, or `None` for the shared (tied) covariance.
        component: Option<usize>,
        /// The regularisation added to the diagonal.
        reg_covar: f64,
        /// Whether the fit computed in float32.
        float32: bool,
    },
    /// The job cannot run within the memory limit.
    #[error("the job needs at least {required_bytes} bytes ({required}) but the memory limit is {limit_bytes} bytes ({limit}): {what}; hint: {hint}",
        required = crate::units::format_bytes(*.required_bytes), limit = crate::units::format_bytes(*.limit_bytes))]
    DoesNotFit {
        /// The smallest limit that would work, in bytes.
        required_bytes: u64,
        /// The limit given, in bytes.
        limit_bytes: u64,
        /// Which buffers could not fit.
        what: String,
        /// What to do about it.
        hint: String,
    },
    /// The run was cancelled by the caller's progress callback.
    #[error("cancelled")]
    Cancelled,
}

fn io_hint(e: &io::Error) -> &'static str {
    match e.kind() {
        io::ErrorKind::NotFound => "; hint: check the path (the file or its folder does not exist)",
        io::ErrorKind::PermissionDenied => "; hint: check the file's permissions",
        io::ErrorKind::StorageFull => "; hint: free space on that disk or write elsewhere",
        io::ErrorKind::UnexpectedEof => "; hint: the file is shorter than its header says",
        _ if e.raw_os_error() == Some(29) => {
            "; hint: inputs must be regular .npy files (not pipes): save to a file first"
        }
        _ => "",
    }
}

fn non_finite_more(count: u64) -> String {
    if count > 1 {
        format!(" ({count} non-finite values in all)")
    } else {
        String::new()
    }
}

/// The engine's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Wraps an I/O error with the file and the action that failed.
    pub fn io(path: impl Into<PathBuf>, action: &'static str, source: io::Error) -> Self {
        Error::Io { path: path.into(), action, cause: source }
    }

    /// Builds [`Error::InvalidParameter`].
    pub fn param(name: &'static str, rule: impl Into<String>) -> Self {
        Error::InvalidParameter { name, rule: rule.into() }
    }
}
