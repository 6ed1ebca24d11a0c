//! Out-of-core Lloyd k-means: one pass over the data per iteration, the
//! assignment fused with the centre update, within a memory plan.
//!
//! Per read block: the exact nearest centre of every row
//! ([`crate::kernels::assign_block`]: GEMM-identity candidates certified by
//! an error bound, exact `f64` differences where it cannot decide), inertia
//! from exact differences in `f64`, and per-cluster weighted sums of the
//! rows' values in `f64` accumulated in row order
//! ([`crate::kernels::accumulate_block`]). No `n_samples × n_clusters`
//! matrix and no per-sample label array is ever held: labels are streamed
//! to the caller in a final pass.
//!
//! Centres are held in `f64` but always rounded to the compute type: each
//! update is the `f64` weighted mean of the cluster's rows (their values
//! summed in `f64`, a function of the labels alone, so that unchanged labels
//! give unchanged centres), rounded once; so the centres a fit returns are
//! exactly the ones its labels and inertia were computed against, and a
//! cluster of identical `float32` (or integer) points gets that point, whose
//! sums are exact in `f64`.
//!
//! Reference: S. Lloyd, "Least squares quantization in PCM" (1982);
//! scikit-learn's `_kmeans_single_lloyd` for the iteration, tolerance,
//! strict-convergence and empty-cluster rules.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::init::{kmeans_plusplus, uniform_distinct, SequentialSample, WeightedDraw};
use super::params::{Init, KMeansParams};
use super::plan::default_init_sample_rows;
use crate::error::{Error, Result};
use crate::io::{BlockReader, Source};
use crate::kernels::{assign_block, Accumulator, PreparedCenters, Scratch};
use crate::plan::Plan;
use crate::plan::TILE_ROWS;
use crate::real::Real;

/// What a fit reports while it runs.
#[derive(Debug, Clone)]
pub enum Progress<'a> {
    /// A phase starts (`"validating"`, `"init"`, `"iterating"`, `"labels"`).
    Phase(&'a str),
    /// An EM iteration of a Gaussian mixture finished.
    EmIteration {
        /// Zero-based index of the initialisation.
        run: usize,
        /// Number of initialisations.
        n_init: usize,
        /// One-based iteration number.
        iteration: usize,
        /// Maximum iterations.
        max_iter: usize,
        /// Mean log-likelihood of the parameters this iteration started from.
        lower_bound: f64,
        /// Change of the lower bound from the previous iteration.
        change: f64,
        /// Rows processed per second in this pass.
        rows_per_sec: f64,
    },
    /// A Lloyd iteration finished.
    Iteration {
        /// Zero-based index of the initialisation.
        run: usize,
        /// Number of initialisations.
        n_init: usize,
        /// One-based iteration number.
        iteration: usize,
        /// Maximum iterations.
        max_iter: usize,
        /// Inertia of the centres this iteration started from.
        inertia: f64,
        /// Sum of squared centre shifts this iteration.
        center_shift: f64,
        /// The absolute tolerance the shift is compared with.
        tol: f64,
        /// Rows processed per second in this pass.
        rows_per_sec: f64,
    },
}

/// Receives progress and can cancel a fit (checked once per read block).
pub trait Observer {
    /// Called at each phase and iteration.
    fn event(&mut self, _event: &Progress<'_>) {}
    /// Returning `true` stops the fit with [`Error::Cancelled`].
    fn cancelled(&self) -> bool {
        false
    }
}

impl Observer for () {}

/// Seconds spent per phase.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Timings {
    /// Validation pass (non-finite check, means, variances, init sample).
    pub validate_secs: f64,
    /// Choosing initial centres.
    pub init_secs: f64,
    /// Lloyd iterations, all initialisations.
    pub iterations_secs: f64,
    /// Final assignment passes (inertia, labels).
    pub final_pass_secs: f64,
}

/// A uniform sample of rows with their final labels, for plotting.
#[derive(Debug, Clone, Default)]
pub struct PlotSample {
    /// Row-major `(rows, n_features)` values in original coordinates.
    pub values: Vec<f64>,
    /// Label of each sampled row.
    pub labels: Vec<u32>,
}

/// A fitted k-means model and what the fit measured.
#[derive(Debug, Clone)]
pub struct KMeansFit<T> {
    /// Row-major `(n_clusters, n_features)` centres in the compute dtype.
    pub cluster_centers: Vec<T>,
    /// Number of clusters.
    pub n_clusters: usize,
    /// Number of features.
    pub n_features: usize,
    /// Number of rows.
    pub n_samples: usize,
    /// Sum of (weighted) squared distances of rows to their centre, in `f64`,
    /// from exact differences.
    pub inertia: f64,
    /// Iterations run by the kept initialisation.
    pub n_iter: usize,
    /// Whether the kept initialisation met `tol` (or had no label change)
    /// before `max_iter`.
    pub converged: bool,
    /// Clusters with at least one row in the final assignment.
    pub n_nonempty_clusters: usize,
    /// Final inertia of each initialisation, in order.
    pub inertia_per_init: Vec<f64>,
    /// Index of the kept initialisation.
    pub best_init: usize,
    /// `tol × mean(var(X, axis=0))`, the absolute tolerance used.
    pub tol_abs: f64,
    /// Seconds per phase.
    pub timings: Timings,
    /// Warnings for the user (e.g. fewer distinct clusters than asked).
    pub warnings: Vec<crate::warning::Warning>,
    /// Sampled rows and labels when `plot_sample_rows > 0`.
    pub plot_sample: Option<PlotSample>,
}

/// The farthest rows from their centres seen in a pass (at most `cap`),
/// kept to refill empty clusters. Ties go to the lower row index.
#[derive(Debug)]
struct Farthest {
    cap: usize,
    heap: BinaryHeap<Reverse<FarRow>>,
}

#[derive(Debug, Clone, Copy)]
struct FarRow {
    dist: f64,
    row: usize,
    label: u32,
}
impl PartialEq for FarRow {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o).is_eq()
    }
}
impl Eq for FarRow {}
impl PartialOrd for FarRow {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for FarRow {
    /// Farther is greater; at equal distance the lower row is greater.
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.dist.total_cmp(&o.dist).then(o.row.cmp(&self.row))
    }
}

impl Farthest {
    fn new(cap: usize) -> Self {
        Farthest { cap, heap: BinaryHeap::with_capacity(cap + 1) }
    }
    #[inline]
    fn offer(&mut self, r: FarRow) {
        if self.heap.len() < self.cap {
            self.heap.push(Reverse(r));
        } else if self.heap.peek().is_some_and(|Reverse(m)| r > *m) {
            self.heap.pop();
            self.heap.push(Reverse(r));
        }
    }
}

/// Per-block assignment outputs and per-thread tiles.
pub(super) struct Assignment<T> {
    pub(super) labels: Vec<u32>,
    pub(super) dist: Vec<f64>,
    tiles: Vec<Scratch<T>>,
    tile_rows: usize,
    k_tile: usize,
    /// Weighted distance sum per tile of the block.
    tile_sums: Vec<f64>,
    /// Farthest rows seen by each worker (merged after a pass).
    far: Vec<Farthest>,
}

impl<T: Real> Assignment<T> {
    /// Buffers for `plan` and `n_clusters` centres of `n_features`: one block
    /// of labels and distances, one tile and, with `farthest`, one list of
    /// the `n_clusters` farthest rows per thread.
    pub(super) fn new(plan: &Plan, n_clusters: usize, n_features: usize, farthest: bool) -> Self {
        let workers = plan.threads.max(1);
        Assignment {
            labels: vec![0; plan.block_rows],
            dist: vec![0.0; plan.block_rows],
            tiles: (0..workers)
                .map(|_| Scratch::new(plan.assign_tile_rows, n_clusters, plan.k_tile, n_features))
                .collect(),
            tile_rows: plan.assign_tile_rows,
            k_tile: plan.k_tile,
            tile_sums: vec![0.0; plan.block_rows.div_ceil(TILE_ROWS)],
            far: (0..if farthest { workers } else { 0 }).map(|_| Farthest::new(n_clusters)).collect(),
        }
    }

    /// Adds Σ w_i · dist_i over the last block's `rows` rows to `total`:
    /// per fixed tile in parallel, then tile by tile in order, so the total
    /// does not depend on the thread count or the block size (blocks hold
    /// whole tiles).
    pub(super) fn add_weighted_sum(&mut self, rows: usize, w: Option<&[f64]>, total: &mut f64) {
        let dist = &self.dist[..rows];
        let n_tiles = rows.div_ceil(TILE_ROWS);
        self.tile_sums[..n_tiles].par_iter_mut().enumerate().for_each(|(t, s)| {
            let r = t * TILE_ROWS..((t + 1) * TILE_ROWS).min(rows);
            *s = match w {
                Some(w) => dist[r.clone()].iter().zip(&w[r]).map(|(d, w)| d * w).sum(),
                None => dist[r].iter().sum(),
            };
        });
        for s in &self.tile_sums[..n_tiles] {
            *total += s;
        }
    }

    /// Offers the last block's rows (those with positive weight) to the
    /// per-worker farthest lists; `start` is the block's first row.
    fn offer_farthest(&mut self, start: usize, rows: usize, w: Option<&[f64]>) {
        let per = rows.div_ceil(self.far.len().max(1)).max(1);
        let (labels, dist) = (&self.labels[..rows], &self.dist[..rows]);
        self.far.par_iter_mut().enumerate().for_each(|(p, far)| {
            for i in p * per..((p + 1) * per).min(rows) {
                if w.is_none_or(|w| w[i] > 0.0) {
                    far.offer(FarRow { dist: dist[i], row: start + i, label: labels[i] });
                }
            }
        });
    }

    /// The farthest rows of the pass, farthest first (the same whatever the
    /// thread count: the top of a total order), and clears the lists.
    fn take_farthest(&mut self) -> Vec<FarRow> {
        let mut all: Vec<FarRow> = self.far.iter_mut().flat_map(|f| f.heap.drain().map(|Reverse(r)| r)).collect();
        all.sort_by(|a, b| b.cmp(a));
        all.truncate(self.far.first().map_or(0, |f| f.cap));
        all
    }

    /// Assigns the block `x`; returns its number of rows. Labels and
    /// distances are in `labels[..rows]` and `dist[..rows]`.
    pub(super) fn run(&mut self, x: &[T], c: &PreparedCenters<T>) -> usize {
        let rows = x.len() / c.n_features;
        assign_block(
            x,
            c,
            self.tile_rows,
            self.k_tile,
            &mut self.tiles,
            &mut self.labels[..rows],
            &mut self.dist[..rows],
        );
        rows
    }
}

/// What the validation pass learns.
pub(crate) struct Scan {
    /// Column means.
    pub(crate) mean: Vec<f64>,
    /// Mean of the column variances.
    pub(crate) mean_variance: f64,
    /// k-means++ sample, row-major, the rows' values in `f64`.
    pub(crate) sample: Vec<f64>,
    /// Weights of the sampled rows.
    pub(crate) sample_weight: Vec<f64>,
    /// Row indices of the sampled rows.
    pub(crate) sample_rows: Vec<usize>,
    /// Sum of the sample weights (`n_samples` without weights).
    pub(crate) weight_sum: f64,
}

/// One initialisation's outcome.
struct Run {
    centers: Vec<f64>,
    inertia: f64,
    n_iter: usize,
    converged: bool,
    nonempty: usize,
}

/// Fits k-means to `x` (shape `(n_samples, n_features)`, any supported dtype,
/// converted block by block to the compute type `T`), with optional
/// `sample_weight` (shape `(n_samples,)`), within `plan` (from
/// [`super::plan_kmeans`] for the same parameters and data).
///
/// When `labels_out` is given it receives the final labels (`u32`, in row
/// order, in pieces of at most `plan.block_rows`).
///
/// # Errors
/// [`Error::InvalidParameter`] / [`Error::ShapeMismatch`] for bad parameters
/// or weights of the wrong length; [`Error::NonFinite`] naming the first
/// non-finite value; [`Error::InvalidWeight`] for a negative or non-finite
/// weight; [`Error::Io`] / [`Error::Truncated`] on read failures and whatever
/// `labels_out` returns; [`Error::Cancelled`] when `observer` cancels.
/// Nothing is allocated beyond the plan before the data are validated.
///
/// # Panics
/// Never on user input.
pub fn fit<T: Real>(
    params: &KMeansParams,
    x: &Source<'_>,
    sample_weight: Option<&Source<'_>>,
    plan: &Plan,
    mut labels_out: LabelSink<'_>,
    observer: &mut dyn Observer,
) -> Result<KMeansFit<T>> {
    let (n, d, k) = (x.n_samples(), x.n_features(), params.n_clusters);
    params.validate(n, d)?;
    x.check_weights(sample_weight)?;
    let n_init = params.effective_n_init();
    let mut warnings = Vec::new();
    if matches!(params.init, Init::Centers { .. }) && params.n_init.is_some_and(|m| m > 1) {
        warnings.push(crate::warning::Warning::InitCentersWithNInit { n_init: params.n_init.unwrap_or(1) });
    }
    if matches!(params.init, Init::KMeansPlusPlus) {
        let wanted = params.init_sample_rows.unwrap_or_else(|| default_init_sample_rows(n, d, k)).min(n);
        if plan.init_sample_rows < wanted {
            warnings.push(crate::warning::Warning::InitSampleCut {
                wanted_rows: wanted,
                used_rows: plan.init_sample_rows,
                more_bytes: ((wanted - plan.init_sample_rows) * (d * 8 + 16)) as u64,
            });
        }
    }
    let mut timings = Timings::default();
    let mut master = ChaCha8Rng::seed_from_u64(params.random_state);
    let mut sample_rng = ChaCha8Rng::seed_from_u64(master.next_u64());
    let mut plot_rng = ChaCha8Rng::seed_from_u64(master.next_u64());

    // Validation and init phase: its buffers (the k-means++ sample, small
    // read blocks) are freed before the iterations allocate theirs.
    let (mean_variance, inits) = {
        let mut blocks = BlockReader::<T>::new(x, sample_weight, plan.scan_block_rows);
        observer.event(&Progress::Phase("validating"));
        let t = Instant::now();
        let scan = scan(&mut blocks, plan.init_sample_rows, &mut sample_rng, &*observer)?;
        timings.validate_secs = t.elapsed().as_secs_f64();
        observer.event(&Progress::Phase("init"));
        let t = Instant::now();
        let mut inits = Vec::with_capacity(n_init);
        for _ in 0..n_init {
            if observer.cancelled() {
                return Err(Error::Cancelled);
            }
            let mut rng = ChaCha8Rng::seed_from_u64(master.next_u64());
            inits.push(initial_centers(params, &scan, &mut blocks, &mut rng, &*observer)?);
        }
        timings.init_secs = t.elapsed().as_secs_f64();
        (scan.mean_variance, inits)
    };
    let tol_abs = params.tol * mean_variance;

    let mut blocks = BlockReader::<T>::new(x, sample_weight, plan.block_rows);
    let mut asg = Assignment::<T>::new(plan, k, d, true);
    let mut best: Option<(usize, Run)> = None;
    let mut inertia_per_init = Vec::with_capacity(n_init);
    let mut sums = vec![0.0; k * d];
    let mut cw = vec![0.0; k];
    let want_output = labels_out.is_some() || params.plot_sample_rows > 0;
    let mut plot = None;
    for (run, init) in inits.into_iter().enumerate() {
        let t = Instant::now();
        observer.event(&Progress::Phase("iterating"));
        let mut r = lloyd(params, run, n_init, tol_abs, init, &mut blocks, &mut asg, &mut sums, &mut cw, observer)?;
        timings.iterations_secs += t.elapsed().as_secs_f64();
        let finish_here = n_init == 1 && want_output;
        if !r.1 || finish_here {
            observer.event(&Progress::Phase("labels"));
            let t = Instant::now();
            let sink = if finish_here { reborrow(&mut labels_out) } else { None };
            let p = if finish_here && params.plot_sample_rows > 0 { Some(&mut plot) } else { None };
            let (inertia, nonempty) = final_pass(
                &r.0.centers,
                k,
                &mut blocks,
                &mut asg,
                &mut cw,
                sink,
                p,
                params.plot_sample_rows,
                &mut plot_rng,
                &*observer,
            )?;
            r.0.inertia = inertia;
            r.0.nonempty = nonempty;
            timings.final_pass_secs += t.elapsed().as_secs_f64();
        }
        inertia_per_init.push(r.0.inertia);
        if best.as_ref().is_none_or(|(_, b)| r.0.inertia < b.inertia) {
            best = Some((run, r.0));
        }
    }
    let (best_init, mut best) = best.expect("n_init >= 1");
    if n_init > 1 && want_output {
        observer.event(&Progress::Phase("labels"));
        let t = Instant::now();
        let p = if params.plot_sample_rows > 0 { Some(&mut plot) } else { None };
        let (inertia, nonempty) = final_pass(
            &best.centers,
            k,
            &mut blocks,
            &mut asg,
            &mut cw,
            reborrow(&mut labels_out),
            p,
            params.plot_sample_rows,
            &mut plot_rng,
            &*observer,
        )?;
        best.inertia = inertia;
        best.nonempty = nonempty;
        timings.final_pass_secs += t.elapsed().as_secs_f64();
    }
    if !best.inertia.is_finite() {
        return Err(overflow(sample_weight.is_some(), "inertia", best.inertia));
    }
    if best.nonempty < k {
        warnings.push(crate::warning::Warning::FewerClusters { found: best.nonempty, n_clusters: k });
    }
    if !best.converged {
        warnings.push(crate::warning::Warning::NotConverged {
            estimator: crate::warning::Estimator::KMeans,
            max_iter: params.max_iter,
        });
    }
    let cluster_centers = best.centers.iter().map(|&v| T::from_f64(v)).collect();
    Ok(KMeansFit {
        cluster_centers,
        n_clusters: k,
        n_features: d,
        n_samples: n,
        inertia: best.inertia,
        n_iter: best.n_iter,
        converged: best.converged,
        n_nonempty_clusters: best.nonempty,
        inertia_per_init,
        best_init,
        tol_abs,
        timings,
        warnings,
        plot_sample: plot,
    })
}

/// Where final labels go: a callback fed labels in row order, block by block.
pub type LabelSink<'f> = Option<&'f mut dyn FnMut(&[u32]) -> Result<()>>;

fn reborrow<'f>(sink: &'f mut LabelSink<'_>) -> LabelSink<'f> {
    match sink {
        Some(f) => Some(&mut **f),
        None => None,
    }
}

/// The validation pass: non-finite values, weights, column means and
/// variances (around the first row, to avoid cancellation), and the
/// k-means++ sample (Algorithm S, so it does not depend on block sizes).
pub(crate) fn scan<T: Real>(
    blocks: &mut BlockReader<'_, '_, T>,
    sample_rows: usize,
    rng: &mut ChaCha8Rng,
    obs: &dyn Observer,
) -> Result<Scan> {
    let x = blocks.x();
    let (n, d) = (x.n_samples(), x.n_features());
    let mut sum = vec![0.0; d];
    let mut sumsq = vec![0.0; d];
    let mut origin: Option<Vec<f64>> = None;
    let mut bad: Option<(usize, usize)> = None;
    let mut bad_count = 0u64;
    let mut weight_sum = 0.0;
    let mut lo = vec![f64::INFINITY; d];
    let mut hi = vec![f64::NEG_INFINITY; d];
    let mut sampler = SequentialSample::new(n, sample_rows);
    let mut sample = Vec::with_capacity(sample_rows.min(n) * d);
    let mut sample_weight = Vec::with_capacity(sample_rows.min(n));
    let mut sample_index = Vec::with_capacity(sample_rows.min(n));
    let zero = vec![0.0; d];
    let wname = blocks.weights().map(Source::name);
    blocks.for_each(&zero, &|| obs.cancelled(), |start, xb, wb| {
        if let Some(wb) = wb {
            for (i, &wi) in wb.iter().enumerate() {
                if !(wi.is_finite() && wi >= 0.0) {
                    return Err(Error::InvalidWeight {
                        path: wname.clone().unwrap_or_default(),
                        row: start + i,
                        value: wi,
                    });
                }
                weight_sum += wi;
            }
        }
        let o = origin.get_or_insert_with(|| xb[..d].iter().map(|v| v.to_f64()).collect());
        for (i, row) in xb.chunks_exact(d).enumerate() {
            for (j, &v) in row.iter().enumerate() {
                let v = v.to_f64();
                if !v.is_finite() {
                    bad_count += 1;
                    bad.get_or_insert((start + i, j));
                    continue;
                }
                sum[j] += v - o[j];
                sumsq[j] += (v - o[j]) * (v - o[j]);
                lo[j] = lo[j].min(v);
                hi[j] = hi[j].max(v);
            }
            if sampler.take(rng) {
                sample.extend(row.iter().map(|v| v.to_f64()));
                sample_weight.push(wb.map_or(1.0, |w| w[i]));
                sample_index.push(start + i);
            }
        }
        Ok(())
    })?;
    if let Some((row, column)) = bad {
        let value = x.value(row, column)?;
        if value.is_finite() {
            return Err(Error::param_with(
                "dtype",
                format!(
                    "{}: row {row}, column {column} holds {value:e}, which overflows {}",
                    x.name().display(),
                    T::DTYPE.name()
                ),
                vec![crate::error::Remedy::ComputeIn(crate::io::Dtype::F64)],
            ));
        }
        return Err(Error::NonFinite { path: x.name(), row, column, value, count: bad_count });
    }
    // Squared distances between any two points must stay finite in the
    // compute type, with room for the GEMM identity's ‖c‖² − 2x·c.
    let spread: f64 = lo.iter().zip(&hi).map(|(l, h)| (h - l) * (h - l)).sum();
    let max = if T::DTYPE == crate::io::Dtype::F32 { f64::from(f32::MAX) } else { f64::MAX };
    if !(spread.is_finite() && spread <= max / 16.0) {
        return Err(Error::param_with(
            "X",
            format!(
                "{}: a column spans {:.3e}, so squared distances overflow {}",
                x.name().display(),
                lo.iter().zip(&hi).map(|(l, h)| h - l).fold(0.0, f64::max),
                T::DTYPE.name(),
            ),
            if T::DTYPE == crate::io::Dtype::F32 {
                vec![crate::error::Remedy::RescaleData, crate::error::Remedy::ComputeIn(crate::io::Dtype::F64)]
            } else {
                vec![crate::error::Remedy::RescaleData]
            },
        ));
    }
    if !weight_sum.is_finite() {
        return Err(Error::param(
            "sample_weight",
            format!("the weights sum to {weight_sum} in float64; hint: scale the sample weights down (only their ratios matter for the centres)"),
        ));
    }
    if blocks.weights().is_some() && weight_sum <= 0.0 {
        return Err(Error::param(
            "sample_weight",
            "all sample weights are zero; hint: at least one weight must be positive",
        ));
    }
    let o = origin.unwrap_or_default();
    let nf = n as f64;
    let mean: Vec<f64> = (0..d).map(|j| o[j] + sum[j] / nf).collect();
    let mean_variance = (0..d).map(|j| (sumsq[j] / nf - (sum[j] / nf).powi(2)).max(0.0)).sum::<f64>() / d as f64;
    let weight_sum = if blocks.weights().is_some() { weight_sum } else { nf };
    Ok(Scan { mean, mean_variance, sample, sample_weight, sample_rows: sample_index, weight_sum })
}

/// Initial centres (row-major, the data's coordinates) for one initialisation.
fn initial_centers<T: Real>(
    params: &KMeansParams,
    scan: &Scan,
    blocks: &mut BlockReader<'_, '_, T>,
    rng: &mut ChaCha8Rng,
    obs: &dyn Observer,
) -> Result<Vec<f64>> {
    let (n, d, k) = (blocks.x().n_samples(), blocks.x().n_features(), params.n_clusters);
    let zero = vec![0.0; d];
    match &params.init {
        Init::Centers { values, .. } => Ok(values.clone()),
        Init::KMeansPlusPlus => {
            let idx = kmeans_plusplus(&scan.sample, d, &scan.sample_weight, k, rng, &|| obs.cancelled())?;
            Ok(idx.iter().flat_map(|&i| scan.sample[i * d..(i + 1) * d].iter().copied()).collect())
        }
        Init::Random => {
            let rows = match blocks.weights() {
                None => uniform_distinct(n, k, rng),
                Some(_) => {
                    let mut draw = WeightedDraw::new(k);
                    blocks.for_each(&zero, &|| obs.cancelled(), |start, _, wb| {
                        for (i, &wi) in wb.unwrap_or(&[]).iter().enumerate() {
                            draw.offer(start + i, wi, rng);
                        }
                        Ok(())
                    })?;
                    let rows = draw.finish();
                    if rows.len() < k {
                        return Err(Error::param(
                            "n_clusters",
                            format!(
                                "only {} rows have a positive sample_weight, fewer than n_clusters = {k}",
                                rows.len()
                            ),
                        ));
                    }
                    rows
                }
            };
            let mut out = vec![0.0; k * d];
            for (c, &i) in rows.iter().enumerate() {
                blocks.read_row(i, &zero, &mut out[c * d..(c + 1) * d])?;
            }
            Ok(out)
        }
    }
}

/// Runs Lloyd iterations from `centers`; returns the run and whether it
/// converged strictly (no centre moved, hence no label changed), in which
/// case its inertia and cluster counts are final.
#[allow(clippy::too_many_arguments)]
fn lloyd<T: Real>(
    params: &KMeansParams,
    run: usize,
    n_init: usize,
    tol_abs: f64,
    mut centers: Vec<f64>,
    blocks: &mut BlockReader<'_, '_, T>,
    asg: &mut Assignment<T>,
    sums: &mut [f64],
    cw: &mut [f64],
    observer: &mut dyn Observer,
) -> Result<(Run, bool)> {
    let (n, d, k) = (blocks.x().n_samples(), blocks.x().n_features(), params.n_clusters);
    let zero = vec![0.0; d];
    // Centres live in the compute type (as scikit-learn's `cluster_centers_`
    // has X's dtype): each is rounded once from its f64 value.
    for c in centers.iter_mut() {
        *c = T::from_f64(*c).to_f64();
    }
    let mut prepared = PreparedCenters::<T>::new(&centers, k, d);
    let mut acc = Accumulator::new(k, d, blocks.block_rows());
    let mut out = Run { centers: Vec::new(), inertia: f64::INFINITY, n_iter: 0, converged: false, nonempty: 0 };
    let mut strict = false;
    let mut row = vec![0.0; d];
    for it in 0..params.max_iter {
        let t = Instant::now();
        sums.fill(0.0);
        cw.fill(0.0);
        let mut inertia = 0.0;
        blocks.for_each(&zero, &|| observer.cancelled(), |start, xb, wb| {
            let rows = asg.run(xb, &prepared);
            asg.add_weighted_sum(rows, wb, &mut inertia);
            asg.offer_farthest(start, rows, wb);
            acc.add_block(xb, start, &asg.labels[..rows], wb, sums, cw);
            Ok(())
        })?;
        acc.finish(sums, cw);
        let nonempty = cw.iter().filter(|&&w| w > 0.0).count();
        // Refill empty clusters with the rows farthest from their centres
        // (scikit-learn's `_relocate_empty_clusters_dense`).
        let farthest = asg.take_farthest();
        if nonempty < k {
            let empty: Vec<usize> = (0..k).filter(|&j| cw[j] == 0.0).collect();
            for (&j, f) in empty.iter().zip(&farthest) {
                blocks.read_row(f.row, &zero, &mut row)?;
                let wi = match blocks.weights() {
                    Some(w) => w.value(f.row, 0)?,
                    None => 1.0,
                };
                let old = f.label as usize;
                for q in 0..d {
                    sums[old * d + q] -= wi * row[q];
                    sums[j * d + q] = wi * row[q];
                }
                cw[old] -= wi;
                cw[j] = wi;
            }
        }
        let mut center_shift = 0.0;
        for j in 0..k {
            if cw[j] > 0.0 {
                for q in 0..d {
                    let c = T::from_f64(sums[j * d + q] / cw[j]).to_f64();
                    center_shift += (c - centers[j * d + q]).powi(2);
                    centers[j * d + q] = c;
                }
            }
        }
        prepared = PreparedCenters::new(&centers, k, d);
        out.n_iter = it + 1;
        out.inertia = inertia;
        out.nonempty = nonempty;
        observer.event(&Progress::Iteration {
            run,
            n_init,
            iteration: it + 1,
            max_iter: params.max_iter,
            inertia,
            center_shift,
            tol: tol_abs,
            rows_per_sec: n as f64 / t.elapsed().as_secs_f64().max(1e-9),
        });
        if center_shift == 0.0 {
            strict = true;
            out.converged = true;
            break;
        }
        if center_shift <= tol_abs {
            out.converged = true;
            break;
        }
    }
    out.centers = centers;
    Ok((out, strict))
}

/// Assigns every row to the final centres (values of the compute type, as
/// `f64`): inertia, non-empty clusters, labels to `sink`, and the plot sample.
#[allow(clippy::too_many_arguments)]
fn final_pass<T: Real>(
    centers: &[f64],
    k: usize,
    blocks: &mut BlockReader<'_, '_, T>,
    asg: &mut Assignment<T>,
    counts: &mut [f64],
    mut sink: LabelSink<'_>,
    plot: Option<&mut Option<PlotSample>>,
    plot_rows: usize,
    rng: &mut ChaCha8Rng,
    obs: &dyn Observer,
) -> Result<(f64, usize)> {
    let (n, d) = (blocks.x().n_samples(), blocks.x().n_features());
    let prepared = PreparedCenters::<T>::new(centers, k, d);
    counts.fill(0.0);
    let mut inertia = 0.0;
    let mut sampler = SequentialSample::new(n, if plot.is_some() { plot_rows } else { 0 });
    let mut sample = PlotSample::default();
    blocks.for_each(&vec![0.0; d], &|| obs.cancelled(), |_, xb, wb| {
        let rows = asg.run(xb, &prepared);
        asg.add_weighted_sum(rows, wb, &mut inertia);
        let labels = &asg.labels[..rows];
        for i in 0..rows {
            counts[labels[i] as usize] += 1.0;
            if sampler.take(rng) {
                sample.values.extend(xb[i * d..(i + 1) * d].iter().map(|v| v.to_f64()));
                sample.labels.push(labels[i]);
            }
        }
        if let Some(s) = sink.as_deref_mut() {
            s(labels)?;
        }
        Ok(())
    })?;
    if let Some(p) = plot {
        *p = Some(sample);
    }
    Ok((inertia, counts.iter().filter(|&&c| c > 0.0).count()))
}

/// The error for a weighted sum that overflowed float64 (`what` = `value`),
/// naming the sample weights when there are any, else the data.
pub(crate) fn overflow(weighted: bool, what: &str, value: f64) -> Error {
    let (name, hint) = if weighted {
        ("sample_weight", "scale the sample weights down (only their ratios matter)")
    } else {
        ("X", "rescale the data (e.g. divide by its standard deviation)")
    };
    Error::param(name, format!("the weighted sums overflow float64 ({what} = {value}); hint: {hint}"))
}
