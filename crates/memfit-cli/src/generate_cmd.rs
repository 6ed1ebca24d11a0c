//! `memfit generate blobs`.

use anyhow::Result;
use memfit::generate::Blobs;
use memfit::io::check_outputs_distinct;

use crate::args::{BlobsArgs, ComputeDtype};
use crate::inputs::check_output;
use crate::memory_limit;
use crate::progress::cancel_token;

/// Runs `memfit generate blobs`, holding at most the memory limit of rows.
pub fn blobs(args: &BlobsArgs) -> Result<()> {
    check_output(&args.out)?;
    if let Some(l) = &args.labels {
        check_output(l)?;
        check_outputs_distinct(&[("--out", &args.out), ("--labels", l)], &[], &[])?;
    }
    let limit = memory_limit(args.memory_limit.as_deref())?;
    let blobs = Blobs {
        n_samples: args.n_samples,
        n_features: args.n_features,
        centers: args.centers,
        cluster_std: args.cluster_std,
        seed: args.seed,
        ..Blobs::default()
    };
    blobs.validate()?;
    // The blob centres and the writer buffers (2 × 256 KiB per file) are
    // held throughout; the block holds values and labels.
    // Saturating: sizes beyond u64 are refused below, never wrapped.
    let fixed = (args.centers as u64).saturating_mul(args.n_features as u64).saturating_mul(8).saturating_add(1 << 20);
    let compute = memfit::estimator::ComputeDtype::from(args.dtype);
    let per_row = (args.n_features as u64).saturating_mul(compute.bytes() as u64).saturating_add(4);
    // The smallest block: a seed chunk of rows (whose values do not depend
    // on the blocks), or every row when there are fewer.
    let min_rows = (memfit::generate::SEED_CHUNK_ROWS as u64).min(args.n_samples.max(1) as u64);
    let need = fixed.saturating_add(per_row.saturating_mul(min_rows));
    if need > limit {
        anyhow::bail!(
            "the job needs at least {need} bytes ({}) but the memory limit is {limit} bytes ({}): {} centres × {} features and the writers' buffers ({}), and a block of {min_rows} rows × {per_row} B; hint: raise --memory-limit to at least {need} bytes",
            memfit::plan::format_bytes_up(need),
            memfit::plan::format_bytes_down(limit),
            args.centers,
            args.n_features,
            memfit::plan::format_bytes(fixed),
        );
    }
    let room = limit - fixed;
    let block_rows = (room / per_row).clamp(1, 1 << 20) as usize;
    match args.dtype {
        ComputeDtype::Float32 => {
            blobs.write_npy::<f32>(&args.out, args.labels.as_deref(), block_rows, &cancel_token())?
        }
        ComputeDtype::Float64 => {
            blobs.write_npy::<f64>(&args.out, args.labels.as_deref(), block_rows, &cancel_token())?
        }
    }
    say!("wrote {} ({} × {} {})", args.out.display(), args.n_samples, args.n_features, compute.dtype().name())?;
    Ok(())
}
