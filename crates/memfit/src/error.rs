//! The engine's error type: one enum whose variants carry the fields a caller
//! needs (path, row, column, bytes) and whose messages end with a hint.
//!
//! Hints that name something the caller can change (the memory limit, the
//! compute dtype, `reg_covar`, ...) are data, [`Remedy`] values, never a
//! front-end's spelling: `Display` words them neutrally ([`Neutral`]), and a
//! front-end renders the same error in its own words with
//! [`Error::render`] and its [`Spelling`] (the CLI names its flags, Python
//! its parameters).

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::dtype::Dtype;
use crate::warning::Warning;

/// Something the caller can change so that a job runs (or runs better),
/// carried by errors and warnings as data. A front-end words it with its
/// [`Spelling`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Remedy {
    /// Raise the memory limit to at least `to_bytes`.
    RaiseMemoryLimit {
        /// The smallest limit that works, in bytes.
        to_bytes: u64,
    },
    /// Raise the memory limit by about `by_bytes`.
    RaiseMemoryLimitBy {
        /// Bytes to add.
        by_bytes: u64,
    },
    /// Use fewer of these (threads, clusters, components).
    UseFewer(Vec<Count>),
    /// Compute in this dtype (`float32` or `float64`).
    ComputeIn(Dtype),
    /// Use a covariance type with fewer parameters: one of these
    /// (scikit-learn's names, `tied`, `diag`, `spherical`).
    CovarianceType(Vec<&'static str>),
    /// Raise `reg_covar`, e.g. to `example`.
    RaiseRegCovar {
        /// A value to try, when there is one to suggest.
        example: Option<f64>,
    },
    /// Raise `max_iter`.
    RaiseMaxIter,
    /// Raise `tol`.
    RaiseTol,
    /// Try other initial parameters (another `init` or seed).
    OtherInit,
    /// Rescale the data (e.g. standardise each feature).
    RescaleData,
    /// Check that given initial means and precisions are on the data's scale.
    CheckInitScale,
    /// Subtract a per-column offset in the integer type, so the values fit
    /// the compute dtype's exact integers.
    SubtractColumnOffset,
    /// Write the result to a file (in blocks) instead of returning it in
    /// memory.
    WriteToFile,
    /// Lower the memory limit to at most `to_bytes` (what the machine has).
    LowerMemoryLimit {
        /// The memory available, in bytes.
        to_bytes: u64,
    },
    /// Run the job on the CPU instead of a device.
    RunOnCpu,
    /// Raise the device memory limit to at least `to_bytes`.
    RaiseDeviceMemoryLimit {
        /// The smallest device limit that works, in bytes.
        to_bytes: u64,
    },
}

/// A quantity a job can use fewer of (see [`Remedy::UseFewer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Count {
    /// Worker threads.
    Threads,
    /// k-means clusters (`n_clusters`).
    Clusters,
    /// Mixture components (`n_components`).
    Components,
}

impl Count {
    /// The plural noun: "threads", "clusters", "components".
    pub fn noun(self) -> &'static str {
        match self {
            Count::Threads => "threads",
            Count::Clusters => "clusters",
            Count::Components => "components",
        }
    }
}

/// How a front-end words a [`Remedy`]: the CLI names its flags
/// (`--memory-limit`), Python its parameters (`memory_limit=`). Override
/// [`Spelling::remedy`] for the remedies a front-end words differently and
/// fall back to [`Neutral`] for the rest.
pub trait Spelling {
    /// One remedy as an imperative phrase ("raise the memory limit to at
    /// least 1.00 MiB (1048576 bytes)").
    fn remedy(&self, remedy: &Remedy) -> String {
        Neutral.remedy(remedy)
    }

    /// A parameter named in an error (`name` as the library spells it, e.g.
    /// `n_clusters`), in the front-end's words (the CLI's `--n-clusters`).
    fn parameter(&self, name: &str) -> String {
        name.to_string()
    }
}

/// The engine's own words, with parameters named as the library's fields
/// ("the memory limit", "reg_covar", "max_iter"); what `Display` uses.
#[derive(Debug, Clone, Copy, Default)]
pub struct Neutral;

impl Spelling for Neutral {
    fn remedy(&self, remedy: &Remedy) -> String {
        match remedy {
            Remedy::RaiseMemoryLimit { to_bytes } => {
                format!(
                    "raise the memory limit to at least {} ({to_bytes} bytes)",
                    crate::units::format_bytes_up(*to_bytes)
                )
            }
            Remedy::RaiseMemoryLimitBy { by_bytes } => {
                format!(
                    "raise the memory limit by about {} ({by_bytes} bytes)",
                    crate::units::format_bytes_up(*by_bytes)
                )
            }
            Remedy::ComputeIn(d) => format!("compute in {}", d.name()),
            Remedy::CovarianceType(types) => {
                format!("use a covariance type with fewer parameters ({})", types.join(", "))
            }
            Remedy::RaiseRegCovar { example } => format!("raise reg_covar{}", for_example(*example)),
            Remedy::RaiseMaxIter => "raise max_iter".into(),
            Remedy::RaiseTol => "raise tol".into(),
            Remedy::UseFewer(_)
            | Remedy::OtherInit
            | Remedy::RescaleData
            | Remedy::CheckInitScale
            | Remedy::SubtractColumnOffset => common_remedy(remedy),
            Remedy::WriteToFile => "write the result to a .npy or Zarr file instead of returning it in memory".into(),
            Remedy::LowerMemoryLimit { to_bytes } => format!(
                "lower the memory limit to at most {} ({to_bytes} bytes) or free memory",
                crate::units::format_bytes_down(*to_bytes)
            ),
            Remedy::RunOnCpu => "run on the CPU".into(),
            Remedy::RaiseDeviceMemoryLimit { to_bytes } => format!(
                "raise the device memory limit to at least {} ({to_bytes} bytes)",
                crate::units::format_bytes_up(*to_bytes)
            ),
        }
    }
}

/// The words of the remedies every front-end words alike (they name no
/// parameter), for [`Spelling`] implementations to fall back on.
pub fn common_remedy(remedy: &Remedy) -> String {
    match remedy {
        Remedy::UseFewer(counts) => {
            let nouns: Vec<String> = counts.iter().map(|c| c.noun().to_string()).collect();
            format!("use fewer {}", join(&nouns, "or"))
        }
        Remedy::OtherInit => "try different init parameters".into(),
        Remedy::RescaleData => "rescale the data (e.g. standardise each feature)".into(),
        Remedy::CheckInitScale => "check that initial means and precisions (if given) are on the data's scale".into(),
        Remedy::SubtractColumnOffset => {
            "subtract a per-column offset (such as the column's minimum) in the integer type first".into()
        }
        other => Neutral.remedy(other),
    }
}

/// " (e.g. 0.001)" for an example value, else nothing.
pub fn for_example(example: Option<f64>) -> String {
    example.map_or(String::new(), |v| format!(" (e.g. {v:e})"))
}

/// `items` joined as a list: "a", "a or b", "a, b, or c" (with `word` "or").
pub fn join(items: &[String], word: &str) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [a, b] => format!("{a} {word} {b}"),
        [init @ .., last] => format!("{}, {word} {last}", init.join(", ")),
    }
}

/// The remedies as one hint, each in `spelling`'s words ("a, b, or c").
pub fn hint(remedies: &[Remedy], spelling: &dyn Spelling) -> String {
    join(&remedies.iter().map(|r| spelling.remedy(r)).collect::<Vec<_>>(), "or")
}

/// The rule of the [`Error::InvalidParameter`] for `sample_weight` whose
/// weights are all zero (fronts may render it in their own words).
pub const ALL_WEIGHTS_ZERO: &str = "all sample weights are zero; hint: at least one weight must be positive";

/// Every failure the engine reports. Messages are one line: the cause, then
/// `; hint: …` saying what to do about it (see [`Error::render`] for a
/// front-end's wording of the hint).
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be opened, created, read or written.
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
    NotNpy {
        /// The file concerned.
        path: PathBuf,
        /// What is wrong with the header.
        reason: String,
    },
    /// The folder is not a Zarr array this engine can read (no array
    /// metadata, a group, or metadata zarrs cannot parse).
    NotZarr {
        /// The folder concerned.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The data section is shorter than the header's shape says.
    Truncated {
        /// The file concerned.
        path: PathBuf,
        /// Bytes of data the shape and dtype require.
        expected_bytes: u64,
        /// Bytes of data present after the header.
        found_bytes: u64,
    },
    /// The array's dtype is not one memfit reads.
    UnsupportedDtype {
        /// The file concerned.
        path: PathBuf,
        /// The dtype descriptor found in the header.
        descr: String,
    },
    /// The array has the wrong number of dimensions.
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
    InvalidWeight {
        /// The weights file (or `<memory>`).
        path: PathBuf,
        /// Zero-based index of the first bad weight.
        row: usize,
        /// The bad weight.
        value: f64,
    },
    /// A parameter (or the data, named `X`) breaks its rule.
    InvalidParameter {
        /// The parameter's name as the library spells it (`n_clusters`,
        /// `tol`, `X`, ...).
        name: &'static str,
        /// The rule it breaks and the value given (with a hint when no
        /// remedy applies).
        rule: String,
        /// What to do about it, when it is something the caller can change
        /// (empty when `rule` says it all).
        remedies: Vec<Remedy>,
    },
    /// An array's shape does not match what the job needs.
    ShapeMismatch {
        /// What array this is: the parameter that holds it (`init`,
        /// `sample_weight`, ...; a front end spells it), or a description.
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
    IllDefinedCovariance {
        /// The component, or `None` for the shared (tied) covariance.
        component: Option<usize>,
        /// The regularisation added to the diagonal.
        reg_covar: f64,
        /// Whether the fit computed in float32.
        float32: bool,
    },
    /// The job cannot run within the memory limit.
    DoesNotFit {
        /// The smallest limit that would work, in bytes.
        required_bytes: u64,
        /// The limit given, in bytes.
        limit_bytes: u64,
        /// Which buffers could not fit.
        what: String,
        /// What to do about it: first [`Remedy::RaiseMemoryLimit`], then
        /// any other change that makes the job smaller.
        remedies: Vec<Remedy>,
    },
    /// The run was cancelled by the caller's progress callback.
    Cancelled,
    /// An array job's evaluation raised a floating-point exception the
    /// caller asked to fail on ([`crate::exec::RunOptions::raise_on`]); no
    /// output was committed.
    FloatingPoint {
        /// The exception.
        exception: crate::FpException,
        /// Values that raised it.
        count: u64,
    },
    /// Array operands whose shapes do not broadcast together (NumPy's
    /// rules: trailing axes equal or 1).
    Broadcast {
        /// The operands' shapes.
        shapes: Vec<Vec<usize>>,
    },
    /// An array operation that is invalid for its operands (a wrong dtype,
    /// axis, shape or subscripts).
    Expression {
        /// Whether the operands' types (`Type`) or their values or shapes
        /// (`Value`) are at fault.
        kind: ExpressionFault,
        /// What is wrong, in NumPy's words where NumPy has some.
        message: String,
    },
    /// An output exists and overwriting it was not allowed.
    OutputExists {
        /// The output concerned.
        path: PathBuf,
    },
    /// A file system has less free space than the files and folders a job
    /// would write there (outputs and scratch files, added up per file
    /// system); refused before anything is written.
    NoDiskSpace {
        /// The first of those paths on that file system.
        path: PathBuf,
        /// Bytes the writes there need.
        needed_bytes: u64,
        /// Bytes free there for an unprivileged writer.
        available_bytes: u64,
        /// What is written there and its bytes, in the caller's words
        /// (e.g. `("scratch files", 41943040)`); empty names are left out.
        writes: Vec<(String, u64)>,
    },
    /// Work handed to another process (a task on a cluster, see
    /// [`crate::exec::Remote`]) failed there or came back unreadable.
    Remote {
        /// What went wrong, as the other side reported it.
        reason: String,
    },
    /// The job cannot run within a device's memory limit.
    DeviceDoesNotFit {
        /// The device as named (`cuda:0`).
        device: String,
        /// The smallest device limit that would work, in bytes.
        required_bytes: u64,
        /// The device limit given, in bytes.
        limit_bytes: u64,
        /// Which buffers could not fit.
        what: String,
        /// What to do about it: first [`Remedy::RaiseDeviceMemoryLimit`].
        remedies: Vec<Remedy>,
    },
    /// A device (see [`crate::device`]) that cannot be used.
    DeviceUnavailable {
        /// The device as named (`cuda:0`).
        device: String,
        /// Why: a build without CUDA, no driver, no such device, a driver
        /// error.
        reason: String,
        /// What to do about it ([`Remedy::RunOnCpu`]).
        remedies: Vec<Remedy>,
    },
}

/// What is at fault in an [`Error::Expression`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpressionFault {
    /// The operands' dtypes (NumPy raises `TypeError`).
    Type,
    /// The operands' shapes, axes or other values (NumPy raises `ValueError`).
    Value,
    /// A value that does not fit its dtype (NumPy raises `OverflowError`).
    Overflow,
    /// An index out of range (NumPy raises `IndexError`).
    Index,
}

impl std::error::Error for Error {}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, &Neutral)
    }
}

/// An [`Error`] worded by a [`Spelling`] (see [`Error::render`]).
pub struct Rendered<'e> {
    error: &'e Error,
    spelling: &'e dyn Spelling,
}

impl fmt::Display for Rendered<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.write(f, self.spelling)
    }
}

impl Error {
    /// The message with its remedies in `spelling`'s words (`Display` is
    /// `render(&Neutral)`).
    pub fn render<'e>(&'e self, spelling: &'e dyn Spelling) -> Rendered<'e> {
        Rendered { error: self, spelling }
    }

    /// The remedies the error carries (none for most variants, whose hint is
    /// fixed text).
    pub fn remedies(&self) -> Vec<Remedy> {
        match self {
            Error::InvalidParameter { remedies, .. }
            | Error::DoesNotFit { remedies, .. }
            | Error::DeviceDoesNotFit { remedies, .. }
            | Error::DeviceUnavailable { remedies, .. } => remedies.clone(),
            Error::IllDefinedCovariance { .. } => vec![
                Remedy::RaiseRegCovar { example: Some(1e-3) },
                Remedy::UseFewer(vec![Count::Components]),
                Remedy::RescaleData,
            ],
            _ => Vec::new(),
        }
    }

    fn write(&self, f: &mut fmt::Formatter<'_>, s: &dyn Spelling) -> fmt::Result {
        match self {
            Error::Io { path, action, cause } => {
                // A cause worded by the engine carries its own hint.
                let text = cause.to_string();
                let h = if text.contains("hint: ") { "" } else { io_hint(cause) };
                write!(f, "{}: {action} failed: {text}{h}", path.display())
            }
            Error::NotNpy { path, reason } => write!(
                f,
                "{}: not a valid .npy file: {reason}; hint: write it with numpy.save(path, array)",
                path.display()
            ),
            Error::NotZarr { path, reason } => write!(
                f,
                "{}: not a readable Zarr array: {reason}; hint: name the array's own folder (holding zarr.json or .zarray); arrays must use the bytes codec, optionally with zstd (and crc32c, sharding or v2's shuffle filter): rewrite blosc, gzip, zlib, lz4, bz2, lzma, delta, transposed or Fortran-order ones with zarr-python",
                path.display()
            ),
            Error::Truncated { path, expected_bytes, found_bytes } => write!(
                f,
                "{}: truncated: the header promises {expected_bytes} bytes of data but the file holds {found_bytes}; hint: the file was cut short, write it again",
                path.display()
            ),
            Error::UnsupportedDtype { path, descr } => write!(
                f,
                "{}: unsupported dtype {descr}; hint: supported are bool, float16/32/64, uint8/16/32/64, int8/16/32/64; convert with array.astype(numpy.float64)",
                path.display()
            ),
            Error::WrongDimensions { path, expected, shape, hint } => {
                write!(f, "{}: expected a {expected}-D array, found shape {shape:?}; hint: {hint}", path.display())
            }
            Error::NonFinite { path, row, column, value, count } => write!(
                f,
                "{}: row {row}, column {column} is {value} (not finite){}; hint: remove or impute missing values first, e.g. X[~numpy.isfinite(X).all(axis=1)] finds the rows (for a scipy.sparse X, ~numpy.isfinite(X.data) the values)",
                path.display(),
                non_finite_more(*count)
            ),
            Error::InvalidWeight { path, row, value } => {
                // The rule the value breaks: jobs that take weights of any
                // sign (the scatter) refuse only non-finite ones.
                let rule = if value.is_finite() { ">= 0" } else { "finite" };
                let value = short_number(*value);
                write!(f, "{}: sample_weight[{row}] = {value}; hint: sample weights must be {rule}", path.display())
            }
            Error::InvalidParameter { name, rule, remedies } => {
                write!(f, "invalid {}: {rule}", s.parameter(name))?;
                if !remedies.is_empty() {
                    write!(f, "; hint: {}", hint(remedies, s))?;
                }
                Ok(())
            }
            Error::ShapeMismatch { what, expected, found, hint } => {
                write!(f, "{}: shape {found:?}, but {expected:?} is required; hint: {hint}", s.parameter(what))
            }
            Error::IllDefinedCovariance { component, reg_covar, .. } => write!(
                f,
                "fitting the mixture failed because {} has an ill-defined empirical covariance (not positive definite with reg_covar = {reg_covar:e}; e.g. singleton or collapsed samples); hint: {}",
                component.map_or("the shared covariance".to_string(), |c| format!("component {c}")),
                hint(&self.remedies(), s)
            ),
            Error::DoesNotFit { required_bytes, limit_bytes, what, remedies } => write!(
                f,
                "the job needs at least {required_bytes} bytes ({}) but the memory limit is {limit_bytes} bytes ({}): {what}; hint: {}",
                crate::units::format_bytes_up(*required_bytes),
                crate::units::format_bytes_down(*limit_bytes),
                hint(remedies, s)
            ),
            Error::Cancelled => f.write_str("cancelled"),
            Error::FloatingPoint { exception, count } => {
                write!(f, "{}", Warning::FloatingPoint { exception: *exception, count: *count })
            }
            Error::Remote { reason } => write!(f, "a task run in another process failed: {reason}"),
            Error::DeviceDoesNotFit { device, required_bytes, limit_bytes, what, remedies } => write!(
                f,
                "the job needs at least {required_bytes} bytes ({}) of {device}'s memory but the device memory limit is {limit_bytes} bytes ({}): {what}; hint: {}",
                crate::units::format_bytes_up(*required_bytes),
                crate::units::format_bytes_down(*limit_bytes),
                hint(remedies, s)
            ),
            Error::DeviceUnavailable { device, reason, remedies } => {
                write!(f, "{device}: cannot be used: {reason}; hint: {}", hint(remedies, s))
            }
            Error::Broadcast { shapes } => {
                f.write_str("operands could not be broadcast together with shapes")?;
                for shape in shapes {
                    write!(f, " {}", shape_text(shape).replace(", ", ","))?;
                }
                // NumPy's message ends with a space.
                f.write_str(" ")
            }
            Error::Expression { message, .. } => f.write_str(message),
            Error::NoDiskSpace { path, needed_bytes, available_bytes, writes } => {
                let fb = crate::units::format_bytes;
                let named: Vec<String> =
                    writes.iter().filter(|(w, _)| !w.is_empty()).map(|(w, b)| format!("{w} {}", fb(*b))).collect();
                let what = if named.is_empty() { String::new() } else { format!(" ({})", named.join(", ")) };
                write!(
                    f,
                    "{}: not enough free disk space: the files written on its file system{what} need {needed_bytes} bytes ({}) but {available_bytes} bytes ({}) are available; nothing was written; hint: free space on that disk or write elsewhere",
                    path.display(),
                    fb(*needed_bytes),
                    fb(*available_bytes)
                )
            }
            Error::OutputExists { path } => write!(
                f,
                "{}: the output exists; hint: allow overwriting it or choose another path",
                path.display()
            ),
        }
    }
}

/// A shape as NumPy prints it: `(2, 3)`, `(4,)`, `()`.
pub fn shape_text(shape: &[usize]) -> String {
    match shape {
        [n] => format!("({n},)"),
        _ => format!("({})", shape.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")),
    }
}

fn io_hint(e: &io::Error) -> &'static str {
    match e.kind() {
        io::ErrorKind::NotFound => "; hint: check the path (the file or its folder does not exist)",
        io::ErrorKind::PermissionDenied => "; hint: check the file's permissions",
        io::ErrorKind::StorageFull => "; hint: free space on that disk or write elsewhere",
        io::ErrorKind::ReadOnlyFilesystem => "; hint: the file system is read-only: write elsewhere",
        io::ErrorKind::UnexpectedEof => "; hint: the file is shorter than its header says",
        _ if e.raw_os_error() == Some(29) => {
            "; hint: inputs must be regular .npy files (not pipes): save to a file first"
        }
        _ => "",
    }
}

/// `v` as a message shows a number: in exponent form when the decimal
/// form would be long (beyond 1e16 or below 1e-4 in magnitude, as Python's
/// `repr`), so that -1e-300 is not printed with 300 zeros.
fn short_number(v: f64) -> String {
    if v.is_finite() && v != 0.0 && !(1e-4..1e16).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
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

    /// Builds [`Error::InvalidParameter`] whose rule says it all.
    pub fn param(name: &'static str, rule: impl Into<String>) -> Self {
        Error::InvalidParameter { name, rule: rule.into(), remedies: Vec::new() }
    }

    /// Builds [`Error::InvalidParameter`] with remedies for its hint.
    pub fn param_with(name: &'static str, rule: impl Into<String>, remedies: Vec<Remedy>) -> Self {
        Error::InvalidParameter { name, rule: rule.into(), remedies }
    }

    /// The error for a value that read as a non-finite `compute` value:
    /// `value` as stored at (`row`, `column`) of `path`, `count` such values
    /// (0 when not counted). A finite stored value overflowed `compute`
    /// (an invalid `dtype`, computing in `float64` fixes it); else
    /// [`Error::NonFinite`].
    pub fn bad_value(path: PathBuf, row: usize, column: usize, value: f64, count: u64, compute: Dtype) -> Self {
        if value.is_finite() {
            return Error::param_with(
                "dtype",
                format!(
                    "{}: row {row}, column {column} holds {value:e}, which overflows {}",
                    path.display(),
                    compute.name()
                ),
                vec![Remedy::ComputeIn(Dtype::F64)],
            );
        }
        Error::NonFinite { path, row, column, value, count }
    }

    /// Builds [`Error::DoesNotFit`]: the job needs `required_bytes` but the
    /// limit is `limit_bytes`; raising the limit is the first remedy, then
    /// `also`.
    pub fn does_not_fit(required_bytes: u64, limit_bytes: u64, what: String, also: Vec<Remedy>) -> Self {
        let mut remedies = vec![Remedy::RaiseMemoryLimit { to_bytes: required_bytes }];
        remedies.extend(also);
        Error::DoesNotFit { required_bytes, limit_bytes, what, remedies }
    }

    /// An [`Error::DoesNotFit`] of a part planned within a share of a job's
    /// limit, as the job's: the limits it names (the smallest, any to raise
    /// to) mapped by `limit`, the raises it suggests by `raise`, against the
    /// job's `limit_bytes`, its words by `what`. Other errors as they are.
    pub fn as_job_limit(
        self,
        limit_bytes: u64,
        limit: impl Fn(u64) -> u64,
        raise: impl Fn(u64) -> u64,
        what: impl FnOnce(String) -> String,
    ) -> Self {
        match self {
            Error::DoesNotFit { required_bytes, what: part, remedies, .. } => Error::DoesNotFit {
                required_bytes: limit(required_bytes),
                limit_bytes,
                what: what(part),
                remedies: remedies
                    .into_iter()
                    .map(|r| match r {
                        Remedy::RaiseMemoryLimit { to_bytes } => Remedy::RaiseMemoryLimit { to_bytes: limit(to_bytes) },
                        Remedy::RaiseMemoryLimitBy { by_bytes } => {
                            Remedy::RaiseMemoryLimitBy { by_bytes: raise(by_bytes) }
                        }
                        other => other,
                    })
                    .collect(),
            },
            other => other,
        }
    }
}
