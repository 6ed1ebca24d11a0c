//! The Gaussian-mixture memory plan.

use super::components::{component_cov_len, cov_len, factor_len, prec_len, precision_read_bytes, work_mats, CholWork};
use super::groups::{Groups, ParamStore, RowState};
use super::params::{CovarianceType, GmmParams, InitMethod};
use super::pass::{Stats, Workspace};
use crate::cluster::{default_init_sample_rows, k_tile, kernel_tile_rows};
use crate::dtype::Dtype;
use crate::error::{Count, Error, Remedy, Result};
use crate::exec::Backend;
use crate::exec::ScanStats;
use crate::io::{npy_writer_bytes, BlockReader, PlannedWrite};
use crate::plan::{
    check_fits, check_square_matrices, pick_block_rows, ComponentGroups, Job, Plan, SampleLayout, TILE_ROWS,
};

/// Iterations whose lower bounds a plan holds (two runs' worth: 1 MiB): a
/// fit with a larger `max_iter` is planned for these; each iteration past
/// them (a pass over the data) adds 8 bytes.
const LOWER_BOUNDS_PLANNED: usize = 1 << 16;

/// Builds the plan for fitting `params` on `job` (or, with `predict_only`,
/// for one E-step pass over the data with a fitted model).
///
/// Buffers held through the EM iterations: the parameters in `f64` (weights,
/// means, reference means, first-moment sums, covariances stored packed,
/// which double as the second-moment sums during a pass), the E-step's
/// precision factors in the compute type, the best parameters when
/// `n_init > 1`, a Cholesky workspace, per-thread E and M tiles, and per
/// block row the read scratch, converted values, `K` responsibilities and
/// `log p(x)`. The validation phase holds the k-means++ sample; the k-means
/// initialisation runs under its own plan within the same limit before these
/// buffers are allocated.
///
/// Only the mixture's own buffers are declared here: what the input or the
/// caller holds is declared once for every job by [`Job::ledger`], outside the
/// algorithm planners.
///
/// When the components' factors and sums do not fit together (full, diag,
/// spherical), the components are cut into equal groups of the largest size
/// that fits ([`crate::plan::ComponentGroups`]: per EM iteration `3G − 2`
/// passes, parameters in scratch files, per-row log-sum-exp states in memory
/// or on disk; see `grouped.rs`).
///
/// # Errors
/// [`crate::Error::DoesNotFit`] when even one component at a time (with the
/// per-row states on disk) and one tile of rows exceed the limit, with the
/// smallest limit that would work.
pub fn plan_gmm(params: &GmmParams<'_>, job: &Job, predict_only: bool) -> Result<Plan> {
    // Full and tied covariances hold d × d matrices (work matrices per
    // thread, at least one component's covariance and factor, the scatter):
    // their sizes must not wrap, even in the smallest plan.
    if matches!(params.covariance_type, CovarianceType::Full | CovarianceType::Tied) {
        let count = work_mats(params.covariance_type, job.threads) as u64 + 3;
        check_square_matrices(
            job.n_features,
            count,
            job.limit_bytes,
            || {
                format!(
                    "a Gaussian mixture with {} covariances and n_features = {}",
                    params.covariance_type.name(),
                    job.n_features
                )
            },
            vec![Remedy::CovarianceType(vec!["diag", "spherical"])],
        )?;
    }
    let own = plan_mixture(params, job, predict_only);
    // A k-means initialisation runs first, planned within the same limit
    // (see `em::fit`): the mixture needs what it needs too, and writes its
    // scratch files (a spilled k-means++ sample).
    if predict_only || params.init_params != InitMethod::KMeans || params.fully_initialised() {
        return own;
    }
    let mut kjob = job.clone();
    kjob.n_outputs = 0;
    let kmeans = match crate::cluster::plan_kmeans(&params.kmeans_init(0), &kjob) {
        Ok(kplan) => {
            let mut plan = own?;
            plan.disk.extend(
                kplan
                    .disk
                    .into_iter()
                    .map(|w| PlannedWrite { name: format!("k-means initialisation: {}", w.name), ..w }),
            );
            return Ok(plan);
        }
        Err(Error::DoesNotFit { required_bytes, limit_bytes, what, remedies }) => Error::DoesNotFit {
            required_bytes,
            limit_bytes,
            what: format!("the mixture's k-means initialisation ({what})"),
            remedies,
        },
        _ => return own,
    };
    match (own, kmeans) {
        (
            Err(Error::DoesNotFit { required_bytes, limit_bytes, what, remedies }),
            Error::DoesNotFit { required_bytes: kmeans_bytes, .. },
        ) => {
            let also = remedies.into_iter().filter(|r| !matches!(r, Remedy::RaiseMemoryLimit { .. })).collect();
            Err(Error::does_not_fit(required_bytes.max(kmeans_bytes), limit_bytes, what, also))
        }
        (Err(e), _) => Err(e),
        (Ok(_), kmeans) => Err(kmeans),
    }
}

/// [`plan_gmm`] for the mixture's own passes.
fn plan_mixture(params: &GmmParams<'_>, job: &Job, predict_only: bool) -> Result<Plan> {
    let whole = plan_layout(params, job, predict_only, None);
    if whole.is_ok() || params.covariance_type == CovarianceType::Tied || params.n_components == 1 {
        return whole;
    }
    // Components in groups: the largest group that fits, with the per-row
    // states in memory or on disk, whichever gives fewer groups (fewer
    // passes over the data); in memory when both give as many.
    let k = params.n_components;
    let largest = |on_disk: bool| {
        let fits = |g: usize| plan_layout(params, job, predict_only, Some((g, on_disk))).is_ok();
        if !fits(1) {
            return None;
        }
        let (mut lo, mut hi) = (1, k - 1);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if fits(mid) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        Some(Groups::of(k, lo))
    };
    let chosen = match (largest(false), largest(true)) {
        (Some(m), Some(d)) if d.count < m.count => Some((d, true)),
        (Some(m), _) => Some((m, false)),
        (None, Some(d)) => Some((d, true)),
        (None, None) => None,
    };
    if let Some((g, on_disk)) = chosen {
        return plan_layout(params, job, predict_only, Some((g.size, on_disk)));
    }
    plan_layout(params, job, predict_only, Some((1, true)))
}

/// The plan with every component in memory, refused when they do not fit
/// together (a pass run as a task cannot use groups).
///
/// # Errors
/// As [`plan_gmm`].
pub(crate) fn plan_whole(params: &GmmParams<'_>, job: &Job, predict_only: bool) -> Result<Plan> {
    plan_layout(params, job, predict_only, None)
}

/// The plan with all components in memory (`groups` `None`) or in groups
/// of `size` components, the per-row states on disk or not.
fn plan_layout(params: &GmmParams<'_>, job: &Job, predict_only: bool, groups: Option<(usize, bool)>) -> Result<Plan> {
    let (n, d, k) = (job.n_samples as u64, job.n_features as u64, params.n_components as u64);
    // Components whose factors, sums and tiles are held at once.
    let (gu, state_on_disk) = groups.unwrap_or((params.n_components, false));
    let g = gu as u64;
    let t = params.covariance_type;
    let c = job.compute_bytes as u64;
    let limit = job.limit_bytes;
    let threads = job.threads.max(1) as u64;
    let (ku, du) = (params.n_components, job.n_features);
    let mut led = job.ledger();
    let cl = cov_len(t, ku, du) as u64;
    let cov_detail = match t {
        CovarianceType::Full => format!("{k} × {d}·({d}+1)/2 × 8 B (lower triangles)"),
        CovarianceType::Tied => format!("{d}·({d}+1)/2 × 8 B (lower triangle)"),
        _ => format!("{k} × {d} × 8 B"),
    };
    led.add("means, weights, log-dets (float64)", k * d + 2 * k, 8, format!("{k} × ({d} + 2) × 8 B"));
    led.add(
        "precision factors (compute dtype)",
        prec_len(t, gu, du) as u64,
        c,
        format!("{} × {c} B", prec_len(t, gu, du)),
    );
    if matches!(t, CovarianceType::Full | CovarianceType::Tied) {
        led.add("means in factor coordinates (float64)", g * d, 8, format!("{g} × {d} × 8 B"));
    }
    led.add("means (compute dtype)", g * d, c, format!("{g} × {d} × {c} B"));
    let per_cov = component_cov_len(t, du) as u64;
    if groups.is_some() {
        led.add(
            "group means, weights and log-dets (float64)",
            g * d + 3 * g,
            8,
            format!("{g} × ({d} + 3) × 8 B: the group's E-step parameters and new means"),
        );
        led.add(
            "parameter records (float64)",
            ParamStore::record_len(t, du) as u64 + g * per_cov,
            8,
            format!("one component's covariance and factor, and {g} covariances"),
        );
        if !predict_only {
            led.add(
                "next means, N_k, log-dets (float64)",
                k * d + 2 * k,
                8,
                format!("{k} × ({d} + 2) × 8 B: the M-step's results across groups"),
            );
        }
        if !state_on_disk {
            led.add(
                "per-row log-sum-exp states",
                n,
                RowState::BYTES_PER_ROW,
                format!("{n} rows × {} B (max, scaled sum, best log-density, label)", RowState::BYTES_PER_ROW),
            );
        }
    } else {
        led.add("one component's factor (float64)", factor_len(t, du) as u64, 8, "between passes".into());
    }
    if !predict_only {
        let sums = Stats::bytes(t, gu, du);
        led.add(
            "sums of a pass (float64): folded chunks + open chunk",
            2,
            sums,
            format!("2 × {sums} B (N_k, first moments, reference means, {cov_detail}); the covariances are rebuilt from them"),
        );
        if t == CovarianceType::Tied {
            led.add("data scatter (float64)", d * d, 8, format!("{d} × {d} × 8 B"));
        }
        if params.n_init > 1 {
            if groups.is_some() {
                led.add(
                    "best weights, means, log-dets (float64)",
                    k * d + 2 * k,
                    8,
                    format!("kept across {} inits (covariances on disk)", params.n_init),
                );
            } else {
                led.add("best parameters (float64)", cl + k * d + k, 8, format!("kept across {} inits", params.n_init));
            }
        }
        if params.init_params == InitMethod::KMeans && !params.fully_initialised() {
            let n_init = params.n_init as u64;
            led.add("k-means centres for init", n_init * k * d, 8, format!("{n_init} × {k} × {d} × 8 B"));
        }
        if params.means_init.is_some() {
            led.add("means_init", k * d, 8, format!("{k} × {d} × 8 B"));
        }
        // The current run's and the best run's: one per iteration, planned
        // for the iterations a fit can be expected to run (a fit of more
        // than `LOWER_BOUNDS_PLANNED` iterations adds 8 B per iteration).
        let iters = params.max_iter.min(LOWER_BOUNDS_PLANNED) as u64;
        let runs = params.n_init.min(2) as u64;
        led.add("lower bounds", runs * iters, 8, format!("{runs} × {iters} iterations × 8 B"));
    }
    let n_mats = if predict_only { 0 } else { work_mats(t, job.threads) };
    if n_mats > 0 {
        led.add(
            "d × d work matrices (float64)",
            CholWork::bytes(du, n_mats),
            1,
            format!("{n_mats} × {d} × {d} × 8 B: per-thread M-step products, then Cholesky factorisations"),
        );
    }
    if predict_only || params.precisions_init.is_some() {
        // Sources of any dtype: count 8-byte raw values.
        led.add(
            "precision read buffers",
            precision_read_bytes(t, du, 8),
            1,
            "one component's values in float64 + raw scratch".into(),
        );
    }
    // Tiles hold at most n rows. They are not shrunk below that to fit a
    // limit: the E-step's rounding would then depend on the limit.
    let tile_rows = TILE_ROWS.min(job.n_samples.max(1));
    let per_thread = Workspace::<f64>::bytes_per_thread(t, gu, du, tile_rows, job.compute_bytes);
    led.add(
        "E/M tiles (per thread)",
        threads,
        per_thread,
        format!("{threads} × {per_thread} B (E-step tiles, M-step gathered rows)"),
    );
    if job.n_outputs > 0 {
        led.add(
            "output writer buffers",
            job.n_outputs as u64 * npy_writer_bytes(Dtype::F64, &[job.n_samples]),
            1,
            format!("{} outputs × 2 buffers (one value per row)", job.n_outputs),
        );
    }
    led.add(
        "validation column statistics",
        2 * ScanStats::bytes(du),
        1,
        "folded chunks + open chunk (validation pass only)".into(),
    );
    let scan_row = BlockReader::<f64>::bytes_per_row(
        job.x_scratch_per_row,
        job.n_features,
        job.compute_bytes,
        job.w_scratch_per_row,
    );
    // Init assignment (k-means labels): label + distance per row.
    let em_row =
        scan_row + Workspace::<f64>::bytes_per_row(gu) + 12 + if state_on_disk { RowState::BYTES_PER_ROW } else { 0 };
    let min_rows = (TILE_ROWS as u64).min(n);
    let kpp = params.init_params == InitMethod::KMeansPlusPlus && !params.fully_initialised() && !predict_only;
    // The k-means++ sample's size is fixed by the data and K; its values are
    // spilled to a scratch file when they do not fit.
    let sample_rows = if kpp { default_init_sample_rows(job.n_samples, du, ku) } else { 0 };
    let candidates = 2 + (ku as f64).ln() as usize;
    let nt = job.threads;
    let sample_min = if kpp { SampleLayout::least_bytes(sample_rows, du, nt, candidates) } else { 0 };
    let rows_min = (min_rows * em_row).max(sample_min + min_rows * scan_row);
    // The k-means initialisation assigns rows to its centres with the
    // nearest-centre kernel, whose tiles shrink to fit (its labels do not
    // depend on them).
    let nearest_init = params.init_params == InitMethod::KMeans && !params.fully_initialised() && !predict_only;
    let assign_tile = |rows: usize| {
        threads * Backend::Cpu.assign_bytes(rows, ku, k_tile(ku, job.compute_bytes), du, job.compute_bytes).host
    };
    let base = led.total();
    let assign_tile_rows = if nearest_init {
        kernel_tile_rows(job.n_samples, |rows| base + assign_tile(rows) + rows_min <= limit)
    } else {
        0
    };
    if nearest_init {
        led.add(
            "k-means init assignment tiles",
            assign_tile(assign_tile_rows),
            1,
            format!("{threads} threads × {assign_tile_rows} rows"),
        );
    }
    let always = led.total();
    let required = always + rows_min;
    let also = || {
        let mut also = vec![Remedy::UseFewer(if predict_only {
            vec![Count::Threads]
        } else {
            vec![Count::Components, Count::Threads]
        })];
        if c == 8 {
            also.push(Remedy::ComputeIn(Dtype::F32));
        }
        let fewer: &[&'static str] = match t {
            CovarianceType::Full => &["tied", "diag", "spherical"],
            CovarianceType::Tied => &["diag", "spherical"],
            CovarianceType::Diag => &["spherical"],
            CovarianceType::Spherical => &[],
        };
        if !predict_only && !fewer.is_empty() {
            also.push(Remedy::CovarianceType(fewer.to_vec()));
        }
        also
    };
    let what = || {
        format!(
            "Gaussian mixture ({}) with n_components = {k}, n_features = {d} on {}",
            t.name(),
            crate::units::threads(threads)
        )
    };
    check_fits(required, limit, &led, what, also)?;
    let room = limit - always;
    let sample = SampleLayout::within(sample_rows, du, nt, candidates, room - min_rows * scan_row);
    let sample_bytes = if kpp { sample.bytes(du, nt, candidates) } else { 0 };
    let scan_rows = pick_block_rows(room - sample_bytes, scan_row, n, d * c, threads);
    let rows = pick_block_rows(room, em_row, n, d * c, threads);
    led.add_in(
        "iterations",
        "read blocks",
        rows,
        em_row,
        format!("{rows} rows × {em_row} B (scratch, values, {g} responsibilities, log p(x), weights)"),
    );
    if kpp {
        led.add_in(
            "validation",
            "read blocks and k-means++ sample",
            scan_rows * scan_row + sample_bytes,
            1,
            format!("{scan_rows} rows × {scan_row} B + sample: {}", sample.describe(du, nt, candidates)),
        );
    } else {
        led.add_in("validation", "read blocks", scan_rows, scan_row, format!("{scan_rows} rows × {scan_row} B"));
    }
    let mut plan = Plan::blocked(
        if predict_only { "gmm-predict" } else { "gmm" },
        limit,
        led,
        rows as usize,
        job.n_samples,
        threads as usize,
    );
    plan.schedule.scan_block_rows = scan_rows as usize;
    plan.schedule.init_sample = sample;
    if sample.piece_rows.is_some() {
        plan.disk.push(crate::io::PlannedWrite::inside(
            "init sample (scratch files)",
            job.scratch_dir.clone(),
            sample.disk_bytes(du),
        ));
    }
    plan.schedule.k_tile = params.n_components;
    plan.schedule.tile_rows = tile_rows;
    plan.schedule.assign_tile_rows = assign_tile_rows;
    if !predict_only {
        let init_passes = if params.fully_initialised() { 0 } else { 1 };
        let kmeans = if params.init_params == InitMethod::KMeans && !params.fully_initialised() {
            " + k-means passes"
        } else {
            ""
        };
        let count = params.n_components.div_ceil(gu) as u64;
        let per_iter = 3 * count - 2;
        let final_passes = 2 * count - 1;
        let per_init = (params.max_iter as u64).saturating_mul(per_iter).saturating_add(init_passes * count);
        plan.schedule.max_passes = (params.n_init as u64).saturating_mul(per_init).saturating_add(1 + final_passes);
        plan.schedule.passes_detail = if groups.is_some() {
            format!(
                "1 validation pass + {} init × ({} init passes + at most {} EM iterations × {per_iter} passes) + {final_passes} final E-step passes{kmeans}",
                params.n_init,
                init_passes * count,
                params.max_iter
            )
        } else {
            format!(
                "1 validation pass + {} init × ({init_passes} init pass + at most {} EM passes) + 1 final E-step pass{kmeans}",
                params.n_init, params.max_iter
            )
        };
    }
    if groups.is_some() {
        let count = params.n_components.div_ceil(gu);
        let slots = if predict_only {
            0
        } else if params.n_init > 1 {
            2
        } else {
            1
        };
        let state = if state_on_disk { n * RowState::BYTES_PER_ROW } else { 0 };
        let scratch_bytes = ParamStore::bytes(t, params.n_components, du, slots) + state;
        plan.schedule.component_groups = Some(ComponentGroups {
            count,
            size: gu,
            row_state_on_disk: state_on_disk,
            scratch_bytes,
            passes_per_iteration: if predict_only { 0 } else { 3 * count as u64 - 2 },
        });
        plan.disk.push(crate::io::PlannedWrite::inside("scratch files", job.scratch_dir.clone(), scratch_bytes));
        if predict_only {
            plan.schedule.max_passes = 2 * count as u64 - 1;
            plan.schedule.passes_detail =
                format!("{} E-step passes (+ {} with probabilities)", 2 * count - 1, count - 1);
        }
    }
    Ok(plan)
}
