//! `memfit predict`: stream nearest-centre labels for new data.

use std::time::Instant;

use anyhow::Result;
use memfit::cluster::{plan_predict, predict};
use memfit::io::{check_output_path, check_outputs_distinct, read_matrix_f64, Dtype, NpyWriter, Source};
use memfit::Real;

use crate::args::{ComputeDtype, PredictArgs};
use crate::inputs::{inexact_warnings, open_data, print_warnings};
use crate::kmeans_cmd::bytes_of;
use crate::memory_limit;
use crate::progress::Bar;

/// Runs `memfit predict`.
pub fn run(args: &PredictArgs) -> Result<()> {
    let started = Instant::now();
    check_output_path(&args.labels)?;
    check_outputs_distinct(
        &[("--labels", &args.labels)],
        &[("INPUT", &args.input), ("--centers", &args.centers)],
        &[],
    )?;
    let limit = memory_limit(args.common.memory_limit.as_deref())?;
    let x = open_data(&args.input, "predict")?;
    let (centers, k, d) = read_matrix_f64(&args.centers)?;
    if d != x.n_features() {
        anyhow::bail!(
            "{} has {d} features but {} has {}; hint: predict with centres fitted on data of the same width",
            args.centers.display(),
            args.input.display(),
            x.n_features()
        );
    }
    let compute = args.common.compute_dtype(x.dtype());
    let plan = plan_predict(&x, k, bytes_of(compute), true, limit)?;
    if args.dry_run {
        println!("{plan}");
        return Ok(());
    }
    let inertia = match compute {
        ComputeDtype::Float32 => stream::<f32>(args, &x, &centers, k, &plan)?,
        ComputeDtype::Float64 => stream::<f64>(args, &x, &centers, k, &plan)?,
    };
    println!(
        "predict: n_samples={} n_clusters={k} inertia={inertia:.10e} seconds={:.3} labels={}",
        x.n_samples(),
        started.elapsed().as_secs_f64(),
        args.labels.display()
    );
    Ok(())
}

fn stream<T: Real>(
    args: &PredictArgs,
    x: &Source<'_>,
    centers: &[f64],
    k: usize,
    plan: &memfit::plan::Plan,
) -> Result<f64> {
    let mut out = NpyWriter::create(&args.labels, Dtype::I32, &[x.n_samples()])?;
    let mut sink = |labels: &[u32], _: &[f64]| out.write_with(labels, crate::put_label);
    let bar = Bar::new(args.common.quiet);
    let inertia = predict::<T>(x, centers, k, plan, &mut sink, &bar);
    bar.finish();
    let inertia = inertia?;
    out.commit()?;
    print_warnings(&inexact_warnings(x, T::DTYPE, None));
    Ok(inertia)
}
