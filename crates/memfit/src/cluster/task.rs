//! The nearest-centre pass of a k-means fit as a [`crate::exec::Task`]: a
//! Lloyd iteration's sums or the final pass's counts and inertia, computed
//! over rows another process holds (see [`crate::exec::Remote`]).

use std::ops::Range;

use serde::{Deserialize, Serialize};

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
    /// Row-major `(k, d)` centres (values of the compute type, as `f64`).
    pub(crate) centers: Vec<f64>,
    pub(crate) k: usize,
    pub(crate) d: usize,
    /// A Lloyd iteration (sums, weights, farthest rows); else a final pass
    /// (row counts and inertia).
    pub(crate) lloyd: bool,
}

impl AssignTask {
    /// The task of `pass`, when it has no per-row outputs.
    pub(crate) fn of<T: Real>(pass: &AssignPass<'_, '_, T>) -> Option<Vec<u8>> {
        let lloyd = match &pass.mode {
            Mode::Lloyd => true,
            Mode::Final { sink: None, plot: None } => false,
            _ => return None,
        };
        let c = pass.centers;
        Some(encode(&AssignTask { centers: c.centers.clone(), k: c.n_clusters, d: c.n_features, lloyd }))
    }

    /// The memory plan for `x`'s rows within `limit_bytes`: a k-means fit's
    /// from given centres.
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
            // A task assigns its rows in full: bounds stay with the client's passes.
            algorithm: super::Algorithm::Lloyd,
            ..KMeansParams::default()
        };
        plan_kmeans(&params, &Job::new(x, w, compute_bytes, 0, &RunOptions::with_limit(limit_bytes)))
    }

    /// Runs the pass over `rows` of `x` within `plan` and returns its
    /// encoded statistics.
    pub(crate) fn run<T: Real>(
        &self,
        plan: &Plan,
        x: &Source<'_>,
        w: Option<&Source<'_>>,
        rows: Range<usize>,
        shift: &[f64],
        cancel: &crate::exec::Cancel,
    ) -> Result<Vec<u8>> {
        let centers = PreparedCenters::<T>::new(&self.centers, self.k, self.d);
        let mut asg = Assignment::<T>::new(plan, self.k, self.d);
        let mode = if self.lloyd { Mode::Lloyd } else { Mode::Final { sink: None, plot: None } };
        let mut pass = AssignPass { centers: &centers, asg: &mut asg, mode, weights_name: None, bounds: None };
        let mut blocks = BlockReader::<T>::new(x, w, plan.schedule.block_rows);
        let partial = run_pass(&mut pass, &mut blocks, Some(rows), shift, cancel)?;
        Ok(task_result(&pass, partial))
    }
}
