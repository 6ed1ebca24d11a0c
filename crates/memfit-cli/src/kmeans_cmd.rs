//! `memfit kmeans`: validate arguments, plan, fit, write outputs atomically.

use std::ffi::OsStr;
use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Result};
use memfit::cluster::{Init, KMeansFit, KMeansParams, LabelSink, MiniBatchParams};
use memfit::estimator::{parse_init, ComputeDtype, KMeansJob};
use memfit::generate::Blobs;
use memfit::io::{check_outputs_distinct, npy_file_bytes, write_matrix, ArrayRef, Dtype, NpyWriter, Source, Values};
use memfit::plan::Plan;

use crate::args::{KmeansArgs, KmeansMetric};
use crate::inputs::{check_output, input_folder, open_data, open_weights};
use crate::plot;
use crate::progress::Bar;
use crate::render::{print_warnings, warning_lines};

/// Rows of the plot sample: up to 20,000, within 8 MiB of values.
fn plot_rows(n_features: usize) -> usize {
    ((8 << 20) / (n_features * 8 + 4)).clamp(500, 20_000)
}

/// The built-in default input: 2,000,000 × 3 Gaussian blobs around 200
/// centres, the same data as `memfit generate blobs --n-samples 2000000
/// --n-features 3 --centers 200 --seed 42`.
pub fn default_blobs() -> Blobs {
    Blobs { n_samples: 2_000_000, n_features: 3, centers: 200, seed: 42, ..Blobs::default() }
}

/// `--init` when it names a file of initial centres (anything but
/// `k-means++` and `random`; a path may be any bytes).
fn init_file(init: &OsStr) -> Option<&Path> {
    (init != "k-means++" && init != "random").then(|| Path::new(init))
}

/// `--init`: k-means++, random, or a `.npy` file of initial centres, of
/// which only the header is read here (their values are read once the plan
/// fits: [`read_init_values`]).
fn parse_init_arg(init: &OsStr) -> Result<Init> {
    Ok(match init_file(init) {
        None => parse_init(&init.to_string_lossy(), None)?,
        Some(path) if path.extension().is_some_and(|e| e == "npy") || path.exists() => {
            let (_, k, d) = crate::inputs::matrix_arg("--init", path, crate::inputs::CENTERS_HINT, false)?;
            parse_init("file", Some((Vec::new(), k, d)))?
        }
        Some(other) => {
            bail!("invalid --init {:?}: expected k-means++, random or a .npy file of initial centres", other.display())
        }
    })
}

/// Runs `memfit kmeans`.
pub fn run(args: &KmeansArgs) -> Result<()> {
    let started = Instant::now();
    let outputs = [
        ("--labels", &args.labels),
        ("--centers", &args.centers),
        ("--summary", &args.summary),
        ("--plot", &args.plot),
    ];
    if let Some(p) = args.plot.as_deref().filter(|p| !p.extension().is_some_and(|e| e.eq_ignore_ascii_case("png"))) {
        bail!("--plot {}: the plot is a PNG image; hint: name a .png file", p.display());
    }
    let mut paths: Vec<(&'static str, &Path)> = Vec::new();
    for (role, out) in outputs {
        // `--summary -` prints to stdout; any other output needs a file.
        if let Some(out) = out.as_deref().filter(|p| !(role == "--summary" && *p == Path::new("-"))) {
            check_output(out)?;
            paths.push((role, out));
        }
    }
    let mut inputs: Vec<(&'static str, &Path)> = Vec::new();
    let init_path = init_file(&args.init);
    for (role, input) in
        [("INPUT", args.input.as_deref()), ("--sample-weight", args.sample_weight.as_deref()), ("--init", init_path)]
    {
        if let Some(p) = input {
            inputs.push((role, p));
        }
    }
    let folder = args.input.as_deref().and_then(input_folder);
    check_outputs_distinct(&paths, &inputs, folder.as_slice())?;
    let run = memfit::exec::RunOptions { scratch_dir: args.scratch_dir.clone(), ..args.common.run_options()? };
    let target = args.device.target()?;
    let default_data: Vec<f64>;
    let (x, n_clusters, extra) = match &args.input {
        Some(p) => (open_data(p, "cluster", Some(&run.scratch_dir()))?, args.n_clusters.unwrap_or(8), vec![]),
        None => {
            let blobs = default_blobs();
            note!(
                "no input given: clustering the built-in default, {} × {} Gaussian blobs, n_clusters = {} \
                 (the data of `memfit generate blobs --n-samples {} --n-features {} --centers {} --seed {}`)",
                blobs.n_samples,
                blobs.n_features,
                args.n_clusters.unwrap_or(blobs.centers),
                blobs.n_samples,
                blobs.n_features,
                blobs.centers,
                blobs.seed
            );
            default_data = blobs.to_vec::<f64>();
            let bytes = (default_data.len() * 8) as u64;
            let src = Source::memory(ArrayRef::c_order(Values::F64(&default_data), blobs.n_samples, blobs.n_features)?);
            (src, args.n_clusters.unwrap_or(blobs.centers), vec![("default input (in memory)".to_string(), bytes)])
        }
    };
    let x = x.unit_rows(args.metric == KmeansMetric::Cosine);
    let weights = args.sample_weight.as_deref().map(|p| open_weights("--sample-weight", p)).transpose()?;
    // Checked before the plan: a dry run refuses them as the run does.
    x.check_weights(weights.as_ref())?;
    let params = KMeansParams {
        n_clusters,
        init: parse_init_arg(&args.init)?,
        n_init: args.n_init,
        max_iter: args.max_iter.unwrap_or(if args.mini_batch.is_some() { 100 } else { 300 }),
        tol: args.tol.unwrap_or(if args.mini_batch.is_some() { 0.0 } else { 1e-4 }),
        random_state: args.seed,
        init_sample_rows: None,
        plot_sample_rows: if args.plot.is_some() { plot_rows(x.n_features()) } else { 0 },
        algorithm: args.algorithm.into(),
        metric: args.metric.into(),
        mini_batch: args.mini_batch.map(|batch_size| MiniBatchParams {
            batch_size,
            max_no_improvement: (args.max_no_improvement > 0).then_some(args.max_no_improvement),
            reassignment_ratio: args.reassignment_ratio,
        }),
    };
    let compute = args.common.compute_dtype(&x);
    // Integers (and float16) that float32 holds exactly: float32 passes with
    // the float64 fit's results, as the Python package's fits give.
    let float64_centers = args.common.dtype.is_none()
        && compute == ComputeDtype::Float32
        && x.dtype() != Dtype::F32
        && args.metric == KmeansMetric::Euclidean
        && args.mini_batch.is_none()
        && target.is_none();
    let mut job = KMeansJob {
        params,
        x: &x,
        sample_weight: weights.as_ref(),
        compute,
        float64_centers,
        n_outputs: usize::from(args.labels.is_some()),
        extra,
        run,
    };
    let (n, k, d) = (x.n_samples(), job.params.n_clusters, x.n_features());
    let shape = (n, d, job.compute.bytes(), job.sample_weight.is_some());
    let device = crate::device_plan(target, shape, |j| memfit::device::plan::plan_kmeans_device(k, j))?;
    job.run.backend = crate::backend_of(device.as_ref())?;
    let mut plan = job.plan()?;
    let outputs = [
        ("--labels", args.labels.as_deref(), npy_file_bytes(Dtype::I32, &[n])),
        ("--centers", args.centers.as_deref(), npy_file_bytes(centers_dtype(&job).dtype(), &[k, d])),
        ("--summary", args.summary.as_deref(), crate::SMALL_FILE_BYTES),
        ("--plot", args.plot.as_deref(), plot::PNG_BYTES),
    ];
    let go = crate::ready(&mut plan, &outputs, args.dry_run)?;
    if !crate::device_ready(device.as_ref(), go)? {
        return Ok(());
    }
    read_init_values(&args.init, &mut job.params)?;
    fit_and_write(args, &job, &plan, started)
}

/// The dtype of the fitted centres: float64 where the passes compute in
/// float32 for the float64 fit's results.
fn centers_dtype(job: &KMeansJob<'_>) -> ComputeDtype {
    if job.float64_centers {
        ComputeDtype::Float64
    } else {
        job.compute
    }
}

/// Reads the initial centres of an `--init` file into `params` (the fit
/// checks their values, as it checks every parameter).
fn read_init_values(init: &OsStr, params: &mut KMeansParams) -> Result<()> {
    if let (Some(path), Init::Centers { values, .. }) = (init_file(init), &mut params.init) {
        *values = crate::inputs::matrix_arg("--init", path, crate::inputs::CENTERS_HINT, true)?.0;
    }
    Ok(())
}

fn fit_and_write(args: &KmeansArgs, job: &KMeansJob<'_>, plan: &Plan, started: Instant) -> Result<()> {
    let n = job.x.n_samples();
    let mut labels_file = args.labels.as_ref().map(|p| NpyWriter::create(p, Dtype::I32, &[n])).transpose()?;
    let mut write_labels =
        |labels: &[u32]| labels_file.as_mut().map_or(Ok(()), |f| f.write_with(labels, crate::put_label));
    let mut bar = Bar::new(args.common.quiet);
    let sink: LabelSink<'_> = if args.labels.is_some() { Some(&mut write_labels) } else { None };
    let model = job.fit(plan, sink, &mut bar);
    bar.finish();
    let model = model?;
    print_warnings(&model.warnings);
    let t = Instant::now();
    if let Some(f) = labels_file {
        f.commit()?;
    }
    if let Some(p) = &args.centers {
        let (c, k, d) = (&model.cluster_centers, model.n_clusters, model.n_features);
        match centers_dtype(job) {
            // The centres were computed in float32: the round trip is exact.
            ComputeDtype::Float32 => write_matrix(p, &c.iter().map(|&v| v as f32).collect::<Vec<_>>(), k, d)?,
            ComputeDtype::Float64 => write_matrix(p, c, k, d)?,
        }
    }
    if let (Some(p), Some(sample)) = (&args.plot, &model.plot_sample) {
        plot::scatter_png(
            p,
            &sample.values,
            model.n_features,
            &sample.labels,
            &model.cluster_centers,
            model.n_clusters,
            args.plot_pca,
        )?;
    }
    let write_secs = t.elapsed().as_secs_f64();
    let peak = memfit::memory::peak_rss_bytes();
    let summary = summary_json(args, job, &model, plan, write_secs, started.elapsed().as_secs_f64(), peak);
    let line = format!(
        "kmeans: n_samples={} n_features={} n_clusters={} inertia={:.10e} n_iter={}{} converged={} distances_skipped={:.1}% seconds={:.3} peak_rss={}",
        model.n_samples,
        model.n_features,
        model.n_clusters,
        model.inertia,
        model.n_iter,
        if args.mini_batch.is_some() { format!(" n_steps={}", model.n_steps) } else { String::new() },
        model.converged,
        100.0 * mean_share(&model.skip_share),
        started.elapsed().as_secs_f64(),
        peak.map_or("unknown".into(), memfit::plan::format_bytes),
    );
    crate::emit_summary(args.summary.as_deref(), &summary, &line)?;
    let saved = args.labels.is_some() || args.centers.is_some() || args.summary.is_some() || args.plot.is_some();
    crate::note_nothing_saved(saved, "--labels, --centers, --summary or --plot");
    Ok(())
}

/// The share of all iterations' distances that bounds skipped.
fn mean_share(per_iteration: &[f64]) -> f64 {
    if per_iteration.is_empty() {
        0.0
    } else {
        per_iteration.iter().sum::<f64>() / per_iteration.len() as f64
    }
}

fn summary_json(
    args: &KmeansArgs,
    job: &KMeansJob<'_>,
    m: &KMeansFit<f64>,
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
        "n_clusters": m.n_clusters,
        "inertia": m.inertia,
        "n_iter": m.n_iter,
        "n_steps": m.n_steps,
        "converged": m.converged,
        "algorithm": if args.mini_batch.is_some() { "mini-batch" } else { memfit::cluster::Algorithm::from(args.algorithm).name() },
        "metric": memfit::cluster::Metric::from(args.metric).name(),
        // The size of each batch drawn (scikit-learn's `_batch_size`).
        "batch_size": args.mini_batch.map(|b| b.min(m.n_samples)),
        "skip_share": m.skip_share,
        "mean_skip_share": mean_share(&m.skip_share),
        "timings": timings,
        "peak_rss_bytes": peak,
        "plan": plan,
        "input": job.x.name().to_string_lossy(),
        "input_dtype": job.x.dtype().name(),
        "compute_dtype": job.compute.dtype().name(),
        "init": args.init.to_string_lossy(),
        "n_init": m.inertia_per_init.len(),
        "best_init": m.best_init,
        "inertia_per_init": m.inertia_per_init,
        "n_nonempty_clusters": m.n_nonempty_clusters,
        "tol_abs": m.tol_abs,
        "seed": args.seed,
        "warnings": warning_lines(&m.warnings),
    })
}
