//! The grouped strategy of the EM loop ([`super::fit`]), and the E-steps of
//! a fitted mixture in groups: for mixtures whose `K` components' precision
//! factors and M-step sums do not fit the memory limit together (the
//! planner chooses the groups, [`super::plan_gmm`]).
//!
//! One EM iteration with `G` groups makes `3G − 2` passes over the data,
//! each computing one group's log-densities ([`steps`]):
//!
//! 1. for each group from the last to the first, every row's largest
//!    log-density `M` and its label ([`super::groups::merge_max`]); the pass
//!    of group 0, the last of them, also starts the sum `S = Σ e^(v − M)`;
//! 2. for groups `1..G`, `S` goes on in component order
//!    ([`super::groups::add_exps`]); the pass of the last group finishes
//!    `log p(x_i) = M + ln S` and, at once, that group's responsibilities
//!    and M-step sums;
//! 3. for each other group, a pass turns its log-densities into
//!    responsibilities with the finished `M` and `S` and adds its M-step
//!    sums.
//!
//! A group's new covariances and factors are written to the scratch file
//! ([`ParamStore`]) as soon as its sums are complete (its old factors are
//! no longer needed then); weights, means and log-determinants (`O(K d)`)
//! stay in memory. The final E-step makes `2G − 1` passes, plus `G − 1`
//! when probabilities are wanted.
//!
//! Exactness: log-densities, M-step sums, covariances and factors are
//! computed component by component exactly as in memory, and the
//! normaliser, labels and responsibilities with the in-memory E-step's
//! arithmetic in its order (see [`super::groups::ROW_STATE`]): a grouped fit
//! has the bits of the fit in memory, for any groups, thread count and
//! limit. The price is `G − 1` passes per iteration more than merging
//! running log-sum-exps group by group, which rounds differently for each
//! cut of the components.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use super::components::{component_cov_len, factor_len, factor_of_cov, CholWork, Estep, Params};
use super::fitted::{Outputs, StoredCovariances};
use super::groups::{add_exps, log_norm, merge_max, responsibilities, Groups, ParamStore, RowState, ROW_STATE};
use super::mstep::{finalize, recentred, Mass, MAX_RECENTRED_PASSES};
use super::params::{CovarianceType, GmmParams, PrecisionsInit};
use super::pass::{zero_density, zero_density_ok, Stats, Sums, Workspace};
use super::passes::{InitPass, InitResp, Nearest};
use super::strategy::{Data, Final, Strategy};
use crate::dtype::Real;
use crate::error::{Error, Result};
use crate::exec::{Block, Leaf, Pass};
use crate::io::Source;
use crate::kernels::{add_weighted_log_norm, clear_upper_vector_state};
use crate::plan::{Plan, TILE_ROWS};

/// Where a group's precision factors are read from.
#[derive(Clone, Copy)]
pub(crate) enum Factors<'s> {
    /// The scratch store's slot, with the log-determinants `(K,)`.
    Store(usize, &'s [f64]),
    /// Given precisions (`false`) or Cholesky factors (`true`), one
    /// component after another (see [`super::PrecisionsInit`]).
    Source(&'s Source<'s>, bool),
}

/// Buffers of one group, reused for every group, and the scratch store.
pub(crate) struct GroupWork<T> {
    pub(crate) groups: Groups,
    t: CovarianceType,
    es: Estep<T>,
    ws: Workspace<T>,
    work: CholWork,
    state: RowState,
    store: Option<ParamStore>,
    factor: Vec<f64>,
}

impl<T: Real> GroupWork<T> {
    /// Buffers for `plan`'s groups over `x`'s rows, and a store of `slots`
    /// sets of parameters (none for 0), in `dir`.
    ///
    /// # Errors
    /// As [`ParamStore::new`] and [`RowState::new`].
    pub(crate) fn new(
        t: CovarianceType,
        k: usize,
        x: &Source<'_>,
        plan: &Plan,
        slots: usize,
        dir: &Path,
    ) -> Result<Self> {
        let d = x.n_features();
        let gp = plan.schedule.component_groups.as_ref().expect("a grouped plan");
        let groups = Groups::of(k, gp.size);
        let g = groups.size;
        let store = if slots > 0 { Some(ParamStore::new(t, k, d, slots, dir)?) } else { None };
        Ok(GroupWork {
            groups,
            t,
            es: Estep::new(t, g, d),
            ws: Workspace::new(t, g, d, plan.schedule.block_rows, plan.schedule.tile_rows, plan.threads),
            work: CholWork::for_fit(t, d, plan.threads),
            state: RowState::new(
                x.first_row(),
                x.n_samples() - x.first_row(),
                gp.row_state_on_disk,
                dir,
                plan.schedule.block_rows,
            )?,
            store,
            factor: vec![0.0; factor_len(t, d)],
        })
    }

    fn store(&self) -> &ParamStore {
        self.store.as_ref().expect("a fit's groups have a store")
    }

    /// Sets up group `g` for its E-steps: weights and means `(K,)`, `(K, d)`
    /// in shifted coordinates, factors from `factors`.
    ///
    /// # Errors
    /// Scratch read errors; as [`Estep::set_precisions`].
    fn load(&mut self, g: usize, weights: &[f64], means: &[f64], factors: Factors<'_>) -> Result<()> {
        let r = self.groups.range(g);
        let d = self.es.d;
        self.es.resize(r.len());
        self.ws.set_components(r.len());
        let (w, m) = (&weights[r.clone()], &means[r.start * d..r.end * d]);
        match factors {
            Factors::Store(slot, log_det) => {
                for (i, c) in r.clone().enumerate() {
                    self.store.as_ref().expect("a store").factor(slot, c, &mut self.factor)?;
                    self.es.put_factor(i, &self.factor, log_det[c]);
                }
                // Also `μ_k U_k` from the factors just set.
                self.es.set_weights_means(w, m);
            }
            Factors::Source(src, cholesky) => {
                // The means first: reading the factors ends with `μ_k U_k`.
                self.es.set_weights_means(w, m);
                self.es.set_precisions(src, cholesky, &mut self.work, None, r.start)?;
            }
        }
        Ok(())
    }

    /// Writes the covariances given precisions imply (their inverses) to
    /// `slot`, group by group (a fit without iterations returns them).
    ///
    /// # Errors
    /// As [`Estep::set_precisions`]; scratch write errors.
    fn store_given_covariances(&mut self, src: &Source<'_>, cholesky: bool, slot: usize) -> Result<()> {
        let per = component_cov_len(self.t, self.es.d);
        let mut cov = vec![0.0; self.groups.size * per];
        for g in 0..self.groups.count {
            let r = self.groups.range(g);
            self.es.resize(r.len());
            self.es.set_precisions(src, cholesky, &mut self.work, Some(&mut cov[..r.len() * per]), r.start)?;
            for (i, c) in r.enumerate() {
                self.store().put_cov(slot, c, &cov[i * per..(i + 1) * per])?;
            }
        }
        Ok(())
    }

    /// Completes group `g`'s M-step from its sums: means into `next.means`,
    /// raw `N_k` into `nk`, covariances and factors into the store's `slot`,
    /// log-determinants into `log_det`; the first component whose covariance
    /// is not positive definite is kept in `bad`.
    ///
    /// # Errors
    /// Scratch write errors.
    #[allow(clippy::too_many_arguments)]
    fn finish_group(
        &mut self,
        g: usize,
        stats: &mut Stats,
        reg_covar: f64,
        mass: Mass,
        init: bool,
        slot: usize,
        next: &mut Next,
        shift: &[f64],
    ) -> Result<()> {
        let (t, d) = (self.t, self.es.d);
        let r = self.groups.range(g);
        let p = finalize(t, d, stats, &[], reg_covar, mass, init, shift);
        let per = component_cov_len(t, d);
        next.nk[r.clone()].copy_from_slice(&stats.nk);
        next.means[r.start * d..r.end * d].copy_from_slice(&p.means);
        for (i, c) in r.enumerate() {
            let cov = &p.cov[i * per..(i + 1) * per];
            self.store().put_cov(slot, c, cov)?;
            match factor_of_cov(t, d, cov, &mut self.work, &mut self.factor) {
                Some(ld) => {
                    next.log_det[c] = ld;
                    self.store().put_factor(slot, c, &self.factor)?;
                }
                None => next.bad = Some(next.bad.map_or(c, |b| b.min(c))),
            }
        }
        Ok(())
    }

    /// The covariances of the store's `slot`, kept beyond the run.
    pub(crate) fn into_stored(self, slot: usize) -> StoredCovariances {
        StoredCovariances::new(self.store.expect("a fit's groups have a store"), slot)
    }
}

/// What a grouped M-step collects across groups.
struct Next {
    nk: Vec<f64>,
    means: Vec<f64>,
    log_det: Vec<f64>,
    bad: Option<usize>,
}

impl Next {
    fn new(k: usize, d: usize) -> Self {
        Next { nk: vec![0.0; k], means: vec![0.0; k * d], log_det: vec![0.0; k], bad: None }
    }

    /// Weights as [`finalize`] computes them from every component's `N_k`
    /// (floored), then the parameters; fails for the first component whose
    /// covariance is not positive definite.
    fn into_params<T: Real>(self, mass: Mass, init: bool, reg_covar: f64) -> Result<(Params, Vec<f64>)> {
        if let Some(c) = self.bad {
            return Err(Error::IllDefinedCovariance {
                component: Some(c),
                reg_covar,
                float32: T::DTYPE == crate::io::Dtype::F32,
            });
        }
        let nk: Vec<f64> = self.nk.iter().map(|n| n + mass.floor).collect();
        let total: f64 = nk.iter().sum();
        let weights = nk.iter().map(|n| n / if init { mass.total } else { total }).collect();
        Ok((Params { weights, means: self.means, cov: Vec::new() }, self.log_det))
    }
}

/// What one grouped pass does with its group's log-densities (see the
/// module docs for the order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Step {
    /// The group.
    g: usize,
    /// Merges into each row's max and label.
    max: bool,
    /// The first pass of an E-step: row states start fresh.
    fresh: bool,
    /// Adds to each row's sum `S` (the max is final).
    sum: bool,
    /// `S` is complete after this pass: `log p(x_i)` and labels are out.
    finish: bool,
    /// Turns the log-densities into responsibilities.
    resp: bool,
}

/// The passes of one E-step over `count` groups: the max sweep from the
/// last group to group 0 (which also starts the sum), the sum for groups
/// `1..count` (the last finishing `log p`), then, with `all_resp`, the
/// responsibilities of groups `0..count − 1`; the finishing pass turns its
/// group's into responsibilities with `all_resp` too.
fn steps(count: usize, all_resp: bool) -> Vec<Step> {
    let none = Step { g: 0, max: false, fresh: false, sum: false, finish: false, resp: false };
    let max = (0..count).rev().map(|g| Step { g, max: true, fresh: g + 1 == count, sum: g == 0, ..none });
    let sum = (1..count).map(|g| Step { g, sum: true, ..none });
    let mut steps: Vec<Step> = max.chain(sum).collect();
    let last = steps.last_mut().expect("at least one group");
    last.finish = true;
    last.resp = all_resp;
    let finished = last.g;
    steps.extend((0..count).filter(|&g| all_resp && g != finished).map(|g| Step { g, resp: true, ..none }));
    steps
}

/// What one grouped pass does besides computing its group's log-densities.
struct GroupPass<'a, 'o, T> {
    x: &'a Source<'a>,
    gw: &'a mut GroupWork<T>,
    mats: &'a mut [Vec<f64>],
    first: usize,
    step: Step,
    /// Adds the group's M-step sums (of its responsibilities).
    m_step: bool,
    reference: &'a [f64],
    outputs: Option<&'a mut Outputs<'o>>,
    labels: Vec<u32>,
    validate: bool,
    /// Rows scored against a fitted model (see [`super::pass::zero_density_ok`]).
    new_rows: bool,
    secs: (f64, f64),
}

impl<T: Real> Pass<T> for GroupPass<'_, '_, T> {
    type Stats = Stats;

    fn new_stats(&self) -> Stats {
        let (t, d) = (self.gw.t, self.gw.es.d);
        if self.m_step {
            Stats::zeros(t, self.gw.es.k, d, self.reference, false)
        } else {
            Stats::zeros(t, 0, d, &[], false)
        }
    }

    fn checks_finite(&self) -> bool {
        self.validate
    }

    fn block(&mut self, block: Block<'_, T>, leaves: &mut [Leaf<'_, Stats>]) -> Result<()> {
        for leaf in leaves.iter_mut() {
            let b = block.sub(leaf.rows.clone());
            self.leaf(b, leaf.stats)?;
        }
        Ok(())
    }
}

impl<T: Real> GroupPass<'_, '_, T> {
    fn leaf(&mut self, b: Block<'_, T>, stats: &mut Stats) -> Result<()> {
        let t0 = Instant::now();
        let (rows, g, first, step) = (b.rows(), self.gw.es.k, self.first, self.step);
        let gw = &mut *self.gw;
        gw.ws.log_densities(b.x, &gw.es)?;
        let states = gw.state.rows(b.start, rows, step.fresh)?;
        let resp = &mut gw.ws.resp[..rows * g];
        clear_upper_vector_state();
        for (s, v) in states.chunks_exact_mut(ROW_STATE).zip(resp.chunks_exact(g)) {
            if step.max {
                merge_max(s, v, first);
            }
            if step.sum {
                add_exps(s, v);
            }
        }
        if step.finish {
            let log_norms = &mut gw.ws.log_norm[..rows];
            for (s, l) in states.chunks_exact(ROW_STATE).zip(log_norms.iter_mut()) {
                *l = log_norm(s);
            }
            if let Some(i) = log_norms.iter().position(|&v| !zero_density_ok(v, self.new_rows)) {
                return Err(zero_density(self.x, b.start + i, log_norms[i], self.new_rows));
            }
            // Summed per tile, then tile by tile, as the in-memory E-step.
            for t0 in (0..rows).step_by(TILE_ROWS) {
                let mut sum = 0.0;
                for (i, &l) in log_norms.iter().enumerate().take((t0 + TILE_ROWS).min(rows)).skip(t0) {
                    sum = add_weighted_log_norm(sum, l, b.w.map_or(1.0, |w| w[i]));
                }
                stats.log_likelihood += sum;
            }
            for (l, s) in self.labels.iter_mut().zip(states.chunks_exact(ROW_STATE)) {
                *l = s[2] as u32;
            }
        }
        if step.resp {
            for (v, s) in resp.chunks_exact_mut(g).zip(states.chunks_exact(ROW_STATE)) {
                responsibilities(v, s);
            }
        }
        if step.max || step.sum {
            gw.state.store(b.start, rows)?;
        }
        let proba = step.resp && self.outputs.as_ref().is_some_and(|o| o.proba.is_some());
        if let Some(o) = self.outputs.as_deref_mut() {
            if step.finish {
                if let Some(f) = o.labels.as_deref_mut() {
                    f(&self.labels[..rows])?;
                }
                if let Some(f) = o.log_likelihood.as_deref_mut() {
                    f(&gw.ws.log_norm[..rows])?;
                }
            }
            if let Some(f) = o.proba.as_deref_mut().filter(|_| proba) {
                f(b.start - self.x.first_row(), first, g, &gw.ws.resp[..rows * g])?;
            }
        }
        let t1 = Instant::now();
        if self.m_step {
            gw.ws.m_step(b.x, b.w, stats, self.mats);
        }
        self.secs.0 += (t1 - t0).as_secs_f64();
        self.secs.1 += t1.elapsed().as_secs_f64();
        Ok(())
    }
}

/// One E-step sweep over every group with the mixture `weights`, `means`
/// (shifted) and `factors`: per-sample results to `outputs` (probabilities
/// as column groups), returns `Σ_i w_i log p(x_i)` and the largest
/// condition estimate with its component. With `validate`, the first pass
/// checks the data for non-finite values.
///
/// # Errors
/// As the in-memory E-step; scratch I/O errors; whatever `outputs` return.
#[allow(clippy::too_many_arguments)]
pub(crate) fn e_sweep<T: Real>(
    gw: &mut GroupWork<T>,
    data: &mut Data<'_, T>,
    weights: &[f64],
    means: &[f64],
    factors: Factors<'_>,
    outputs: &mut Outputs<'_>,
    validate: bool,
    cancel: &crate::exec::Cancel,
) -> Result<(f64, Option<(usize, f64)>)> {
    let count = gw.groups.count;
    let mut total = 0.0;
    let mut worst: Option<(usize, f64)> = None;
    let want_proba = outputs.proba.is_some();
    let want_labels = outputs.labels.is_some();
    let mut worst_of = vec![None; count];
    for step in steps(count, want_proba) {
        let g = step.g;
        gw.load(g, weights, means, factors)?;
        if step.max {
            let first = gw.groups.range(g).start;
            for (c, v) in gw.es.condition_estimates().into_iter().enumerate() {
                if worst_of[g].is_none_or(|(_, w)| v >= w) {
                    worst_of[g] = Some((first + c, v));
                }
            }
        }
        let block_rows = data.blocks.block_rows();
        let mut mats: Vec<Vec<f64>> = Vec::new();
        let mut pass = GroupPass {
            x: data.x(),
            first: gw.groups.range(g).start,
            gw,
            mats: &mut mats,
            step,
            m_step: false,
            reference: &[],
            // Columns of every group; labels and log p(x) once finished.
            outputs: (want_proba || step.finish).then_some(&mut *outputs),
            labels: vec![0; if step.finish && want_labels { block_rows } else { 0 }],
            validate: validate && step.fresh,
            new_rows: validate,
            secs: (0.0, 0.0),
        };
        let stats = data.run(&mut pass, cancel)?;
        if step.finish {
            total = stats.log_likelihood;
        }
    }
    // The largest estimate, the last component among equals (as in memory).
    for w in worst_of.into_iter().flatten() {
        if worst.is_none_or(|(_, v)| w.1 >= v) {
            worst = Some(w);
        }
    }
    Ok((total, worst))
}

/// One grouped EM iteration from `cur` (factors from `factors`): returns
/// `Σ_i w_i log p(x_i)` under `cur` and the new parameters (covariances and
/// factors in the store's `slot`) with their log-determinants.
///
/// # Errors
/// As [`e_sweep`]; [`Error::IllDefinedCovariance`] naming the first
/// component whose new covariance is not positive definite.
#[allow(clippy::too_many_arguments)]
pub(crate) fn em_iteration<T: Real>(
    gw: &mut GroupWork<T>,
    data: &mut Data<'_, T>,
    cur: &Params,
    factors: Factors<'_>,
    slot: usize,
    reg_covar: f64,
    mass: Mass,
    secs: &mut (f64, f64),
    cancel: &crate::exec::Cancel,
) -> Result<(f64, Params, Vec<f64>)> {
    let (k, d, count) = (gw.groups.k, gw.es.d, gw.groups.count);
    let mut next = Next::new(k, d);
    let mut total = 0.0;
    for step in steps(count, true) {
        let g = step.g;
        // Loading given precisions factors them in the work matrices.
        gw.load(g, &cur.weights, &cur.means, factors)?;
        let r = gw.groups.range(g);
        let mut stats = em_pass(gw, data, step, &cur.means[r.start * d..r.end * d], secs, cancel)?;
        if step.finish {
            total = stats.log_likelihood;
        }
        if step.resp {
            for _ in 0..MAX_RECENTRED_PASSES {
                let Some(reference) = recentred(gw.t, d, &stats, &[]) else { break };
                // The group's responsibilities again (the rows' states are
                // final), their sums around the new weighted means.
                let again = Step { g, max: false, fresh: false, sum: false, finish: false, resp: true };
                stats = em_pass(gw, data, again, &reference, secs, cancel)?;
            }
            gw.finish_group(g, &mut stats, reg_covar, mass, false, slot, &mut next, data.shift)?;
        }
    }
    let (params, log_det) = next.into_params::<T>(mass, false, reg_covar)?;
    Ok((total, params, log_det))
}

/// One grouped pass of an EM iteration: `step` over the data, with the
/// M-step's sums around `reference` (the group's means) when it makes
/// responsibilities; adds its E- and M-step seconds to `secs`.
///
/// # Errors
/// As [`em_iteration`].
fn em_pass<T: Real>(
    gw: &mut GroupWork<T>,
    data: &mut Data<'_, T>,
    step: Step,
    reference: &[f64],
    secs: &mut (f64, f64),
    cancel: &crate::exec::Cancel,
) -> Result<Stats> {
    // During the pass the work matrices are the M-step's per-thread products.
    let mut mats = std::mem::take(&mut gw.work.mats);
    let mut pass = GroupPass {
        x: data.x(),
        first: gw.groups.range(step.g).start,
        gw: &mut *gw,
        mats: &mut mats,
        step,
        m_step: step.resp,
        reference,
        outputs: None,
        labels: Vec::new(),
        validate: false,
        new_rows: false,
        secs: (0.0, 0.0),
    };
    let stats = data.run(&mut pass, cancel);
    let pass_secs = pass.secs;
    gw.work.mats = mats;
    secs.0 += pass_secs.0;
    secs.1 += pass_secs.1;
    stats
}

/// The initial M-step in groups: one pass per group under `init`'s
/// responsibilities; covariances and factors into the store's `slot`.
///
/// # Errors
/// As [`em_iteration`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn init_params<T: Real>(
    gw: &mut GroupWork<T>,
    data: &mut Data<'_, T>,
    init: &InitResp,
    plan: &Plan,
    slot: usize,
    reg_covar: f64,
    mass: Mass,
    cancel: &crate::exec::Cancel,
) -> Result<(Params, Vec<f64>)> {
    let (k, d, t) = (gw.groups.k, gw.es.d, gw.t);
    let reference = init.reference(k, d);
    let mut nearest = Nearest::<T>::of(init, plan, k, d);
    let mut next = Next::new(k, d);
    for g in 0..gw.groups.count {
        let r = gw.groups.range(g);
        gw.ws.set_components(r.len());
        let mut pass = InitPass {
            init,
            nearest: nearest.as_mut(),
            ws: &mut gw.ws,
            mats: &mut gw.work.mats,
            sums: Sums { t, reference: &reference[r.start * d..r.end * d], scatter: false },
            k,
            first: r.start,
            g: r.len(),
        };
        let mut stats = data.run(&mut pass, cancel)?;
        gw.finish_group(g, &mut stats, reg_covar, mass, true, slot, &mut next, data.shift)?;
    }
    next.into_params::<T>(mass, true, reg_covar)
}

/// Components in groups, covariances and factors in the scratch store: a
/// run writes to one of its slots, the best run's slot is kept (two slots
/// when `n_init > 1`).
pub(crate) struct Grouped<'r, T> {
    gw: GroupWork<T>,
    data: Data<'r, T>,
    plan: &'r Plan,
    reg_covar: f64,
    /// Sum of the sample weights.
    mass: Mass,
    /// Given precisions (or their Cholesky factors, `true`), if any.
    given: Option<(&'r Source<'r>, bool)>,
    /// Whether the run's factors are still the given precisions' (read from
    /// their source until the first M-step).
    from_source: bool,
    /// The run's log-determinants `(K,)` (its factors are in the store's slot).
    log_det: Vec<f64>,
    /// The store's slot the run writes to.
    slot: usize,
}

/// What a grouped run keeps of the best run besides its parameters.
pub(crate) struct KeptGroups {
    log_det: Vec<f64>,
    /// The store's slot of its covariances and factors.
    slot: usize,
    /// Its factors are the given precisions' (no iteration ran).
    from_source: bool,
}

impl<'r, T: Real> Grouped<'r, T> {
    /// The strategy for `params` over `data` within `plan`'s groups (`gw`),
    /// of total weight and `N_k` floor `mass`.
    pub(crate) fn new(
        params: &'r GmmParams<'r>,
        gw: GroupWork<T>,
        data: Data<'r, T>,
        plan: &'r Plan,
        mass: Mass,
    ) -> Self {
        let given = params.precisions_init.as_ref().map(|p| (p.source(), matches!(p, PrecisionsInit::Cholesky(_))));
        Grouped {
            gw,
            data,
            plan,
            reg_covar: params.reg_covar,
            mass,
            given,
            from_source: false,
            log_det: Vec::new(),
            slot: 0,
        }
    }
}

impl<T: Real> Strategy for Grouped<'_, T> {
    type Kept = KeptGroups;

    /// The max's sweep, the sum's and the M-step's (`3G − 2` passes).
    const SWEEPS_PER_ITERATION: usize = 3;

    fn init(&mut self, init: Option<&InitResp>, cur: &mut Params, cancel: &crate::exec::Cancel) -> Result<()> {
        (*cur, self.log_det) = match init {
            Some(init) => {
                let (gw, data) = (&mut self.gw, &mut self.data);
                init_params(gw, data, init, self.plan, self.slot, self.reg_covar, self.mass, cancel)?
            }
            None => (Params::default(), vec![0.0; self.gw.groups.k]),
        };
        Ok(())
    }

    fn start(&mut self, params: &GmmParams<'_>, _cur: &mut Params) -> Result<()> {
        self.from_source = self.given.is_some();
        if let (Some((src, cholesky)), 0) = (self.given, params.max_iter) {
            self.gw.store_given_covariances(src, cholesky, self.slot)?;
        }
        Ok(())
    }

    fn iterate(&mut self, cur: &mut Params, secs: &mut (f64, f64), cancel: &crate::exec::Cancel) -> Result<f64> {
        let factors = match self.given.filter(|_| self.from_source) {
            Some((src, cholesky)) => Factors::Source(src, cholesky),
            None => Factors::Store(self.slot, &self.log_det),
        };
        self.from_source = false;
        let (ll, next, log_det) = em_iteration(
            &mut self.gw,
            &mut self.data,
            cur,
            factors,
            self.slot,
            self.reg_covar,
            self.mass,
            secs,
            cancel,
        )?;
        (*cur, self.log_det) = (next, log_det);
        Ok(ll)
    }

    /// The factors were made with the parameters (in [`Strategy::iterate`]).
    fn prepare(&mut self, _cur: &Params) -> Result<()> {
        Ok(())
    }

    fn keep(&mut self, more: bool) -> KeptGroups {
        let kept =
            KeptGroups { log_det: std::mem::take(&mut self.log_det), slot: self.slot, from_source: self.from_source };
        // The next run writes to the other slot.
        if more {
            self.slot = 1 - self.slot;
        }
        kept
    }

    fn finish(
        mut self,
        best: &Params,
        kept: KeptGroups,
        _last: bool,
        outputs: &mut Outputs<'_>,
        cancel: &crate::exec::Cancel,
    ) -> Result<Final> {
        let factors = match self.given.filter(|_| kept.from_source) {
            Some((src, cholesky)) => Factors::Source(src, cholesky),
            None => Factors::Store(kept.slot, &kept.log_det),
        };
        let (gw, data) = (&mut self.gw, &mut self.data);
        let (log_likelihood, worst) = e_sweep(gw, data, &best.weights, &best.means, factors, outputs, false, cancel)?;
        let stored = Some(Arc::new(self.gw.into_stored(kept.slot)));
        Ok(Final { log_likelihood, worst, stored })
    }
}
