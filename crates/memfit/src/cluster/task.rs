//! The nearest-centre pass of a k-means fit as a [`crate::exec::Task`]: a
//! Lloyd iteration's sums or the final pass's counts and inertia, computed
//! over rows another process holds (see [`crate::exec::Remote`]).

use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::bounds::{Bounds, BoundsTask};
use super::params::{Init, KMeansParams};
use super::pass::{AssignPass, Assignment, Mode};
use super::plan::plan_kmeans;
use crate::dtype::Real;
use crate::error::Result;
use crate::exec::{encode, run_pass, task_result, RunOptions};
use crate::io::{BlockReader, Source};
use crate::kernels::PreparedCenters;
use crate::plan::{Job, Plan};

/// The task kind of [`AssignTask`].
pub(crate) const ASSIGN: &str = "kmeans-assign";

/// A nearest-centre pass without per-row outputs.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct AssignTask {
    /// Row-major `(k, d)` centres (values of the compute type, as `f64`;
    /// centres of sparse rows are mostly zeros).
    #[serde(with = "crate::wire::zero_runs")]
    pub(crate) centers: Vec<f64>,
    pub(crate) k: usize,
    pub(crate) d: usize,
    /// What the pass computes.
    pub(crate) kind: TaskKind,
    /// A bounded pass's centre side; its rows' bounds come with the task
    /// (see [`super::bounds`]).
    pub(crate) bounds: Option<BoundsTask>,
}

/// What an [`AssignTask`] computes (see [`Mode`]).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) enum TaskKind {
    /// A Lloyd iteration's sums and weights.
    Lloyd,
    /// The rows farthest from their centres.
    Farthest,
    /// A final pass's row counts and inertia.
    Final,
}

impl AssignTask {
    /// The task of `pass`, when it has no per-row outputs.
    pub(crate) fn of<T: Real>(pass: &AssignPass<'_, '_, T>) -> Option<Vec<u8>> {
        let kind = match &pass.mode {
            Mode::Lloyd => TaskKind::Lloyd,
            Mode::Farthest => TaskKind::Farthest,
            Mode::Final { sink: None, plot: None } => TaskKind::Final,
            _ => return None,
        };
        let c = pass.centers;
        let bounds = pass.bounds.as_deref().map(Bounds::task);
        Some(encode(&AssignTask { centers: c.centers.clone(), k: c.n_clusters, d: c.n_features, kind, bounds }))
    }

    /// The memory plan for `x`'s rows within `limit_bytes`: a k-means fit's
    /// from given centres; a bounded pass's with its rows' bounds in memory
    /// (where the task's caller keeps them between passes), or a plain
    /// one's when they do not fit (the same statistics, its rows then
    /// keeping no bounds).
    pub(crate) fn plan(
        &self,
        x: &Source<'_>,
        w: Option<&Source<'_>>,
        compute_bytes: usize,
        limit_bytes: u64,
    ) -> Result<Plan> {
        let params = KMeansParams {
            n_clusters: self.k,
            init: Init::Centers { values: Vec::new(), n_rows: self.k, n_cols: self.d },
            n_init: Some(1),
            algorithm: if self.bounds.is_some() { super::Algorithm::Bounded } else { super::Algorithm::Lloyd },
            ..KMeansParams::default()
        };
        let job = Job::new(x, w, compute_bytes, 0, &RunOptions::with_limit(limit_bytes));
        let plan = plan_kmeans(&params, &job)?;
        if plan.schedule.bounds_on_disk == Some(true) {
            return plan_kmeans(&KMeansParams { algorithm: super::Algorithm::Lloyd, ..params }, &job);
        }
        Ok(plan)
    }

    /// Runs the pass over `rows` of `x` within `plan` and returns its
    /// encoded statistics and, for a bounded pass planned with its bounds,
    /// the rows' bounds after it, from those `kept` after the rows' last
    /// task (`None`, or states of other rows: a full assignment).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run<T: Real>(
        self,
        plan: &Plan,
        x: &Source<'_>,
        w: Option<&Source<'_>>,
        rows: Range<usize>,
        shift: &[f64],
        kept: Option<Vec<f64>>,
        cancel: &crate::exec::Cancel,
    ) -> Result<(Vec<u8>, Option<Vec<f64>>)> {
        let sparse = x.sparse_row_nnz().is_some();
        let centers = PreparedCenters::<T>::for_rows(&self.centers, self.k, self.d, sparse, x.has_unit_rows());
        let mut asg = Assignment::<T>::new(plan, self.k, self.d, crate::exec::Backend::Cpu, sparse);
        let mut bounds = self.bounds.filter(|_| plan.schedule.bounds_on_disk == Some(false)).map(|b| {
            Bounds::<T>::of_task(b, kept, rows.start, rows.len(), self.k, self.d, plan.threads, asg.tile_rows)
        });
        let mode = match self.kind {
            TaskKind::Lloyd => Mode::Lloyd,
            TaskKind::Farthest => Mode::Farthest,
            TaskKind::Final => Mode::Final { sink: None, plot: None },
        };
        let mut pass = AssignPass {
            centers: &centers,
            asg: &mut asg,
            mode,
            weights_name: None,
            bounds: bounds.as_mut(),
            cancel: cancel.clone(),
        };
        let mut blocks = BlockReader::<T>::new(x, w, plan.schedule.block_rows);
        let partial = run_pass(&mut pass, &mut blocks, Some(rows), shift, cancel)?;
        let out = task_result(&pass, partial);
        Ok((out, bounds.and_then(Bounds::into_states)))
    }
}
