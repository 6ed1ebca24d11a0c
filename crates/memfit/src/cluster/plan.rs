//! The k-means memory plan: which buffers a fit allocates and how many rows
//! each read block holds.

use super::bounds::{centre_bytes, Compact, COMPACT_ROWS, WIDTH};
use super::minibatch::MiniBatch;
use super::minibatch_run::Draw;
use super::params::{Algorithm, Init, KMeansParams, MiniBatchParams};
use super::pass::{AssignStats, Assignment};
use crate::error::{Count, Remedy, Result};
use crate::exec::Backend;
use crate::exec::{KeyedSample, RowStates, ScanStats};
use crate::io::{npy_writer_bytes, Dtype};
use crate::kernels::{PreparedCenters, SparseCenters, SparseScratch};
use crate::plan::SampleLayout;
use crate::plan::{check_fits, pick_block_rows, Job, Plan, PlannedBuffer, RowSchedule, CHUNK_ROWS, TILE_ROWS};

/// Centres per compute tile for `n_clusters` centres and a compute type of
/// `compute_bytes` bytes: as many as keep a tile of [`TILE_ROWS`] rows'
/// products within 1 MiB (512 centres in `f64`, 1,024 in `f32`), about half
/// the L2 cache of a current x86 core. A row's products for every centre
/// then stay in the tile when `n_clusters` fits in one, and decide its close
/// calls without recomputing them. Measured on 200,000 × 128 `f32` rows with
/// k = 1,000: 1,024 centres per tile are 5 % faster per pass than 512 (the
/// close calls), while 1,024 in `f64` (2 MiB tiles) were 9 % slower than 512.
pub fn k_tile(n_clusters: usize, compute_bytes: usize) -> usize {
    n_clusters.min((1 << 20) / (TILE_ROWS * compute_bytes.max(1)))
}

/// Builds the plan for `params` on `job`.
///
/// The run has two phases whose buffers never coexist, so the plan's total is
/// the always-held buffers plus the larger phase:
/// - always: centres (`f64` current and new sums, best-so-far, the
///   compute-type copy with norms), per-cluster weights, the plot sample,
///   the label writer's buffers, the initial centres of every init and
///   what the input and the caller hold ([`Job::ledger`]);
/// - validation and init: the k-means++ sample (or the `k` rows a random init
///   reads) and read blocks (raw scratch, converted values, weights);
/// - iterations: per-thread distance
///   tiles and farthest-point lists, and read blocks (raw scratch, converted
///   values, label, distance, tile sums, weights per row); the final
///   assignment of a mini-batch fit runs in them too;
/// - mini-batch steps (instead of the iterations' passes): the batch's row
///   indices, read scratch and values, a step's buffers
///   ([`MiniBatch::step_ledger`]), the centres' weights and previous values,
///   and with weights their cumulative sums (8 B per row).
///
/// # Errors
/// [`crate::Error::DoesNotFit`] when the always-held buffers plus the smallest
/// version of either phase exceed `job.limit_bytes`, with the
/// smallest limit that would work.
pub fn plan_kmeans(params: &KMeansParams, job: &Job) -> Result<Plan> {
    let (n, d, k) = (job.n_samples as u64, job.n_features as u64, params.n_clusters as u64);
    let limit = job.limit_bytes;
    let n_init = params.effective_n_init() as u64;
    let threads = job.threads as u64;
    let k_tile = k_tile(params.n_clusters, job.compute_bytes);
    let mut led = job.ledger();
    led.add("centers (float64)", k * d, 8, format!("{k} × {d} × 8 B"));
    if n_init > 1 {
        led.add("best centers (float64)", k * d, 8, format!("{k} × {d} × 8 B, kept across {n_init} inits"));
    }
    led.add(
        "centers for kernels",
        PreparedCenters::<f64>::bytes_for(params.n_clusters, job.n_features, job.compute_bytes),
        1,
        "float64 values, radii + shifted values and norms for the fast path".into(),
    );
    if job.sparse_row_nnz.is_some() {
        led.add(
            "centers for sparse rows",
            SparseCenters::bytes_for(params.n_clusters, job.n_features),
            1,
            format!("{d} × {k} × 8 B transposed, the same in float16 (rows of 32 centres) + norms and radii"),
        );
    }
    led.add("initial centers", n_init * k * d, 8, format!("{n_init} inits × {k} × {d} × 8 B"));
    let plot = params.plot_sample_rows.min(job.n_samples) as u64;
    let plot_per = KeyedSample::bytes_per_row(job.n_features);
    if plot > 0 {
        let select = SampleLayout::select_bytes(job.threads);
        led.add(
            "plot sample",
            plot * plot_per + select,
            1,
            format!("{plot} rows × {plot_per} B + {select} B to select its rows"),
        );
    }
    if job.n_outputs > 0 {
        let bytes = npy_writer_bytes(Dtype::I32, &[job.n_samples]);
        led.add("label writer buffers", bytes, 1, "file buffer + encode buffer".into());
    }
    let always = led.total();
    let scan_row = job.read_bytes_per_row(job.w_scratch_per_row);
    // Per row: label and distance, and a share of the per-chunk statistics
    // (those held for a block of `rows` rows: 2 + rows / CHUNK_ROWS, or 2).
    let part = AssignStats::lloyd_bytes(params.n_clusters, job.n_features, job.sparse_row_nnz.is_some());
    let held = |rows: u64| AssignStats::held(params.n_clusters, job.n_features, rows as usize) * part;
    let chunk_share = (held(CHUNK_ROWS as u64) - held(0)).div_ceil(CHUNK_ROWS as u64);
    let mut iter_row = scan_row + Assignment::<f64>::BYTES_PER_ROW + chunk_share;
    let min_rows = (TILE_ROWS as u64).min(n);
    // Bounded iterations: the centres the bounds refer to with drifts and
    // half gaps, per thread a batch of the rows the bounds do not clear,
    // and per row a label and a lower bound, in memory when they fit.
    // On a remote split the rows' bounds stay with the tasks that read them.
    let state_row = if job.rows_elsewhere { 0 } else { RowStates::bytes_per_row(WIDTH) };
    let bounds_fixed = |bounded: bool, rows: usize| {
        if bounded {
            centre_bytes(params.n_clusters, job.n_features)
                + threads * Compact::<f64>::bytes(rows, job.n_features, job.compute_bytes)
        } else {
            0
        }
    };

    // Validation and init phase.
    let kpp = matches!(params.init, Init::KMeansPlusPlus);
    // The k-means++ sample's size is fixed by the data and k; its values
    // are spilled to a scratch file when they do not fit. The candidates of
    // a step are read one by one.
    let sample_rows = if kpp {
        params.init_sample_rows.map_or_else(
            || default_init_sample_rows(job.n_samples, job.n_features, params.n_clusters),
            |s| s.min(job.n_samples),
        )
    } else {
        0
    };
    let candidates = 2 + (params.n_clusters as f64).ln() as usize;
    let (dd, nt) = (job.n_features, job.threads);
    let init_min = if kpp { SampleLayout::least_bytes(sample_rows, dd, nt, candidates) } else { k.min(n) * d * 8 };
    // Iteration phase, fixed part. Kernel tiles hold at most n rows and
    // shrink (results do not depend on them) before the job is refused.
    let init_need = init_min + min_rows * scan_row + 2 * ScanStats::bytes(job.n_features);
    let tile = |rows: usize| assign_tile_bytes(job, rows, params.n_clusters, k_tile);
    // The statistics of the smallest block (one open chunk beside the two
    // held when chunks run in parallel, none more otherwise).
    let iter_fixed = |bounded: bool, rows: usize| threads * tile(rows) + held(min_rows) + bounds_fixed(bounded, rows);
    let needed = |bounded: bool, rows: usize, per_row: u64| {
        always + init_need.max(iter_fixed(bounded, rows) + min_rows * per_row)
    };
    // Kernel tiles as plain Lloyd's; `auto` keeps them and runs plain when
    // the bounds (at least one block's, from a scratch file) do not fit
    // beside them; `bounded` shrinks them for the bounds first.
    let plain_tile_rows = kernel_tile_rows(job.n_samples, |rows| needed(false, rows, iter_row) <= limit);
    // A mini-batch fit's one full pass (its last) needs no bounds; sparse
    // rows run plain Lloyd passes whatever the algorithm (the bounds do
    // not take them yet; every algorithm gives the same bits).
    let bounded = match params.algorithm {
        _ if params.mini_batch.is_some() || job.sparse_row_nnz.is_some() => false,
        Algorithm::Lloyd => false,
        Algorithm::Auto => needed(true, plain_tile_rows, iter_row + state_row) <= limit,
        Algorithm::Bounded => true,
    };
    let tile_rows = if bounded {
        kernel_tile_rows(job.n_samples, |rows| needed(true, rows, iter_row + state_row) <= limit)
    } else {
        plain_tile_rows
    };
    let mut iter_fixed = iter_fixed(bounded, tile_rows);
    // The bounds in memory when they leave room for the smallest blocks.
    let bounds_on_disk = bounded.then(|| needed(true, tile_rows, iter_row) + n * state_row > limit);
    match bounds_on_disk {
        Some(false) => iter_fixed += n * state_row,
        Some(true) => iter_row += state_row,
        None => {}
    }
    let required = match bounds_on_disk {
        Some(false) => needed(true, tile_rows, iter_row) + n * state_row,
        _ => needed(bounded, tile_rows, iter_row),
    };
    // Mini-batch steps: a phase of their own.
    let mini_batch = params.mini_batch.map_or_else(Vec::new, |mb| mini_batch_buffers(params, &mb, job));
    let required = required.max(always + mini_batch.iter().map(|b| b.bytes).sum::<u64>());
    // A refusal names the largest buffer counted, the steps' included (their
    // draw's cumulative weights, 8 B per row, can decide it).
    let mut counted = led.clone();
    for b in &mini_batch {
        counted.add_in("mini-batch steps", &b.name, b.bytes, 1, b.detail.clone());
    }
    check_fits(
        required,
        limit,
        &counted,
        || {
            let densest = job
                .sparse_row_nnz
                .map(|nnz| format!(" (sparse rows of up to {nnz} stored values)"))
                .unwrap_or_default();
            format!("k-means with n_clusters = {k}, n_features = {d}{densest} on {}", crate::units::threads(threads))
        },
        || vec![Remedy::UseFewer(vec![Count::Threads, Count::Clusters])],
    )?;
    let room = limit - always;
    let scan_stats = 2 * ScanStats::bytes(job.n_features);
    let sample = if kpp {
        SampleLayout::within(sample_rows, dd, nt, candidates, room - scan_stats - min_rows * scan_row)
    } else {
        SampleLayout::default()
    };
    let init_bytes = if kpp { sample.bytes(dd, nt, candidates) } else { k * d * 8 };
    let scan_rows = pick_block_rows(room - scan_stats - init_bytes, scan_row, n, job.row_value_bytes(), threads);
    let rows = pick_block_rows(room - iter_fixed, iter_row, n, job.row_value_bytes(), threads);
    let phase = "validation and init";
    if kpp {
        led.add_in(phase, "init sample (k-means++)", init_bytes, 1, sample.describe(dd, nt, candidates));
    } else {
        led.add_in(phase, "init rows", k, d * 8, format!("{k} × {d} × 8 B"));
    }
    led.add_in(phase, "read blocks", scan_rows, scan_row, format!("{scan_rows} rows × {scan_row} B"));
    led.add_in(phase, "column statistics", scan_stats, 1, "folded chunks + open chunk".into());
    let phase = "iterations";
    let n_stats = held(rows) / part.max(1);
    led.add_in(
        phase,
        "chunk statistics",
        n_stats,
        part,
        format!("{n_stats} × {part} B (per-cluster sums and weights, {k} + 1 farthest rows with values)"),
    );
    led.add_in(
        phase,
        "distance tiles",
        threads * tile(tile_rows),
        1,
        format!("{threads} threads × {} B ({tile_rows} rows × {k_tile} centres)", tile(tile_rows)),
    );
    let block_row = scan_row + Assignment::<f64>::BYTES_PER_ROW;
    led.add_in(
        phase,
        "read blocks",
        rows,
        block_row,
        format!("{rows} rows × {block_row} B (scratch, values, label, distance, weight)"),
    );
    if let Some(on_disk) = bounds_on_disk {
        led.add_in(
            phase,
            "bounds of the centres",
            centre_bytes(params.n_clusters, job.n_features),
            1,
            format!("{k} × {d} × 8 B centres the bounds refer to + {k} × 16 B drifts and half gaps"),
        );
        let compact = Compact::<f64>::bytes(tile_rows, job.n_features, job.compute_bytes);
        led.add_in(
            phase,
            "rows to assign in full",
            threads * compact,
            1,
            format!(
                "{threads} threads × {compact} B ({} rows: values, index, label, distances)",
                tile_rows.min(COMPACT_ROWS)
            ),
        );
        if job.rows_elsewhere {
            led.add_in(phase, "row bounds", 0, 1, "kept with the rows by the tasks that read them".into());
        } else {
            let (state_rows, what) =
                if on_disk { (rows, "per block, read from a scratch file") } else { (n, "all rows") };
            led.add_in(
                phase,
                "row bounds",
                state_rows,
                state_row,
                format!("{state_rows} rows × {state_row} B (label, lower bound; {what})"),
            );
        }
    }
    for buf in mini_batch {
        led.add_in("mini-batch steps", &buf.name, buf.bytes, 1, buf.detail);
    }
    let extra_label_pass = u64::from(n_init > 1 && (job.n_outputs > 0 || plot > 0));
    let schedule = RowSchedule {
        block_rows: rows as usize,
        n_blocks: job.n_samples.div_ceil(rows.max(1) as usize),
        scan_block_rows: scan_rows as usize,
        tile_rows,
        assign_tile_rows: tile_rows,
        k_tile,
        init_sample: sample,
        max_passes: n_init
            .saturating_mul(if params.mini_batch.is_some() { 0 } else { params.max_iter as u64 }.saturating_add(1))
            .saturating_add(1 + extra_label_pass),
        passes_detail: format!(
            "1 to validate and sample + {n_init} init(s) × ({} + 1 final assignment){}",
            match &params.mini_batch {
                Some(mb) => {
                    let b = mb.batch_size.clamp(1, job.n_samples.max(1));
                    format!(
                        "up to {} steps of {b} rows read where they lie",
                        params.max_iter.saturating_mul(job.n_samples) / b
                    )
                }
                None => format!("{} iterations", params.max_iter),
            },
            if extra_label_pass > 0 { " + 1 to write labels" } else { "" }
        ),
        component_groups: None,
        bounds_on_disk,
    };
    let mut plan = Plan::new("kmeans", limit, job.threads, led, schedule);
    if bounds_on_disk == Some(true) {
        plan.disk.push(crate::io::PlannedWrite::inside("scratch files", job.scratch_dir.clone(), n * state_row));
    }
    if sample.piece_rows.is_some() {
        plan.disk.push(crate::io::PlannedWrite::inside(
            "init sample (scratch files)",
            job.scratch_dir.clone(),
            sample.disk_bytes(dd),
        ));
    }
    Ok(plan)
}

/// Plans [`super::validate`], the validation pass of [`plan_kmeans`]'s fit
/// run alone (by a caller that draws its own mini-batches after it): what
/// the input holds, the pass's statistics and read blocks (raw scratch,
/// converted values and weights per row).
///
/// # Errors
/// [`crate::Error::DoesNotFit`] when one tile of rows does not fit.
pub fn plan_validation(job: &Job) -> Result<Plan> {
    let (n, d) = (job.n_samples as u64, job.n_features);
    let mut led = job.ledger();
    led.add("statistics: folded chunks + open chunk", 2, ScanStats::bytes(d), "column moments and ranges".into());
    let per_row = job.read_bytes_per_row(job.w_scratch_per_row);
    let required = led.total() + per_row * (TILE_ROWS as u64).min(n);
    check_fits(required, job.limit_bytes, &led, || format!("the validation pass with n_features = {d}"), Vec::new)?;
    let rows = pick_block_rows(job.limit_bytes - led.total(), per_row, n, job.row_value_bytes(), job.threads as u64);
    led.add("read blocks", rows, per_row, format!("{rows} rows × {per_row} B"));
    Ok(Plan::blocked("validation", job.limit_bytes, led, rows as usize, job.n_samples, job.threads))
}

/// The buffers of a mini-batch run's steps (see [`plan_kmeans`]).
fn mini_batch_buffers(params: &KMeansParams, mb: &MiniBatchParams, job: &Job) -> Vec<PlannedBuffer> {
    let (k, d, n, c) =
        (params.n_clusters as u64, job.n_features as u64, job.n_samples as u64, job.compute_bytes as u64);
    let b = mb.batch_size.min(job.n_samples) as u64;
    let sparse = job.sparse_row_nnz;
    let mut led = MiniBatch::step_ledger(
        params.n_clusters,
        job.n_features,
        b as usize,
        job.threads,
        job.compute_bytes,
        sparse.is_some(),
    );
    match sparse {
        Some(nnz) => {
            // Index and offset, and per stored value its column and value
            // (a read of consecutive rows holds as much again).
            let per_row = 16 + job.x_scratch_per_row as u64 + 2 * nnz as u64 * (4 + c);
            led.add(
                "batch (CSR)",
                b,
                per_row,
                format!("{b} rows × {per_row} B (index, offsets, read scratch, twice {nnz} stored values and columns)"),
            );
        }
        None => {
            let per_row = 8 + job.x_scratch_per_row as u64 + d * c;
            led.add("batch", b, per_row, format!("{b} rows × {per_row} B (index, read scratch, values)"));
        }
    }
    led.add("centre weights and previous centres", k * (d + 1), 8, format!("{k} × ({d} + 1) × 8 B"));
    let draw = Draw::bytes(job.n_samples, job.w_scratch_per_row.is_some());
    led.add("cumulative weights", draw, 1, format!("{n} rows × 8 B + a piece of weights being read"));
    led.into_buffers()
}

/// Bytes of one thread's assignment buffers for tiles of `rows` rows and
/// `n_clusters` centres taken `k_tile` at a time: the CPU backend's tiles,
/// or for sparse data its products and one dense row.
pub(crate) fn assign_tile_bytes(job: &Job, rows: usize, n_clusters: usize, k_tile: usize) -> u64 {
    match job.sparse_row_nnz {
        Some(_) => SparseScratch::<f64>::bytes(n_clusters, job.n_features, job.compute_bytes),
        None => Backend::Cpu.assign_bytes(rows, n_clusters, k_tile, job.n_features, job.compute_bytes).host,
    }
}

/// Rows per assignment-kernel tile: [`TILE_ROWS`], at most `n_samples`,
/// halved (down to 8) while `fits` says the job does not fit. Labels and
/// distances do not depend on it.
pub(crate) fn kernel_tile_rows(n_samples: usize, fits: impl Fn(usize) -> bool) -> usize {
    let mut rows = TILE_ROWS.min(n_samples.max(1));
    while rows > 8 && !fits(rows) {
        rows /= 2;
    }
    rows
}

/// The default k-means++ sample: `max(256 × n_clusters, 100_000)` rows, at
/// most 2^22 values (32 MiB as `f64`) but at least `n_clusters` rows, and at
/// most `n_samples`. It depends only on the data's shape (a limit that
/// cannot hold it spills its values to a scratch file), so results do not
/// change with the memory limit.
pub fn default_init_sample_rows(n_samples: usize, n_features: usize, n_clusters: usize) -> usize {
    (256 * n_clusters).max(100_000).min((1 << 22) / n_features.max(1)).max(n_clusters).min(n_samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::exec::RunOptions;

    fn job(n: usize, d: usize, limit: u64) -> Job {
        let mut job = Job::of_shape(n, d, &RunOptions::with_limit(limit));
        job.n_outputs = 1;
        job
    }

    #[test]
    fn blocks_fit_the_limit_and_align_to_tiles() {
        let p = KMeansParams { n_clusters: 200, ..Default::default() };
        let plan = plan_kmeans(&p, &job(100_000_000, 3, 64 << 20)).unwrap();
        assert!(plan.total_bytes <= 64 << 20, "{plan}");
        assert_eq!(plan.schedule.block_rows % TILE_ROWS, 0);
        assert!(plan.schedule.block_rows > 100_000);
        assert_eq!(plan.schedule.init_sample, SampleLayout { rows: 100_000, piece_rows: None });
        assert_eq!(default_init_sample_rows(10, 3, 2), 10);
        assert_eq!(default_init_sample_rows(10_000_000, 784, 10), (1 << 22) / 784);
        // Always-held buffers plus the larger phase.
        let phase =
            |p: &str| plan.buffers.iter().filter(|b| b.phase.as_deref() == Some(p)).map(|b| b.bytes).sum::<u64>();
        let (a, b) = (phase("validation and init"), phase("iterations"));
        let all: u64 = plan.buffers.iter().map(|b| b.bytes).sum();
        assert!(a > 0 && b > 0);
        assert_eq!(plan.total_bytes, all - a - b + a.max(b));
    }

    #[test]
    fn small_data_is_one_block() {
        let p = KMeansParams { n_clusters: 3, ..Default::default() };
        let plan = plan_kmeans(&p, &job(1000, 4, 1 << 30)).unwrap();
        assert_eq!((plan.schedule.block_rows, plan.schedule.n_blocks, plan.schedule.init_sample.rows), (1000, 1, 1000));
    }

    #[test]
    fn refuses_when_centres_do_not_fit_and_names_the_minimum() {
        let p = KMeansParams { n_clusters: 100_000, ..Default::default() };
        let err = plan_kmeans(&p, &job(10_000_000, 100, 16 << 20)).unwrap_err();
        let crate::Error::DoesNotFit { required_bytes, .. } = err else { panic!("{err}") };
        let plan = plan_kmeans(&p, &job(10_000_000, 100, required_bytes)).unwrap();
        assert!(plan.total_bytes <= required_bytes);
        assert!(plan_kmeans(&p, &job(10_000_000, 100, required_bytes - 1)).is_err());
    }

    /// The smallest limit named is the smallest plan's total: the chunk
    /// statistics counted as the plan holds them (helper 84: one buffer of
    /// them, 46–183 MiB, too many when chunks do not run in parallel).
    #[test]
    fn the_named_minimum_is_what_the_smallest_plan_holds() {
        for (n, d, k) in [(1000, 2000, 1000), (2000, 4000, 2000), (1_000_000, 784, 10), (100_000, 3, 200)] {
            let p = KMeansParams { n_clusters: k, algorithm: Algorithm::Lloyd, ..Default::default() };
            let err = plan_kmeans(&p, &job(n, d, 1 << 10)).unwrap_err();
            let crate::Error::DoesNotFit { required_bytes, .. } = err else { panic!("{err}") };
            let plan = plan_kmeans(&p, &job(n, d, required_bytes)).unwrap();
            assert!(plan.total_bytes <= required_bytes);
            assert!(plan.total_bytes as f64 >= 0.97 * required_bytes as f64, "{n} × {d}, k = {k}: {plan}");
        }
    }

    #[test]
    fn limit_changes_block_rows_not_tiles() {
        let mut seen = Vec::new();
        for mib in [8u64, 16, 64, 1024] {
            let p = KMeansParams { n_clusters: 10, ..Default::default() };
            let plan = plan_kmeans(&p, &job(1_000_000, 784, mib << 20)).unwrap();
            assert!(plan.total_bytes <= mib << 20);
            seen.push((plan.schedule.block_rows, plan.schedule.tile_rows, plan.schedule.k_tile));
        }
        assert!(seen.windows(2).all(|w| w[0].1 == w[1].1 && w[0].2 == w[1].2 && w[0].0 <= w[1].0), "{seen:?}");
    }

    #[test]
    fn the_init_sample_keeps_its_rows_and_spills_when_the_limit_is_small() {
        let p = KMeansParams { n_clusters: 64, ..Default::default() };
        let rows = default_init_sample_rows(1_000_000, 512, 64);
        let mut spilled = 0;
        for mib in [8u64, 16, 32, 64, 1024] {
            let plan = plan_kmeans(&p, &job(1_000_000, 512, mib << 20)).unwrap();
            assert!(plan.total_bytes <= mib << 20, "{plan}");
            assert_eq!(plan.schedule.init_sample.rows, rows);
            if plan.schedule.init_sample.piece_rows.is_some() {
                spilled += 1;
                assert!(plan.disk.iter().any(|w| w.name.contains("init sample")), "{plan}");
            }
        }
        assert!((1..5).contains(&spilled), "{spilled}");
    }
}
