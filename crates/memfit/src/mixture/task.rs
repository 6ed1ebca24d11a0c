//! The passes of a Gaussian-mixture fit as [`crate::exec::Task`]s: an EM
//! iteration's sums, or the log-likelihood of an E-step without per-row
//! outputs, computed over rows another process holds (see
//! [`crate::exec::Remote`]).

use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::components::{CholWork, Estep};
use super::em::work_mats;
use super::fitted::Outputs;
use super::params::{CovarianceType, GmmParams};
use super::pass::Workspace;
use super::passes::{EPass, EmPass, Sums};
use super::plan::plan_whole;
use crate::dtype::Real;
use crate::error::Result;
use crate::exec::{decode, encode, run_pass, task_result, RunOptions};
use crate::io::{BlockReader, Source};
use crate::kernels::Prec;
use crate::plan::{Job, Plan};

/// The task kind of an EM iteration.
pub(crate) const EM: &str = "gmm-em";
/// The task kind of an E-step's log-likelihood.
pub(crate) const E: &str = "gmm-e";

/// What an EM iteration's sums are centred on and hold.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct EmSums {
    pub(crate) t: CovarianceType,
    pub(crate) reference: Vec<f64>,
    pub(crate) scatter: bool,
}

/// An EM iteration (with `em`) or an E-step's `Σ_i w_i log p(x_i)`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(bound = "T: Real")]
pub(crate) struct MixtureTask<T> {
    pub(crate) es: Estep<T>,
    pub(crate) em: Option<EmSums>,
    /// Whether the rows are checked for non-finite values.
    pub(crate) validate: bool,
}

/// [`MixtureTask`] borrowed, to encode without copying the parameters
/// (the same bytes: serde writes a slice as a vector).
#[derive(Serialize)]
#[serde(bound = "T: Real")]
struct MixtureTaskRef<'a, T> {
    es: &'a Estep<T>,
    em: Option<EmSumsRef<'a>>,
    validate: bool,
}

/// [`EmSums`] borrowed.
#[derive(Serialize)]
struct EmSumsRef<'a> {
    t: CovarianceType,
    reference: &'a [f64],
    scatter: bool,
}

impl<T: Real> MixtureTask<T> {
    /// The task of an EM pass.
    pub(crate) fn of_em(pass: &EmPass<'_, T>) -> Vec<u8> {
        let s = &pass.sums;
        let em = EmSumsRef { t: s.t, reference: s.reference, scatter: s.scatter };
        encode(&MixtureTaskRef { es: pass.es, em: Some(em), validate: false })
    }

    /// The task of an E pass, when it has no per-row outputs.
    pub(crate) fn of_e(pass: &EPass<'_, '_, T>) -> Option<Vec<u8>> {
        let o = &pass.outputs;
        (o.labels.is_none() && o.proba.is_none() && o.log_likelihood.is_none())
            .then(|| encode(&MixtureTaskRef { es: pass.es, em: None, validate: pass.validate }))
    }

    /// The task in `payload`.
    pub(crate) fn decode(payload: &[u8]) -> Result<Self> {
        decode(payload, "mixture task")
    }

    fn covariance_type(&self) -> CovarianceType {
        match &self.es.prec {
            Prec::Full(..) => CovarianceType::Full,
            Prec::Tied(..) => CovarianceType::Tied,
            Prec::Diag(_) => CovarianceType::Diag,
            Prec::Spherical(_) => CovarianceType::Spherical,
        }
    }

    /// The memory plan for `x`'s rows within `limit_bytes`: a fit's (with
    /// the M-step's sums) or a prediction's.
    pub(crate) fn plan(&self, x: &Source<'_>, w: Option<&Source<'_>>, limit_bytes: u64) -> Result<Plan> {
        let params = GmmParams {
            n_components: self.es.k,
            covariance_type: self.covariance_type(),
            max_iter: 1,
            ..GmmParams::default()
        };
        // A task holds every component (groups run in one process only).
        let run = RunOptions::with_limit(limit_bytes);
        plan_whole(&params, &Job::new(x, w, size_of::<T>(), 0, &run), self.em.is_none())
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
        let (t, k, d) = (self.covariance_type(), self.es.k, self.es.d);
        let mut ws = Workspace::<T>::new(t, k, d, plan.block_rows, plan.tile_rows, plan.threads);
        let mut blocks = BlockReader::<T>::new(x, w, plan.block_rows);
        match &self.em {
            Some(s) => {
                let full = matches!(t, CovarianceType::Full | CovarianceType::Tied);
                let mut work = CholWork::new(if full { d } else { 0 }, work_mats(t, plan.threads));
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
