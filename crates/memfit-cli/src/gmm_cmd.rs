//! `memfit gmm`: validate arguments, plan, fit a Gaussian mixture by EM,
//! write the model folder, labels, summary and plot atomically.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use memfit::estimator::GmmJob;
use memfit::io::{check_outputs_distinct, npy_file_bytes, read_array_f64, Dtype, NpyWriter, Source};
use memfit::mixture::{
    check_model_dir, load_model, model_dir_bytes, save_model, CovarianceType, GmmFit, GmmParams, InitMethod, Outputs,
    PrecisionsInit,
};
use memfit::plan::Plan;
use memfit::Warning;

use crate::args::GmmArgs;
use crate::inputs::{check_output, open_data, open_weights};
use crate::plot;
use crate::progress::Bar;
use crate::render::{print_warnings, warning_lines};

/// An engine error about the model folder read for `--warm-start dir`
/// named by that flag (the engine calls every model folder `model`).
fn from_warm_start(e: memfit::Error, dir: &Path) -> anyhow::Error {
    match e {
        memfit::Error::InvalidParameter { name: "model", rule, .. } => {
            anyhow::anyhow!("invalid --warm-start {}: {rule}", dir.display())
        }
        e => anyhow::Error::new(e),
    }
}

/// Runs `memfit gmm`.
pub fn run(args: &GmmArgs) -> Result<()> {
    let started = Instant::now();
    anyhow::ensure!(
        args.plot.is_none() || args.max_iter > 0,
        "--plot draws the lower bound of each EM iteration, and --max-iter 0 runs none; hint: drop --plot or give \
         --max-iter of at least 1"
    );
    let mut paths: Vec<(&'static str, &Path)> = Vec::new();
    for (role, out) in [("--labels", &args.labels), ("--summary", &args.summary), ("--plot", &args.plot)] {
        // `--summary -` prints to stdout; any other output needs a file.
        if let Some(out) = out.as_deref().filter(|p| !(role == "--summary" && *p == Path::new("-"))) {
            check_output(out)?;
            paths.push((role, out));
        }
    }
    if let Some(dir) = &args.model {
        if dir == Path::new("-") {
            anyhow::bail!(
                "-: write model failed: a model folder cannot go to stdout; hint: name a folder such as ./model"
            );
        }
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
    // The --model folder is replaced (no input may lie inside it); the
    // --warm-start folder is read.
    let mut folders: Vec<(&'static str, &Path, bool)> = Vec::new();
    if let Some(dir) = &args.model {
        folders.push(("--model", dir, true));
    }
    if let Some(dir) = &args.warm_start {
        folders.push(("--warm-start", dir, false));
    }
    check_outputs_distinct(&paths, &inputs, &folders)?;
    let run = args.common.run_options()?;
    let target = args.device.target()?;
    let x = open_data(&args.input, "fit", None)?;
    let weights = args.sample_weight.as_deref().map(|p| open_weights("--sample-weight", p)).transpose()?;
    // Checked before the plan: a dry run refuses them as the run does.
    x.check_weights(weights.as_ref())?;
    let covariance_type = CovarianceType::parse(&args.covariance_type)?;
    let init_params = InitMethod::parse(&args.init)?;
    let params = GmmParams {
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
            .transpose()
            .context("--precisions-init")?,
        random_state: args.seed,
        lower_bound_init: None,
    };
    let mut job = GmmJob {
        params,
        x: &x,
        sample_weight: weights.as_ref(),
        compute: args.common.compute_dtype(&x),
        n_outputs: usize::from(args.labels.is_some()),
        extra: Vec::new(),
        run: memfit::exec::RunOptions { scratch_dir: args.scratch_dir.clone(), ..run },
    };
    let mut warnings = Vec::new();
    if let Some(dir) = &args.warm_start {
        let context = || format!("--warm-start {}", dir.display());
        let model = load_model(dir).map_err(|e| from_warm_start(e, dir))?;
        let warned = job.warm_start(model).with_context(context)?;
        print_warnings(warned.as_slice());
        warnings.extend(warned);
    }
    let (n, k, d) = (x.n_samples(), args.n_components, x.n_features());
    let shape = (n, d, job.compute.bytes(), job.sample_weight.is_some());
    let (params, stats) = memfit::device::plan::gmm_values_per_component(covariance_type, d);
    let device = crate::device_plan(target, shape, |j| memfit::device::plan::plan_gmm_device(k, params, stats, j))?;
    job.run.backend = crate::backend_of(device.as_ref())?;
    let mut plan = job.plan()?;
    let outputs = [
        ("--labels", args.labels.as_deref(), npy_file_bytes(Dtype::I32, &[n])),
        ("--model", args.model.as_deref(), model_dir_bytes(covariance_type, k, d)),
        ("--summary", args.summary.as_deref(), crate::SMALL_FILE_BYTES),
        ("--plot", args.plot.as_deref(), plot::PNG_BYTES),
    ];
    let go = crate::ready(&mut plan, &outputs, args.dry_run)?;
    if !crate::device_ready(device.as_ref(), go)? {
        return Ok(());
    }
    fit_and_write(args, &job, &plan, warnings, started)
}

/// Opens `--precisions-init`, checking its shape against scikit-learn's for
/// the covariance type.
fn open_precisions(path: &Path, t: CovarianceType, k: usize, d: usize) -> memfit::Result<PrecisionsInit<'static>> {
    let want = t.param_shape(k, d);
    let (src, shape) = Source::open_stacked(path, want.len())?;
    if shape != want {
        return Err(memfit::Error::ShapeMismatch {
            // The caller's context names the option.
            what: path.display().to_string(),
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
fn read_matrix_init(path: &Path, n_features: usize) -> Result<Vec<f64>> {
    let (values, _, d) = crate::inputs::matrix_arg(
        "--means-init",
        path,
        "give --means-init of shape (n_components, n_features); for one component use m.reshape(1, -1)",
        true,
    )?;
    if d != n_features {
        return Err(memfit::Error::ShapeMismatch {
            what: format!("--means-init {}", path.display()),
            expected: vec![values.len() / d.max(1), n_features],
            found: vec![values.len() / d.max(1), d],
            hint: "give one column per feature of the data",
        }
        .into());
    }
    Ok(values)
}

fn fit_and_write(
    args: &GmmArgs,
    job: &GmmJob<'_>,
    plan: &Plan,
    mut warnings: Vec<Warning>,
    started: Instant,
) -> Result<()> {
    let n = job.x.n_samples();
    let mut labels_file = args.labels.as_ref().map(|p| NpyWriter::create(p, Dtype::I32, &[n])).transpose()?;
    let mut write_labels =
        |labels: &[u32]| labels_file.as_mut().map_or(Ok(()), |f| f.write_with(labels, crate::put_label));
    let mut outputs = Outputs::default();
    if args.labels.is_some() {
        outputs.labels = Some(&mut write_labels);
    }
    let mut bar = Bar::new(args.common.quiet);
    let model = job.fit(plan, &mut outputs, &mut bar);
    bar.finish();
    // A warm start's factors are read during the fit.
    let model = match &args.warm_start {
        Some(dir) => model.map_err(|e| from_warm_start(e, dir))?,
        None => model?,
    };
    print_warnings(&model.warnings);
    warnings.extend(model.warnings.iter().cloned());
    let t = Instant::now();
    // The plot first: it can fail on the fit's values, the others only on
    // the file system.
    if let Some(p) = &args.plot {
        let title = format!(
            "Gaussian mixture ({}, {} component{}): lower bound per EM iteration",
            model.covariance_type.name(),
            model.n_components,
            if model.n_components == 1 { "" } else { "s" }
        );
        plot::lower_bound_png(p, &model.lower_bounds, &title)?;
    }
    if let Some(f) = labels_file {
        f.commit()?;
    }
    if let Some(dir) = &args.model {
        let extra = serde_json::json!({
            "reg_covar": job.params.reg_covar,
            "compute_dtype": job.compute.dtype().name(),
            "input": job.x.name().to_string_lossy(),
        });
        save_model(dir, &model, extra, false)?;
    }
    let write_secs = t.elapsed().as_secs_f64();
    let peak = memfit::memory::peak_rss_bytes();
    let summary = summary_json(args, job, &model, &warnings, plan, write_secs, started.elapsed().as_secs_f64(), peak);
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
    crate::emit_summary(args.summary.as_deref(), &summary, &line)?;
    let saved = args.model.is_some() || args.labels.is_some() || args.summary.is_some() || args.plot.is_some();
    crate::note_nothing_saved(saved, "--model, --labels, --summary or --plot");
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn summary_json(
    args: &GmmArgs,
    job: &GmmJob<'_>,
    m: &GmmFit,
    warnings: &[Warning],
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
        "input": job.x.name().to_string_lossy(),
        "input_dtype": job.x.dtype().name(),
        "compute_dtype": job.compute.dtype().name(),
        "init": args.init,
        "n_init": m.lower_bound_per_init.len(),
        "best_init": m.best_init,
        "lower_bound_per_init": m.lower_bound_per_init,
        "reg_covar": args.reg_covar,
        "tol": args.tol,
        "seed": args.seed,
        "warnings": warning_lines(warnings),
    })
}
