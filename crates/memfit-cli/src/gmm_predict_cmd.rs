//! `memfit gmm-predict`: stream labels, component probabilities and
//! per-sample log-likelihoods of new data under a saved mixture.

use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use memfit::estimator::{GmmPredictJob, GmmScore};
use memfit::io::{check_outputs_distinct, npy_file_bytes, Dtype, NpyWriter, PositionedNpy};
use memfit::mixture::{load_model, Outputs};
use memfit::plan::Plan;

use crate::args::GmmPredictArgs;
use crate::inputs::{check_output, open_data};
use crate::progress::Bar;
use crate::render::print_warnings;

/// The compute dtype `memfit gmm` recorded in the model folder `dir`
/// (`model.json`'s `compute_dtype`), if any.
fn fitted_dtype(dir: &Path) -> Result<Option<memfit::estimator::ComputeDtype>> {
    let Some(json) = std::fs::read_to_string(dir.join(memfit::mixture::MODEL_JSON))
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
    else {
        // load_model says what is wrong with the file.
        return Ok(None);
    };
    Ok(match json.get("compute_dtype") {
        None => None,
        Some(v) if v == "float32" => Some(memfit::estimator::ComputeDtype::Float32),
        Some(v) if v == "float64" => Some(memfit::estimator::ComputeDtype::Float64),
        Some(v) => bail!(
            "--model {}: model.json's compute_dtype is {v}, not \"float32\" or \"float64\"; hint: give a model folder written by memfit",
            dir.display()
        ),
    })
}

/// Runs `memfit gmm-predict`.
pub fn run(args: &GmmPredictArgs) -> Result<()> {
    let started = Instant::now();
    let outputs = [("--labels", &args.labels), ("--proba", &args.proba), ("--log-likelihood", &args.log_likelihood)];
    let mut paths: Vec<(&'static str, &Path)> = Vec::new();
    for (role, out) in outputs {
        if let Some(p) = out {
            check_output(p)?;
            paths.push((role, p));
        }
    }
    if paths.is_empty() && !args.dry_run {
        bail!("nothing to write; hint: give --labels, --proba and/or --log-likelihood");
    }
    check_outputs_distinct(&paths, &[("INPUT", &args.input)], &[("--model", &args.model, false)])?;
    let run = args.common.run_options()?;
    let target = args.device.target()?;
    let x = open_data(&args.input, "predict", None)?;
    let model = load_model(&args.model)?;
    let mut job = GmmPredictJob {
        model: &model,
        x: &x,
        compute: match args.common.dtype {
            Some(d) => d.into(),
            // The dtype the model was fitted in, so that new rows are scored
            // as the fit scored its own (its labels again on its data).
            None => fitted_dtype(&args.model)?.unwrap_or_else(|| args.common.compute_dtype(&x)),
        },
        // Probabilities go by positioned writes from the planned block.
        n_outputs: usize::from(args.labels.is_some()) + usize::from(args.log_likelihood.is_some()),
        run,
    };
    let (n, k) = (x.n_samples(), model.n_components());
    let (d, t) = (x.n_features(), model.covariance_type);
    let (params, stats) = memfit::device::plan::gmm_values_per_component(t, d);
    let shape = (n, d, job.compute.bytes(), false);
    let device = crate::device_plan(target, shape, |j| memfit::device::plan::plan_gmm_device(k, params, stats, j))?;
    job.run.backend = crate::backend_of(device.as_ref())?;
    let mut plan = job.plan().with_context(|| format!("--model {}", args.model.display()))?;
    let outputs = [
        ("--labels", args.labels.as_deref(), npy_file_bytes(Dtype::I32, &[n])),
        ("--proba", args.proba.as_deref(), npy_file_bytes(Dtype::F64, &[n, k])),
        ("--log-likelihood", args.log_likelihood.as_deref(), npy_file_bytes(Dtype::F64, &[n])),
    ];
    let go = crate::ready(&mut plan, &outputs, args.dry_run)?;
    if !crate::device_ready(device.as_ref(), go)? {
        return Ok(());
    }
    let score = stream(args, &job, &plan)?.score;
    if score == f64::NEG_INFINITY {
        // Finite rows (non-finite ones are refused) far from every component.
        note!(
            "memfit: warning: some rows have zero density under every component: their log-likelihood is -inf, their probabilities NaN and their label 0 (as scikit-learn's); hint: such rows lie far outside the fitted mixture"
        );
    }
    say!(
        "gmm-predict: n_samples={} n_components={} score={score:.10e} seconds={:.3}",
        x.n_samples(),
        model.n_components(),
        started.elapsed().as_secs_f64()
    )?;
    Ok(())
}

fn stream(args: &GmmPredictArgs, job: &GmmPredictJob<'_>, plan: &Plan) -> Result<GmmScore> {
    let (n, k) = (job.x.n_samples(), job.model.n_components());
    let create = |p: &Option<std::path::PathBuf>, shape: &[usize], dtype| {
        p.as_ref().map(|p| NpyWriter::create(p, dtype, shape)).transpose()
    };
    let mut labels = create(&args.labels, &[n], Dtype::I32)?;
    // Probabilities by positioned writes: a mixture fitted in component
    // groups sends each group's columns in turn.
    let proba = args.proba.as_ref().map(|p| PositionedNpy::create(p, Dtype::F64, &[n, k], true)).transpose()?;
    let mut loglik = create(&args.log_likelihood, &[n], Dtype::F64)?;
    let f64_le = |v: f64, o: &mut Vec<u8>| o.extend_from_slice(&v.to_le_bytes());
    let mut put_labels =
        |l: &[u32]| -> memfit::Result<()> { labels.as_mut().map_or(Ok(()), |w| w.write_with(l, crate::put_label)) };
    let mut put_proba = |row: usize, first: usize, g: usize, p: &[f64]| -> memfit::Result<()> {
        let Some(w) = proba.as_ref() else { return Ok(()) };
        // One write for the whole block when every column is here.
        let run = if g == k { p.len() } else { g };
        for (i, r) in p.chunks_exact(run).enumerate() {
            w.write_f64_at(((row + i) * k + first) as u64, r)?;
        }
        Ok(())
    };
    let mut put_loglik =
        |p: &[f64]| -> memfit::Result<()> { loglik.as_mut().map_or(Ok(()), |w| w.write_with(p, f64_le)) };
    let mut outputs = Outputs::default();
    if args.labels.is_some() {
        outputs.labels = Some(&mut put_labels);
    }
    if args.proba.is_some() {
        outputs.proba = Some(&mut put_proba);
    }
    if args.log_likelihood.is_some() {
        outputs.log_likelihood = Some(&mut put_loglik);
    }
    let mut bar = Bar::new(args.common.quiet);
    let done = job.predict(plan, &mut outputs, &mut bar);
    bar.finish();
    let done = done?;
    for w in [labels, loglik].into_iter().flatten() {
        w.commit()?;
    }
    if let Some(w) = proba {
        w.commit()?;
    }
    print_warnings(&done.warnings);
    Ok(done.value)
}
