//! Gaussian-mixture jobs: fit (fresh or warm-started from a model) and the
//! E-step of a fitted model (labels, probabilities, log-likelihoods, score,
//! BIC and AIC).

use super::{gmm_device_out, job_warnings, planned_job, prepare, ComputeDtype, Done};
use crate::cluster::Observer;
use crate::error::{Error, Result};
use crate::exec::RunOptions;
use crate::io::Source;
use crate::mixture::{self, CovarianceType, GmmFit, GmmParams, MixtureModel, Outputs, PrecisionsInit};
use crate::plan::Plan;
use crate::warning::Warning;

/// A Gaussian-mixture fit of `x` (with optional per-row weights) computed
/// in `compute`.
#[derive(Debug)]
pub struct GmmJob<'a> {
    /// The hyperparameters.
    pub params: GmmParams<'a>,
    /// The data, `(n_samples, n_features)`.
    pub x: &'a Source<'a>,
    /// Per-row weights, `(n_samples,)` or `(n_samples, 1)`.
    pub sample_weight: Option<&'a Source<'a>>,
    /// The compute dtype.
    pub compute: ComputeDtype,
    /// Arrays the caller streams to files (each with a write buffer).
    pub n_outputs: usize,
    /// Other buffers the caller holds for the run (name, bytes).
    pub extra: Vec<(String, u64)>,
    /// How the job runs: memory limit, threads, row split, scratch folder.
    pub run: RunOptions,
}

impl<'a> GmmJob<'a> {
    /// Continues the fit of `model` (scikit-learn's `warm_start`): its
    /// weights, means and precision factors initialise one run, whose first
    /// change is measured from the model's lower bound. Returns a warning
    /// when more than one initialisation was asked for.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`warm_start`) when the model has another
    /// number of features than the data, or other components or covariance
    /// type than the parameters.
    pub fn warm_start(&mut self, model: MixtureModel<'a>) -> Result<Option<Warning>> {
        let d = self.x.n_features();
        if model.n_features() != d {
            return Err(Error::param(
                "warm_start",
                format!(
                    "the model has {} features but the data have {d}; hint: warm-start from a model fitted on data of the same width",
                    model.n_features()
                ),
            ));
        }
        let p = &mut self.params;
        if model.covariance_type != p.covariance_type || model.n_components() != p.n_components {
            return Err(Error::param(
                "warm_start",
                format!(
                    "the model has {} components of covariance type {}, but n_components = {}, covariance_type = {} were given; hint: use the same settings as the model",
                    model.n_components(),
                    model.covariance_type.name(),
                    p.n_components,
                    p.covariance_type.name()
                ),
            ));
        }
        let warning = (p.n_init > 1).then_some(Warning::WarmStartWithNInit { n_init: p.n_init });
        p.weights_init = Some(model.weights);
        p.means_init = Some(model.means);
        p.precisions_init = Some(PrecisionsInit::Cholesky(model.precisions_cholesky));
        p.lower_bound_init = model.lower_bound;
        p.n_init = 1;
        Ok(warning)
    }

    /// Checks a given scratch folder (see [`crate::io::ScratchFile::check_dir`]),
    /// validates the parameters against the data and plans the fit; when
    /// the plan puts scratch files in a folder, checks that folder.
    ///
    /// # Errors
    /// As [`crate::io::ScratchFile::check_dir`], [`GmmParams::validate`] and
    /// [`mixture::plan_gmm`].
    pub fn plan(&self) -> Result<Plan> {
        if let Some(dir) = &self.run.scratch_dir {
            // Checked first: a fit finds out late that it needs scratch files.
            crate::io::ScratchFile::check_dir(dir)?;
        }
        self.params.validate(self.x.n_samples(), self.x.n_features())?;
        let (w, extra, out) = (self.sample_weight, &self.extra, gmm_device_out(self.params.n_components));
        let job = planned_job(self.x, w, self.compute, self.n_outputs, extra, &self.run, out);
        let plan = mixture::plan_gmm(&self.params, &job, false)?;
        plan.check_scratch_dirs()?;
        Ok(plan)
    }

    /// Fits within `plan` (from [`GmmJob::plan`]); the final E-step's
    /// results go to `outputs`. The fit's warnings include integers the
    /// compute dtype rounded.
    ///
    /// # Errors
    /// As [`mixture::fit`].
    pub fn fit(&self, plan: &Plan, outputs: &mut Outputs<'_>, observer: &mut dyn Observer) -> Result<GmmFit> {
        let (x, w, p, run) = (self.x, self.sample_weight, &self.params, &self.run);
        prepare(plan, x, w, &*observer)?;
        let mut fit = match self.compute {
            ComputeDtype::Float32 => mixture::fit::<f32>(p, x, w, plan, run, outputs, observer)?,
            ComputeDtype::Float64 => mixture::fit::<f64>(p, x, w, plan, run, outputs, observer)?,
        };
        fit.warnings.extend(job_warnings(plan, x, self.compute.dtype(), w));
        Ok(fit)
    }
}

/// Free parameters of a mixture: covariances, means and `k − 1` weights.
pub fn n_parameters(covariance_type: CovarianceType, n_components: usize, n_features: usize) -> usize {
    let (k, d) = (n_components, n_features);
    covariance_type.n_cov_parameters(k, d) + k * d + k - 1
}

/// `(BIC, AIC)` of a model with `n_parameters` free parameters whose mean
/// log-likelihood per sample over `n` samples is `score`:
/// `−2 · score · n + p · ln n` and `−2 · score · n + 2 p`.
pub fn information_criteria(score: f64, n: f64, n_parameters: usize) -> (f64, f64) {
    let p = n_parameters as f64;
    (-2.0 * score * n + p * n.ln(), -2.0 * score * n + 2.0 * p)
}

/// One E-step pass of a fitted mixture over `x`.
#[derive(Debug)]
pub struct GmmPredictJob<'a> {
    /// The model.
    pub model: &'a MixtureModel<'a>,
    /// The data, `(n_samples, n_features)`.
    pub x: &'a Source<'a>,
    /// The compute dtype.
    pub compute: ComputeDtype,
    /// Arrays the caller streams to files (each with a write buffer).
    pub n_outputs: usize,
    /// How the job runs: memory limit, threads, row split.
    pub run: RunOptions,
}

/// The model's fit to the data of a [`GmmPredictJob`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GmmScore {
    /// Mean log-likelihood per sample (`score(X)`).
    pub score: f64,
    /// Rows scored.
    pub n_samples: usize,
    /// Free parameters of the model.
    pub n_parameters: usize,
    /// Bayesian information criterion on the data (lower is better).
    pub bic: f64,
    /// Akaike information criterion on the data (lower is better).
    pub aic: f64,
}

impl GmmPredictJob<'_> {
    fn check(&self) -> Result<()> {
        let d = self.model.n_features();
        if self.x.n_features() != d {
            return Err(Error::param(
                "X",
                format!(
                    "{} has {} features but the model was fitted on {d}; hint: predict with data of the model's width",
                    self.x.name().display(),
                    self.x.n_features()
                ),
            ));
        }
        Ok(())
    }

    /// Checks the data's width and plans the pass.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`X`) for data of another width than the
    /// model's; [`Error::DoesNotFit`].
    pub fn plan(&self) -> Result<Plan> {
        self.check()?;
        let out = gmm_device_out(self.model.n_components());
        mixture::plan_predict(self.model, &planned_job(self.x, None, self.compute, self.n_outputs, &[], &self.run, out))
    }

    /// Runs the pass within `plan`: labels, probabilities and
    /// log-likelihoods go to `outputs`; returns the score, BIC and AIC.
    ///
    /// # Errors
    /// As [`mixture::predict`].
    pub fn predict(
        &self,
        plan: &Plan,
        outputs: &mut Outputs<'_>,
        observer: &mut dyn Observer,
    ) -> Result<Done<GmmScore>> {
        self.check()?;
        let (m, x, split) = (self.model, self.x, &self.run.row_split);
        prepare(plan, x, None, &*observer)?;
        let score = match self.compute {
            ComputeDtype::Float32 => mixture::predict::<f32>(m, x, plan, split, self.run.backend, outputs, observer)?,
            ComputeDtype::Float64 => mixture::predict::<f64>(m, x, plan, split, self.run.backend, outputs, observer)?,
        };
        let n_samples = x.n_samples() - x.first_row();
        let p = n_parameters(m.covariance_type, m.n_components(), m.n_features());
        let (bic, aic) = information_criteria(score, n_samples as f64, p);
        Ok(Done {
            value: GmmScore { score, n_samples, n_parameters: p, bic, aic },
            warnings: job_warnings(plan, x, self.compute.dtype(), None),
        })
    }
}
