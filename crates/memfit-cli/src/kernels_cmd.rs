//! `memfit quadratic-form` and `memfit scatter`: the blocked linear-algebra
//! kernels on .npy files, within the memory limit.

use std::time::Instant;

use anyhow::Result;
use memfit::estimator::{QuadraticFormJob, ScatterJob};
use memfit::io::{check_outputs_distinct, npy_file_bytes, write_npy, Dtype, NpyWriter};

use crate::args::{QuadraticFormArgs, ScatterArgs};
use crate::inputs::{check_output, open_data, open_weights};
use crate::progress::Stop;
use crate::render::{about_input, print_warnings};

fn put_f64(v: f64, out: &mut Vec<u8>) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Runs `memfit quadratic-form`: q is streamed to `--out` block by block.
pub fn quadratic_form(args: &QuadraticFormArgs) -> Result<()> {
    let started = Instant::now();
    check_output(&args.out)?;
    check_outputs_distinct(&[("--out", &args.out)], &[("INPUT", &args.input), ("--q", &args.q)], &[])?;
    let run = args.common.run_options()?;
    let x = open_data(&args.input, "compute", None)?;
    // Q's shape from its header: the plan (which holds Q) is checked before Q is read.
    let q_shape = {
        let (_, rows, cols) = crate::inputs::matrix_arg("--q", &args.q, crate::inputs::Q_HINT, false)?;
        [rows, cols]
    };
    let compute = args.common.compute_dtype(&x);
    let job = QuadraticFormJob { x: &x, q: &[], q_shape, q_read: true, compute, n_outputs: 1, run };
    let mut plan = about_input(job.plan(), || format!("--q {}", args.q.display()))?;
    let out_bytes = npy_file_bytes(Dtype::F64, &[x.n_samples()]);
    if !crate::ready(&mut plan, &[("--out", Some(&args.out), out_bytes)], args.dry_run)? {
        return Ok(());
    }
    let (q, _, _) = crate::inputs::matrix_arg("--q", &args.q, crate::inputs::Q_HINT, true)?;
    let job = QuadraticFormJob { q: &q, ..job };
    let mut out = NpyWriter::create(&args.out, Dtype::F64, &[x.n_samples()])?;
    let done = job.run(&plan, &mut |block: &[f64]| out.write_with(block, put_f64), &Stop)?;
    out.commit()?;
    print_warnings(&done.warnings);
    say!(
        "quadratic-form: n_samples={} n_features={} seconds={:.3} peak_rss={} out={}",
        x.n_samples(),
        x.n_features(),
        started.elapsed().as_secs_f64(),
        memfit::memory::peak_rss_bytes().map_or("unknown".into(), memfit::plan::format_bytes),
        args.out.display()
    )?;
    Ok(())
}

/// Runs `memfit scatter`.
pub fn scatter(args: &ScatterArgs) -> Result<()> {
    let started = Instant::now();
    if args.common.dtype == Some(crate::args::ComputeDtype::Float32) {
        anyhow::bail!(
            "--dtype float32: the scatter matrix is always computed in float64 (its sums of products); hint: leave --dtype out"
        );
    }
    check_output(&args.out)?;
    let mut inputs = vec![("INPUT", args.input.as_path())];
    if let Some(w) = &args.weights {
        inputs.push(("--weights", w.as_path()));
    }
    check_outputs_distinct(&[("--out", &args.out)], &inputs, &[])?;
    let run = args.common.run_options()?;
    let x = open_data(&args.input, "compute", None)?;
    let w = args.weights.as_deref().map(|p| open_weights("--weights", p)).transpose()?;
    let job = ScatterJob { x: &x, weights: w.as_ref(), run };
    // The only shape the plan checks is that of the weights.
    let mut plan = job.plan().map_err(|e| match (&e, &args.weights) {
        (memfit::Error::ShapeMismatch { .. }, Some(path)) => {
            anyhow::Error::new(e).context(format!("--weights {}", path.display()))
        }
        _ => e.into(),
    })?;
    let d = x.n_features();
    if !crate::ready(&mut plan, &[("--out", Some(&args.out), npy_file_bytes(Dtype::F64, &[d, d]))], args.dry_run)? {
        return Ok(());
    }
    let done = job.run(&plan, &Stop)?;
    write_npy(&args.out, Dtype::F64, &[d, d], &done.value, put_f64)?;
    print_warnings(&done.warnings);
    say!(
        "scatter: n_samples={} n_features={d} seconds={:.3} peak_rss={} out={}",
        x.n_samples(),
        started.elapsed().as_secs_f64(),
        memfit::memory::peak_rss_bytes().map_or("unknown".into(), memfit::plan::format_bytes),
        args.out.display()
    )?;
    Ok(())
}
