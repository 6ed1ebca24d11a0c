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
    let fixed = (args.centers as u64).saturating_mul(args.n_features as u64).saturating_mul(8) + (1 << 20);
    let per_row = (args.n_features * memfit::estimator::ComputeDtype::from(args.dtype).bytes() + 4) as u64;
    if fixed.saturating_add(per_row) > limit {
        anyhow::bail!(
            "{} centres × {} features need {} but the memory limit is {}; hint: raise --memory-limit or use fewer centres or features",
            args.centers,
            args.n_features,
            memfit::plan::format_bytes(fixed),
            memfit::plan::format_bytes(limit)
        );
    }
    let room = limit - fixed;
    let block_rows = (room / per_row).clamp(1, 1 << 20) as usize;
    if (block_rows as u64) < memfit::generate::SEED_CHUNK_ROWS as u64 && args.n_samples > block_rows {
        let need = fixed + per_row * memfit::generate::SEED_CHUNK_ROWS as u64;
        anyhow::bail!(
            "the memory limit is too small to generate in blocks of {} rows; hint: raise --memory-limit to at least {need} bytes",
            memfit::generate::SEED_CHUNK_ROWS
        );
    }
    match args.dtype {
        ComputeDtype::Float32 => {
            blobs.write_npy::<f32>(&args.out, args.labels.as_deref(), block_rows, &cancel_token())?
        }
        ComputeDtype::Float64 => {
            blobs.write_npy::<f64>(&args.out, args.labels.as_deref(), block_rows, &cancel_token())?
        }
    }
    say!("wrote {} ({} × {} {:?})", args.out.display(), args.n_samples, args.n_features, args.dtype)?;
    Ok(())
}
