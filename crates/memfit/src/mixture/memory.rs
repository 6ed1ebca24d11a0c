//! The in-memory strategy of the EM loop: every component's parameters in
//! memory, one pass over the data per EM iteration (the E-step fused with
//! the M-step's sums); the E-step pass of a fitted mixture; and the passes
//! of a fit run as tasks over rows another process holds.

use std::ops::Range;

use super::components::{cov_len, CholWork, Estep, Params};
use super::fitted::Outputs;
use super::mstep::{finalize, recentred, Mass, MAX_RECENTRED_PASSES};
use super::params::{CovarianceType, GmmParams, InitMethod, PrecisionsInit};
use super::pass::{Stats, Sums, Workspace};
use super::passes::{EPass, EmPass, InitPass, InitResp, Nearest};
use super::plan::plan_whole;
use super::strategy::{Data, Final, Strategy};
use super::task::{InitTask, MixtureTask};
use crate::dtype::Real;
use crate::error::Result;
use crate::exec::{run_pass, task_result};
use crate::io::{BlockReader, Source};
use crate::plan::{Job, Plan};

/// Every component in memory: the E-step's parameters and the buffers of
/// one pass.
pub(crate) struct InMemory<'r, T> {
    data: Data<'r, T>,
    plan: &'r Plan,
    t: CovarianceType,
    reg_covar: f64,
    /// Sum of the sample weights.
    mass: Mass,
    es: Estep<T>,
    work: CholWork,
    ws: Workspace<T>,
    /// Tied only: `Σ_i w_i x_i x_iᵀ`, summed by the first pass that needs it.
    tied_scatter: Vec<f64>,
}

impl<'r, T: Real> InMemory<'r, T> {
    /// The strategy for `params` over `data` within `plan`, whose sample
    /// total weight and `N_k` floor are `mass`, with the E-step's log-densities on `backend`.
    pub(crate) fn new(
        params: &GmmParams<'_>,
        data: Data<'r, T>,
        plan: &'r Plan,
        mass: Mass,
        backend: crate::exec::Backend,
    ) -> Self {
        let (t, k, d) = (params.covariance_type, params.n_components, data.x().n_features());
        InMemory {
            plan,
            t,
            reg_covar: params.reg_covar,
            mass,
            es: Estep::new(t, k, d),
            work: CholWork::for_fit(t, d, plan.threads),
            ws: Workspace::new(t, k, d, plan.schedule.block_rows, plan.schedule.tile_rows, plan.threads).on(backend),
            tied_scatter: Vec::new(),
            data,
        }
    }
}

impl<T: Real> InMemory<'_, T> {
    /// One E-step pass under the current parameters with the M-step's
    /// `sums`; adds its E- and M-step seconds to `secs`.
    fn em_pass(&mut self, sums: Sums<'_>, secs: &mut (f64, f64), cancel: &crate::exec::Cancel) -> Result<Stats> {
        let mut pass = EmPass {
            x: self.data.x(),
            es: &self.es,
            ws: &mut self.ws,
            mats: &mut self.work.mats,
            sums,
            secs: (0.0, 0.0),
        };
        let stats = self.data.run(&mut pass, cancel);
        secs.0 += pass.secs.0;
        secs.1 += pass.secs.1;
        stats
    }
}

impl<T: Real> Strategy for InMemory<'_, T> {
    type Kept = ();

    const SWEEPS_PER_ITERATION: usize = 1;

    fn init(&mut self, init: Option<&InitResp>, cur: &mut Params, cancel: &crate::exec::Cancel) -> Result<()> {
        let Some(init) = init else { return Ok(()) };
        let (t, k, d) = (self.t, self.es.k, self.es.d);
        let reference = init.reference(k, d);
        let want_scatter = t == CovarianceType::Tied && self.tied_scatter.is_empty();
        drop(std::mem::take(&mut cur.cov));
        let mut nearest = Nearest::<T>::of(init, self.plan, k, d);
        let mut pass = InitPass {
            init,
            nearest: nearest.as_mut(),
            ws: &mut self.ws,
            mats: &mut self.work.mats,
            sums: Sums { t, reference: &reference, scatter: want_scatter },
            k,
            first: 0,
            g: k,
        };
        let mut stats = self.data.run(&mut pass, cancel)?;
        if want_scatter {
            self.tied_scatter = std::mem::take(&mut stats.scatter);
        }
        *cur = finalize(t, d, &mut stats, &self.tied_scatter, self.reg_covar, self.mass, true, self.data.shift);
        Ok(())
    }

    fn start(&mut self, params: &GmmParams<'_>, cur: &mut Params) -> Result<()> {
        let (t, k, d) = (self.t, self.es.k, self.es.d);
        match &params.precisions_init {
            Some(p) => {
                self.es.set_weights_means(&cur.weights, &cur.means);
                // Without iterations the covariances returned are the
                // given precisions' inverses.
                let cov = (params.max_iter == 0).then(|| {
                    cur.cov.resize(cov_len(t, k, d), 0.0);
                    &mut cur.cov[..]
                });
                let cholesky = matches!(p, PrecisionsInit::Cholesky(_));
                self.es.set_precisions(p.source(), cholesky, &mut self.work, cov, 0)
            }
            None => self.prepare(cur),
        }
    }

    fn iterate(&mut self, cur: &mut Params, secs: &mut (f64, f64), cancel: &crate::exec::Cancel) -> Result<f64> {
        let (t, d) = (self.t, self.es.d);
        let want_scatter = t == CovarianceType::Tied && self.tied_scatter.is_empty();
        drop(std::mem::take(&mut cur.cov));
        let reference = self.es.means.clone();
        let mut stats = self.em_pass(Sums { t, reference: &reference, scatter: want_scatter }, secs, cancel)?;
        if want_scatter {
            self.tied_scatter = std::mem::take(&mut stats.scatter);
        }
        for _ in 0..MAX_RECENTRED_PASSES {
            let Some(reference) = recentred(t, d, &stats, &self.tied_scatter) else { break };
            // The same E-step, its sums around the new weighted means.
            let again = self.em_pass(Sums { t, reference: &reference, scatter: false }, secs, cancel)?;
            stats = Stats { log_likelihood: stats.log_likelihood, ..again };
        }
        *cur = finalize(t, d, &mut stats, &self.tied_scatter, self.reg_covar, self.mass, false, self.data.shift);
        Ok(stats.log_likelihood)
    }

    fn prepare(&mut self, cur: &Params) -> Result<()> {
        self.es.set_params(cur, self.reg_covar, &mut self.work)
    }

    fn keep(&mut self, _more: bool) {}

    fn finish(
        mut self,
        best: &Params,
        _kept: (),
        last: bool,
        outputs: &mut Outputs<'_>,
        cancel: &crate::exec::Cancel,
    ) -> Result<Final> {
        if !last {
            self.prepare(best)?;
        }
        let worst = self.es.condition_estimates().into_iter().enumerate().max_by(|a, b| a.1.total_cmp(&b.1));
        let log_likelihood = e_pass(&mut self.data, &mut self.ws, &self.es, outputs, false, cancel)?;
        Ok(Final { log_likelihood, worst, stored: None })
    }
}

/// One E-step pass over `data` with parameters `es`; sends per-sample
/// results to `outputs` and returns `Σ_i w_i log p(x_i)`; with `validate`,
/// fails at the first non-finite value (data a fit has not already checked).
///
/// # Errors
/// Read errors, [`crate::Error::NonFinite`] (with `validate`), zero
/// densities, [`crate::Error::Cancelled`], whatever `outputs` return.
pub(crate) fn e_pass<T: Real>(
    data: &mut Data<'_, T>,
    ws: &mut Workspace<T>,
    es: &Estep<T>,
    outputs: &mut Outputs<'_>,
    validate: bool,
    cancel: &crate::exec::Cancel,
) -> Result<f64> {
    let labels = vec![0u32; if outputs.labels.is_some() { data.blocks.block_rows() } else { 0 }];
    let mut pass = EPass { x: data.x(), es, ws, outputs, labels, validate };
    data.run(&mut pass, cancel)
}

/// The initial M-step is a pass of the in-memory strategy: it holds every
/// component.
impl InitTask {
    /// The memory plan over `at` (with the tiles of a k-means
    /// initialisation's nearest centres).
    pub(crate) fn plan(&self, at: PlanRows<'_, '_>) -> Result<Plan> {
        let init_params = match self.init {
            InitResp::Nearest(_) => InitMethod::KMeans,
            _ => InitMethod::Random,
        };
        plan_task(self.k, self.sums.t, init_params, at, false)
    }

    /// Runs the pass over `at` within `plan` and returns its encoded
    /// statistics.
    pub(crate) fn run<T: Real>(&self, plan: &Plan, at: TaskRows<'_, '_>) -> Result<Vec<u8>> {
        let TaskRows { x, w, rows, shift, cancel } = at;
        let (t, k, d) = (self.sums.t, self.k, x.n_features());
        let mut ws = Workspace::<T>::new(t, k, d, plan.schedule.block_rows, plan.schedule.tile_rows, plan.threads);
        let mut work = CholWork::for_fit(t, d, plan.threads);
        let mut nearest = Nearest::<T>::of(&self.init, plan, k, d);
        let mut blocks = BlockReader::<T>::new(x, w, plan.schedule.block_rows);
        let mut pass = InitPass {
            init: &self.init,
            nearest: nearest.as_mut(),
            ws: &mut ws,
            mats: &mut work.mats,
            sums: Sums { t, reference: &self.sums.reference, scatter: self.sums.scatter },
            k,
            first: 0,
            g: k,
        };
        let partial = run_pass(&mut pass, &mut blocks, Some(rows), shift, cancel)?;
        Ok(task_result(&pass, partial))
    }
}

/// The rows a task runs over: a piece `x` of the data (and its weights
/// `w`), the piece's `rows`, the `shift` subtracted from each, and the
/// run's cancellation token (see [`crate::estimator::run_task`]).
pub(crate) struct TaskRows<'a, 's> {
    pub(crate) x: &'a Source<'s>,
    pub(crate) w: Option<&'a Source<'s>>,
    pub(crate) rows: Range<usize>,
    pub(crate) shift: &'a [f64],
    pub(crate) cancel: &'a crate::exec::Cancel,
}

/// What a task's plan needs of its rows: the piece, its weights, the
/// compute type's bytes and the memory limit.
pub(crate) struct PlanRows<'a, 's> {
    pub(crate) x: &'a Source<'s>,
    pub(crate) w: Option<&'a Source<'s>>,
    pub(crate) compute_bytes: usize,
    pub(crate) limit_bytes: u64,
}

/// The plan of a task over `at`: `k` components of type `t` (every one of
/// them: groups run in one process only) initialised by `init_params`, a
/// fit's pass (with the M-step's sums) or, with `predict_only`, an E-step's.
fn plan_task(
    k: usize,
    t: CovarianceType,
    init_params: InitMethod,
    at: PlanRows<'_, '_>,
    predict_only: bool,
) -> Result<Plan> {
    let params = GmmParams { n_components: k, covariance_type: t, max_iter: 1, init_params, ..GmmParams::default() };
    let run = crate::exec::RunOptions::with_limit(at.limit_bytes);
    plan_whole(&params, &Job::new(at.x, at.w, at.compute_bytes, 0, &run), predict_only)
}

/// A task is a pass of the in-memory strategy: it holds every component
/// (groups run in one process only).
impl<T: Real> MixtureTask<T> {
    /// The memory plan for `x`'s rows within `limit_bytes`: a fit's (with
    /// the M-step's sums) or a prediction's.
    pub(crate) fn plan(&self, x: &Source<'_>, w: Option<&Source<'_>>, limit_bytes: u64) -> Result<Plan> {
        let rows = PlanRows { x, w, compute_bytes: size_of::<T>(), limit_bytes };
        let init_params = GmmParams::default().init_params;
        plan_task(self.es.k, self.es.covariance_type(), init_params, rows, self.em.is_none())
    }

    /// Runs the pass over `at` within `plan` and returns its encoded
    /// statistics.
    pub(crate) fn run(&self, plan: &Plan, at: TaskRows<'_, '_>) -> Result<Vec<u8>> {
        let TaskRows { x, w, rows, shift, cancel } = at;
        let (t, k, d) = (self.es.covariance_type(), self.es.k, self.es.d);
        let mut ws = Workspace::<T>::new(t, k, d, plan.schedule.block_rows, plan.schedule.tile_rows, plan.threads);
        let mut blocks = BlockReader::<T>::new(x, w, plan.schedule.block_rows);
        match &self.em {
            Some(s) => {
                let mut work = CholWork::for_fit(t, d, plan.threads);
                let mut pass = EmPass {
                    x,
                    es: &self.es,
                    ws: &mut ws,
                    mats: &mut work.mats,
                    sums: Sums { t, reference: &s.reference, scatter: s.scatter },
                    secs: (0.0, 0.0),
                };
                let partial = run_pass(&mut pass, &mut blocks, Some(rows), shift, cancel)?;
                Ok(task_result(&pass, partial))
            }
            None => {
                let mut outputs = Outputs::default();
                let mut pass = EPass {
                    x,
                    es: &self.es,
                    ws: &mut ws,
                    outputs: &mut outputs,
                    labels: Vec::new(),
                    validate: self.validate,
                };
                let partial = run_pass(&mut pass, &mut blocks, Some(rows), shift, cancel)?;
                Ok(task_result(&pass, partial))
            }
        }
    }
}
