//! EM with every component's parameters in memory: the E-step passes of a
//! fitted mixture, and the passes of a fit run as tasks over rows another
//! process holds.

use std::ops::Range;

use super::components::{CholWork, Estep};
use super::fitted::Outputs;
use super::params::GmmParams;
use super::pass::{Sums, Workspace};
use super::passes::{EPass, EmPass};
use super::plan::plan_whole;
use super::task::MixtureTask;
use crate::dtype::Real;
use crate::error::Result;
use crate::exec::{run_pass, run_split, task_result, RowSplit};
use crate::io::{BlockReader, Source};
use crate::plan::{Job, Plan};

/// One E-step pass with parameters `es`; sends per-sample results to
/// `outputs` and returns `Σ_i w_i log p(x_i)`; with `validate`, fails at the
/// first non-finite value (data a fit has not already checked).
#[allow(clippy::too_many_arguments)]
pub(crate) fn e_pass<T: Real>(
    x: &Source<'_>,
    blocks: &mut BlockReader<'_, '_, T>,
    split: &RowSplit,
    shift: &[f64],
    ws: &mut Workspace<T>,
    es: &Estep<T>,
    outputs: &mut Outputs<'_>,
    validate: bool,
    cancel: &dyn Fn() -> bool,
) -> Result<f64> {
    let labels = vec![0u32; if outputs.labels.is_some() { blocks.block_rows() } else { 0 }];
    let mut pass = EPass { x, es, ws, outputs, labels, validate };
    run_split(&mut pass, blocks, split, shift, cancel)
}

/// A task is a pass of the in-memory strategy: it holds every component
/// (groups run in one process only).
impl<T: Real> MixtureTask<T> {
    /// The memory plan for `x`'s rows within `limit_bytes`: a fit's (with
    /// the M-step's sums) or a prediction's.
    pub(crate) fn plan(&self, x: &Source<'_>, w: Option<&Source<'_>>, limit_bytes: u64) -> Result<Plan> {
        let params = GmmParams {
            n_components: self.es.k,
            covariance_type: self.es.covariance_type(),
            memory_limit_bytes: limit_bytes,
            max_iter: 1,
            ..GmmParams::default()
        };
        // A task holds every component (groups run in one process only).
        plan_whole(&params, &Job::new(x, w, size_of::<T>(), 0), self.em.is_none())
    }

    /// Runs the pass over `rows` of `x` within `plan` and returns its
    /// encoded statistics.
    pub(crate) fn run(
        &self,
        plan: &Plan,
        x: &Source<'_>,
        w: Option<&Source<'_>>,
        rows: Range<usize>,
        shift: &[f64],
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Vec<u8>> {
        let (t, k, d) = (self.es.covariance_type(), self.es.k, self.es.d);
        let mut ws = Workspace::<T>::new(t, k, d, plan.block_rows, plan.tile_rows, plan.threads);
        let mut blocks = BlockReader::<T>::new(x, w, plan.block_rows);
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
                let partial = run_pass(&mut pass, &mut blocks, Some(rows), shift, cancelled)?;
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
                let partial = run_pass(&mut pass, &mut blocks, Some(rows), shift, cancelled)?;
                Ok(task_result(&pass, partial))
            }
        }
    }
}
