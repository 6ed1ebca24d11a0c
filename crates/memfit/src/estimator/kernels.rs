//! The linear-algebra kernels as jobs: the row-wise quadratic form and the
//! weighted scatter matrix.

use super::{job_warnings, planned_job, prepare, ComputeDtype, Done};
use crate::cluster::Observer;
use crate::error::{Error, Result};
use crate::exec::RunOptions;
use crate::io::{Dtype, Source};
use crate::linalg;
use crate::plan::Plan;

/// `q_i = x_iᵀ Q x_i` for each row of `x`, computed in `compute`.
#[derive(Debug)]
pub struct QuadraticFormJob<'a> {
    /// The data, `(n_samples, n_features)`.
    pub x: &'a Source<'a>,
    /// Row-major matrix `Q`, which must be `(n_features, n_features)`
    /// (it may be empty for [`QuadraticFormJob::plan`], which needs only
    /// `q_shape`: a command line reads `Q` once the plan fits).
    pub q: &'a [f64],
    /// The shape of `Q` as given.
    pub q_shape: [usize; 2],
    /// Whether `q` was read for this job (from a file, by the command
    /// line): it is then planned beside the compute dtype's copy; false
    /// when the caller owns it (an array passed in).
    pub q_read: bool,
    /// The compute dtype.
    pub compute: ComputeDtype,
    /// 1 when the results go to a file writer (whose buffers are planned),
    /// 0 when the caller keeps them.
    pub n_outputs: usize,
    /// How the job runs: memory limit, threads.
    pub run: RunOptions,
}

impl QuadraticFormJob<'_> {
    fn check(&self) -> Result<()> {
        let d = self.x.n_features();
        if self.q_shape != [d, d] {
            return Err(Error::ShapeMismatch {
                what: "Q".into(),
                expected: vec![d, d],
                found: self.q_shape.to_vec(),
                hint: "Q must be (n_features, n_features)",
            });
        }
        Ok(())
    }

    /// Checks `q_shape` and plans the pass (`q` is not read).
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`]; [`Error::DoesNotFit`].
    pub fn plan(&self) -> Result<Plan> {
        self.check()?;
        let job = planned_job(self.x, None, self.compute, self.n_outputs, &[], &self.run, 0);
        linalg::plan_row_quadratic_form(&job, self.q_read)
    }

    /// Runs within `plan`, handing `q` to `out` block by block in row order.
    ///
    /// # Errors
    /// As [`linalg::row_quadratic_form`].
    pub fn run(
        &self,
        plan: &Plan,
        out: &mut dyn FnMut(&[f64]) -> Result<()>,
        observer: &dyn Observer,
    ) -> Result<Done<()>> {
        self.check()?;
        let d = self.x.n_features();
        if self.q.len() != d * d {
            return Err(Error::ShapeMismatch {
                what: "Q".into(),
                expected: vec![d * d],
                found: vec![self.q.len()],
                hint: "Q must hold its shape's values",
            });
        }
        prepare(plan, self.x, None, observer)?;
        let cancel = observer.cancel();
        match self.compute {
            ComputeDtype::Float32 => linalg::row_quadratic_form::<f32>(self.x, self.q, plan, out, &cancel)?,
            ComputeDtype::Float64 => linalg::row_quadratic_form::<f64>(self.x, self.q, plan, out, &cancel)?,
        }
        Ok(Done { value: (), warnings: job_warnings(plan, self.x, self.compute.dtype(), None) })
    }
}

/// `S = Σ_i w_i x_i x_iᵀ` of `x` (always in float64).
#[derive(Debug)]
pub struct ScatterJob<'a> {
    /// The data, `(n_samples, n_features)`.
    pub x: &'a Source<'a>,
    /// Per-row weights (all ones when `None`).
    pub weights: Option<&'a Source<'a>>,
    /// How the job runs: memory limit, threads, row split.
    pub run: RunOptions,
}

impl ScatterJob<'_> {
    /// Checks the weights' length and plans the pass.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`]; [`Error::DoesNotFit`].
    pub fn plan(&self) -> Result<Plan> {
        self.x.check_weights(self.weights)?;
        linalg::plan_weighted_scatter(&planned_job(self.x, self.weights, ComputeDtype::Float64, 0, &[], &self.run, 0))
    }

    /// Runs within `plan`; returns `S`, row-major `(n_features, n_features)`.
    ///
    /// # Errors
    /// As [`linalg::weighted_scatter`].
    pub fn run(&self, plan: &Plan, observer: &dyn Observer) -> Result<Done<Vec<f64>>> {
        prepare(plan, self.x, self.weights, observer)?;
        let cancel = observer.cancel();
        let s = linalg::weighted_scatter_split(self.x, self.weights, plan, &self.run.row_split, &cancel)?;
        Ok(Done { value: s, warnings: job_warnings(plan, self.x, Dtype::F64, self.weights) })
    }
}
