//! Fitted centres applied to new data, streamed within a memory limit: the
//! nearest centre of each row (`predict`) and the distances to every centre
//! (`transform`), both from the same exact kernel.

use super::pass::{AssignPass, AssignSink, Assignment, Mode};
use super::plan::{k_tile, kernel_tile_rows};
use crate::dtype::Real;
use crate::error::{Error, Result};
use crate::exec::{run_split, Backend, Block, Leaf, Observer, Pass, RowSplit};
use crate::io::{npy_writer_bytes, BlockReader, Dtype, Source};
use crate::kernels::PreparedCenters;
use crate::plan::{check_fits, pick_block_rows, TILE_ROWS};
use crate::plan::{Job, Ledger, Plan, RowSchedule};

/// Plans [`predict`] of `job`'s data (and its weights, read with the
/// data's blocks) against `n_clusters` centres, with a label file writer's
/// buffers when `labels_file` (results handed to a callable that keeps them
/// in memory need none).
///
/// # Errors
/// [`Error::DoesNotFit`] when what the input holds, the centres, tiles and
/// one tile of rows exceed `job.limit_bytes`.
pub fn plan_predict(job: &Job, n_clusters: usize, labels_file: bool) -> Result<Plan> {
    let (d, k, threads) = (job.n_features, n_clusters, job.threads);
    let k_tile = k_tile(n_clusters, job.compute_bytes);
    let mut led = centre_ledger(job, n_clusters);
    if labels_file {
        let bytes = npy_writer_bytes(Dtype::I32, &[job.n_samples]);
        led.add("label writer buffers", bytes, 1, "file buffer + encode buffer".into());
    }
    // Per row: label, distance, a share of the per-tile distance sums, and
    // the weight's raw scratch and value.
    let extra = Assignment::<f64>::BYTES_PER_ROW + 1 + job.w_scratch_per_row.map_or(0, |w| w as u64 + 8);
    let tile = |rows: usize| threads as u64 * super::plan::assign_tile_bytes(job, rows, k, k_tile);
    let fits = |rows: usize| led.total() + tile(rows) + min_rows_bytes(job, extra) <= job.limit_bytes;
    let tile_rows = kernel_tile_rows(job.n_samples, fits);
    led.add(
        "distance tiles (per thread)",
        tile(tile_rows),
        1,
        format!("{threads} threads × {tile_rows} rows × {k_tile} centres"),
    );
    let what = format!("predict with {k} centres of {d} features on {}", crate::units::threads(threads));
    let rows = add_blocks(job, &mut led, extra, "labels, distances, tile sums, weights", what)?;
    let schedule = RowSchedule {
        scan_block_rows: rows,
        tile_rows,
        assign_tile_rows: tile_rows,
        k_tile,
        passes_detail: "1 assignment pass".into(),
        ..RowSchedule::one_pass(rows, job.n_samples)
    };
    Ok(Plan::new("predict", job.limit_bytes, threads, led, schedule))
}

/// What the input holds ([`Job::ledger`]) and the centres' buffers, for
/// [`plan_predict`] and [`plan_transform`].
fn centre_ledger(job: &Job, n_clusters: usize) -> Ledger {
    let (d, k) = (job.n_features as u64, n_clusters as u64);
    let mut led = job.ledger();
    led.add("centers (float64)", k * d, 8, format!("{k} × {d} × 8 B"));
    led.add(
        "centers for kernels",
        PreparedCenters::<f64>::bytes_for(n_clusters, job.n_features, job.compute_bytes),
        1,
        "float64 values, radii + shifted values and norms for the fast path".into(),
    );
    if job.sparse_row_nnz.is_some() {
        led.add(
            "centers for sparse rows",
            crate::kernels::SparseCenters::bytes_for(n_clusters, job.n_features),
            1,
            format!("{d} × {k} × 8 B transposed, the same in float16 (rows of 32 centres) + norms and radii"),
        );
    }
    led
}

/// Bytes of a block row: raw read scratch, converted values and `extra`.
fn row_bytes(job: &Job, extra: u64) -> u64 {
    job.read_bytes_per_row(None) + extra
}

/// Bytes of the smallest block: one tile of rows (or every row, if fewer).
fn min_rows_bytes(job: &Job, extra: u64) -> u64 {
    row_bytes(job, extra) * (TILE_ROWS as u64).min(job.n_samples as u64)
}

/// Adds read blocks to `led`, which holds every other buffer: as many rows
/// as fit `job.limit_bytes`, each with its raw read scratch, converted
/// values and `extra` bytes of `extra_what`; returns the rows per block.
///
/// # Errors
/// [`Error::DoesNotFit`] naming `what` when one tile of rows does not fit.
fn add_blocks(job: &Job, led: &mut Ledger, extra: u64, extra_what: &str, what: String) -> Result<usize> {
    let (n, d, c) = (job.n_samples as u64, job.n_features as u64, job.compute_bytes as u64);
    let limit_bytes = job.limit_bytes;
    let required = led.total() + min_rows_bytes(job, extra);
    check_fits(required, limit_bytes, led, || what, Vec::new)?;
    let rows =
        pick_block_rows(limit_bytes - led.total(), row_bytes(job, extra), n, job.row_value_bytes(), job.threads as u64);
    if job.sparse_row_nnz.is_some() {
        let per = job.read_bytes_per_row(None);
        led.add(
            "block values (sparse rows)",
            rows,
            per,
            format!("{rows} rows × {per} B (offset, stored values and columns)"),
        );
    } else {
        let scratch = job.x_scratch_per_row as u64;
        led.add("read scratch (raw bytes)", rows, scratch, format!("{rows} rows × {scratch} B"));
        led.add("block values (compute dtype)", rows * d, c, format!("{rows} rows × {d} × {c} B"));
    }
    led.add(&format!("block {extra_what}"), rows, extra, format!("{rows} rows × {extra} B"));
    Ok(rows as usize)
}

/// Assigns each row of `x` (shape `(n_samples, n_features)`, converted to `T`)
/// to the nearest of `centers` (row-major `(n_clusters, n_features)`, `f64`)
/// and hands labels and the squared distances to the assigned centres (`f64`,
/// from exact differences) to `out` in row order, one block at a time, the
/// assignments on `backend`. Returns the inertia (their sum, in `f64`).
/// Every backend gives the same labels and distances.
///
/// The label is the exact nearest centre unless two centres are tied within
/// `f64` rounding of the squared distances (see [`crate::kernels`]'s
/// `assign` guarantee), whatever the data's distance from the origin.
///
/// # Errors
/// [`Error::ShapeMismatch`] when the centres' width differs from the data's;
/// [`Error::NonFinite`] for a non-finite value in the data or the centres;
/// read errors, [`Error::Cancelled`], and whatever `out` returns.
#[allow(clippy::too_many_arguments)]
pub fn predict<T: Real>(
    x: &Source<'_>,
    sample_weight: Option<&Source<'_>>,
    centers: &[f64],
    n_clusters: usize,
    plan: &Plan,
    backend: Backend,
    out: AssignSink<'_>,
    observer: &dyn Observer,
) -> Result<f64> {
    let d = x.n_features();
    let prepared = prepare::<T>(centers, n_clusters, d, x)?;
    x.check_weights(sample_weight)?;
    let mut blocks = BlockReader::<T>::new(x, sample_weight, plan.schedule.block_rows);
    let mut asg = Assignment::<T>::new(plan, n_clusters, d, backend, x.sparse_row_nnz().is_some());
    let mut pass = AssignPass {
        centers: &prepared,
        asg: &mut asg,
        mode: Mode::Predict(out),
        weights_name: sample_weight.map(Source::name),
        bounds: None,
        cancel: observer.cancel(),
    };
    let inertia = run_split(&mut pass, &mut blocks, &RowSplit::default(), &vec![0.0; d], &observer.cancel())?.inertia;
    if !inertia.is_finite() {
        return Err(overflow(inertia));
    }
    Ok(inertia)
}

/// Plans [`transform`] of `job`'s data against `n_clusters` centres: what
/// the input holds, the centres and, per block row, the read scratch,
/// converted values and `n_clusters` distances.
///
/// # Errors
/// [`Error::DoesNotFit`] when these with one tile of rows exceed
/// `job.limit_bytes`.
pub fn plan_transform(job: &Job, n_clusters: usize) -> Result<Plan> {
    let (d, k) = (job.n_features, n_clusters);
    let mut led = centre_ledger(job, n_clusters);
    let what = format!("distances to {k} centres of {d} features");
    let rows = add_blocks(job, &mut led, k as u64 * 8, "distances (float64)", what)?;
    let mut plan = Plan::blocked("transform", job.limit_bytes, led, rows, job.n_samples, job.threads);
    plan.schedule.passes_detail = "1 distance pass".into();
    Ok(plan)
}

/// Euclidean distances of each row of `x` (shape `(n_samples, n_features)`,
/// converted to `T`) to every one of `centers` (row-major `(n_clusters,
/// n_features)`, `f64`): `out` receives them row-major, `(rows, n_clusters)`
/// `f64` per block, in row order. Each is the square root of the exact
/// squared distance whose first minimum is [`predict`]'s label and distance,
/// so `argmin` of a row is its predicted label, unless two distances round to
/// the same value.
///
/// # Errors
/// As [`predict`]; a distance that overflows `f64` is refused like an
/// overflowing inertia.
pub fn transform<T: Real>(
    x: &Source<'_>,
    centers: &[f64],
    n_clusters: usize,
    plan: &Plan,
    out: &mut dyn FnMut(&[f64]) -> Result<()>,
    observer: &dyn Observer,
) -> Result<()> {
    let d = x.n_features();
    let prepared = prepare::<T>(centers, n_clusters, d, x)?;
    let mut blocks = BlockReader::<T>::new(x, None, plan.schedule.block_rows);
    let mut pass = TransformPass {
        backend: Backend::Cpu,
        centers: &prepared,
        dist: vec![0.0; plan.schedule.block_rows * n_clusters],
        out,
    };
    run_split(&mut pass, &mut blocks, &RowSplit::default(), &vec![0.0; d], &observer.cancel())
}

/// The pass of [`transform`]: distances of each block to every centre.
struct TransformPass<'p, 'f, T> {
    backend: Backend,
    centers: &'p PreparedCenters<T>,
    /// Row-major `(block_rows, n_clusters)` distances.
    dist: Vec<f64>,
    out: &'f mut dyn FnMut(&[f64]) -> Result<()>,
}

impl<T: Real> Pass<T> for TransformPass<'_, '_, T> {
    type Stats = ();
    fn new_stats(&self) {}
    fn checks_finite(&self) -> bool {
        true
    }
    fn block(&mut self, block: Block<'_, T>, _: &mut [Leaf<'_, ()>]) -> Result<()> {
        let dist = &mut self.dist[..block.rows() * self.centers.n_clusters];
        match block.csr {
            Some(csr) => self.backend.ops::<T>().sq_distances_sparse(block.x, csr, self.centers, dist),
            None => self.backend.ops::<T>().sq_distances_block(block.x, self.centers, dist),
        }
        if let Some(v) = dist.iter().find(|v| !v.is_finite()) {
            return Err(overflow(*v));
        }
        dist.iter_mut().for_each(|v| *v = v.sqrt());
        (self.out)(dist)
    }
}

/// Checks `centers` (row-major `(n_clusters, d)`) and prepares them.
/// The centres checked and prepared for the kernels; for data read as unit
/// rows (cosine), each scaled to unit norm first (as a fit's initial
/// centres are), so that the nearest centre is the one of largest cosine,
/// except a centre of unit norm already, to rounding (`|‖c‖² − 1| ≤
/// 2⁻²⁰`, which float32 centres meet): a fit's centres are used as they are,
/// as its last pass used them (scaling them again can move their values by
/// an ulp, and so a label where two cosines are within rounding).
fn prepare<T: Real>(centers: &[f64], n_clusters: usize, d: usize, x: &Source<'_>) -> Result<PreparedCenters<T>> {
    let (unit, sparse) = (x.has_unit_rows(), x.sparse_row_nnz().is_some());
    if n_clusters == 0 {
        return Err(Error::param("centers", "no centres (0 rows); hint: give at least one centre"));
    }
    if centers.len() != n_clusters * d {
        return Err(Error::ShapeMismatch {
            what: "centers".into(),
            expected: vec![n_clusters, d],
            found: vec![n_clusters, centers.len() / n_clusters.max(1)],
            hint: "the centres need one column per feature of the data",
        });
    }
    if let Some(i) = centers.iter().position(|v| !v.is_finite()) {
        return Err(Error::param(
            "centers",
            format!("centre {} feature {} is {}; hint: centres must be finite", i / d, i % d, centers[i]),
        ));
    }
    if unit {
        let mut scaled = centers.to_vec();
        for c in scaled.chunks_exact_mut(d.max(1)) {
            if (c.iter().map(|v| v * v).sum::<f64>() - 1.0).abs() > UNIT_NORM_ROUNDING {
                crate::kernels::unit_row(c);
            }
        }
        return Ok(PreparedCenters::for_rows(&scaled, n_clusters, d, sparse, true));
    }
    Ok(PreparedCenters::for_rows(centers, n_clusters, d, sparse, false))
}

/// How far from 1 the squared norm of a centre of unit norm to rounding can
/// be: float32 rounding of each value moves it by at most about `2⁻²³`.
const UNIT_NORM_ROUNDING: f64 = 1.0 / (1u64 << 20) as f64;

/// Squared distances between the data and the centres overflowed `f64`.
fn overflow(value: f64) -> Error {
    Error::param(
        "centers",
        format!("squared distances between the data and the centres overflow float64 ({value}); hint: rescale the data and the centres"),
    )
}
