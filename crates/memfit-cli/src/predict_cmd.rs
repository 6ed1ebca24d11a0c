//! `memfit predict`: stream nearest-centre labels for new data.

use std::time::Instant;

use anyhow::Result;
use memfit::estimator::CentersJob;
use memfit::io::{check_outputs_distinct, npy_file_bytes, Dtype, NpyWriter};

use crate::args::{KmeansMetric, PredictArgs};
use crate::inputs::{check_output, input_folder, matrix_arg, open_data, CENTERS_HINT};
use crate::progress::Bar;
use crate::render::{about_input, print_warnings};

/// Runs `memfit predict`.
pub fn run(args: &PredictArgs) -> Result<()> {
    let started = Instant::now();
    check_output(&args.labels)?;
    check_outputs_distinct(
        &[("--labels", &args.labels)],
        &[("INPUT", &args.input), ("--centers", &args.centers)],
        input_folder(&args.input).as_slice(),
    )?;
    if let Some(dir) = &args.scratch_dir {
        memfit::io::ScratchFile::check_dir(dir)?;
    }
    let run = memfit::exec::RunOptions { scratch_dir: args.scratch_dir.clone(), ..args.common.run_options()? };
    let target = args.device.target()?;
    let x = open_data(&args.input, "predict", Some(&run.scratch_dir()))?.unit_rows(args.metric == KmeansMetric::Cosine);
    // The centres' shape from their header: the plan (which holds them) is
    // checked before they are read.
    let (_, k, centers_d) = matrix_arg("--centers", &args.centers, CENTERS_HINT, false)?;
    let centers_dtype = memfit::io::Source::open_matrix(&args.centers)?.dtype();
    let mut job = CentersJob {
        x: &x,
        centers: &[],
        n_clusters: k,
        sample_weight: None,
        compute: args.common.assign_dtype(&x, centers_dtype),
        labels_file: true,
        run,
    };
    let shape = (x.n_samples(), x.n_features(), job.compute.bytes(), false);
    let device = crate::device_plan(target, shape, |j| memfit::device::plan::plan_kmeans_device(k, j))?;
    job.run.backend = crate::backend_of(device.as_ref())?;
    let mut plan = about_input(job.plan_assign_unread(centers_d), || format!("--centers {}", args.centers.display()))?;
    let labels_bytes = npy_file_bytes(Dtype::I32, &[x.n_samples()]);
    let go = crate::ready(&mut plan, &[("--labels", Some(&args.labels), labels_bytes)], args.dry_run)?;
    if !crate::device_ready(device.as_ref(), go)? {
        return Ok(());
    }
    let (centers, _, _) = matrix_arg("--centers", &args.centers, CENTERS_HINT, true)?;
    let job = CentersJob { centers: &centers, ..job };
    let mut out = NpyWriter::create(&args.labels, Dtype::I32, &[x.n_samples()])?;
    let mut sink = |labels: &[u32], _: &[f64]| out.write_with(labels, crate::put_label);
    let bar = Bar::new(args.common.quiet);
    let done = job.assign(&plan, &mut sink, &bar);
    bar.finish();
    let done = done?;
    out.commit()?;
    print_warnings(&done.warnings);
    say!(
        "predict: n_samples={} n_clusters={k} inertia={:.10e} seconds={:.3} labels={}",
        x.n_samples(),
        done.value.inertia,
        started.elapsed().as_secs_f64(),
        args.labels.display()
    )?;
    Ok(())
}
