//! Out-of-core Lloyd k-means: one pass over the data per iteration, the
//! assignment fused with the centre update, within a memory plan.
//!
//! Per read block: the exact nearest centre of every row
//! ([`crate::kernels::assign_block`]: GEMM-identity candidates certified by
//! an error bound, exact `f64` differences where it cannot decide), inertia
//! from exact differences in `f64`, and per-cluster weighted sums of the
//! rows' values in `f64` accumulated in row order with their rounding
//! errors ([`crate::kernels::accumulate_block`]). No `n_samples × n_clusters`
//! matrix and no per-sample label array is ever held: labels are streamed
//! to the caller in a final pass.
//!
//! Centres are held in `f64` but always rounded to the compute type (or
//! kept in `f64`, with [`fit_centers`]): each
//! update is the weighted mean of the cluster's rows (their values summed
//! in `f64` with compensation, a function of the labels alone, so that
//! unchanged labels give unchanged centres), rounded once to the compute
//! type; so the centres a fit returns are exactly the ones its labels and
//! inertia were computed against, a cluster of identical points gets that
//! point, and data far from the origin (`1e14 + i`) keep means as accurate
//! as centred data would give.
//!
//! Reference: S. Lloyd, "Least squares quantization in PCM" (1982);
//! scikit-learn's `_kmeans_single_lloyd` for the iteration, tolerance,
//! strict-convergence and empty-cluster rules.

use std::time::Instant;

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::auto::AutoChoice;
use super::bounds::{Bounds, WIDTH};
use super::init::{kmeans_plusplus, random_rows};
use super::minibatch_run::{run_steps, Draw};
use super::params::{Algorithm, Init, KMeansParams, Metric};
use super::pass::{AssignPass, AssignStats, Assignment, Mode};
use crate::dtype::Real;
use crate::error::{Error, Result};
use crate::exec::{run_split, scan, KeyedSample, Observer, Progress, RowSplit, RowStates, RunOptions, Scan};
use crate::io::{BlockReader, Source};
use crate::kernels::{unit_row, PreparedCenters};
use crate::plan::Plan;

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
    /// Iterations run by the kept initialisation (mini-batch: passes' worth
    /// of steps, rounded up).
    pub n_iter: usize,
    /// Mini-batch steps run by the kept initialisation (0 for Lloyd).
    pub n_steps: usize,
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
    /// Per iteration of the kept initialisation: the share of the
    /// `n_samples × n_clusters` distances that bounds skipped (0 for plain
    /// Lloyd passes; see [`Algorithm`]).
    pub skip_share: Vec<f64>,
}

/// One initialisation's outcome.
struct Run {
    centers: Vec<f64>,
    inertia: f64,
    n_iter: usize,
    n_steps: usize,
    converged: bool,
    nonempty: usize,
    skip_share: Vec<f64>,
}

/// Fits k-means to `x` (shape `(n_samples, n_features)`, any supported dtype,
/// converted block by block to the compute type `T`), with optional
/// `sample_weight` (shape `(n_samples,)`), within `plan` (from
/// [`super::plan_kmeans`] for the same parameters and data).
///
/// When `labels_out` is given it receives the final labels (`u32`, in row
/// order, in pieces of at most `plan.schedule.block_rows`).
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
    opts: &RunOptions,
    labels_out: LabelSink<'_>,
    observer: &mut dyn Observer,
) -> Result<KMeansFit<T>> {
    fit_centers::<T, T>(params, x, sample_weight, plan, opts, labels_out, observer)
}

/// [`fit`] computing in `T` with centres rounded to `C` instead of `T`
/// (and returned as `C`). With `T = f32` and `C = f64` on rows whose values
/// `f32` holds exactly (integers up to 2²⁴ in magnitude, `float16`), every
/// result is the `f64` fit's, to the bit: the labels are exact nearest
/// centres and the sums, means and distances are computed in `f64` from the
/// same values, while the GEMM tiles and the blocks are `f32`. The plan must
/// be made for `T`.
///
/// # Errors
/// As [`fit`].
///
/// # Panics
/// Never on user input.
pub fn fit_centers<T: Real, C: Real>(
    params: &KMeansParams,
    x: &Source<'_>,
    sample_weight: Option<&Source<'_>>,
    plan: &Plan,
    opts: &RunOptions,
    mut labels_out: LabelSink<'_>,
    observer: &mut dyn Observer,
) -> Result<KMeansFit<C>> {
    let (n, d, k) = (x.n_samples(), x.n_features(), params.n_clusters);
    params.validate(n, d)?;
    x.check_weights(sample_weight)?;
    if (params.metric == Metric::Cosine) != x.has_unit_rows() {
        return Err(Error::param("metric", "cosine k-means reads its rows scaled to unit norm, and only it does"));
    }
    let n_init = params.effective_n_init();
    let mut warnings = Vec::new();
    if matches!(params.init, Init::Centers { .. }) && params.n_init.is_some_and(|m| m > 1) {
        warnings.push(crate::warning::Warning::InitCentersWithNInit { n_init: params.n_init.unwrap_or(1) });
    }
    let mut timings = Timings::default();
    let mut master = ChaCha8Rng::seed_from_u64(params.random_state);
    let sample_seed = master.next_u64();
    let plot_seed = master.next_u64();
    let split = &opts.row_split;
    if x.sparse_row_nnz().is_some() && !opts.backend.is_cpu() {
        return Err(Error::param("X", "sparse data are fitted on the CPU only (not on a device yet)"));
    }

    // Validation and init phase: its buffers (the k-means++ sample, small
    // read blocks) are freed before the iterations allocate theirs.
    let (mean_variance, inits) = {
        let mut blocks = BlockReader::<T>::new(x, sample_weight, plan.schedule.scan_block_rows);
        observer.event(&Progress::Phase("validating"));
        let t = Instant::now();
        let scan = scan(&mut blocks, split, plan.schedule.init_sample, &opts.scratch_dir(), sample_seed, &*observer)?;
        timings.validate_secs = t.elapsed().as_secs_f64();
        observer.event(&Progress::Phase("init"));
        let t = Instant::now();
        let mut inits = Vec::with_capacity(n_init);
        for _ in 0..n_init {
            if observer.cancelled() {
                return Err(Error::Cancelled);
            }
            let mut rng = ChaCha8Rng::seed_from_u64(master.next_u64());
            inits.push(initial_centers(params, &scan, &mut blocks, split, &mut rng, &*observer)?);
        }
        timings.init_secs = t.elapsed().as_secs_f64();
        (scan.mean_variance, inits)
    };
    let tol_abs = params.tol * mean_variance;
    // Mini-batch runs draw their rows from a stream of their own (after the
    // initialisations', which it leaves as Lloyd's).
    let mini_batch = match &params.mini_batch {
        Some(mb) if !split.is_remote() => Some((mb, master.next_u64())),
        Some(_) => return Err(Error::param("mini_batch", "mini-batch runs read rows anywhere: not on a cluster")),
        None => None,
    };

    let mut blocks = BlockReader::<T>::new(x, sample_weight, plan.schedule.block_rows);
    let mut asg = Assignment::<T>::new(plan, k, d, opts.backend, x.sparse_row_nnz().is_some());
    let mut best: Option<(usize, Run)> = None;
    let mut inertia_per_init = Vec::with_capacity(n_init);
    let want_output = labels_out.is_some() || params.plot_sample_rows > 0;
    let mut plot = None;
    for (run, init) in inits.into_iter().enumerate() {
        let t = Instant::now();
        observer.event(&Progress::Phase("iterating"));
        let (mut r, strict, mut held) = match &mini_batch {
            Some((mb, seed)) => {
                // The draw's cumulative weights are freed before the final
                // pass allocates its blocks.
                let draw = Draw::new(x, sample_weight)?;
                let mut rng = ChaCha8Rng::seed_from_u64(*seed);
                rng.set_stream(run as u64);
                let s = run_steps::<T, C>(
                    params,
                    mb,
                    x,
                    &draw,
                    init,
                    tol_abs,
                    &mut rng,
                    plan.threads,
                    (run, n_init),
                    observer,
                )?;
                let rows = n - x.first_row();
                let n_iter = (s.n_steps * mb.batch_size.min(rows)).div_ceil(rows);
                let r = Run {
                    centers: s.centers,
                    inertia: f64::INFINITY,
                    n_iter,
                    n_steps: s.n_steps,
                    converged: s.converged,
                    nonempty: 0,
                    skip_share: Vec::new(),
                };
                (r, false, None)
            }
            None => lloyd::<T, C>(params, plan, opts, run, n_init, tol_abs, init, &mut blocks, &mut asg, observer)?,
        };
        timings.iterations_secs += t.elapsed().as_secs_f64();
        let finish_here = n_init == 1 && want_output;
        // A strictly converged bounded run holds its final labels in the
        // bounds: no final pass (unless a plot sample needs the rows). Any
        // other bounded run's final pass is a bounded one.
        let from_bounds = match held.as_mut() {
            Some(b) if strict && finish_here && params.plot_sample_rows == 0 => {
                observer.event(&Progress::Phase("labels"));
                let t = Instant::now();
                // The clusters that hold rows (scikit-learn's distinct
                // labels), counted as the labels go out: the last pass's
                // count is of clusters with weight, fewer where every row
                // of a cluster has weight zero.
                if let Some(sink) = reborrow(&mut labels_out) {
                    let mut has_rows = vec![false; k];
                    let first = blocks.x().first_row();
                    b.labels_to(first, n - first, asg.labels_mut(), &mut |labels: &[u32]| {
                        for &l in labels {
                            has_rows[l as usize] = true;
                        }
                        sink(labels)
                    })?;
                    r.nonempty = has_rows.iter().filter(|&&h| h).count();
                }
                timings.final_pass_secs += t.elapsed().as_secs_f64();
                true
            }
            _ => false,
        };
        if !from_bounds && (!strict || finish_here) {
            observer.event(&Progress::Phase("labels"));
            let t = Instant::now();
            let sink = if finish_here { reborrow(&mut labels_out) } else { None };
            let p = if finish_here && params.plot_sample_rows > 0 { Some(&mut plot) } else { None };
            let (inertia, nonempty) = final_pass(
                &r.centers,
                k,
                &mut blocks,
                &mut asg,
                split,
                sink,
                held.as_mut(),
                p.map(|p| (p, params.plot_sample_rows, plot_seed)),
                &*observer,
            )?;
            r.inertia = inertia;
            r.nonempty = nonempty;
            timings.final_pass_secs += t.elapsed().as_secs_f64();
        }
        inertia_per_init.push(r.inertia);
        if best.as_ref().is_none_or(|(_, b)| r.inertia < b.inertia) {
            best = Some((run, r));
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
            split,
            reborrow(&mut labels_out),
            None,
            p.map(|p| (p, params.plot_sample_rows, plot_seed)),
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
    // Mini-batches stop when their steps run out without a word, as
    // scikit-learn's MiniBatchKMeans does.
    if !best.converged && params.mini_batch.is_none() {
        warnings.push(crate::warning::Warning::NotConverged {
            estimator: crate::warning::Estimator::KMeans,
            max_iter: params.max_iter,
        });
    }
    let cluster_centers = best.centers.iter().map(|&v| C::from_f64(v)).collect();
    Ok(KMeansFit {
        cluster_centers,
        n_clusters: k,
        n_features: d,
        n_samples: n,
        inertia: best.inertia,
        n_iter: best.n_iter,
        n_steps: best.n_steps,
        converged: best.converged,
        n_nonempty_clusters: best.nonempty,
        inertia_per_init,
        best_init,
        tol_abs,
        timings,
        warnings,
        plot_sample: plot,
        skip_share: best.skip_share,
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

/// Initial centres (row-major, the data's coordinates) for one initialisation.
fn initial_centers<T: Real>(
    params: &KMeansParams,
    scan: &Scan,
    blocks: &mut BlockReader<'_, '_, T>,
    split: &RowSplit,
    rng: &mut ChaCha8Rng,
    obs: &dyn Observer,
) -> Result<Vec<f64>> {
    let (d, k) = (blocks.x().n_features(), params.n_clusters);
    let zero = vec![0.0; d];
    match &params.init {
        Init::Centers { values, .. } if values.is_empty() => {
            Err(Error::param("init", "the initial centres were planned but not given"))
        }
        Init::Centers { values, .. } => Ok(values.clone()),
        Init::KMeansPlusPlus => {
            let idx = kmeans_plusplus(&scan.sample, k, rng, params.metric == Metric::Cosine, &obs.cancel())?;
            scan.sample.gather(&idx)
        }
        Init::Random => {
            let rows = random_rows(blocks, split, k, "n_clusters", rng, &obs.cancel())?;
            let mut out = vec![0.0; k * d];
            for (c, &i) in rows.iter().enumerate() {
                blocks.read_row(i, &zero, &mut out[c * d..(c + 1) * d])?;
            }
            Ok(out)
        }
    }
}

/// Runs Lloyd iterations from `centers`; returns the run, whether it
/// converged strictly (no centre moved, hence no label changed), in which
/// case its inertia and cluster counts are final, and then, when its last
/// pass was bounded and ran here, the bounds holding its final labels.
/// With bounds planned the passes are bounded (see [`super::bounds`]): the
/// same bits, fewer distances; on a remote split each range's bounds stay
/// where its tasks run.
#[allow(clippy::too_many_arguments)]
fn lloyd<T: Real, C: Real>(
    params: &KMeansParams,
    plan: &Plan,
    opts: &RunOptions,
    run: usize,
    n_init: usize,
    tol_abs: f64,
    mut centers: Vec<f64>,
    blocks: &mut BlockReader<'_, '_, T>,
    asg: &mut Assignment<T>,
    observer: &mut dyn Observer,
) -> Result<(Run, bool, Option<Bounds<T>>)> {
    let (n, d, k) = (blocks.x().n_samples(), blocks.x().n_features(), params.n_clusters);
    let split = &opts.row_split;
    let zero = vec![0.0; d];
    // Centres live in the compute type (as scikit-learn's `cluster_centers_`
    // has X's dtype), or `C`: each is rounded once from its f64 value
    // (cosine: from its value scaled to unit norm).
    let cosine = params.metric == Metric::Cosine;
    for c in centers.chunks_exact_mut(d) {
        if cosine {
            unit_row(c);
        }
        for v in c.iter_mut() {
            *v = C::from_f64(*v).to_f64();
        }
    }
    let first = blocks.x().first_row();
    let remote = split.is_remote();
    let mut bounds = match plan.schedule.bounds_on_disk {
        // A device assigns whole tiles: plain passes (the same bits).
        Some(_) if !opts.backend.is_cpu() => None,
        // The rows' states stay where their tasks run (see `super::bounds`).
        Some(_) if remote => {
            Some(Bounds::<T>::new(RowStates::in_memory(first, 0, WIDTH), k, d, plan.threads, asg.tile_rows, n - first))
        }
        Some(on_disk) => {
            let states = if on_disk {
                RowStates::on_disk(first, n - first, WIDTH, &opts.scratch_dir(), plan.schedule.block_rows)?
            } else {
                RowStates::in_memory(first, n - first, WIDTH)
            };
            Some(Bounds::<T>::new(states, k, d, plan.threads, asg.tile_rows, n - first))
        }
        _ => None,
    };
    let mut out = Run {
        centers: Vec::new(),
        inertia: f64::INFINITY,
        n_iter: 0,
        n_steps: 0,
        converged: false,
        nonempty: 0,
        skip_share: Vec::new(),
    };
    let mut strict = false;
    let mut last_bounded = false;
    let mut choice = AutoChoice::new(params.algorithm == Algorithm::Auto);
    // The centres prepared for the kernels, in the same buffers every
    // iteration.
    let mut reuse: Option<PreparedCenters<T>> = None;
    for it in 0..params.max_iter {
        let t = Instant::now();
        let prepared = match reuse.take() {
            Some(p) => p.renew(&centers),
            None => PreparedCenters::<T>::for_rows(
                &centers,
                k,
                d,
                blocks.x().sparse_row_nnz().is_some(),
                blocks.x().has_unit_rows(),
            ),
        };
        let mut bounded = bounds.as_mut().filter(|_| choice.bounded(it));
        if let Some(b) = bounded.as_deref_mut() {
            if choice.fresh(it) {
                b.restart();
            }
            b.moved_to(&centers);
        }
        let cancel = observer.cancel();
        let mode = Mode::Lloyd;
        let mut pass = AssignPass {
            centers: &prepared,
            asg: &mut *asg,
            mode,
            weights_name: None,
            bounds: bounded,
            cancel: cancel.clone(),
        };
        let s = run_split(&mut pass, blocks, split, &zero, &cancel)?;
        last_bounded = pass.bounds.is_some();
        if let Some(b) = pass.bounds {
            b.passed();
        }
        let skip_share = if k > 1 { s.skipped as f64 * (k - 1) as f64 / (n as f64 * k as f64) } else { 0.0 };
        choice.record(it, t.elapsed().as_secs_f64(), skip_share);
        let mut sums = s.sums;
        let mut unit = vec![0.0; if cosine { d } else { 0 }];
        // A cluster holds rows, and for cosine k-means a direction: rows
        // of zeros alone leave it as empty as no rows (they move no centre).
        let filled = |sums: &crate::kernels::ClusterSums, j: usize, unit: &mut [f64]| {
            sums.weight(j) > 0.0
                && (!cosine || {
                    sums.direction(j, unit);
                    unit.iter().any(|&v| v != 0.0)
                })
        };
        let nonempty = (0..k).filter(|&j| filled(&sums, j, &mut unit)).count();
        // Refill empty clusters with the rows farthest from their centres
        // (scikit-learn's `_relocate_empty_clusters_dense`), found by a
        // pass of their own (the same labels and distances: a function of
        // the centres), run only when a cluster is empty.
        if nonempty < k {
            let mut pass = AssignPass {
                centers: &prepared,
                asg: &mut *asg,
                mode: Mode::Farthest,
                weights_name: None,
                bounds: None,
                cancel: observer.cancel(),
            };
            let far = run_split(&mut pass, blocks, split, &zero, &observer.cancel())?.farthest;
            let empty: Vec<usize> = (0..k).filter(|&j| !filled(&sums, j, &mut unit)).collect();
            for (&j, f) in empty.iter().zip(far.into_sorted()) {
                sums.move_row(f.label as usize, j, &f.values, f.weight);
            }
        }
        reuse = Some(prepared);
        let mut center_shift = 0.0;
        // Strict convergence is no centre moving at all: a sum of squared
        // moves can underflow to zero while centres still move.
        let mut moved = false;
        for j in 0..k {
            if filled(&sums, j, &mut unit) {
                if cosine {
                    // The mean's direction, that of the weighted sum: the
                    // sum over its largest magnitude, scaled to unit norm
                    // in float64, rounded once. Neither the weight of a row
                    // of zeros (no direction) nor the weights of rows of one
                    // direction change a bit of it: every cluster of such
                    // rows gets the same centre (scaling the sum itself
                    // rounds differently for each weight, and rows then
                    // moved between such centres until max_iter).
                    sums.direction(j, &mut unit);
                    unit_row(&mut unit);
                }
                for q in 0..d {
                    let c = if cosine { C::from_f64(unit[q]) } else { sums.mean_as::<C>(j, q, d) }.to_f64();
                    if !c.is_finite() {
                        // Values near float64's largest: a cluster's sum
                        // overflowed (its mean would not).
                        let what = format!("the mean of cluster {j} in column {q}");
                        return Err(overflow(blocks.weights().is_some(), &what, c));
                    }
                    center_shift += (c - centers[j * d + q]).powi(2);
                    moved |= c != centers[j * d + q];
                    centers[j * d + q] = c;
                }
            }
        }
        asg.recycle(AssignStats::of_sums(sums));
        out.n_iter = it + 1;
        out.inertia = s.inertia;
        out.nonempty = nonempty;
        out.skip_share.push(skip_share);
        observer.event(&Progress::Iteration {
            run,
            n_init,
            iteration: it + 1,
            max_iter: params.max_iter,
            inertia: s.inertia,
            center_shift,
            tol: tol_abs,
            rows_per_sec: n as f64 / t.elapsed().as_secs_f64().max(1e-9),
            skip_share,
        });
        if !moved {
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
    // Bounds kept elsewhere do not hold the labels here.
    let held = if last_bounded && !remote { bounds } else { None };
    Ok((out, strict, held))
}

/// Assigns every row to the final centres (values of the compute type, as
/// `f64`): inertia and non-empty clusters, labels to `sink`, and with `plot`
/// a keyed sample of rows and labels (`(out, rows, seed)`). With the bounds
/// of the run's last pass, rows they clear keep their labels without the
/// other distances (the same labels and inertia).
#[allow(clippy::too_many_arguments)]
fn final_pass<T: Real>(
    centers: &[f64],
    k: usize,
    blocks: &mut BlockReader<'_, '_, T>,
    asg: &mut Assignment<T>,
    split: &RowSplit,
    sink: LabelSink<'_>,
    mut bounds: Option<&mut Bounds<T>>,
    plot: Option<(&mut Option<PlotSample>, usize, u64)>,
    obs: &dyn Observer,
) -> Result<(f64, usize)> {
    let (n, d) = (blocks.x().n_samples(), blocks.x().n_features());
    let x = blocks.x();
    let prepared = PreparedCenters::<T>::for_rows(centers, k, d, x.sparse_row_nnz().is_some(), x.has_unit_rows());
    let first = blocks.x().first_row();
    let sample = plot.as_ref().map(|&(_, rows, seed)| {
        let mut s = KeyedSample::new(rows.min(n - first), d, seed);
        s.settle(first..n);
        s
    });
    if let Some(b) = bounds.as_deref_mut() {
        b.moved_to(centers);
    }
    let (mode, cancel) = (Mode::Final { sink, plot: sample }, obs.cancel());
    let mut pass = AssignPass { centers: &prepared, asg, mode, weights_name: None, bounds, cancel: cancel.clone() };
    let s = run_split(&mut pass, blocks, split, &vec![0.0; d], &cancel)?;
    if let (Some((out, _, _)), Mode::Final { plot: Some(sample), .. }) = (plot, pass.mode) {
        let (values, labels, _) = sample.into_rows();
        *out = Some(PlotSample { values, labels: labels.into_iter().map(|l| l as u32).collect() });
    }
    Ok((s.inertia, s.counts.iter().filter(|&&c| c > 0.0).count()))
}

/// The validation pass of [`fit`] alone, within `plan`
/// ([`super::plan_validation`]), over `x` and its weights split as `split`,
/// for a caller that draws its own mini-batches after it: fails as [`fit`]
/// does on a non-finite value, a negative or non-finite weight, weights
/// that sum to zero or overflow, and columns whose squared distances
/// overflow `T` or all underflow `f64`; returns the [`Scan`] (no sample).
///
/// # Errors
/// As described ([`Error::NonFinite`], [`Error::InvalidWeight`],
/// [`Error::InvalidParameter`]); read errors; [`Error::Cancelled`].
pub fn validate<T: Real>(
    x: &Source<'_>,
    sample_weight: Option<&Source<'_>>,
    plan: &Plan,
    opts: &RunOptions,
    observer: &dyn Observer,
) -> Result<Scan> {
    x.check_weights(sample_weight)?;
    let mut blocks = BlockReader::<T>::new(x, sample_weight, plan.schedule.scan_block_rows);
    let none = crate::plan::SampleLayout { rows: 0, piece_rows: None };
    scan(&mut blocks, &opts.row_split, none, &opts.scratch_dir(), 0, observer)
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
