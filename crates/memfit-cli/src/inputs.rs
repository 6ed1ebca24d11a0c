//! Opening the commands' input files, and the warnings about them that are
//! rendered once a job is done.

use std::path::Path;

use anyhow::{bail, Context, Result};
use memfit::io::{Dtype, Source};

/// Opens a command's data file: a 2-D `.npy` with at least one row and one
/// column (`verb` says what would be done with it: "cluster", "fit", ...).
///
/// # Errors
/// The engine's errors for a missing or malformed file; an empty array,
/// naming the file.
pub fn open_data(path: &Path, verb: &str) -> Result<Source<'static>> {
    let x = Source::open_matrix(path)?;
    if x.n_samples() == 0 || x.n_features() == 0 {
        bail!(
            "{} has shape ({}, {}): nothing to {verb}; hint: give at least one row and one column",
            path.display(),
            x.n_samples(),
            x.n_features()
        );
    }
    Ok(x)
}

/// Opens per-row weights given with `flag`: a 1-D `.npy` of shape
/// `(n_samples,)`, as scikit-learn's `sample_weight` (an `(n, 1)` column is
/// refused as scikit-learn refuses it).
///
/// # Errors
/// The engine's errors, after the flag.
pub fn open_weights(flag: &str, path: &Path) -> Result<Source<'static>> {
    Source::open_vector(path).with_context(|| flag.to_string())
}

/// One warning for each of the data `x` (computed in `compute`) and the
/// weights `w` (always read in float64) in which integers were found that
/// this dtype cannot represent exactly, naming the file, the column and the
/// first such value, with what to do about it.
pub fn inexact_warnings(x: &Source<'_>, compute: Dtype, w: Option<&Source<'_>>) -> Vec<String> {
    std::iter::once((x, compute))
        .chain(w.map(|w| (w, Dtype::F64)))
        .filter_map(|(src, compute)| {
            let found = src.inexact_integer(compute)?;
            let hint = if compute == Dtype::F32 {
                "compute in float64 (drop --dtype float32), which holds integers exactly up to 2^53"
            } else {
                "float64 holds integers exactly only up to 2^53: subtract a per-column offset (such as the column's minimum) in the integer type before saving"
            };
            Some(format!("{}: {found}; hint: {hint}", src.name().display()))
        })
        .collect()
}

/// Prints each warning on stderr, one line each.
pub fn print_warnings(warnings: &[String]) {
    for warning in warnings {
        eprintln!("warning: {warning}");
    }
}
