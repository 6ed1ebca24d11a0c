//! `memfit gmm`: validate arguments, plan, fit a Gaussian mixture by EM,
//! write the model folder, labels, summary and plot atomically.

use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use memfit::io::{
    check_output_path, check_outputs_distinct, read_array_f64, read_matrix_f64, Dtype, NpyWriter, Source,
};
use memfit::mixture::{
    check_model_dir, fit, load_model, plan_gmm, save_model, CovarianceType, GmmFit, GmmParams, InitMethod, Outputs,
    PrecisionsInit,
};
use memfit::plan::{Job, Plan};
use memfit::Real;

use crate::args::{ComputeDtype, GmmArgs};
use crate::inputs::{inexact_warnings, open_data, open_weights, print_warnings};
use crate::kmeans_cmd::bytes_of;
use crate::progress::Bar;
use crate::{memory_limit, plot};

/// Runs `memfit gmm`.
pub fn run(args: &GmmArgs) -> Result<()> {
    let started = Instant::now();
    let mut paths: Vec<(&'static str, &Path)> = Vec::new();
    for (role, out) in [("--labels", &args.labels), ("--summary", &args.summary), ("--plot", &args.plot)] {
        // `--summary -` prints to stdout; any other output needs a file.
        if let Some(out) = out.as_deref().filter(|p| !(role == "--summary" && *p == Path::new("-"))) {
            check_output_path(out)?;
            paths.push((role, out));
        }
    }
    if let Some(dir) = &args.model {
        check_model_dir(dir)?;
    }
    let mut inputs: Vec<(&'static str, &Path)> = vec![("INPUT", &args.input)];
    for (role, input) in [
        ("--sample-weight", &args.sample_weight),
        ("--means-init", &args.means_init),
        ("--weights-init", &args.weights_init),
        ("--precisions-init", &args.precisions_init),
    ] {
        if let Some(p) = input {
            inputs.push((role, p));
        }
    }
    let mut folders: Vec<(&'static str, &Path)> = Vec::new();
    if let Some(dir) = &args.model {
        folders.push(("--model", dir));
    }
    if let Some(dir) = &args.warm_start {
        folders.push(("--warm-start", dir));
    }
    check_outputs_distinct(&paths, &inputs, &folders)?;
    let limit = memory_limit(args.common.memory_limit.as_deref())?;
    let x = open_data(&args.input, "fit")?;
    let weights = args.sample_weight.as_deref().map(|p| open_weights("--sample-weight", p)).transpose()?;
    let covariance_type = CovarianceType::parse(&args.covariance_type)?;
    let init_params = InitMethod::parse(&args.init)?;
    let mut params = GmmParams {
        n_components: args.n_components,
        covariance_type,
        tol: args.tol,
        reg_covar: args.reg_covar,
        max_iter: args.max_iter,
        n_init: args.n_init,
        init_params,
        weights_init: args.weights_init.as_deref().map(read_weights_init).transpose()?,
        means_init: args.means_init.as_ref().map(|p| read_matrix_init(p, x.n_features())).transpose()?,
        precisions_init: args
            .precisions_init
            .as_ref()
            .map(|p| open_precisions(p, covariance_type, args.n_components, x.n_features()))
            .transpose()?,
        random_state: args.seed,
        memory_limit_bytes: limit,
        lower_bound_init: None,
        row_split: Default::default(),
    };
    if let Some(dir) = &args.warm_start {
        let m = load_model(dir)?;
        if m.n_features() != x.n_features() {
            bail!(
                "--warm-start {}: the model has {} features but {} has {}; hint: warm-start from a model fitted on data of the same width",
                dir.display(),
                m.n_features(),
                args.input.display(),
                x.n_features()
            );
        }
        if args.n_init > 1 {
            eprintln!(
                "warning: --warm-start runs one initialisation (the saved model); --n-init {} is ignored",
                args.n_init
            );
        }
        if m.covariance_type != covariance_type || m.n_components() != args.n_components {
            bail!(
                "--warm-start {}: the model has {} components of covariance type {}, but --n-components {} --covariance-type {} were given; hint: use the same settings as the saved model",
                dir.display(),
                m.n_components(),
                m.covariance_type.name(),
                args.n_components,
                covariance_type.name()
            );
        }
        params.weights_init = Some(m.weights);
        params.means_init = Some(m.means);
        params.precisions_init = Some(PrecisionsInit::Cholesky(m.precisions_cholesky));
        params.lower_bound_init = m.lower_bound;
        params.n_init = 1;
    }
    params.validate(x.n_samples(), x.n_features())?;
    let compute = args.common.compute_dtype(x.dtype());
    let job = Job::new(&x, weights.as_ref(), bytes_of(compute), usize::from(args.labels.is_some()));
    let plan = plan_gmm(&params, &job, false)?;
    if args.dry_run {
        println!("{plan}");
        return Ok(());
    }
    match compute {
        ComputeDtype::Float32 => fit_and_write::<f32>(args, &params, &x, weights.as_ref(), &plan, started),
        ComputeDtype::Float64 => fit_and_write::<f64>(args, &params, &x, weights.as_ref(), &plan, started),
    }
}

/// Opens `--precisions-init`, checking its shape against scikit-learn's for
/// the covariance type.
fn open_precisions(path: &Path, t: CovarianceType, k: usize, d: usize) -> memfit::Result<PrecisionsInit<'static>> {
    let want = t.param_shape(k, d);
    let (src, shape) = Source::open_stacked(path, want.len())?;
    if shape != want {
        return Err(memfit::Error::ShapeMismatch {
            what: format!("--precisions-init {}", path.display()),
            expected: want,
            found: shape,
            hint: "give scikit-learn's precisions_init shape for the covariance type: (K, d, d) full, (d, d) tied, (K, d) diag, (K,) spherical",
        });
    }
    Ok(PrecisionsInit::Precisions(src))
}

/// Reads initial weights `(n_components,)`: a 1-D array, as scikit-learn's
/// `weights_init` (an `(n_components, 1)` column is refused, as it is there
/// and for `--sample-weight`); their count is checked by the parameters'
/// validation.
fn read_weights_init(path: &Path) -> Result<Vec<f64>> {
    let (values, _) = read_array_f64(path, 1)
        .map_err(|e| match e {
            memfit::Error::WrongDimensions { path, expected, shape, .. } => memfit::Error::WrongDimensions {
                path,
                expected,
                shape,
                hint: "save a 1-D array of shape (n_components,) summing to 1; for a column w of shape (n_components, 1) save w.ravel()",
            },
            e => e,
        })
        .context("--weights-init")?;
    Ok(values)
}

/// Reads initial means `(n_components, n_features)`; the shape is checked
/// by the parameters' validation.
fn read_matrix_init(path: &Path, n_features: usize) -> memfit::Result<Vec<f64>> {
    let (values, _, d) = read_matrix_f64(path).map_err(|e| match e {
        memfit::Error::WrongDimensions { path, expected, shape, .. } => memfit::Error::WrongDimensions {
            path,
            expected,
            shape,
            hint: "give means_init of shape (n_components, n_features)",
        },
        e => e,
    })?;
    if d != n_features {
        return Err(memfit::Error::ShapeMismatch {
            what: format!("--means-init {}", path.display()),
            expected: vec![values.len() / d.max(1), n_features],
            found: vec![values.len() / d.max(1), d],
            hint: "give one column per feature of the data",
        });
    }
    Ok(values)
}

fn fit_and_write<T: Real>(
    args: &GmmArgs,
    params: &GmmParams<'_>,
    x: &Source<'_>,
    w: Option<&Source<'_>>,
    plan: &Plan,
    started: Instant,
) -> Result<()> {
    let n = x.n_samples();
    let mut labels_file = args.labels.as_ref().map(|p| NpyWriter::create(p, Dtype::I32, &[n])).transpose()?;
    let mut write_labels =
        |labels: &[u32]| labels_file.as_mut().map_or(Ok(()), |f| f.write_with(labels, crate::put_label));
    let mut outputs = Outputs::default();
    if args.labels.is_some() {
        outputs.labels = Some(&mut write_labels);
    }
    let mut bar = Bar::new(args.common.quiet);
    let model = fit::<T>(params, x, w, plan, &mut outputs, &mut bar);
    bar.finish();
    let model = model?;
    let mut warnings = model.warnings.clone();
    warnings.extend(inexact_warnings(x, T::DTYPE, w));
    print_warnings(&warnings);
    let t = Instant::now();
    if let Some(f) = labels_file {
        f.commit()?;
    }
    if let Some(dir) = &args.model {
        let extra = serde_json::json!({
            "reg_covar": params.reg_covar,
            "compute_dtype": T::DTYPE.name(),
            "input": x.name(),
        });
        save_model(dir, &model, extra)?;
    }
    if let Some(p) = &args.plot {
        let title = format!(
            "Gaussian mixture ({}, {} components): lower bound per EM iteration",
            model.covariance_type.name(),
            model.n_components
        );
        plot::lower_bound_png(p, &model.lower_bounds, &title)?;
    }
    let write_secs = t.elapsed().as_secs_f64();
    let peak = memfit::memory::peak_rss_bytes();
    let summary =
        summary_json::<T>(args, x, &model, &warnings, plan, write_secs, started.elapsed().as_secs_f64(), peak);
    let line = format!(
        "gmm: n_samples={} n_features={} n_components={} covariance_type={} lower_bound={:.10e} n_iter={} converged={} bic={:.6e} seconds={:.3} peak_rss={}",
        model.n_samples,
        model.n_features,
        model.n_components,
        model.covariance_type.name(),
        model.lower_bound,
        model.n_iter,
        model.converged,
        model.bic,
        started.elapsed().as_secs_f64(),
        peak.map_or("unknown".into(), memfit::plan::format_bytes),
    );
    crate::emit_summary(args.summary.as_deref(), &summary, &line)
}

#[allow(clippy::too_many_arguments)]
fn summary_json<T: Real>(
    args: &GmmArgs,
    x: &Source<'_>,
    m: &GmmFit,
    warnings: &[String],
    plan: &Plan,
    write_secs: f64,
    total_secs: f64,
    peak: Option<u64>,
) -> serde_json::Value {
    let mut timings = serde_json::to_value(&m.timings).expect("plain struct");
    timings["write_secs"] = write_secs.into();
    timings["total_secs"] = total_secs.into();
    serde_json::json!({
        "n_samples": m.n_samples,
        "n_features": m.n_features,
        "n_components": m.n_components,
        "covariance_type": m.covariance_type.name(),
        "lower_bound": m.lower_bound,
        "lower_bounds": m.lower_bounds,
        "n_iter": m.n_iter,
        "converged": m.converged,
        "score": m.score,
        "bic": m.bic,
        "aic": m.aic,
        "n_parameters": m.n_parameters,
        "e_step_gflops_per_sec": m.e_step_gflops_per_sec,
        "weights": m.weights,
        "timings": timings,
        "peak_rss_bytes": peak,
        "plan": plan,
        "input": x.name(),
        "input_dtype": x.dtype().name(),
        "compute_dtype": T::DTYPE.name(),
        "init": args.init,
        "n_init": m.lower_bound_per_init.len(),
        "best_init": m.best_init,
        "lower_bound_per_init": m.lower_bound_per_init,
        "reg_covar": args.reg_covar,
        "tol": args.tol,
        "seed": args.seed,
        "warnings": warnings,
    })
}
