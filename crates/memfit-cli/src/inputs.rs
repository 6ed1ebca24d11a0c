//! Opening the commands' input files.

use std::path::Path;

use anyhow::{bail, Context, Result};
use memfit::io::Source;

/// Opens a command's data file: a 2-D `.npy` with at least one row and one
/// column (`verb` says what would be done with it: "cluster", "fit", ...),
/// or where sparse input is taken (`sparse`: the scratch folder a `.npz` is
/// unpacked into), a CSR matrix: a folder (see `memfit::io::CsrFiles`: an
/// unzipped `scipy.sparse.save_npz`) or a `.npz` file itself.
///
/// # Errors
/// The engine's errors for a missing or malformed file or folder; an empty
/// array, naming the file; a folder or `.npz` where sparse input is not
/// taken.
pub fn open_data(path: &Path, verb: &str, sparse: Option<&Path>) -> Result<Source<'static>> {
    // A .npz by its name, or any zip archive by its first bytes.
    let npz = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("npz")) || is_zip(path);
    if ["zarr.json", ".zarray", ".zgroup"].iter().any(|m| path.join(m).is_file()) {
        bail!(
            "{}: is a Zarr array or group; the command line reads .npy files{}; hint: save a dense 2-D .npy, or fit it from Python (memfit.array.from_zarr)",
            path.display(),
            if sparse.is_some() { " and sparse (CSR) folders" } else { "" }
        );
    }
    let x = match sparse {
        None if path.is_dir() || npz => bail!(
            "{}: is a {}; only kmeans and predict read a sparse (CSR) matrix; hint: save a dense 2-D .npy",
            path.display(),
            if npz { ".npz" } else { "directory" }
        ),
        Some(_) if path.is_dir() => Source::open_csr_dir(path)?,
        Some(scratch) if npz => Source::open_npz(path, scratch)?,
        _ => Source::open_matrix(path)?,
    };
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

/// The input folder entry of `check_outputs_distinct` for an input that
/// is a sparse (CSR) folder: its arrays are inputs too, so no output may
/// land among them. `None` for a file.
pub fn input_folder(path: &Path) -> Option<(&'static str, &Path, bool)> {
    path.is_dir().then_some(("INPUT", path, false))
}

/// Whether `path` is a regular file that starts as a zip archive does.
fn is_zip(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    path.is_file()
        && std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic)).is_ok()
        && magic == *b"PK\x03\x04"
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

/// The shape `--centers` (and `kmeans --init`) needs.
pub const CENTERS_HINT: &str =
    "save the centres as a 2-D array of shape (n_clusters, n_features); for one centre use c.reshape(1, -1)";

/// The shape `quadratic-form --q` needs.
pub const Q_HINT: &str = "save Q as a 2-D array of shape (n_features, n_features)";

/// A matrix option's `.npy` file (`--centers`, `--q`, `--init`,
/// `--means-init`): its shape from the header, or with `read`, its values
/// too (as `f64` in C order). Errors name the flag; an array of another
/// number of dimensions gets `hint` (the shape the option needs), not the
/// data's.
///
/// # Errors
/// The engine's errors, after the flag.
pub fn matrix_arg(flag: &str, path: &Path, hint: &'static str, read: bool) -> Result<(Vec<f64>, usize, usize)> {
    let own_hint = |e| match e {
        memfit::Error::WrongDimensions { path, expected, shape, .. } => {
            memfit::Error::WrongDimensions { path, expected, shape, hint }
        }
        e => e,
    };
    let got = if read {
        memfit::io::read_matrix_f64(path)
    } else {
        Source::open_matrix(path).map(|m| (Vec::new(), m.n_samples(), m.n_features()))
    };
    got.map_err(own_hint).with_context(|| flag.to_string())
}

/// Checks that an output file may be created at `path` (`--summary -`,
/// which prints to stdout, is not checked here).
///
/// # Errors
/// `-`, which only `--summary` accepts; the engine's errors for a missing
/// folder or a path that is not a file.
pub fn check_output(path: &Path) -> Result<()> {
    if path == Path::new("-") {
        bail!("-: create failed: this output cannot go to stdout; hint: name a file (only --summary accepts -)");
    }
    memfit::io::check_output_path(path)?;
    Ok(())
}
