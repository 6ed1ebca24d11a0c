//! The k-means memory plan: which buffers a fit allocates and how many rows
//! each read block holds.

use super::params::{Init, KMeansParams};
use crate::error::{Error, Result};
use crate::io::{Source, WRITE_BUFFER_BYTES};
use crate::kernels::PreparedCenters;
use crate::plan::{format_bytes, Ledger, Plan};

/// Rows per compute tile. Fixed (not derived from the limit or the thread
/// count) so that every row meets the same GEMM shapes whatever the limit.
pub const TILE_ROWS: usize = 256;
/// Most centres per compute tile.
pub const MAX_K_TILE: usize = 512;
/// Largest read block, in bytes of converted values: bigger blocks gain nothing.
pub const MAX_BLOCK_BYTES: u64 = 32 << 20;

/// What a k-means job looks like to the planner.
#[derive(Debug, Clone)]
pub struct KMeansJob {
    /// Rows of the data.
    pub n_samples: usize,
    /// Columns of the data.
    pub n_features: usize,
    /// Bytes per row of read scratch for the data (0 for in-memory data).
    pub x_scratch_per_row: usize,
    /// Bytes per row of read scratch for the weights; `None` without weights.
    pub w_scratch_per_row: Option<usize>,
    /// Bytes per element of the compute type (4 or 8).
    pub compute_bytes: usize,
    /// Worker threads.
    pub threads: usize,
    /// Whether labels are written out.
    pub write_labels: bool,
    /// Other buffers the caller holds for the run (name, bytes), such as an
    /// in-memory input it generated.
    pub extra: Vec<(String, u64)>,
}

impl KMeansJob {
    /// Describes a job over `x` (and optional weights) in compute type of
    /// `compute_bytes` bytes on the current rayon pool.
    pub fn new(x: &Source<'_>, weights: Option<&Source<'_>>, compute_bytes: usize, write_labels: bool) -> Self {
        KMeansJob {
            n_samples: x.n_samples(),
            n_features: x.n_features(),
            x_scratch_per_row: x.scratch_bytes_per_row(),
            w_scratch_per_row: weights.map(Source::scratch_bytes_per_row),
            compute_bytes,
            threads: rayon::current_num_threads(),
            write_labels,
            extra: Vec::new(),
        }
    }
}

/// Builds the plan for `params` on `job`.
///
/// Buffers counted: centres (`f64` current, new sums, best-so-far, and the
/// compute-type copy with norms), per-cluster weights, the farthest-point
/// list used to refill empty clusters, per-thread distance tiles, the init
/// sample (k-means++) or the init rows (random, given centres), the plot
/// sample, the label writer's buffers and, per block row: read scratch,
/// converted values, label, distance and weight.
///
/// # Errors
/// [`Error::DoesNotFit`] when the fixed buffers plus one tile of rows exceed
/// `params.memory_limit_bytes`, with the smallest limit that would work.
pub fn plan_kmeans(params: &KMeansParams, job: &KMeansJob) -> Result<Plan> {
    let (n, d, k) = (job.n_samples as u64, job.n_features as u64, params.n_clusters as u64);
    let c = job.compute_bytes as u64;
    let limit = params.memory_limit_bytes;
    let n_init = params.effective_n_init() as u64;
    let k_tile = params.n_clusters.min(MAX_K_TILE);
    let mut led = Ledger::default();
    led.add("centers (float64)", k * d, 8, format!("{k} × {d} × 8 B"));
    led.add("new center sums (float64)", k * d, 8, format!("{k} × {d} × 8 B"));
    if n_init > 1 {
        led.add("best centers (float64)", k * d, 8, format!("{k} × {d} × 8 B, kept across {n_init} inits"));
    }
    led.add(
        "centers for kernels (compute dtype)",
        PreparedCenters::<f64>::len_for(params.n_clusters, job.n_features) as u64,
        c,
        "values + norms (+ transposed copy for narrow data)".into(),
    );
    led.add("cluster weights", k, 8, format!("{k} × 8 B"));
    led.add(
        "farthest points (empty-cluster refill)",
        job.threads as u64 * k,
        24,
        format!("{} threads × {k} × 24 B", job.threads),
    );
    let tile = PreparedCenters::<f64>::scratch_len(TILE_ROWS, k_tile) as u64;
    led.add(
        "distance tiles (per thread)",
        job.threads as u64 * tile,
        c,
        format!("{} threads × ({TILE_ROWS} × {k_tile} + {TILE_ROWS}) × {c} B", job.threads),
    );
    for (name, bytes) in &job.extra {
        led.add(name, *bytes, 1, "held by the caller".into());
    }
    let plot = params.plot_sample_rows.min(job.n_samples) as u64;
    led.add("plot sample", plot, d * 8 + 4, format!("{plot} rows × ({d} × 8 + 4) B"));
    if job.write_labels {
        led.add("label writer buffers", 2 * WRITE_BUFFER_BYTES as u64, 1, "file buffer + encode buffer".into());
    }
    let w_per_row = job.w_scratch_per_row.map_or(0, |s| s as u64 + 8);
    // label + distance + a share of the per-tile distance sums (8 B per tile, rounded up).
    let per_row = job.x_scratch_per_row as u64 + d * c + 4 + 8 + 1 + w_per_row;
    // The init buffers: k-means++ keeps a sample (values in f64 + weight +
    // closest squared distance per row) that may take up to a quarter of the
    // limit; the other inits hold k rows.
    let kpp = matches!(params.init, Init::KMeansPlusPlus);
    let init_per = if kpp { d * 8 + 16 } else { d * 8 };
    let init_min = k.min(n);
    let what = format!("k-means with n_clusters = {k}, n_features = {d} on {} threads", job.threads);
    check_fits(limit, led.total() + init_min * init_per, per_row, n, &led, &what)?;
    let init_rows = if kpp {
        let wanted = params.init_sample_rows.map_or_else(
            || default_init_sample_rows(job.n_samples, job.n_features, params.n_clusters),
            |s| s.min(job.n_samples),
        ) as u64;
        let spare = limit - led.total() - per_row * (TILE_ROWS as u64).min(n);
        let rows = wanted.min(spare / init_per).max(init_min);
        let note = if rows < wanted {
            format!(" (shrunk from {wanted} to fit the limit: results now depend on the limit)")
        } else {
            String::new()
        };
        led.add("init sample (k-means++)", rows, init_per, format!("{rows} rows × ({d} × 8 + 16) B{note}"));
        rows
    } else {
        led.add("init rows", k, init_per, format!("{k} × {d} × 8 B"));
        0
    };
    let fixed = led.total();
    let rows = pick_block_rows(limit, fixed, per_row, n, d * c);
    let block_rows = rows as usize;
    led.add(
        "read scratch (raw bytes)",
        rows,
        job.x_scratch_per_row as u64,
        format!("{rows} rows × {} B", job.x_scratch_per_row),
    );
    led.add("block values (compute dtype)", rows * d, c, format!("{rows} rows × {d} × {c} B"));
    led.add("block labels", rows, 4, format!("{rows} × 4 B"));
    led.add("block distances", rows, 8, format!("{rows} × 8 B"));
    led.add(
        "per-tile distance sums",
        rows.div_ceil(TILE_ROWS as u64),
        8,
        format!("{} tiles × 8 B", rows.div_ceil(TILE_ROWS as u64)),
    );
    if let Some(ws) = job.w_scratch_per_row {
        led.add("block sample weights", rows, ws as u64 + 8, format!("{rows} × ({ws} + 8) B"));
    }
    let total = led.total();
    let extra_label_pass = u64::from(job.write_labels || plot > 0);
    let max_passes = 1 + n_init * (params.max_iter as u64 + 1) + extra_label_pass;
    Ok(Plan {
        job: "kmeans".into(),
        limit_bytes: limit,
        buffers: led.into_buffers(),
        total_bytes: total,
        block_rows,
        n_blocks: job.n_samples.div_ceil(block_rows),
        tile_rows: TILE_ROWS,
        k_tile,
        threads: job.threads,
        init_sample_rows: init_rows as usize,
        max_passes,
        passes_detail: format!(
            "1 to validate and sample + {n_init} init(s) × ({} iterations + 1 final assignment){}",
            params.max_iter,
            if extra_label_pass > 0 { " + 1 to write labels" } else { "" }
        ),
    })
}

/// The default k-means++ sample: `max(256 × n_clusters, 100_000)` rows, at
/// most 2^22 values (32 MiB as `f64`) but at least `n_clusters` rows, and at
/// most `n_samples`. It depends only on the data's shape, so results do not
/// change with the memory limit unless the limit cannot hold the sample.
pub fn default_init_sample_rows(n_samples: usize, n_features: usize, n_clusters: usize) -> usize {
    (256 * n_clusters).max(100_000).min((1 << 22) / n_features.max(1)).max(n_clusters).min(n_samples)
}

/// Fails with [`Error::DoesNotFit`] unless `committed` bytes plus one tile of
/// rows at `per_row` bytes each fit `limit`.
pub(super) fn check_fits(limit: u64, committed: u64, per_row: u64, n: u64, led: &Ledger, what: &str) -> Result<()> {
    let required = committed + per_row * (TILE_ROWS as u64).min(n);
    if required <= limit {
        return Ok(());
    }
    let biggest = led
        .buffers()
        .iter()
        .max_by_key(|b| b.bytes)
        .map(|b| format!("; largest buffer: {} = {}", b.name, format_bytes(b.bytes)))
        .unwrap_or_default();
    Err(Error::DoesNotFit {
        required_bytes: required,
        limit_bytes: limit,
        what: format!("{what}{biggest}"),
        hint: format!(
            "raise --memory-limit to at least {} ({required} bytes), or use fewer threads or clusters",
            format_bytes(required)
        ),
    })
}

/// Rows per read block: as many as fit `limit - fixed` at `per_row` bytes,
/// at most [`MAX_BLOCK_BYTES`] of values (`row_value_bytes` per row), a
/// multiple of [`TILE_ROWS`] (so tiles line up whatever the limit), or all
/// `n` rows when they fit. Call after [`check_fits`].
pub(super) fn pick_block_rows(limit: u64, fixed: u64, per_row: u64, n: u64, row_value_bytes: u64) -> u64 {
    let tile = TILE_ROWS as u64;
    let rows = ((limit - fixed) / per_row).min((MAX_BLOCK_BYTES / row_value_bytes).max(tile));
    if rows >= n {
        n
    } else {
        (rows / tile * tile).max(tile.min(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(n: usize, d: usize) -> KMeansJob {
        KMeansJob {
            n_samples: n,
            n_features: d,
            x_scratch_per_row: d * 8,
            w_scratch_per_row: None,
            compute_bytes: 8,
            threads: 2,
            write_labels: true,
            extra: vec![],
        }
    }

    #[test]
    fn blocks_fit_the_limit_and_align_to_tiles() {
        let p = KMeansParams { n_clusters: 200, memory_limit_bytes: 64 << 20, ..Default::default() };
        let plan = plan_kmeans(&p, &job(100_000_000, 3)).unwrap();
        assert!(plan.total_bytes <= 64 << 20, "{plan}");
        assert_eq!(plan.block_rows % TILE_ROWS, 0);
        assert!(plan.block_rows > 100_000);
        assert_eq!(plan.init_sample_rows, 100_000);
        assert_eq!(default_init_sample_rows(10, 3, 2), 10);
        assert_eq!(default_init_sample_rows(10_000_000, 784, 10), (1 << 22) / 784);
        let sum: u64 = plan.buffers.iter().map(|b| b.bytes).sum();
        assert_eq!(sum, plan.total_bytes);
    }

    #[test]
    fn small_data_is_one_block() {
        let p = KMeansParams { n_clusters: 3, memory_limit_bytes: 1 << 30, ..Default::default() };
        let plan = plan_kmeans(&p, &job(1000, 4)).unwrap();
        assert_eq!((plan.block_rows, plan.n_blocks, plan.init_sample_rows), (1000, 1, 1000));
    }

    #[test]
    fn refuses_when_centres_do_not_fit_and_names_the_minimum() {
        let p = KMeansParams { n_clusters: 100_000, memory_limit_bytes: 16 << 20, ..Default::default() };
        let err = plan_kmeans(&p, &job(10_000_000, 100)).unwrap_err();
        let Error::DoesNotFit { required_bytes, .. } = err else { panic!("{err}") };
        let p2 = KMeansParams { memory_limit_bytes: required_bytes, ..p.clone() };
        let plan = plan_kmeans(&p2, &job(10_000_000, 100)).unwrap();
        assert!(plan.total_bytes <= required_bytes);
        let p3 = KMeansParams { memory_limit_bytes: required_bytes - 1, ..p };
        assert!(plan_kmeans(&p3, &job(10_000_000, 100)).is_err());
    }

    #[test]
    fn limit_changes_block_rows_not_tiles() {
        let mut seen = Vec::new();
        for mib in [8u64, 16, 64, 1024] {
            let p = KMeansParams { n_clusters: 10, memory_limit_bytes: mib << 20, ..Default::default() };
            let plan = plan_kmeans(&p, &job(1_000_000, 784)).unwrap();
            assert!(plan.total_bytes <= mib << 20);
            seen.push((plan.block_rows, plan.tile_rows, plan.k_tile));
        }
        assert!(seen.windows(2).all(|w| w[0].1 == w[1].1 && w[0].2 == w[1].2 && w[0].0 <= w[1].0));
    }
}
