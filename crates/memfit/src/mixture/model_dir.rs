//! A fitted mixture saved as a folder of `.npy` files shaped as
//! scikit-learn's attributes, plus `model.json`:
//!
//! - `weights.npy` `(K,)`, `means.npy` `(K, d)`;
//! - `covariances.npy` and `precisions_cholesky.npy`: `(K, d, d)` full,
//!   `(d, d)` tied, `(K, d)` diag, `(K,)` spherical; all float64;
//! - `model.json`: covariance type, sizes, the fit's lower bound, `n_iter`,
//!   `converged`, and the column means the engine read the data around.
//!
//! The folder is put in place whole when complete (an existing model folder
//! is replaced): its files are written beside it, unnamed where the system
//! allows, so a process killed while writing leaves nothing (see
//! [`AtomicFolder`]).

use std::path::Path;

use super::fitted::GmmFit;
use super::params::CovarianceType;
use super::predict::MixtureModel;
use crate::error::{Error, Result};
use crate::io::{npy_file_bytes, read_array_f64, read_matrix_f64, AtomicFolder, Dtype, Source};

pub use crate::io::MODEL_JSON;

/// The files of a model folder.
const MODEL_FILES: [&str; 5] = ["weights.npy", "means.npy", "covariances.npy", "precisions_cholesky.npy", MODEL_JSON];

/// Checks, before a fit, that `dir` can receive a model: a new folder name
/// in an existing folder, or an existing memfit model folder holding
/// nothing but model files (which is replaced).
///
/// # Errors
/// [`Error::Io`] saying why not (a file, a folder with other contents,
/// `.` or `..`, a missing parent folder).
pub fn check_model_dir(dir: impl AsRef<Path>) -> Result<()> {
    let dir = dir.as_ref();
    let refuse = |why: &str| Err(Error::io(dir, "write model", std::io::Error::other(why.to_string())));
    if dir.file_name().is_none() || dir.components().next_back().is_some_and(|c| c.as_os_str() == "..") {
        return refuse("a model folder needs a name of its own; hint: give a new folder name such as ./model");
    }
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if parent.exists() && !parent.is_dir() {
        return refuse(&format!("{} is not a folder (it is a file); hint: name a folder", parent.display()));
    }
    if !parent.is_dir() {
        return refuse(&format!("the folder {} does not exist; hint: create it first", parent.display()));
    }
    // The model is staged in a hidden folder beside it: a folder that takes
    // nothing new is found now, not after the fit.
    crate::io::probe_dir(parent, dir)?;
    // A new folder, or an empty one (made for the model).
    if !dir.exists() || std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_none()) {
        return Ok(());
    }
    let is_model = dir.is_dir()
        && std::fs::read_to_string(dir.join(MODEL_JSON))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .is_some_and(|j| j["format"] == "memfit-gaussian-mixture");
    let only_model_files = std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().all(|e| MODEL_FILES.contains(&e.file_name().to_string_lossy().as_ref()))
    });
    if !(is_model && only_model_files) {
        return refuse(
            "it exists and is not a memfit model folder holding only model files, so it is not replaced; hint: choose a new model folder",
        );
    }
    Ok(())
}

/// Bytes of a model folder for `k` components of `d` features: its four
/// `.npy` files and a bound on `model.json` (which lists the `d` column
/// means).
pub fn model_dir_bytes(t: CovarianceType, k: usize, d: usize) -> u64 {
    let shape = t.param_shape(k, d);
    [npy_file_bytes(Dtype::F64, &[k]), npy_file_bytes(Dtype::F64, &[k, d])]
        .into_iter()
        .chain([npy_file_bytes(Dtype::F64, &shape); 2])
        .chain([(4 << 10) + 32 * d as u64])
        .fold(0u64, u64::saturating_add)
}

/// Writes `fit` to the folder `dir` (created, or an existing model folder
/// replaced), computing each component's precision Cholesky factor while
/// streaming, so no more than one `d × d` matrix is held at a time.
/// `extra` is merged into `model.json`. The arrays are float64, or with
/// `float32` float32 (each value rounded once, and the lower bound too:
/// the parameters of a float32 fit as a caller that holds them in float32
/// sees them, so that predictions and warm starts from the folder equal
/// those from the caller's arrays).
///
/// # Errors
/// As [`check_model_dir`]; [`Error::Io`] when writing fails.
pub fn save_model(dir: impl AsRef<Path>, fit: &GmmFit, extra: serde_json::Value, float32: bool) -> Result<()> {
    let dir = dir.as_ref();
    check_model_dir(dir)?;
    let mut folder = AtomicFolder::new(dir);
    write_files(&mut folder, fit, extra, float32)?;
    folder.commit()
}

/// The dtype of a model folder's arrays (see [`save_model`]), and how a
/// value is written in it (little-endian bytes).
pub fn param_dtype(float32: bool) -> (Dtype, fn(f64, &mut Vec<u8>)) {
    if float32 {
        (Dtype::F32, |v, out| out.extend_from_slice(&(v as f32).to_le_bytes()))
    } else {
        (Dtype::F64, |v, out| out.extend_from_slice(&v.to_le_bytes()))
    }
}

fn write_files(folder: &mut AtomicFolder, fit: &GmmFit, extra: serde_json::Value, float32: bool) -> Result<()> {
    let (k, d, t) = (fit.n_components, fit.n_features, fit.covariance_type);
    let (dtype, put) = param_dtype(float32);
    for (name, shape, values) in [("weights.npy", vec![k], &fit.weights), ("means.npy", vec![k, d], &fit.means)] {
        let mut w = folder.npy(name, dtype, &shape)?;
        w.write_with(values, put)?;
        folder.add_npy(w)?;
    }
    let shape = t.param_shape(k, d);
    let mut cov_w = folder.npy("covariances.npy", dtype, &shape)?;
    let mut prec_w = folder.npy("precisions_cholesky.npy", dtype, &shape)?;
    fit.parameter_blocks(|cov, prec| {
        cov_w.write_with(cov, put)?;
        prec_w.write_with(prec, put)
    })?;
    folder.add_npy(cov_w)?;
    folder.add_npy(prec_w)?;
    let mut json = serde_json::json!({
        "format": "memfit-gaussian-mixture",
        "version": 1,
        "covariance_type": t.name(),
        "n_components": k,
        "n_features": d,
        "n_samples": fit.n_samples,
        "lower_bound": if float32 { f64::from(fit.lower_bound as f32) } else { fit.lower_bound },
        "n_iter": fit.n_iter,
        "converged": fit.converged,
        "shift": fit.shift,
    });
    if let (Some(obj), serde_json::Value::Object(more)) = (json.as_object_mut(), extra) {
        obj.extend(more);
    }
    let mut file = folder.file(MODEL_JSON)?;
    file.write_all(serde_json::to_string_pretty(&json).expect("plain json").as_bytes())?;
    folder.add(file)
}

/// Opens the model folder `dir` for prediction or a warm start: weights and
/// means are read; precision factors stay on disk and are read one
/// component at a time.
///
/// # Errors
/// [`Error::Io`] for a missing folder or file; [`Error::InvalidParameter`]
/// (`model`) for a `model.json` that is not a memfit mixture or disagrees
/// with the arrays' shapes; `.npy` errors.
pub fn load_model(dir: impl AsRef<Path>) -> Result<MixtureModel<'static>> {
    let dir = dir.as_ref();
    if !dir.is_dir() {
        let what = if dir.exists() { "is not a folder" } else { "does not exist" };
        return Err(Error::param(
            "model",
            format!("{} {what}; hint: give a model folder written by memfit", dir.display()),
        ));
    }
    let json_path = dir.join(MODEL_JSON);
    let text = std::fs::read_to_string(&json_path).map_err(|e| Error::io(&json_path, "read", e))?;
    let bad = |why: String| {
        Error::param("model", format!("{}: {why}; hint: give a model folder written by memfit", dir.display()))
    };
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(format!("model.json: {e}")))?;
    if json["format"] != "memfit-gaussian-mixture" {
        return Err(bad("model.json is not a memfit Gaussian-mixture model".into()));
    }
    let t = json["covariance_type"].as_str().and_then(|s| CovarianceType::parse(s).ok()).ok_or_else(|| {
        bad(format!(
            "model.json's covariance_type is {}, not one of \"full\", \"tied\", \"diag\", \"spherical\"",
            json["covariance_type"]
        ))
    })?;
    let (weights, wshape) = read_array_f64(dir.join("weights.npy"), 1)?;
    let k = wshape[0];
    let (means, mk, d) = read_matrix_f64(dir.join("means.npy"))?;
    let ndim = t.param_shape(k, d).len();
    let (prec, shape) = Source::open_stacked(dir.join("precisions_cholesky.npy"), ndim).map_err(|e| match e {
        // Factors of another covariance type: the folder disagrees with itself.
        Error::WrongDimensions { shape, .. } => bad(format!(
            "model.json declares covariance_type {} but precisions_cholesky.npy has shape {shape:?}, of another covariance type",
            t.name()
        )),
        e => e,
    })?;
    if mk != k || shape != t.param_shape(k, d) {
        return Err(bad(format!(
            "weights {:?}, means {:?} and precisions_cholesky {shape:?} do not fit together for covariance_type {}",
            [k],
            [mk, d],
            t.name()
        )));
    }
    let declared = |key: &str, value: usize| json.get(key).is_none_or(|v| v.as_u64() == Some(value as u64));
    if !declared("n_components", k) || !declared("n_features", d) || !declared("version", 1) {
        return Err(bad(format!(
            "model.json declares n_components {}, n_features {}, version {} but the arrays hold {k} components of {d} features (version 1 expected)",
            json["n_components"], json["n_features"], json["version"]
        )));
    }
    if let Some(i) = weights.iter().position(|w| !(w.is_finite() && (0.0..=1.0).contains(w))) {
        return Err(bad(format!("weights.npy[{i}] = {:?} is not a weight in [0, 1]", weights[i])));
    }
    if (weights.iter().sum::<f64>() - 1.0).abs() > 1e-6 {
        return Err(bad("weights.npy does not sum to 1".into()));
    }
    if let Some(i) = means.iter().position(|v| !v.is_finite()) {
        return Err(bad(format!("means.npy: component {} feature {} is {}", i / d, i % d, means[i])));
    }
    // The offset the parameters are stored around: none, or one finite
    // number per feature (anything else is a damaged folder, not a guess).
    let shift = match &json["shift"] {
        serde_json::Value::Null => None,
        value => {
            let numbers =
                value.as_array().and_then(|a| a.iter().map(serde_json::Value::as_f64).collect::<Option<Vec<_>>>());
            match numbers {
                Some(s) if s.len() == d && s.iter().all(|v| v.is_finite()) => Some(s),
                _ => {
                    return Err(bad(format!("model.json's shift is {value}, not {d} finite numbers (one per feature)")))
                }
            }
        }
    };
    // A fit's shift is 0 or a column's mean that every value of it lies
    // within a factor of 2 of, so its components' means (0 for one without
    // rows) do too and subtracting it is exact; any other shift would
    // round every row it is subtracted from.
    for (j, &s) in shift.iter().flatten().enumerate().filter(|(_, &s)| s != 0.0) {
        let column = means.iter().skip(j).step_by(d).filter(|&&m| m != 0.0);
        let (lo, hi) = column.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &m| (lo.min(m), hi.max(m)));
        if lo <= hi && crate::exec::exact_shift(s, lo, hi) != s {
            return Err(bad(format!(
                "model.json's shift for feature {j} is {s:?}, but the means of that feature other than 0 span {lo:?} to {hi:?}: \
                 not within a factor of 2 of it (memfit writes 0 or such a shift, which subtracts exactly)"
            )));
        }
    }
    let lower_bound = json["lower_bound"].as_f64();
    Ok(MixtureModel { covariance_type: t, weights, means, precisions_cholesky: prec, shift, lower_bound })
}
