//! `memfit quadratic-form` and `memfit scatter`: the blocked linear-algebra
//! kernels on .npy files, within the memory limit.

use std::time::Instant;

use anyhow::Result;
use memfit::io::{check_output_path, check_outputs_distinct, read_matrix_f64, write_npy, Dtype, NpyWriter, Source};
use memfit::linalg::{plan_row_quadratic_form, plan_weighted_scatter, row_quadratic_form, weighted_scatter};

use crate::args::{ComputeDtype, QuadraticFormArgs, ScatterArgs};
use crate::inputs::{inexact_warnings, open_weights, print_warnings};
use crate::kmeans_cmd::bytes_of;
use crate::memory_limit;
use crate::progress::interrupted;

fn put_f64(v: f64, out: &mut Vec<u8>) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Runs `memfit quadratic-form`: q is streamed to `--out` block by block.
pub fn quadratic_form(args: &QuadraticFormArgs) -> Result<()> {
    let started = Instant::now();
    check_output_path(&args.out)?;
    check_outputs_distinct(&[("--out", &args.out)], &[("INPUT", &args.input), ("--q", &args.q)], &[])?;
    let limit = memory_limit(args.common.memory_limit.as_deref())?;
    let x = Source::open_matrix(&args.input)?;
    let (q, qr, qc) = read_matrix_f64(&args.q)?;
    if (qr, qc) != (x.n_features(), x.n_features()) {
        anyhow::bail!(
            "--q {} has shape ({qr}, {qc}) but {} has {} features; hint: Q must be (n_features, n_features)",
            args.q.display(),
            args.input.display(),
            x.n_features()
        );
    }
    let compute = args.common.compute_dtype(x.dtype());
    let plan = plan_row_quadratic_form(&x, bytes_of(compute), limit)?;
    if args.dry_run {
        println!("{plan}");
        return Ok(());
    }
    let mut out = NpyWriter::create(&args.out, Dtype::F64, &[x.n_samples()])?;
    let mut sink = |block: &[f64]| out.write_with(block, put_f64);
    let computed = match compute {
        ComputeDtype::Float32 => {
            row_quadratic_form::<f32>(&x, &q, &plan, &mut sink, &interrupted)?;
            Dtype::F32
        }
        ComputeDtype::Float64 => {
            row_quadratic_form::<f64>(&x, &q, &plan, &mut sink, &interrupted)?;
            Dtype::F64
        }
    };
    out.commit()?;
    print_warnings(&inexact_warnings(&x, computed, None));
    println!(
        "quadratic-form: n_samples={} n_features={} seconds={:.3} peak_rss={} out={}",
        x.n_samples(),
        x.n_features(),
        started.elapsed().as_secs_f64(),
        memfit::memory::peak_rss_bytes().map_or("unknown".into(), memfit::plan::format_bytes),
        args.out.display()
    );
    Ok(())
}

/// Runs `memfit scatter`.
pub fn scatter(args: &ScatterArgs) -> Result<()> {
    let started = Instant::now();
    check_output_path(&args.out)?;
    let mut inputs = vec![("INPUT", args.input.as_path())];
    if let Some(w) = &args.weights {
        inputs.push(("--weights", w.as_path()));
    }
    check_outputs_distinct(&[("--out", &args.out)], &inputs, &[])?;
    let limit = memory_limit(args.common.memory_limit.as_deref())?;
    let x = Source::open_matrix(&args.input)?;
    let w = args.weights.as_deref().map(|p| open_weights("--weights", p)).transpose()?;
    let plan = plan_weighted_scatter(&x, w.as_ref(), limit)?;
    if args.dry_run {
        println!("{plan}");
        return Ok(());
    }
    let s = weighted_scatter(&x, w.as_ref(), &plan, &interrupted)?;
    let d = x.n_features();
    write_npy(&args.out, Dtype::F64, &[d, d], &s, put_f64)?;
    print_warnings(&inexact_warnings(&x, Dtype::F64, w.as_ref()));
    println!(
        "scatter: n_samples={} n_features={d} seconds={:.3} peak_rss={} out={}",
        x.n_samples(),
        started.elapsed().as_secs_f64(),
        memfit::memory::peak_rss_bytes().map_or("unknown".into(), memfit::plan::format_bytes),
        args.out.display()
    );
    Ok(())
}
